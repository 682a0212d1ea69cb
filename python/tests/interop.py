"""The interop clients and reference libraries the tests drive, which ./scripts/setup.sh
installs into .venv (python/requirements-test.txt; the ndflow wheel it builds).

A test of an interop that cannot run has checked nothing, so a missing client fails the test
that needs it, naming the package, instead of skipping it.
"""

import importlib
import importlib.util

import pytest

# Import name -> what to install, where the two differ.
PACKAGES = {
    "epics": "pyepics",
    "pvaccess": "pvapy",
    "PIL": "Pillow",
    "ophyd_async": "ophyd-async",
    "tqdm": "tqdm (installed with bluesky)",
    "ndflow": "the ndflow wheel (crates/ndflow-python)",
}


def _missing(module, why):
    top = module.split(".")[0]
    pytest.fail(
        f"cannot import {module} ({why}): {PACKAGES.get(top, top)} is missing from this "
        "Python; run ./scripts/setup.sh and the tests with .venv/bin/python",
        pytrace=False,
    )


def require(module):
    """Import `module` (dotted names too) and return it; fail with what to install if it is
    missing."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        error = e
    # Outside the except block, so the report is this message alone.
    _missing(module, error)


def require_installed(module):
    """Fail with what to install unless top-level `module` is installed, without importing it:
    for clients that run in a subprocess. Loading them here would put a second copy of EPICS
    base (aioca's libca next to pvapy's) into the pytest process, which crashes at exit."""
    if importlib.util.find_spec(module) is None:
        _missing(module, "not installed")
