"""The command-line clients against a running IOC: `ndflow ca get|put|monitor` (Channel
Access) and `ndflow pv get|put|monitor` (pvAccess). Enums print as their strings, char
waveforms (FilePath) as text, arrays as their count and first elements (-n), a put of an enum
string or index and of text takes effect (read back with p4p), monitor --count N prints N
`NAME TIMESTAMP VALUE` lines, a missing PV fails naming it and where the search went, and
EPICS_CA_NAME_SERVERS finds channels over TCP alone.

Loopback only: the IOC and every client get netenv.py's loopback variables (automatic address
lists off, 127.0.0.1) with this module's free ports.
"""

import re
import subprocess
import time

import numpy as np
import pytest
from interop import require
from netenv import process_env
from pva_util import NdflowIoc, enum_index

require("p4p")

P = "CLI13:"

CONFIG = """
prefix = "{P}"

[[port]]
name = "SIM1"
type = "sim"
prefix = "cam1:"
MaxSizeX = 64
MaxSizeY = 32
DataType = "UInt16"
ImageMode = "Single"
AcquireTime = 0.0
AcquirePeriod = 0.02

[[port]]
name = "IMAGE1"
type = "stdarrays"
prefix = "image1:"
NDArrayPort = "SIM1"
BlockingCallbacks = "Yes"
ArrayDataType = "UInt16"

[[port]]
name = "HDF1"
type = "hdf5"
prefix = "HDF1:"
NDArrayPort = "SIM1"
FilePath = "{DIR}"
FileName = "scan"
"""

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"


@pytest.fixture(scope="module")
def ioc(ndflow_bin, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli_clients")
    ioc = NdflowIoc(ndflow_bin, tmp, CONFIG.replace("{P}", P).replace("{DIR}", str(tmp) + "/"))
    ioc.wait_for(P + "cam1:ArrayCounter_RBV", lambda v: v == 0)
    ioc.dir = str(tmp) + "/"
    yield ioc
    ioc.close()


def client_env(ioc, **extra):
    """This module's ports on top of the loopback variables."""
    env = dict(ioc.conf)
    env.update(
        EPICS_CA_SERVER_PORT=str(ioc.ca_port),
        EPICS_CA_REPEATER_PORT=str(ioc.ca_repeater),
    )
    env.update(extra)
    return process_env(**env)


def cli(ndflow_bin, ioc, *args, env=None, timeout=30):
    return subprocess.run(
        [str(ndflow_bin), *args],
        env=env or client_env(ioc),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ok(p):
    assert p.returncode == 0, f"exit {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}"
    return p.stdout.splitlines()


def test_ca_get_prints_enum_strings_text_and_numbers(ndflow_bin, ioc):
    lines = ok(
        cli(
            ndflow_bin,
            ioc,
            "ca",
            "get",
            P + "cam1:DataType_RBV",
            P + "cam1:ImageMode",
            P + "HDF1:FilePath",
            P + "HDF1:FileName_RBV",
            P + "cam1:MaxSizeX_RBV",
        )
    )
    assert lines == [
        P + "cam1:DataType_RBV UInt16",
        P + "cam1:ImageMode Single",
        P + "HDF1:FilePath " + ioc.dir,
        P + "HDF1:FileName_RBV scan",
        P + "cam1:MaxSizeX_RBV 64",
    ]
    # The same over pvAccess (NTEnum choice, NTScalar string).
    lines = ok(cli(ndflow_bin, ioc, "pv", "get", P + "cam1:DataType_RBV", P + "HDF1:FilePath"))
    assert lines == [P + "cam1:DataType_RBV UInt16", P + "HDF1:FilePath " + ioc.dir]


def test_ca_put_enum_by_string_and_index_and_text(ndflow_bin, ioc):
    ok(cli(ndflow_bin, ioc, "ca", "put", P + "cam1:ImageMode", "Continuous"))
    assert enum_index(ioc.ctx.get(P + "cam1:ImageMode_RBV")) == 2
    ok(cli(ndflow_bin, ioc, "ca", "put", P + "cam1:ImageMode", "1"))
    assert enum_index(ioc.ctx.get(P + "cam1:ImageMode_RBV")) == 1
    ok(cli(ndflow_bin, ioc, "pv", "put", P + "cam1:ImageMode", "Single"))
    assert ok(cli(ndflow_bin, ioc, "ca", "get", P + "cam1:ImageMode_RBV")) == [
        P + "cam1:ImageMode_RBV Single"
    ]
    # A choice that does not exist: refused, naming the PV and the choices; nothing changes.
    p = cli(ndflow_bin, ioc, "ca", "put", P + "cam1:ImageMode", "Sometimes")
    assert p.returncode != 0
    assert P + "cam1:ImageMode" in p.stderr and '"Continuous"' in p.stderr, p.stderr
    assert enum_index(ioc.ctx.get(P + "cam1:ImageMode_RBV")) == 0
    # Text into a char waveform.
    new = ioc.dir + "sub dir/"
    ok(cli(ndflow_bin, ioc, "ca", "put", P + "HDF1:FilePath", new))
    assert ioc.ctx.get(P + "HDF1:FilePath") == new
    assert ok(cli(ndflow_bin, ioc, "ca", "get", P + "HDF1:FilePath")) == [
        P + "HDF1:FilePath " + new
    ]
    ok(cli(ndflow_bin, ioc, "ca", "put", P + "HDF1:FilePath", ioc.dir))
    # A number out of range is refused by the server, and reported.
    p = cli(ndflow_bin, ioc, "ca", "put", P + "cam1:SizeX", "-5")
    assert p.returncode != 0 and P + "cam1:SizeX" in p.stderr, p.stderr
    assert ioc.ctx.get(P + "cam1:SizeX_RBV") == 64
    # A negative value is a value, not an option, over pvAccess too.
    p = cli(ndflow_bin, ioc, "pv", "put", P + "cam1:SizeX", "-5")
    assert p.returncode != 0 and "unexpected argument" not in p.stderr, p.stderr
    assert P + "cam1:SizeX" in p.stderr, p.stderr
    gain = ioc.ctx.get(P + "cam1:Gain_RBV")
    ok(cli(ndflow_bin, ioc, "pv", "put", P + "cam1:Gain", "-1.5"))
    assert ioc.ctx.get(P + "cam1:Gain_RBV") == -1.5
    ok(cli(ndflow_bin, ioc, "pv", "put", P + "cam1:Gain", str(float(gain))))


def test_ca_put_wait_then_arrays_with_n(ndflow_bin, ioc):
    # -c: a put with completion on Acquire returns once the (single) frame is done.
    ok(cli(ndflow_bin, ioc, "ca", "put", "-c", P + "cam1:Acquire", "1"))
    assert ioc.ctx.get(P + "cam1:ArrayCounter_RBV") >= 1
    frame = np.asarray(ioc.ctx.get(P + "image1:ArrayData"))
    assert frame.size == 64 * 32
    first = " ".join(str(x) for x in frame[:3])
    assert ok(cli(ndflow_bin, ioc, "ca", "get", "-n", "3", P + "image1:ArrayData")) == [
        f"{P}image1:ArrayData 2048 [{first} ...]"
    ]
    assert ok(cli(ndflow_bin, ioc, "pv", "get", "-n", "3", P + "image1:ArrayData")) == [
        f"{P}image1:ArrayData 2048 [{first} ...]"
    ]
    line = ok(cli(ndflow_bin, ioc, "ca", "get", "-n", "0", P + "image1:ArrayData"))[0]
    assert line == f"{P}image1:ArrayData 2048 [...]"


@pytest.mark.parametrize("proto", ["ca", "pv"])
def test_monitor_prints_count_updates(ndflow_bin, ioc, proto):
    ioc.ctx.put(P + "cam1:ImageMode", "Continuous")
    ioc.ctx.put(P + "cam1:Acquire", 1)
    try:
        t0 = time.monotonic()
        lines = ok(
            cli(ndflow_bin, ioc, proto, "monitor", "--count", "3", P + "cam1:ArrayCounter_RBV")
        )
        assert time.monotonic() - t0 < 10
    finally:
        ioc.ctx.put(P + "cam1:Acquire", 0)
        ioc.ctx.put(P + "cam1:ImageMode", "Single")
    assert len(lines) == 3, lines
    counts = []
    for line in lines:
        m = re.fullmatch(re.escape(P + "cam1:ArrayCounter_RBV") + f" ({STAMP}) (\\d+)", line)
        assert m, line
        counts.append(int(m.group(2)))
    assert counts == sorted(counts) and counts[-1] > counts[0], counts
    # An enum monitor prints the string (the current value comes first).
    lines = ok(cli(ndflow_bin, ioc, proto, "monitor", "--count", "1", P + "cam1:ImageMode_RBV"))
    assert re.fullmatch(re.escape(P + "cam1:ImageMode_RBV") + f" {STAMP} Single", lines[0]), lines


@pytest.mark.parametrize(
    "args, var",
    [
        (["ca", "get"], "CA"),
        (["ca", "monitor"], "CA"),
        (["ca", "put"], "CA"),
        (["pv", "get"], "PVA"),
        (["pv", "monitor"], "PVA"),
    ],
)
def test_missing_pv_fails_naming_it(ndflow_bin, ioc, args, var):
    name = P + "no:such:pv"
    extra = ["1"] if args[1] == "put" else []
    t0 = time.monotonic()
    p = cli(ndflow_bin, ioc, *args, "--timeout", "0.5", name, *extra)
    assert time.monotonic() - t0 < 5
    assert p.returncode != 0 and p.stdout == ""
    port = ioc.ca_port if var == "CA" else ioc.conf["EPICS_PVA_BROADCAST_PORT"]
    assert (
        f"{name}: not found within 0.5 s: no server answered the search; "
        f"searched: udp 127.0.0.1:{port}; set EPICS_{var}_ADDR_LIST"
    ) in p.stderr, p.stderr


def test_ca_name_server_alone_finds_channels_over_tcp(ndflow_bin, ioc):
    # No UDP destination at all (empty address list, automatic list off): only the TCP search.
    env = client_env(
        ioc,
        EPICS_CA_ADDR_LIST="",
        EPICS_CA_AUTO_ADDR_LIST="NO",
        EPICS_CA_NAME_SERVERS=f"127.0.0.1:{ioc.ca_port}",
    )
    assert ok(cli(ndflow_bin, ioc, "ca", "get", P + "cam1:DataType_RBV", env=env)) == [
        P + "cam1:DataType_RBV UInt16"
    ]
    p = cli(ndflow_bin, ioc, "ca", "get", "--timeout", "0.5", P + "no:such:pv", env=env)
    assert p.returncode != 0
    assert f"searched: tcp 127.0.0.1:{ioc.ca_port};" in p.stderr, p.stderr
