"""Shared test helpers: where the real Nsight Compute fixtures live (read from ../shared, never copied)."""

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REAL = REPO.parent / "shared" / "fixtures" / "real"


def real_fixture(folder: str) -> Path:
    """The path of a real fixture folder, or skip the test saying why."""
    path = REAL / folder
    if not path.is_dir():
        pytest.skip(f"real fixtures not found at {path} (../shared/fixtures/real is absent)")
    return path


def real_reports() -> list[Path]:
    """Every .ncu-rep in ../shared/fixtures/real (empty when absent)."""
    return sorted(REAL.glob("*/*.ncu-rep")) if REAL.is_dir() else []


@pytest.fixture
def real_root() -> Path:
    if not REAL.is_dir():
        pytest.skip(f"real fixtures not found at {REAL} (../shared/fixtures/real is absent)")
    return REAL
