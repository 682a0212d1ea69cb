"""Settings that survive restarts (docs/state.md): `ndflow run CONFIG` saves every changed
setting to CONFIG's state file and restores it at the next start, between the config and
`--set`; actions (Acquire) are never saved; a state file that does not fit the config is
reported key by key and the rest restored; a kill -9 at any moment of a save leaves a whole
file.

Loopback only: the IOCs and the clients get netenv.py's loopback variables and free ports
(pva_util.NdflowIoc, netenv.ca_client_env).
"""

import random
import subprocess
import textwrap
import time
import tomllib

import pytest
from interop import require
from netenv import process_env
from pva_util import NdflowIoc
from pyepics_client import run_pyepics

require("epics")

P = "STATE13:"

CONFIG = """
prefix = "{P}"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 32
MaxSizeY = 32
DataType = "UInt8"
ImageMode = "Continuous"
AcquireTime = 0.001
AcquirePeriod = 0.01

[[port]]
name = "ROI1"
type = "roi"
prefix = "ROI1:"
NDArrayPort = "SIM1"

[[port]]
name = "HDF1"
type = "hdf5"
prefix = "HDF1:"
NDArrayPort = "SIM1"
FilePath = "{DIR}/first/"
"""


def config(tmp):
    (tmp / "first").mkdir(exist_ok=True)
    return CONFIG.replace("{P}", P).replace("{DIR}", str(tmp))


def state_file(tmp):
    """NdflowIoc writes the config as ioc.toml: its state file is beside it."""
    return tmp / "ioc.state.toml"


def ca_client(ioc, code):
    """Runs pyepics `code` (which fills the dict `out`) against the IOC; returns `out`."""
    return run_pyepics(ioc, code, P)


def wait_saved(path, pred, ioc, timeout=10.0):
    """Polls the state file until `pred(parsed)`; returns it."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = tomllib.loads(path.read_text())
            if pred(last):
                return last
        except (FileNotFoundError, tomllib.TOMLDecodeError) as e:
            last = e
        time.sleep(0.05)
    pytest.fail(f"state file never matched (last {last!r})\n{ioc.log_text()}")


def kill9(ioc):
    """SIGKILL our IOC (by its Popen handle) and close its clients."""
    ioc.proc.kill()
    ioc.proc.wait(timeout=10)
    ioc.raw.close()
    ioc.ctx.close()
    ioc.log.close()


def started(ndflow_bin, tmp, args=()):
    ioc = NdflowIoc(ndflow_bin, tmp, config(tmp), args=args)
    ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: True)
    return ioc


def state_diff(ndflow_bin, config_path):
    """`ndflow state diff CONFIG`'s output (it must succeed)."""
    return subprocess.run(
        [str(ndflow_bin), "state", "diff", str(config_path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def text_of(v):
    """A long string (char waveform) as p4p returns it: text, or an array of char codes."""
    if isinstance(v, str):
        return v
    return bytes(int(c) & 0xFF for c in v).split(b"\0", 1)[0].decode()


def test_changes_survive_kill_9_and_acquire_does_not(ndflow_bin, tmp_path):
    second = tmp_path / "second"
    second.mkdir()
    ioc = started(ndflow_bin, tmp_path)
    try:
        ca_client(
            ioc,
            f"""
            epics.caput(P + "ROI1:MinX", 7, wait=True)
            epics.caput(P + "HDF1:FilePath", {str(second) + "/"!r}, wait=True)
            out["minx"] = epics.caget(P + "ROI1:MinX_RBV")
            """,
        )
        ioc.ctx.put(P + "cam1:AcquireTime", 0.0025)
        ioc.ctx.put(P + "cam1:Acquire", 1)
        ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: v > 2)
        saved = wait_saved(
            state_file(tmp_path),
            lambda s: s.get("ROI1", {}).get("MinX") == 7
            and s.get("SIM1", {}).get("AcquireTime") == 0.0025
            and "FilePath" in s.get("HDF1", {}),
            ioc,
        )
        assert saved["HDF1"]["FilePath"] == str(second) + "/"
        # Actions and counters are never saved, however they changed.
        assert "Acquire" not in saved["SIM1"] and "ArrayCounter" not in saved["SIM1"]
        # Only what differs from the config.
        assert set(saved) == {"SIM1", "ROI1", "HDF1"}
        assert set(saved["SIM1"]) == {"AcquireTime"}, saved
    finally:
        kill9(ioc)

    ioc = started(ndflow_bin, tmp_path)
    try:
        ioc.wait_for(P + "ROI1:MinX_RBV", lambda v: v == 7)
        assert ioc.ctx.get(P + "cam1:AcquireTime_RBV") == pytest.approx(0.0025)
        assert text_of(ioc.ctx.get(P + "HDF1:FilePath_RBV")) == str(second) + "/"
        assert ioc.raw.get(P + "cam1:Acquire_RBV").value.index == 0
        time.sleep(0.2)
        assert ioc.ctx.get(P + "cam1:ArrayCounter_RBV") == 0, "nothing acquired"
        assert "state: restored 3 settings from" in ioc.log_text()
        # Put back to the config's value, a setting leaves the file.
        ioc.ctx.put(P + "ROI1:MinX", 0)
        wait_saved(state_file(tmp_path), lambda s: "ROI1" not in s, ioc)
    finally:
        ioc.close()


def test_a_state_file_that_does_not_fit_is_reported_key_by_key(ndflow_bin, tmp_path):
    path = state_file(tmp_path)
    path.write_text(
        textwrap.dedent(
            """
            [SIM1]
            AcquireTime = 0.003
            [ROI1]
            MinX = "abc"
            SizeX = 20
            [NOPE1]
            MinY = 5
            """
        )
    )
    ioc = started(ndflow_bin, tmp_path)
    try:
        assert ioc.ctx.get(P + "cam1:AcquireTime_RBV") == pytest.approx(0.003)
        assert ioc.ctx.get(P + "ROI1:SizeX_RBV") == 20
        assert ioc.ctx.get(P + "ROI1:MinX_RBV") == 0
        log = ioc.log_text()
        warnings = [l for l in log.splitlines() if l.startswith("warning: state ")]
        assert len(warnings) == 2, log
        bad_value, unknown_port = warnings
        assert f"{path}:5: port 'ROI1': key 'MinX' = \"abc\": not restored: " in bad_value
        assert "expected an integer" in bad_value
        assert f"{path}:8: port 'NOPE1': key 'MinY' = 5: not restored: " in unknown_port
        assert "no port named 'NOPE1'" in unknown_port
        assert "state: restored 2 settings" in log
    finally:
        ioc.close()
    # `ndflow state diff` says the same without starting anything.
    diff = state_diff(ndflow_bin, tmp_path / "ioc.toml")
    assert "  SIM1.AcquireTime: 0.001 -> 0.003\n" in diff
    assert "2 keys do not fit the config" in diff


def test_set_wins_over_the_state_file(ndflow_bin, tmp_path):
    state_file(tmp_path).write_text("[SIM1]\nAcquireTime = 0.004\n[ROI1]\nMinX = 9\n")
    ioc = started(ndflow_bin, tmp_path, args=("--set", "ROI1.MinX=2"))
    try:
        assert ioc.ctx.get(P + "ROI1:MinX_RBV") == 2
        assert ioc.ctx.get(P + "cam1:AcquireTime_RBV") == pytest.approx(0.004)
        assert "ROI1.MinX = 9 not restored: --set ROI1.MinX wins" in ioc.log_text()
    finally:
        ioc.close()


def test_a_corrupt_file_is_set_aside_and_an_unwritable_one_does_not_stop_the_ioc(
    ndflow_bin, tmp_path
):
    path = state_file(tmp_path)
    path.write_text("[SIM1]\nAcquireTime = = 1\n")
    ioc = started(ndflow_bin, tmp_path)
    try:
        assert "is unreadable" in ioc.log_text() and str(path) + ".bad" in ioc.log_text()
        assert (tmp_path / "ioc.state.toml.bad").read_text() == "[SIM1]\nAcquireTime = = 1\n"
        assert ioc.ctx.get(P + "cam1:AcquireTime_RBV") == pytest.approx(0.001)
        ioc.ctx.put(P + "ROI1:MinX", 3)
        wait_saved(path, lambda s: s.get("ROI1", {}).get("MinX") == 3, ioc)
    finally:
        ioc.close()
    unwritable = "/proc/ndflow-state-test/ioc.state.toml"
    ioc = started(ndflow_bin, tmp_path, args=("--state", unwritable))
    try:
        # Said at start, once; the IOC serves and takes puts all the same.
        assert "warning: cannot save settings to " + unwritable in ioc.log_text()
        ioc.ctx.put(P + "ROI1:MinX", 4)
        ioc.wait_for(P + "ROI1:MinX_RBV", lambda v: v == 4)
        time.sleep(1.2)  # past a save attempt
        assert ioc.proc.poll() is None
        assert ioc.log_text().count("cannot save settings") == 1, ioc.log_text()
    finally:
        ioc.close()


def test_kill_9_during_saves_never_leaves_a_broken_file(ndflow_bin, tmp_path):
    """100 kills at random moments of `ndflow state stress-write`, which rewrites the state
    file through the IOC's atomic save as fast as it can (a whole file per version, every
    value the version number): after each, the file is one whole version."""
    path = tmp_path / "s.state.toml"
    tmp = tmp_path / "s.state.toml.tmp"
    rng = random.Random(1234)
    versions = set()
    mid_save = 0
    for i in range(100):
        p = subprocess.Popen(
            [str(ndflow_bin), "state", "stress-write", str(path), "--seconds", "20"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=process_env(),
            text=True,
        )
        try:
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
            time.sleep(rng.uniform(0, 0.04))
        finally:
            p.kill()
            p.wait(timeout=10)
        # A temporary file left behind: the kill landed inside a save.
        mid_save += tmp.exists()
        text = path.read_text()
        assert text.strip(), f"kill {i}: empty state file"
        doc = tomllib.loads(text)
        values = {v for port in doc.values() for v in port.values()}
        assert len(doc) == 20 and len(values) == 1, f"kill {i}: mixed versions {sorted(values)[:5]}"
        versions |= values
    # The kills landed at different moments, many of them inside a save.
    assert len(versions) >= 3, sorted(versions)
    assert mid_save >= 10, f"only {mid_save} of 100 kills landed inside a save"


OVERLAY = """
[[port]]
name = "OV1"
type = "overlay"
prefix = "Over1:"
NDArrayPort = "SIM1"
"""


def test_link_fields_survive_a_restart(ndflow_bin, tmp_path):
    """The link fields ADCore's request files save (an overlay's PositionXLink.DOL, ADBase's
    ShutterOpenEPICS.OUT/.OCAL and ShutterStatusEPICS_RBV.INP/.ZRVL), set over Channel
    Access, are in the state file and back after a kill -9: the link follows again."""
    cfg = config(tmp_path) + OVERLAY
    ioc = NdflowIoc(ndflow_bin, tmp_path, cfg)
    path = state_file(tmp_path)
    try:
        ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: True)
        got = ca_client(
            ioc,
            """
            put = lambda n, v: epics.caput(P + n, v, wait=True, timeout=5)
            out["puts"] = [put("Over1:1:PositionXLink.DOL", P + "ROI1:MinX_RBV CP"),
                           put("cam1:ShutterOpenEPICS.OUT", P + "ROI1:MinY PP"),
                           put("cam1:ShutterOpenEPICS.OCAL", "3"),
                           put("cam1:ShutterStatusEPICS_RBV.ZRVL", 5)]
            """,
        )
        assert got["puts"] == [1, 1, 1, 1], got
        saved = wait_saved(
            path,
            lambda s: "1:PositionXLink.DOL" in s.get("OV1", {})
            and "ShutterStatusEPICS_RBV.ZRVL" in s.get("SIM1", {}),
            ioc,
        )
        assert saved["OV1"] == {"1:PositionXLink.DOL": P + "ROI1:MinX_RBV CP"}, saved
        assert saved["SIM1"] == {
            "ShutterOpenEPICS.OUT": P + "ROI1:MinY PP",
            "ShutterOpenEPICS.OCAL": "3",
            "ShutterStatusEPICS_RBV.ZRVL": 5,
        }, saved
    finally:
        kill9(ioc)

    # A key no link record has is reported with the keys the port has; the rest restored.
    text = path.read_text().replace("[OV1]", '[OV1]\n"1:PositionX.DOL" = "X"')
    path.write_text(text)
    ioc = NdflowIoc(ndflow_bin, tmp_path, cfg)
    try:
        ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: True)
        got = ca_client(
            ioc,
            """
            g = lambda n: epics.caget(P + n, timeout=5)
            out["got"] = [g("Over1:1:PositionXLink.DOL"), g("cam1:ShutterOpenEPICS.OUT"),
                          g("cam1:ShutterOpenEPICS.OCAL"), g("cam1:ShutterStatusEPICS_RBV.ZRVL")]
            """,
        )
        assert got["got"] == [P + "ROI1:MinX_RBV CP", P + "ROI1:MinY PP", "3", 5], got
        log = ioc.log_text()
        assert "state: restored 4 link fields from" in log, log
        warning = [l for l in log.splitlines() if "1:PositionX.DOL" in l]
        assert len(warning) == 1 and "no link field '1:PositionX.DOL'" in warning[0], log
        assert "1:PositionXLink.DOL" in warning[0], warning
        # The restored link follows its PV again.
        ioc.ctx.put(P + "ROI1:MinX", 12, wait=True)
        ioc.wait_for(P + "Over1:1:PositionX_RBV", lambda v: v == 12)
        # Emptied again, a link field leaves the file (the misfit key is dropped too); what
        # the link wrote (PositionX, and CenterX with it) stays, as any setting.
        ioc.ctx.put(P + "Over1:1:PositionXLink.DOL", "", wait=True)
        saved = wait_saved(path, lambda s: "1:PositionXLink.DOL" not in s.get("OV1", {}), ioc)
        assert saved["OV1"]["1:PositionX"] == 12 and "1:PositionX.DOL" not in saved["OV1"]
    finally:
        ioc.close()
    diff = state_diff(ndflow_bin, tmp_path / "ioc.toml")
    assert f'  SIM1.ShutterOpenEPICS.OUT (link field): "" -> "{P}ROI1:MinY PP"\n' in diff, diff
    assert '  SIM1.ShutterOpenEPICS.OCAL (link field): "1" -> "3"\n' in diff, diff


def cam(cfg, line):
    """`cfg` with `line` added to the camera's table."""
    return cfg.replace("AcquirePeriod = 0.01\n", f"AcquirePeriod = 0.01\n{line}\n")


def test_link_fields_in_the_config_then_the_state_file(ndflow_bin, tmp_path):
    """A config sets link fields as `"RECORD.FIELD" = …` keys: applied at start, they are the
    baseline (not saved until changed); a client's change is saved and wins at the next start,
    as any setting over the config."""
    cfg = (
        cam(config(tmp_path), f'"ShutterOpenEPICS.OUT" = "{P}ROI1:MinY PP"')
        + OVERLAY
        + f'"1:PositionXLink.DOL" = "{P}ROI1:MinX_RBV CP"\n'
    )
    path = state_file(tmp_path)
    ioc = NdflowIoc(ndflow_bin, tmp_path, cfg)
    try:
        ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: True)
        assert ioc.ctx.get(P + "cam1:ShutterOpenEPICS.OUT") == P + "ROI1:MinY PP"
        assert ioc.ctx.get(P + "Over1:1:PositionXLink.DOL") == P + "ROI1:MinX_RBV CP"
        ioc.ctx.put(P + "ROI1:MinX", 9, wait=True)
        ioc.wait_for(P + "Over1:1:PositionX_RBV", lambda v: v == 9)
        saved = wait_saved(path, lambda s: s.get("ROI1", {}).get("MinX") == 9, ioc)
        assert "ShutterOpenEPICS.OUT" not in saved.get("SIM1", {}), saved
        assert "1:PositionXLink.DOL" not in saved.get("OV1", {}), saved
        ioc.ctx.put(P + "cam1:ShutterOpenEPICS.OUT", P + "ROI1:SizeY PP", wait=True)
        wait_saved(path, lambda s: "ShutterOpenEPICS.OUT" in s.get("SIM1", {}), ioc)
    finally:
        ioc.close()
    ioc = NdflowIoc(ndflow_bin, tmp_path, cfg)
    try:
        ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: True)
        assert ioc.ctx.get(P + "cam1:ShutterOpenEPICS.OUT") == P + "ROI1:SizeY PP"
        assert "state: restored 1 link fields from" in ioc.log_text()
    finally:
        ioc.close()
    # A link field the port does not have, or a value its write would refuse, is the
    # config's error, naming the key.
    for bad, says in [
        (
            cfg.replace('"1:PositionXLink.DOL"', '"1:PositionX.DOL"'),
            "port 'OV1': key '1:PositionX.DOL': no link field '1:PositionX.DOL'",
        ),
        (
            cfg + '"1:PositionYLink.DOL" = "pva://X:Y"\n',
            "key '1:PositionYLink.DOL': 1:PositionYLink.DOL 'pva://X:Y': pvAccess links",
        ),
        (
            cam(cfg, '"ShutterOpenEPICS.OCAL" = "open"'),
            "ShutterOpenEPICS.OCAL takes a number",
        ),
        (
            cam(cfg, '"ShutterCloseEPICS.OUT" = 5'),
            "ShutterCloseEPICS.OUT takes a PV name",
        ),
    ]:
        (tmp_path / "bad.toml").write_text(bad)
        r = subprocess.run(
            [str(ndflow_bin), "check", str(tmp_path / "bad.toml")], capture_output=True, text=True
        )
        assert r.returncode != 0 and says in r.stderr, (says, r.stderr)
    # A number is an input link's constant.
    (tmp_path / "const.toml").write_text(cfg + '"1:SizeXLink.DOL" = 5\n')
    r = subprocess.run(
        [str(ndflow_bin), "check", str(tmp_path / "const.toml")], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
