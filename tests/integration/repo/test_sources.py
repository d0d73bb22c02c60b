"""The repository explains itself: every source a file names is in it, or public.

Code, profiles and docs point into docs/reference.md as `docs/reference.md#<section>`.
These tests read every tracked file (`git ls-files`) and fail when such a pointer names a
section that does not exist, and when a file mentions notes kept outside the repository or
a path on a development machine (tests/support/reference.py holds the rules).
"""

from __future__ import annotations

import subprocess
from functools import cache

import pytest

from tests.support import REPO
from tests.support.reference import broken_pointers, outside_mentions, reference_anchors

# Examples that break the rules on purpose, to show each rule can fail.
EXAMPLES = REPO / "tests" / "unit" / "test_sources.py"


def checked(path: str) -> bool:
    """Files the rules apply to: all tracked text, but not the fixtures' recorded data."""
    if path.startswith("tests/fixtures/"):
        name = path.rsplit("/", 1)[-1]
        return name == "SOURCES.md" or name.startswith("MANIFEST")
    return (REPO / path).resolve() != EXAMPLES


@cache
def tracked_texts() -> tuple[tuple[str, str], ...]:
    """(path, text) of every file of the repository the rules apply to."""
    try:
        listed = subprocess.run(
            # Tracked files, and new ones not yet added (but not ignored ones).
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: no list of tracked files")
    texts = []
    for path in sorted(p for p in listed.decode().split("\0") if p and checked(p)):
        try:
            texts.append((path, (REPO / path).read_text(encoding="utf-8")))
        except (FileNotFoundError, IsADirectoryError, UnicodeDecodeError):
            continue  # deleted in the work tree, a submodule, or binary
    return tuple(texts)


# --- the rules, on the repository ---------------------------------------------------------------


def test_the_repository_is_listed() -> None:
    paths = [path for path, _ in tracked_texts()]
    assert "docs/reference.md" in paths and "checks/profiles/b300.yaml" in paths
    assert not any(path.endswith(".txt") for path in paths if path.startswith("tests/fixtures/"))


def test_every_pointer_into_the_reference_names_a_section() -> None:
    broken = [
        f"{path}:{number}: docs/reference.md#{anchor}"
        for path, text in tracked_texts()
        for number, anchor in broken_pointers(text, reference_anchors())
    ]
    assert broken == []


def test_no_file_mentions_notes_or_paths_outside_the_repository() -> None:
    found = [
        f"{path}:{number}" for path, text in tracked_texts() for number in outside_mentions(text)
    ]
    assert found == []
