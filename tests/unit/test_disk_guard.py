"""The integration tier's free-disk guard (tests/support/disk.py)."""

from __future__ import annotations

from pathlib import Path

from tests.support.disk import shortfall, shortfall_line


def test_enough_free_space_is_no_line(tmp_path: Path) -> None:
    assert shortfall(str(tmp_path), needed=1) is None
    assert shortfall_line("/tmp", 4 * 10**9, needed=4 * 10**9) is None


def test_too_little_names_the_path_and_both_amounts() -> None:
    # Pure: the free space given, not read (it moves while the other worker writes).
    line = shortfall_line("/tmp", 2_345_000_000, needed=4 * 10**9)
    assert line is not None
    assert line.startswith("only 2.3 GB free on /tmp, ")
    assert "need 4 GB" in line
