"""The JSON of a run directory's records, written and read without pydantic (issue 31).

facts/<node>.json, the journal's lines and manifest.json were written by pydantic models,
and their bytes are evidence: the SHA-256 of manifest.json is what `bringup verify`, a
handover and a replay's provenance quote, and every evidence file is hashed in it. So
`dumps` writes the tool's dataclasses (facts.py, provenance.py, rundir.py) byte for byte
as pydantic wrote them: msgspec's encoder, whose text is pydantic's but for the sign of a
positive exponent (msgspec writes 1e16, pydantic 1e+16: put back here), and for the
indented files msgspec's `format`, whose layout is pydantic's `indent=2`. Texts are
written unescaped past ASCII, a number that is not finite (no JSON number) as null, and a
text that is no Unicode (a lone surrogate) is refused (ValueError) before anything is
written. tests/unit/test_records_dataclass.py holds it to main's pydantic models.

`load` and `convert` read what someone else may have written (a file, a node's record)
into those dataclasses: msgspec in strict mode, the house's validator for untrusted data
(docs/contributing.md, "validation"). A value is taken only in the form the tool writes it
(an int for a float, as JSON writes 3.0 as 3, and nothing else); whatever pydantic
refused is refused, and the lax forms pydantic took that no run writes too (docs/json.md,
"How a run's records are read"). What does not fit is one `Invalid` line naming where.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")

# An "e" between two digits is a positive exponent as msgspec writes it (1e16), or the
# same characters inside a text (a GPU's UUID: "GPU-3e5a..."). Found as "0e0" with every
# digit read as 0: two passes of C over the text (most records hold none, and their text
# is final as encoded).
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_CANDIDATE = re.compile(rb"e(?<=[0-9]e)(?=[0-9])")  # the letter first: a fast scan for it
# A number with a positive exponent as msgspec's compact text has it is a value: the first
# thing in the text or just after a ":", "," or "[" (that text has no whitespace), then
# digits, maybe a fraction, the "e". A UUID's "3e5" never is, so a gpu record's text is
# final as encoded; a text that holds such characters inside a string is looked at line
# by line below.
_DIGITS = frozenset(b"0123456789")
_BEFORE_A_VALUE = frozenset(b":,[")
# One line of the indented text whose value is a number with a positive exponent: an
# element, or a key (a whole text: its escapes taken as such) and its value. A text never
# spans lines, so a number is told from a text's characters by the line alone.
_NUMBER_LINE = re.compile(rb' *(?:"(?:[^"\\]|\\.)*": )?-?[0-9]+(?:\.[0-9]+)?e(?=[0-9]+,?$)')


class Invalid(ValueError):
    """JSON that is not the record it should be; the message is one line naming where."""


def dumps(value: object, indent: bool = False) -> str:
    """`value` (a dataclass of the tool's, or JSON data) as pydantic's `model_dump_json()`
    wrote it, or `model_dump_json(indent=2)` with `indent`. ValueError for a text that is
    no Unicode; TypeError for a value JSON has no form for."""
    data = msgspec.json.encode(value)
    if not _may_hold_exponent(data):
        return (msgspec.json.format(data, indent=2) if indent else data).decode()
    text = msgspec.json.format(data, indent=2)
    # The candidates are the same, in the same order, in both texts: formatting adds
    # whitespace between values and changes no number and no text.
    return _signed(text if indent else data, _exponents(text)).decode()


def _may_hold_exponent(data: bytes) -> bool:
    """Whether msgspec's compact text may hold a number with a positive exponent: an "e"
    between two digits at all, then one where a number can be (a text that holds the
    same characters passes here too, and is told apart by _exponents)."""
    if b"0e0" not in data.translate(_DIGITS_AS_ZERO):
        return False
    return any(_after_a_value_start(data, at) for at in _candidates(data))


def _after_a_value_start(data: bytes, at: int) -> bool:
    """Whether the "e" at `at` ends what reads as a number's start: digits, maybe a
    fraction, maybe a minus, at the text's start or after a ":", "," or "["."""
    i = at - 1
    while i >= 0 and data[i] in _DIGITS:
        i -= 1
    if i >= 0 and data[i] == 0x2E:  # ".": the fraction, then the integer part
        i -= 1
        end = i
        while i >= 0 and data[i] in _DIGITS:
            i -= 1
        if i == end:
            return False
    if i >= 0 and data[i] == 0x2D:  # "-"
        i -= 1
    return i < 0 or data[i] in _BEFORE_A_VALUE


def _candidates(data: bytes) -> list[int]:
    """Where each "e" between two digits is, in order."""
    return [found.start() for found in _CANDIDATE.finditer(data)]


def _exponents(text: bytes) -> list[bool]:
    """For each candidate "e" of the indented `text`, in order: whether it is a number's
    exponent. One value a line: a number is told from a text's characters by its line
    alone (a text never spans lines)."""
    found: list[bool] = []
    line = -1  # the start of the line last looked at
    exponent = -1  # where its number's exponent is (-1: its value is no such number)
    for at in _candidates(text):
        start = text.rfind(b"\n", 0, at) + 1
        if start != line:
            end = text.find(b"\n", at)
            number = _NUMBER_LINE.match(text, start, len(text) if end < 0 else end)
            line, exponent = start, -1 if number is None else number.end() - 1
        found.append(at == exponent)
    return found


def _signed(data: bytes, exponents: list[bool]) -> bytes:
    """`data` with a "+" after each candidate "e" that `exponents` says is an exponent."""
    pieces: list[bytes] = []
    done = 0  # the text before this is in `pieces`
    for at, exponent in zip(_candidates(data), exponents, strict=True):
        if exponent:
            pieces += [data[done : at + 1], b"+"]
            done = at + 1
    pieces.append(data[done:])
    return b"".join(pieces)


def to_json(value: object) -> Any:
    """A dataclass of the tool's as JSON data (dicts, lists, text, numbers, booleans,
    None): what pydantic's `model_dump(mode="json")` gave, a number not finite aside (kept
    here, written null)."""
    return msgspec.to_builtins(value)


def load(data: bytes | str, kind: type[T]) -> T:
    """The JSON text `data` as a `kind` (a dataclass), or Invalid saying where it does not
    fit: its syntax, a type, a key it lacks, a value it may not hold."""
    try:
        return msgspec.json.decode(data, type=kind, strict=True)
    except msgspec.DecodeError as exc:  # ValidationError too: it is a DecodeError
        raise Invalid(reason(exc)) from None
    except RecursionError:
        raise Invalid("at the top: nested too deeply") from None


def convert(data: object, kind: type[T]) -> T:
    """JSON data already parsed (a node's record, as the transport read it) as a `kind`,
    as strictly as `load`; Invalid saying where it does not fit."""
    try:
        return msgspec.convert(data, kind, strict=True)
    except msgspec.ValidationError as exc:
        raise Invalid(reason(exc)) from None
    except RecursionError:
        raise Invalid("at the top: nested too deeply") from None


def reason(exc: msgspec.MsgspecError) -> str:
    """msgspec's "Expected `int`, got `str` - at `$.gpus[0].index`" as "at gpus[0].index:
    Expected `int`, got `str`" (the place first; "at the top" for the record itself), on
    one line."""
    text = " ".join(str(exc).split())
    message, sep, path = text.rpartition(" - at `")
    if not sep:
        return f"at the top: {text}"
    where = path.removesuffix("`").removeprefix("$").removeprefix(".")
    return f"at {where or 'the top'}: {message}"
