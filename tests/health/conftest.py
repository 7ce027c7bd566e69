from __future__ import annotations

from pathlib import Path

import pytest

SAMPLES = Path(__file__).parent / "samples"


@pytest.fixture
def sample():
    """Text of a sample tool output under tests/health/samples/."""
    return lambda name: (SAMPLES / name).read_text()
