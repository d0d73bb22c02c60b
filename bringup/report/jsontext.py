"""`json.dumps(value, indent=2, sort_keys=True)`, the same text, at a third of the CPU.

report.json is written indented with sorted keys (docs/json.md). The standard library's
C encoder does not indent: with `indent` set, json.dumps runs its pure-Python encoder, a
generator per container and a `yield` per token; at a thousand nodes that was a fifth of
`bringup report`'s CPU (docs/scale.md). `dumps` builds the same text from the same pieces
(the C `encode_basestring_ascii` for strings, `float.__repr__` and `int.__repr__` for
numbers, json's words for NaN and the infinities) into one list, by plain recursion.

Only plain JSON data is written here (what `model_dump(mode="json")` gives: dicts with
text keys, lists, text, numbers, booleans, None); anything else (a key that is not text,
an object json cannot write) goes to json.dumps itself, which writes it or raises as it
always did.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii

_INFINITY = float("inf")


class _NotPlain(Exception):
    """The value holds what only json.dumps knows how to write (or refuse)."""


def dumps(value: object, indent: str = "") -> str:
    """`json.dumps(value, indent=2, sort_keys=True)`, each line after the first shifted
    by `indent` (the value written that deep inside a larger document)."""
    out: list[str] = []
    try:
        _write(value, out, "\n" + indent)
    except _NotPlain:
        return json.dumps(value, indent=2, sort_keys=True).replace("\n", "\n" + indent)
    return "".join(out)


def float_text(value: float) -> str:
    """A float as json writes it (allow_nan: NaN and the infinities as JavaScript's words)."""
    if value != value:
        return "NaN"
    if value == _INFINITY:
        return "Infinity"
    if value == -_INFINITY:
        return "-Infinity"
    return float.__repr__(value)


def scalar(value: object) -> str | None:
    """A scalar's text, the common types by their exact type (the fast path: most of a
    report is numbers and text); None for anything else (written by _write)."""
    kind = type(value)
    if kind is str:
        return encode_basestring_ascii(value)  # type: ignore[arg-type]
    if kind is float:
        return float_text(value)  # type: ignore[arg-type]
    if kind is int:
        return int.__repr__(value)  # type: ignore[arg-type]
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    return None


def _write(value: object, out: list[str], newline: str) -> None:
    """Append `value`'s text to `out`; `newline`: a line break and the current indent.
    The checks run in json's own order (bool before int: True is an int)."""
    if isinstance(value, str):
        out.append(encode_basestring_ascii(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        out.append(float_text(value))
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[]")
            return
        inner = newline + "  "
        out.append("[")
        separator = inner
        for item in value:
            text = scalar(item)
            if text is not None:
                out.append(separator + text)
            else:
                out.append(separator)
                _write(item, out, inner)
            separator = "," + inner
        out.append(newline + "]")
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        try:
            keys = sorted(value)
        except TypeError:
            raise _NotPlain from None  # keys of several types: json's own error
        inner = newline + "  "
        out.append("{")
        separator = inner
        for key in keys:
            if type(key) is not str:
                raise _NotPlain  # json turns such keys into text, and sorts them as they were
            item = value[key]
            text = scalar(item)
            if text is not None:
                out.append(separator + encode_basestring_ascii(key) + ": " + text)
            else:
                out.append(separator + encode_basestring_ascii(key) + ": ")
                _write(item, out, inner)
            separator = "," + inner
        out.append(newline + "}")
    else:
        raise _NotPlain
