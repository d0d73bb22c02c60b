"""docs/reference.md and the pointers into it, and the rule that no text names notes or
paths outside the repository (tests/unit/test_sources.py shows each rule can fail;
tests/integration/repo/test_sources.py applies them to every tracked file).

Figures are explained in docs/reference.md; code, profiles and docs point into it as
`docs/reference.md#<section>`, the anchor GitHub gives the section's heading.
"""

from __future__ import annotations

import re
from functools import cache

from tests.support import REPO

REFERENCE = REPO / "docs" / "reference.md"

POINTER = re.compile(r"docs/reference\.md#([\w-]+)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
# Notes that never were part of the repository, and absolute paths of the machine it was
# written on. A machine path counts only where a path starts (a run directory's
# `<run>/work/` is the repository's own layout); the notes' folder is a sibling of the checkout.
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
