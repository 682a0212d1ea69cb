import os
import pathlib

import pytest

import netenv

# The EIGER simulator's fixtures, defined once here so that its venv is built once a session.
from eiger_peer import tickit_eiger, tickit_python  # noqa: F401, E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def pytest_configure(config):
    # In-process clients (p4p contexts, pyepics, the ndflow package's servers) read the process
    # environment: keep them on 127.0.0.1 however the suite was started.
    os.environ.update(netenv.LOOPBACK)


@pytest.fixture(scope="session")
def ndflow_bin():
    """The release binary built by scripts/setup.sh (or NDFLOW_BIN)."""
    path = pathlib.Path(os.environ.get("NDFLOW_BIN", ROOT / "target" / "release" / "ndflow"))
    if not path.exists():
        pytest.fail(f"ndflow binary not found at {path}: run scripts/setup.sh first")
    return path


# The EIGER tests run last: their two peers are installed in the background while the other
# tests run (scripts/test.sh: the tickit simulator's venv and dectris-compression, which pip
# builds from source), so by then they are usually ready and nobody waits.
_RUN_LAST = ("test_eiger.py", "test_eiger_golden.py", "test_eiger_peer_selfcheck.py")


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: item.path.name in _RUN_LAST)
