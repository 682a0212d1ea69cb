"""areaDetector's own operator screens in PyDM against an ndflow IOC.

Sites run ADCore's MEDM screens (ADApp/op/adl), converted to PyDM with adl2pydm. This test
opens them against an ndflow IOC (a simulated detector with ROI, Stats, Process, Overlay,
HDF5 and TIFF plugins) over Channel Access, in PyDM under Xvfb (a real X server, Qt's xcb
platform, screenshots under the test's tmp_path):

A. (runs everywhere; no ADCore files needed) For each screen of
   python/tests/data/ad_screen_channels.json (ADBase, NDPluginBase, NDPluginBaseFull, NDStats,
   NDROI, NDFileHDF5, NDProcess, NDOverlay, NDOverlayN, NDFileTIFF, NDFile, with the composite
   files they embed: facts extracted from ADCore by python/tools/adl_channels.py) a PyDM display
   is built with one widget per channel, of the class adl2pydm makes of the MEDM widget
   (PyDMLabel, PyDMLineEdit, PyDMSlider, PyDMEnumComboBox, PyDMPushButton; a dynamic
   attribute's channel as a visibility rule), macros expanded as an operator opens them. Every
   channel must connect (but SCREEN_GAPS); the ADBase Start button (Acquire=1) must make
   ArrayCounter_RBV rise; then the ROI's MinX/SizeX/MinY/SizeY sliders must span the input
   (0..MaxSizeX), as must Stats' cursor and the overlay's position/size sliders.

B. (only with NDFLOW_ADCORE_ADL=DIR, a directory of ADCore's .adl files: CI has no copy) The
   real screens, converted by the `adl2pydm` command, with the two fixes its output needs in
   PyDM 1.29 (fix_adl2pydm_ui), loaded as PyDM loads them with the macros: every channel of
   every widget connects (but SCREEN_GAPS; embedded displays and rules included), Start makes
   the counter rise, the same sliders span the input.

The Stats screen's time-series controls ($(R)TS:) are an NDPluginTimeSeries port at
`Stats1:TS:` fed by the Stats port, as ADCore's commonPlugins.cmd configures it. PyDM 1.29's
pyepics plugin can leave a channel that connected during its setup marked disconnected (a
race in Connection.add_listener); pydm_screens.py reports such channels (`pydm_resynced`) and
gives them the update a reconnection would, and the test asserts the CA channel and PyDM's
state both.

Loopback only: the IOC gets netenv.py's loopback variables and free ports (pva_util.NdflowIoc);
the PyDM process gets the same variables and the IOC's CA port, and Xvfb listens on no TCP port.
"""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
from interop import require_installed
from netenv import ca_client_env, process_env
from pva_util import NdflowIoc

HERE = pathlib.Path(__file__).resolve().parent
FACTS = json.loads((HERE / "data" / "ad_screen_channels.json").read_text())
RUNNER = HERE / "pydm_screens.py"

P = "ADS:"
SIZE_X, SIZE_Y = 64, 48

# Which port each screen is opened for (areaDetector's $(R)).
SCREEN_R = {
    "ADBase": "cam1:",
    "NDPluginBase": "ROI1:",
    "NDPluginBaseFull": "ROI1:",
    "NDStats": "Stats1:",
    "NDROI": "ROI1:",
    "NDFileHDF5": "HDF1:",
    "NDProcess": "Proc1:",
    "NDOverlay": "Over1:",
    "NDOverlayN": "Over1:1:",  # NDOverlay's related display for overlay 1: R=$(R)1:
    "NDFileTIFF": "TIFF1:",
    "NDFile": "TIFF1:",
}

# Channels of these screens the IOC does not serve yet, by channel (macros unexpanded), with
# why. The test fails on any other channel that does not connect, and when a listed one starts
# connecting (remove it here: the list only shrinks).
SCREEN_GAPS = {}


def config(tmp):
    data = pathlib.Path(tmp) / "data"
    data.mkdir(exist_ok=True)
    ports = [
        ("SIM1", "sim", "cam1:", None,
         [f"MaxSizeX = {SIZE_X}", f"MaxSizeY = {SIZE_Y}", 'ImageMode = "Continuous"',
          "AcquireTime = 0.005", "AcquirePeriod = 0.02"]),
        ("ROI1", "roi", "ROI1:", "SIM1", []),
        # ComputeProfiles: Stats' CursorX/Y limits follow the profile size, as in areaDetector
        ("STATS1", "stats", "Stats1:", "SIM1", ['ComputeProfiles = "Yes"']),
        # NDStats.adl shows the Stats time series at $(R)TS:, an NDPluginTimeSeries fed by the
        # Stats port, as ADCore's commonPlugins.cmd loads NDTimeSeries.template for it.
        ("STATS1_TS", "timeseries", "Stats1:TS:", "STATS1", []),
        ("PROC1", "process", "Proc1:", "SIM1", []),
        ("OVER1", "overlay", "Over1:", "SIM1", []),
        ("HDF1", "hdf5", "HDF1:", "SIM1", [f'FilePath = "{data}/"', 'FileName = "screens"']),
        ("TIFF1", "tiff", "TIFF1:", "SIM1", [f'FilePath = "{data}/"', 'FileName = "screens"']),
    ]
    lines = [f'prefix = "{P}"', "ca = true", "pva = true"]
    for name, typ, prefix, src, extra in ports:
        lines += ["", "[[port]]", f'name = "{name}"', f'type = "{typ}"', f'prefix = "{prefix}"']
        if src:
            lines.append(f'NDArrayPort = "{src}"')
        lines += extra
    return "\n".join(lines) + "\n"


MACRO = re.compile(r"\$[({]([A-Za-z0-9_]+)[)}]")


def expand(channel, macros):
    return MACRO.sub(lambda m: macros[m.group(1)], channel)


def macros_for(screen):
    return {"P": P, "R": SCREEN_R[screen]}


def gap_addresses():
    """ca:// addresses of the SCREEN_GAPS channels on every screen."""
    out = set()
    for screen in SCREEN_R:
        for ch in SCREEN_GAPS:
            out.add("ca://" + expand(ch, macros_for(screen)))
    return out


def xvfb():
    """Starts Xvfb on a free display (it picks the number: -displayfd), listening on no TCP
    port; returns (process, DISPLAY)."""
    exe = shutil.which("Xvfb")
    if exe is None:
        pytest.fail("Xvfb is missing: run ./scripts/setup.sh (Debian package xvfb)", pytrace=False)
    r, w = os.pipe()
    proc = subprocess.Popen([exe, "-displayfd", str(w), "-screen", "0", "1920x1200x24",
                             "-nolisten", "tcp", "-noreset"], pass_fds=(w,),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(w)
    with os.fdopen(r) as f:
        num = f.readline().strip()
    if not num:
        proc.kill()
        pytest.fail("Xvfb did not start")
    return proc, f":{num}"


@pytest.fixture(scope="module")
def display():
    proc, disp = xvfb()
    yield disp
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def ioc(ndflow_bin, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("adcore_screens")
    ioc = NdflowIoc(ndflow_bin, tmp, config(tmp), args=("--no-state",))
    ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: v == 0)
    yield ioc
    ioc.close()


def run_pydm(ioc, display, spec, tmp):
    """Runs pydm_screens.py with `spec` against `ioc` on `display`; returns its report."""
    require_installed("pydm")
    require_installed("PyQt5")
    spec_path, result = tmp / "spec.json", tmp / "result.json"
    spec_path.write_text(json.dumps(spec))
    env = process_env(**ca_client_env(ioc.ca_port, ioc.ca_repeater))
    env.update(DISPLAY=display, QT_QPA_PLATFORM="xcb", PYDM_EPICS_LIB="PYEPICS",
               XDG_RUNTIME_DIR=str(tmp), PYTHONPATH=str(HERE))
    env.pop("WAYLAND_DISPLAY", None)
    p = subprocess.run([sys.executable, str(RUNNER), str(spec_path), str(result)], env=env,
                       capture_output=True, text=True, timeout=120, cwd=tmp)
    assert p.returncode == 0 and result.exists(), p.stdout[-3000:] + p.stderr[-3000:]
    return json.loads(result.read_text())


def check_report(report, label):
    """Every channel connected but the SCREEN_GAPS; no gap connected."""
    gaps = gap_addresses()
    failed, closed, lines = [], set(), []
    for screen, r in report["screens"].items():
        chans = r["channels"]
        ok = sum(c["connected"] and c["ca_connected"] for c in chans)
        lines.append(f"{screen}: {ok}/{len(chans)} channels connected ({r['widgets']} widgets)")
        for c in chans:
            if not (c["connected"] and c["ca_connected"]) and c["address"] not in gaps:
                failed.append(f"{screen}: {c['cls']} {c['address']}")
            if (c["connected"] or c["ca_connected"]) and c["address"] in gaps:
                closed.add(c["address"])
    print(f"\n{label}:\n  " + "\n  ".join(lines) + f"\n  timing {report['timing']}")
    if report["pydm_resynced"]:
        print(f"  PyDM's add_listener race (pydm_screens.py) left {len(report['pydm_resynced'])} "
              f"connected channel(s) marked disconnected, resynced: {report['pydm_resynced']}")
    assert not failed, f"{len(failed)} channels did not connect:\n" + "\n".join(sorted(set(failed)))
    closed_names = sorted({ch for ch in SCREEN_GAPS for a in closed
                           if any(a == "ca://" + expand(ch, macros_for(s)) for s in SCREEN_R)})
    assert not closed, f"gaps closed, remove them from SCREEN_GAPS: {closed_names}"


def check_acquire(report):
    st = report["start"]
    assert isinstance(st["counter_after"], (int, float)) and st["counter_after"] >= st["counter_before"] + 3, \
        f"Start did not make ArrayCounter_RBV rise: {st}"


# Sliders whose high limit the IOC takes from the input size (as the templates' dfanout records
# set it): ROI MinX/SizeX (Y), Stats CursorX/Y, an overlay's Position/Center/Size X (Y).
FOLLOW = {"NDROI": ["MinX", "SizeX", "MinY", "SizeY"], "NDStats": ["CursorX", "CursorY"],
          "NDOverlayN": [f"{k}{xy}" for k in ("Position", "Center", "Size") for xy in "XY"]}


def slider_max():
    """{address: the input size less one} of the FOLLOW sliders."""
    return {f"ca://{P}{SCREEN_R[s]}{n}": (SIZE_Y if n.endswith("Y") else SIZE_X) - 1
            for s, names in FOLLOW.items() for n in names}


def check_sliders(report):
    """Each FOLLOW slider is on its screen and spans the input, 0..size-1 at least, once a
    frame went through (PyDM's range is the channel's DBR_CTRL limits, updated by DBE_PROPERTY
    monitors when the size changes)."""
    got = {(s["screen"], s["address"]): s for s in report["sliders"]}
    want = slider_max()
    for screen, names in FOLLOW.items():
        for n in names:
            addr = f"ca://{P}{SCREEN_R[screen]}{n}"
            s = got.get((screen, addr))
            assert s is not None, f"no {n} slider on the {screen} screen"
            assert s["minimum"] is not None and s["minimum"] <= 0 \
                and s["maximum"] is not None and s["maximum"] >= want[addr], \
                f"{screen} slider {addr} spans {s['minimum']}..{s['maximum']}, not the " \
                f"input's 0..{want[addr]}"
    print("  sliders: " + ", ".join(f"{a.rsplit(':', 1)[-1]} 0..{got[(s, a)]['maximum']:g}"
                                    for s, names in FOLLOW.items() for a in
                                    [f"ca://{P}{SCREEN_R[s]}{n}" for n in names]))


def test_screens_channels_connect_in_pydm(ioc, display, tmp_path):
    """Part A: one PyDM widget per channel of each screen (adl2pydm's class for its MEDM
    widget); all connect, Start counts, sliders span the input."""
    screens = {}
    for screen, facts in FACTS["screens"].items():
        widgets = []
        for w in facts["widgets"]:
            assert w["role"] in ("control", "monitor", "visibility"), w
            if w["pydm"] == "PyDMRelatedDisplayButton":
                continue
            item = {"cls": w["pydm"], "role": w["role"],
                    "channel": "ca://" + expand(w["channel"], macros_for(screen))}
            if "press" in w:
                item.update(press=w["press"], label=w["label"])
            widgets.append(item)
        screens[screen] = {"widgets": widgets}
    spec = {"screens": screens, "wait_for_missing": sorted(gap_addresses()), "timeout": 20,
            "start": {"screen": "ADBase", "acquire": ":cam1:Acquire",
                      "counter": ":cam1:ArrayCounter_RBV"},
            "slider_max": slider_max(), "shots": str(tmp_path / "screenshots")}
    report = run_pydm(ioc, display, spec, tmp_path)
    (tmp_path / "report.json").write_text(json.dumps(report, indent=1))
    check_report(report, "part A (widgets built from ad_screen_channels.json)")
    check_acquire(report)
    check_sliders(report)
    shots = sorted(p.name for p in (tmp_path / "screenshots").iterdir())
    assert "NDROI-acquiring.png" in shots and all(f"{s}.png" in shots for s in screens), shots


# --- Part B: ADCore's real screens, converted by adl2pydm -------------------------------------

# The composite files the screens embed: adl2pydm makes each a PyDMEmbeddedDisplay of NAME.ui,
# so they are converted too.
def screens_and_embeds():
    out = set(SCREEN_R)
    for facts in FACTS["screens"].values():
        out.update(facts["includes"])
    return sorted(out)


def fix_adl2pydm_ui(text):
    """The two fixes adl2pydm 0.0.4's output needs to load in PyDM 1.29 (docs/screens.md gives
    them as sed commands, which this does):
    1. `PyDMAbsoluteGeometry` (its top-level form and every composite) is no PyDM class
       (ModuleNotFoundError: pydm.widgets.absolute_geometry): PyDMFrame, whose children keep
       their absolute positions as well;
    2. a slider's `tickPosition` is written `NoTicks`, which uic looks up on Qt
       (AttributeError): it is `QSlider::NoTicks`."""
    text = text.replace("PyDMAbsoluteGeometry", "PyDMFrame")
    text = text.replace("pydm.widgets.absolute_geometry", "pydm.widgets.frame")
    return text.replace("<enum>NoTicks<", "<enum>QSlider::NoTicks<")


def convert(adl_dir, out):
    """adl2pydm on each screen (and embedded file), then fix_adl2pydm_ui; returns the .ui paths."""
    exe = pathlib.Path(sys.executable).with_name("adl2pydm")
    if not exe.exists():
        pytest.fail("adl2pydm is missing: run ./scripts/setup.sh", pytrace=False)
    files = [str(pathlib.Path(adl_dir) / f"{n}.adl") for n in screens_and_embeds()]
    pathlib.Path(out).mkdir(parents=True, exist_ok=True)
    p = subprocess.run([str(exe), "-d", str(out), *files], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    uis = {}
    for n in screens_and_embeds():
        ui = pathlib.Path(out) / f"{n}.ui"
        assert ui.exists(), f"adl2pydm wrote no {ui.name}: {p.stderr[-2000:]}"
        ui.write_text(fix_adl2pydm_ui(ui.read_text()))
        uis[n] = ui
    return uis


def test_adcore_screens_converted_by_adl2pydm(ioc, display, tmp_path):
    """Part B: ADCore's real .adl screens through adl2pydm, loaded in PyDM with the macros."""
    adl_dir = os.environ.get("NDFLOW_ADCORE_ADL")
    if not adl_dir:
        pytest.skip("NDFLOW_ADCORE_ADL is not set: it names a directory of ADCore's .adl "
                    "screens (ADCore/ADApp/op/adl), which this repository does not ship")
    uis = convert(adl_dir, tmp_path / "ui")
    screens = {s: {"ui": str(uis[s]), "macros": macros_for(s)} for s in SCREEN_R}
    spec = {"screens": screens, "wait_for_missing": sorted(gap_addresses()), "timeout": 20,
            "start": {"screen": "ADBase", "acquire": ":cam1:Acquire",
                      "counter": ":cam1:ArrayCounter_RBV"},
            "slider_max": slider_max(), "shots": str(tmp_path / "screenshots")}
    report = run_pydm(ioc, display, spec, tmp_path)
    (tmp_path / "report.json").write_text(json.dumps(report, indent=1))
    # Each screen shows the channels the facts list (the converted file loses none).
    for s in SCREEN_R:
        want = {"ca://" + expand(w["channel"], macros_for(s)) for w in FACTS["screens"][s]["widgets"]}
        got = {c["address"] for c in report["screens"][s]["channels"]}
        assert want <= got, f"{s}: the converted screen lacks {sorted(want - got)[:20]}"
    check_report(report, "part B (ADCore's screens through adl2pydm)")
    check_acquire(report)
    check_sliders(report)
