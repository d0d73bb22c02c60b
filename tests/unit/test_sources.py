"""The repository explains itself: every source a file names is in it, or public.

Figures are explained in docs/reference.md; code, profiles and docs point into it as
`docs/reference.md#<section>`, the anchor GitHub gives the section's heading. These tests
fail when such a pointer names a section that does not exist, and when a tracked file
mentions notes kept outside the repository or a path on a development machine.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "docs" / "reference.md"
THIS_FILE = Path(__file__).resolve()

POINTER = re.compile(r"docs/reference\.md#([\w-]+)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
# Notes that never were part of the repository, and absolute paths of the machine it was
# written on. `/work/` counts only where a path starts (a run directory's `<run>/work/`
# is the repository's own layout); `../shared` is a sibling of the checkout.
OUTSIDE = re.compile(
    r"REFERENCE\.md|DESIGN\.md|(?:^|[\s\"'`(\[=:,;])/work/|\.\./shared",
)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every heading anchor of a Markdown text; a repeated heading gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    fenced = False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = HEADING.match(line)
        if fenced or not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


@cache
def reference_anchors() -> frozenset[str]:
    return frozenset(anchors(REFERENCE.read_text(encoding="utf-8")))


def broken_pointers(text: str, known: set[str] | frozenset[str]) -> list[tuple[int, str]]:
    """(line number, anchor) of every docs/reference.md pointer to a section that is missing."""
    return [
        (number, anchor)
        for number, line in enumerate(text.splitlines(), start=1)
        for anchor in POINTER.findall(line)
        if anchor not in known
    ]


def outside_mentions(text: str) -> list[int]:
    """Line numbers that mention notes or paths outside the repository."""
    return [n for n, line in enumerate(text.splitlines(), start=1) if OUTSIDE.search(line)]


def checked(path: str) -> bool:
    """Files the rules apply to: all tracked text, but not the fixtures' recorded data."""
    if path.startswith("tests/fixtures/"):
        name = path.rsplit("/", 1)[-1]
        return name == "SOURCES.md" or name.startswith("MANIFEST")
    return (REPO / path).resolve() != THIS_FILE


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


def test_the_reference_has_the_sections_the_profiles_rely_on() -> None:
    assert {
        "gpu-identity",
        "gpu-peaks",
        "achievable-matmul-ceilings",
        "power-limits",
        "pcie",
        "nvlink",
        "thermal-limits-and-tlimit",
        "nvml",
        "driver-cuda-and-provisioning",
        "nccl-bus-bandwidth",
        "nccl-floors",
        "nvme-and-fio",
        "flops-and-mfu",
        "host-settings",
        "bringup-policy",
        "profile-margins",
        "report-tolerances",
    } <= reference_anchors()


# --- the rules can fail ----------------------------------------------------------------------


def test_slugs_are_githubs() -> None:
    assert slug("Thermal limits and T.Limit") == "thermal-limits-and-tlimit"
    assert slug("Driver, CUDA and provisioning") == "driver-cuda-and-provisioning"
    assert slug("NVMe and fio") == "nvme-and-fio"
    text = "# Title\n## Notes\n```\n## not a heading\n```\n### Notes\n"
    assert anchors(text) == {"title", "notes", "notes-1"}


def test_a_pointer_to_a_missing_section_is_found() -> None:
    text = "x  # docs/reference.md#gpu-peaks\ny  # docs/reference.md#gpu-peak (typo)\n"
    assert broken_pointers(text, {"gpu-peaks"}) == [(2, "gpu-peak")]


def test_mentions_outside_the_repository_are_found() -> None:
    text = "\n".join(
        [
            "# see REFERENCE.md",  # 1
            '"""As DESIGN.md says."""',  # 2
            "copied from /work/shared/fixtures/nccl/",  # 3
            "(../shared/REFERENCE)",  # 4
            "checkpoints in <run>/work/checkpoints/step<N>",  # 5: the run directory's layout
            "not a burn-in checkpoint (…/work/checkpoints/step<N>)",  # 6: same
            "see docs/reference.md#units",  # 7
            "path=`/work/main`",  # 8
        ]
    )
    assert outside_mentions(text) == [1, 2, 3, 4, 8]
