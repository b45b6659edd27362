import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def fixtures_dir() -> Path | None:
    """Real logs from other people's runs: ../shared/fixtures or $DLPERF_FIXTURES."""
    env = os.environ.get("DLPERF_FIXTURES")
    candidate = Path(env) if env else ROOT.parent / "shared" / "fixtures"
    return candidate if candidate.is_dir() else None


@pytest.fixture
def fixtures() -> Path:
    found = fixtures_dir()
    if found is None:
        pytest.skip("no ../shared/fixtures beside the project and DLPERF_FIXTURES is unset")
    return found
