"""The integration tier's free-disk guard (tests/support/disk.py)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.disk import shortfall


def test_enough_free_space_is_no_line(tmp_path: Path) -> None:
    assert shortfall(str(tmp_path), needed=1) is None


def test_too_little_names_the_path_and_both_amounts(tmp_path: Path) -> None:
    stats = os.statvfs(tmp_path)
    free = stats.f_bavail * stats.f_frsize
    line = shortfall(str(tmp_path), needed=free + 10**12)
    assert line is not None
    assert line.startswith(f"only {free / 10**9:.1f} GB free on {tmp_path}, ")
    assert f"need {(free + 10**12) / 10**9:.0f} GB" in line
