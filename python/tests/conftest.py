import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def ndflow_bin():
    """The release binary built by scripts/setup.sh (or NDFLOW_BIN)."""
    path = pathlib.Path(os.environ.get("NDFLOW_BIN", ROOT / "target" / "release" / "ndflow"))
    if not path.exists():
        pytest.fail(f"ndflow binary not found at {path}: run scripts/setup.sh first")
    return path
