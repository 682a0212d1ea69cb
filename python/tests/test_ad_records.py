"""areaDetector interface parity: every user-facing record of ADCore's, ADSimDetector's and ADEiger's
templates (python/tests/data/ad_records.json, a copy of the name contract) is served by a port
of each type, with the record type's natural PV type and the menu strings in order — over
pvAccess (p4p) and over Channel Access (pyepics).

A port type serves the union of its templates: drivers NDArrayBase + ADBase + their own
(simDetector; ADEiger's NDFile + eigerBase + eiger1/eiger2/pilatus4),
plugins NDArrayBase + NDPluginBase + their own, file plugins also NDFile. Records ndflow does
not serve yet are listed in KNOWN_GAPS with the reason; the test fails on any other miss, and
also when a listed gap has been closed (so the list only shrinks).

Loopback only: the IOC and the clients get netenv.py's loopback variables with per-test free
ports.
"""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
from interop import require
from netenv import ca_client_env
from pva_util import NdflowIoc

RECORDS = json.loads((pathlib.Path(__file__).parent / "data" / "ad_records.json").read_text())
# The templates' helper records (calc, calcout, seq, sseq, dfanout, fanout, subArray, asyn) of
# the templates that have them: name and record type.
HELPERS = json.loads(
    (pathlib.Path(__file__).parent / "data" / "ad_helper_records.json").read_text())

P = "PAR:"
PLUGIN = ["NDArrayBase", "NDPluginBase"]
FILE = PLUGIN + ["NDFile"]

# (port type, port prefix, templates, extra config lines)
PORTS = [
    ("sim", "cam1:", ["NDArrayBase", "ADBase", "simDetector"], 'MaxSizeX = 64\nMaxSizeY = 32'),
    # DECTRIS detectors, each with its ADEiger template set; the detector is not there (a closed
    # loopback port): every record is served all the same.
    ("eiger", "eig2:", ["NDArrayBase", "ADBase", "NDFile", "eigerBase", "eiger2"], 'Host = "127.0.0.1:9"'),
    ("eiger1", "eig1:", ["NDArrayBase", "ADBase", "NDFile", "eigerBase", "eiger1"], 'Host = "127.0.0.1:9"'),
    ("pilatus4", "p4:", ["NDArrayBase", "ADBase", "NDFile", "eigerBase", "eiger2", "pilatus4"], 'Host = "127.0.0.1:9"'),
    # A GenICam camera through Aravis, opened by IP literal only (a unicast to that address, no
    # discovery broadcast); nothing answers at 127.0.0.2, so the camera-filled menus stay 'N.A.'.
    ("aravis", "arv:", ["NDArrayBase", "ADBase", "ADGenICam", "aravisCamera"], 'CameraId = "127.0.0.2"'),
    ("roi", "ROI1:", PLUGIN + ["NDROI"], ""),
    ("stats", "Stats1:", PLUGIN + ["NDStats"], ""),
    ("process", "Proc1:", PLUGIN + ["NDProcess"], ""),
    ("stdarrays", "image1:", PLUGIN + ["NDStdArrays"], ""),
    ("codec", "Codec1:", PLUGIN + ["NDCodec"], ""),
    ("pva", "Pva1:", PLUGIN + ["NDPva"], ""),
    ("tiff", "TIFF1:", FILE + ["NDFileTIFF"], ""),
    ("jpeg", "JPEG1:", FILE + ["NDFileJPEG"], ""),
    ("hdf5", "HDF1:", FILE + ["NDFileHDF5"], ""),
    ("netcdf", "netCDF1:", FILE + ["NDFileNetCDF"], ""),
    ("nexus", "Nexus1:", FILE + ["NDFileNexus"], ""),
    ("null", "Null1:", FILE, ""),
    ("magick", "Magick1:", FILE + ["NDFileMagick"], ""),
    ("transform", "Trans1:", PLUGIN + ["NDTransform"], ""),
    ("colorconvert", "CC1:", PLUGIN + ["NDColorConvert"], ""),
    ("badpixel", "BadPix1:", PLUGIN + ["NDBadPixel"], ""),
    ("fft", "FFT1:", PLUGIN + ["NDFFT"], ""),
    ("overlay", "Over1:", PLUGIN + ["NDOverlay"], ""),
    # "Template@N:" = a per-address template loaded under `N:` (first and last of the default 8).
    ("roistat", "ROIStat1:", PLUGIN + ["NDROIStat", "NDROIStatN@1:", "NDROIStatN@8:"], ""),
    ("timeseries", "TS1:", PLUGIN + ["NDTimeSeries", "NDTimeSeriesN@1:", "NDTimeSeriesN@8:"], ""),
    ("circularbuff", "CB1:", PLUGIN + ["NDCircularBuff"], ""),
    ("attribute", "Attr1:", PLUGIN + ["NDAttribute"] + [f"NDAttributeN@{n}:" for n in range(1, 9)], ""),
    # NDAttrPlotData/NDAttrPlotAttr (X:Data, Y1:Data0, Attr0, ...) are not in ad_records.json;
    # test_attr_plot.py reads them.
    ("attrplot", "AttrPlot1:", PLUGIN + ["NDAttrPlot"], ""),
    ("pos", "Pos1:", PLUGIN + ["NDPosPlugin"], ""),
    ("scatter", "Scatter1:", PLUGIN + ["NDScatter"], ""),
    # NDGather.template is NDPluginBase only; its NDGatherN records are checked in
    # test_scatter_gather.py (that template is not in ad_records.json).
    ("gather", "Gather1:", PLUGIN, ""),
]

DRIVERS = {"sim", "eiger", "eiger1", "pilatus4", "aravis"}

# Records not served yet, by port type ("*" = every type), with why. Keep this short and honest.
KNOWN_GAPS = {
}


def menu(rec):
    """The menu a client sees: an mbbo/mbbi reports its states up to the last one with a
    string, so a template's trailing empty states (simDetector's ColorMode) are not part of
    it; a bo/bi always has its two."""
    choices = list(rec["choices"])
    while rec["type"] in ("mbbo", "mbbi") and choices and choices[-1] == "":
        choices.pop()
    return choices


def wanted(templates):
    """The union of the templates' records; a later template overrides an earlier one.
    `T@N:` is template T loaded at address N, its records under `N:` (NDAttributeN, ...)."""
    out = {}
    for t in templates:
        t, _, addr = t.partition("@")
        for r in RECORDS[t]:
            out[addr + r["name"]] = dict(r, name=addr + r["name"])
    return out


def config():
    lines = [f'prefix = "{P}"', "pva = true", "ca = true"]
    for i, (typ, prefix, _, extra) in enumerate(PORTS):
        lines += ["", "[[port]]", f'name = "P{i}"', f'type = "{typ}"', f'prefix = "{prefix}"']
        if typ not in DRIVERS:
            lines.append('NDArrayPort = "P0"')
        if extra:
            lines.append(extra)
    return "\n".join(lines) + "\n"


def all_records():
    """[(port type, full PV name, record)] for every port of the IOC."""
    out = []
    for typ, prefix, templates, _ in PORTS:
        for name, rec in wanted(templates).items():
            out.append((typ, P + prefix + name, rec))
    return out


@pytest.fixture(scope="module")
def ioc(ndflow_bin, tmp_path_factory):
    ioc = NdflowIoc(ndflow_bin, tmp_path_factory.mktemp("ad_records"), config())
    ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: v == 0)
    yield ioc
    ioc.close()


ENUMS = {"bo", "bi", "mbbo", "mbbi", "busy"}


def pva_problem(rec, v):
    """Why the pvAccess value `v` (p4p.Value or an exception) does not fit record `rec`."""
    if isinstance(v, Exception):
        return "missing"
    vid = v.getID()
    t = rec["type"]
    if t in ENUMS:
        if "NTEnum" not in vid:
            return f"{vid} is not NTEnum"
        choices = list(v["value.choices"])
        if choices != menu(rec):
            return f"menu {choices} != {menu(rec)}"
        return None
    if "NTEnum" in vid:
        return f"NTEnum for a {t}"
    val = v["value"]
    if t in ("ao", "ai"):
        return None if isinstance(val, (float, int)) and not isinstance(val, bool) else f"value {type(val).__name__}"
    if t in ("longin", "longout"):
        return None if isinstance(val, int) else f"value {type(val).__name__}"
    if t in ("stringin", "stringout"):
        return None if isinstance(val, str) else f"value {type(val).__name__}"
    if t == "waveform":
        return None if isinstance(val, str) or hasattr(val, "__len__") else f"value {type(val).__name__}"
    return None


def check(problems):
    missing = {k: v for k, v in problems.items() if (k[0], k[1]) not in KNOWN_GAPS and ("*", k[1]) not in KNOWN_GAPS}
    closed = [k for k in KNOWN_GAPS if k[0] != "*" and not any(p[0] == k[0] and p[1] == k[1] for p in problems)]
    lines = [f"{t} {n}: {why}" for (t, n), why in sorted(missing.items())]
    assert not missing, f"{len(missing)} records wrong:\n" + "\n".join(lines[:200])
    assert not closed, f"gaps closed, remove them from KNOWN_GAPS: {closed}"


def test_every_record_over_pvaccess(ioc):
    recs = all_records()
    values = ioc.raw.get([n for _, n, _ in recs], throw=False, timeout=20)
    problems = {}
    for (typ, name, rec), v in zip(recs, values):
        why = pva_problem(rec, v)
        if why:
            problems[(typ, rec["name"])] = why
    total = len(recs)
    print(f"\npvAccess: {total - len(problems)}/{total} records right")
    check(problems)


CA_CHECK = r"""
import json, sys
from epics import ca
names = json.loads(sys.stdin.read())
chids = [ca.create_channel(n, connect=False, auto_cb=False) for n in names]
ca.pend_io(1.0)
out = {}
for n, c in zip(names, chids):
    if not ca.connect_channel(c, timeout=5.0):
        out[n] = None
        continue
    ft = ca.field_type(c)
    enum = None
    if ft == 3:
        enum = list(ca.get_enum_strings(c))
    out[n] = [ft, enum]
print("RESULT " + json.dumps(out))
"""

def run_ca(ioc, script, names):
    """Runs a pyepics `script` (names on its stdin) against `ioc`; returns its RESULT dict."""
    env = dict(os.environ)
    env.update(ca_client_env(ioc.ca_port, ioc.ca_repeater))
    p = subprocess.run([sys.executable, "-c", script], input=json.dumps(names),
                       env=env, capture_output=True, text=True, timeout=300)
    lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    assert p.returncode == 0 and lines, p.stdout[-2000:] + p.stderr[-2000:]
    return json.loads(lines[-1][7:])


CA_NATIVE = {"ao": {6}, "ai": {6}, "longin": {5}, "longout": {5}, "stringin": {0}, "stringout": {0},
             "waveform": {0, 1, 2, 4, 5, 6}, "bo": {3}, "bi": {3}, "mbbo": {3}, "mbbi": {3}, "busy": {3}}


def test_every_record_over_channel_access(ioc):
    require("epics")
    recs = all_records()
    got = run_ca(ioc, CA_CHECK, [n for _, n, _ in recs])
    problems = {}
    for typ, name, rec in recs:
        r = got.get(name)
        if r is None:
            problems[(typ, rec["name"])] = "missing"
            continue
        ft, enum = r
        if ft not in CA_NATIVE[rec["type"]]:
            problems[(typ, rec["name"])] = f"native type {ft} for a {rec['type']}"
        elif rec["type"] in ENUMS and enum != menu(rec):
            problems[(typ, rec["name"])] = f"menu {enum} != {menu(rec)}"
    print(f"\nChannel Access: {len(recs) - len(problems)}/{len(recs)} records right")
    check(problems)


def all_helpers():
    """[(port type, full PV name, record)] for every helper record of every port's templates."""
    out = []
    for typ, prefix, templates, _ in PORTS:
        seen = {}
        for t in templates:
            t, _, addr = t.partition("@")
            # NDOverlay's per-overlay records are NDOverlayN's, under `1:` … `8:`.
            per = [("NDOverlayN", f"{n}:") for n in (1, 8)] if t == "NDOverlay" else [(t, addr)]
            for tt, a in per:
                for r in HELPERS.get(tt, []):
                    seen[a + r["name"]] = dict(r, name=a + r["name"])
        out += [(typ, P + prefix + n, r) for n, r in seen.items()]
    return out


RTYP_CHECK = r"""
import json, sys
from epics import ca
names = json.loads(sys.stdin.read())
chids = [ca.create_channel(n + ".RTYP", connect=False, auto_cb=False) for n in names]
ca.pend_io(1.0)
out = {}
for n, c in zip(names, chids):
    out[n] = ca.get(c, timeout=5.0) if ca.connect_channel(c, timeout=5.0) else None
print("RESULT " + json.dumps(out))
"""


# `.RTYP` answers that differ from the template's record type, by record name, with why.
# The value, menu and access of each are right (the tests above); the record type alone
# differs, because it is inferred from the declaration (a two-entry menu is a bo/bi; a
# read-only result is an ai/longin). Keep this short and honest: it only shrinks.
MBB2 = "a two-entry menu served as bo/bi where the template has an mbbo/mbbi"
RESULT = "a result the template makes an output (so its Reset sseq can zero it), served as an input"
RTYP_GAPS = {"ARPacketResendEnable": "an mbbo in the template whose readback is a bi"}
RTYP_GAPS.update({name: RESULT for name in """
    MinValue MaxValue MeanValue SigmaValue Total Net MinX MinY MaxX MaxY CentroidTotal CentroidX
    CentroidY SigmaX SigmaY SigmaXY SkewX SkewY KurtosisX KurtosisY Eccentricity Orientation
    HistAbove HistBelow HistEntropy""".split()})
RTYP_GAPS["PoolMaxMem"] = "writable in ndflow (the pool's cap), an ai in the template"


def test_every_record_type_over_channel_access(ioc):
    """`.RTYP` of every record, helper records included, is the template's record type (but
    for RTYP_GAPS)."""
    require("epics")
    recs = all_records() + all_helpers()
    got = run_ca(ioc, RTYP_CHECK, [n for _, n, _ in recs])
    problems = {}
    gaps_seen = set()
    for typ, name, rec in recs:
        if got.get(name) != rec["type"]:
            base = rec["name"].rsplit(":", 1)[-1]
            if got.get(name) is not None and base in RTYP_GAPS:
                gaps_seen.add(base)
                continue
            problems[(typ, rec["name"])] = f".RTYP {got.get(name)!r} != {rec['type']!r}"
    closed = sorted(set(RTYP_GAPS) - gaps_seen)
    assert not closed, f"RTYP gaps closed, remove them from RTYP_GAPS: {closed}"
    helpers = len(all_helpers())
    print(f"\nChannel Access .RTYP: {len(recs) - len(problems)}/{len(recs)} right "
          f"({helpers} helper records)")
    check(problems)


def test_every_helper_record_over_pvaccess(ioc):
    """Each helper record answers over pvAccess, and its `.RTYP` field PV names its type."""
    recs = all_helpers()
    values = ioc.ctx.get([n for _, n, _ in recs], throw=False, timeout=20)
    rtyps = ioc.ctx.get([n + ".RTYP" for _, n, _ in recs], throw=False, timeout=20)
    problems = {}
    for (typ, name, rec), v, r in zip(recs, values, rtyps):
        if isinstance(v, Exception):
            problems[(typ, rec["name"])] = f"missing: {v}"
        elif r != rec["type"]:
            problems[(typ, rec["name"])] = f".RTYP {r!r} != {rec['type']!r}"
    print(f"\npvAccess helper records: {len(recs) - len(problems)}/{len(recs)} right")
    check(problems)
