"""English for counts, written once: "1 node", "2 nodes", "1 difference".

Every count a person reads (console, reports, messages) goes through `plural`, so that
no output says "1 nodes".
"""

from __future__ import annotations

# Nouns whose plural is not the noun + "s".
_IRREGULAR = {"GPU's": "GPUs'", "index": "indices", "child": "children", "this": "these"}


def plural(count: int, word: str, many: str | None = None) -> str:
    """ "1 node", "2 nodes", "0 nodes"; `many` where the plural is not word + "s"."""
    if count == 1:
        return f"{count} {word}"
    return f"{count} {many or _IRREGULAR.get(word) or word + 's'}"
