"""Findings: the verdicts of checks, one line each in findings.jsonl.

A finding's `value` is what was measured and its `expected` what the profile asks for,
both typed: numbers are numbers, with the `unit` they are in (docs/json.md#typed-values).
`expected` is an `Expected` object, `{"op": ">=", "value": 580, "unit": "W"}`; the text a
person reads (">= 580 W") is `str(expected)`, the one rendering that the console, the
reports and JUnit all show.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import cache, lru_cache
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import msgspec

if TYPE_CHECKING:
    from pydantic import TypeAdapter


class Status(str, Enum):
    """Outcome of one check on one node, from best to worst."""

    PASS = "PASS"
    SKIP = "SKIP"  # not applicable here; the message says why
    WARN = "WARN"
    FAIL = "FAIL"
    ERROR = "ERROR"  # could not be measured: never counted as a pass
    UNREACHABLE = "UNREACHABLE"  # the node itself could not be reached

    @property
    def bad(self) -> bool:
        """True for the statuses that make the run exit 1."""
        return self in (Status.FAIL, Status.ERROR, Status.UNREACHABLE)

    @property
    def rank(self) -> int:
        return _RANKS[self]


# Each status's place from best to worst, worked out once: worst() asks for it per finding.
_RANKS = {status: index for index, status in enumerate(Status)}


# How the measured value is compared with `value`: the ordering comparisons; "==" (the
# value exactly); "in" (one of a list); "within" (within `tolerance_pct` percent of
# `value`); "text" (a description for people, nothing a program can compare).
Op = Literal[">=", ">", "<=", "<", "==", "!=", "in", "within", "text"]
Scalar = int | float | str | bool


# Read by pydantic where a finding is read from a file (read_finding, below) and where a
# schema is written (docs/json.md): plain dicts, so that importing this module imports no
# pydantic. A key the schema does not know is refused; every key is always written.
_READ_STRICTLY: dict[str, Any] = {
    "extra": "forbid",
    "json_schema_serialization_defaults_required": True,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Expected:
    """What a check expects, typed: an operator, a value (a number where it is one), its unit."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {**_READ_STRICTLY, "frozen": True}

    op: Op
    value: Scalar | list[Scalar]
    unit: str | None = None
    tolerance_pct: float | None = field(
        default=None, metadata={"description": '"within" only: the percent'}
    )
    note: str | None = field(
        default=None, metadata={"description": "A qualifier for people: 'of the time'"}
    )

    def __post_init__(self) -> None:
        # A percent is a float however it was given (within(5, ...)): 5.0 in the JSON, as
        # the validated model wrote it.
        if isinstance(self.tolerance_pct, int):
            object.__setattr__(self, "tolerance_pct", float(self.tolerance_pct))

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """As read from a file: a text is typed by Expected.parse (findings recorded
        before expectations were typed hold '>= 3.0 GB/s'), as Finding's own code does."""
        from pydantic_core import core_schema

        return core_schema.no_info_before_validator_function(_parsed_if_text, handler(source))

    def __str__(self) -> str:
        value = (
            " or ".join(_text(v) for v in self.value)
            if isinstance(self.value, list)
            else _text(self.value)
        )
        unit = f" {self.unit}" if self.unit and self.unit != "%" else (self.unit or "")
        note = f" {self.note}" if self.note else ""
        if self.op == "within":
            return f"within {_text(self.tolerance_pct or 0)}% of {value}{unit}{note}"
        if self.op in ("==", "in", "text"):
            return f"{value}{unit}{note}"
        return f"{self.op} {value}{unit}{note}"

    @classmethod
    @lru_cache(maxsize=4096)  # bounded: a text may carry a node's own figure
    def parse(cls, text: str) -> Expected:
        """The typed form of an expectation written as text (findings recorded before it
        was typed, and checks that say it in words): '>= 3.0 GB/s' -> >=, 3.0, GB/s.

        Each text is parsed once: a check says the same threshold for every node, nine
        texts a node here, the same ones at ten thousand nodes. An Expected is frozen,
        and its value from a text is a number or a text, never a list: one Expected
        serves every finding that gives the same text."""
        text = " ".join(text.split())
        within = re.fullmatch(r"within (\S+)% of (\S+)(?: (\S+))?(?: (.+))?", text)
        if within and _number(within[1]) is not None:
            pct, value, unit, note = within.groups()
            return cls(
                op="within",
                value=_typed(value),
                unit=unit,
                tolerance_pct=float(pct),
                note=note,
            )
        compared = re.fullmatch(r"(>=|<=|!=|==|>|<) ?(\S+)(?: (\S+))?(?: (.+))?", text)
        if compared:
            op, value, unit, note = compared.groups()
            if value.endswith("%") and _number(value[:-1]) is not None:
                value, unit, note = value[:-1], "%", " ".join(filter(None, (unit, note)))
            return cls(op=op, value=_typed(value), unit=unit, note=note)  # type: ignore[arg-type]
        counted = re.fullmatch(r"(\S+)(?: (.+))?", text)
        if counted and _number(counted[1]) is not None:
            return cls(op="==", value=_typed(counted[1]), unit=counted[2])
        return cls(op="==" if " " not in text else "text", value=text)


def at_least(value: Scalar, unit: str | None = None, note: str | None = None) -> Expected:
    return Expected(op=">=", value=value, unit=unit, note=note)


def below(value: Scalar, unit: str | None = None, note: str | None = None) -> Expected:
    return Expected(op="<", value=value, unit=unit, note=note)


def equal(value: Scalar, unit: str | None = None) -> Expected:
    return Expected(op="==", value=value, unit=unit)


def one_of(*values: Scalar) -> Expected:
    return Expected(op="in", value=list(values))


def within(pct: float, of: float, unit: str | None = None) -> Expected:
    return Expected(op="within", value=of, unit=unit, tolerance_pct=pct)


def described(text: str) -> Expected:
    """An expectation only a person can compare ('a disk or network file system')."""
    return Expected(op="text", value=text)


def _number(text: str) -> int | float | None:
    """A finite number; 'Infinity', 'nan' (text a node may report) stay text: JSON has no
    such numbers, and a finding that holds one could not be read back from findings.jsonl."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _typed(text: str) -> Scalar:
    """'8' -> 8, '3.0' -> 3.0; anything else ('580.65.06', 'Gen5') stays text."""
    number = _number(text)
    return text if number is None else number


def _text(value: Scalar) -> str:
    """A value as people read it: 3.0 -> '3', 2.5 -> '2.5', True -> 'true'."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def _parsed_if_text(given: object) -> object:
    return Expected.parse(given) if isinstance(given, str) else given


@dataclass(slots=True, kw_only=True)
class Finding:
    """One judgement: what was measured, what was expected, and what to do about it."""

    __pydantic_config__: ClassVar[dict[str, Any]] = _READ_STRICTLY

    node: str = ""
    check: str
    status: Status
    message: str
    value: Scalar | None = None  # what was measured, in `unit`
    expected: Expected | None = None  # a text given is typed by Expected.parse
    unit: str | None = None
    action: str | None = None

    def __post_init__(self) -> None:
        # Run for the tool's own findings and for each one read_finding validates.
        if type(self.status) is not Status:  # "FAIL" given: the Status, as pydantic made it
            self.status = Status(self.status)
        if isinstance(self.expected, str):
            self.expected = Expected.parse(self.expected)
        # One unit for value and expected unless the check said otherwise.
        given = self.expected
        if given is None or given.unit is not None or not self.unit:
            return
        if given.op not in ("text", "in") and not isinstance(given.value, str):
            self.expected = replace(given, unit=self.unit)


# --- findings as JSON: findings.jsonl, --json, report.json ------------------------------


def finding_json(f: Finding) -> dict[str, Any]:
    """The finding as JSON data: every key, in this order, null where there is nothing,
    the status its word, a number of the type it was measured in (3 is not 3.0). What
    findings.jsonl, `--json` and report.json hold of it (docs/json.md)."""
    return {
        "node": f.node,
        "check": f.check,
        "status": f.status.value,
        "message": f.message,
        "value": f.value,
        "expected": None if f.expected is None else expected_json(f.expected),
        "unit": f.unit,
        "action": f.action,
    }


def expected_json(e: Expected) -> dict[str, Any]:
    return {
        "op": e.op,
        "value": list(e.value) if isinstance(e.value, list) else e.value,
        "unit": e.unit,
        "tolerance_pct": e.tolerance_pct,
        "note": e.note,
    }


def finding_line(f: Finding) -> str:
    """The finding as one line of findings.jsonl (no newline): its finding_json in
    compact JSON, written byte for byte as pydantic wrote it before (the files of older
    runs and of newer ones are alike): texts unescaped past ASCII, 1e-05 written 0.00001,
    1e-07 written 1e-7, a number that is not finite (no JSON number) null. A text that
    is no Unicode (a lone surrogate) raises ValueError, before any line is written."""
    expected = f.expected
    plain = _plain_number(f.value) and (
        expected is None
        or (
            _plain_number(expected.tolerance_pct)
            and (
                all(map(_plain_number, expected.value))
                if isinstance(expected.value, list)
                else _plain_number(expected.value)
            )
        )
    )
    if plain:
        # msgspec writes the dataclass's fields in their order, which is finding_json's,
        # with json's string escapes and int and float text: the same line (tests/unit/
        # test_finding_dataclass.py), a sixth of the CPU of json's C encoder over
        # finding_json's dict (29 lines a node: docs/scale.md). A float in an exponent's
        # form or not finite takes the long way. UnicodeEncodeError (a ValueError) for a
        # lone surrogate, as pydantic refused to write it.
        return msgspec.json.encode(f).decode()
    line = _json_text(finding_json(f))
    line.encode("utf-8")  # UnicodeEncodeError: as pydantic refused to write it
    return line


def _plain_number(value: object) -> bool:
    """A text, a whole number, a truth value, nothing, or a float written as its repr (not
    1e-05, 1e-07, inf or nan, which pydantic wrote otherwise)."""
    kind = type(value)
    if kind is float:
        return math.isfinite(value) and "e" not in float.__repr__(value)  # type: ignore[arg-type]
    return kind in _PLAIN  # anything else (a subclass, a list in a value): _json_text's own


_PLAIN = (str, int, bool, type(None))


def _json_text(value: object) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return encode_basestring(value)
    if isinstance(value, float):
        return _float_text(value)
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, list):
        return "[" + ",".join(_json_text(item) for item in value) + "]"
    if isinstance(value, dict):
        items = (f"{encode_basestring(k)}:{_json_text(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    raise TypeError(f"not JSON data: {type(value).__name__}")


def _float_text(number: float) -> str:
    """A float as pydantic-core writes it: Python's repr, but 1e-05 and its kind (the
    exponent -5) written out (0.00001234) and smaller exponents without a leading zero
    (1e-7, not 1e-07); inf and nan, no JSON numbers, are null."""
    if not math.isfinite(number):
        return "null"
    text = float.__repr__(number)
    mantissa, _, exponent = text.partition("e-")
    if not exponent:
        return text
    if exponent == "05":
        sign, digits = ("-", mantissa[1:]) if mantissa.startswith("-") else ("", mantissa)
        return f"{sign}0.0000{digits.replace('.', '')}"
    return f"{mantissa}e-{int(exponent)}"


def read_finding(text: str | bytes) -> Finding:
    """A finding from its JSON (a line of findings.jsonl), validated: every field of its
    type, no key the schema does not know, a text `expected` typed. Anything else raises
    pydantic's ValidationError (a ValueError) naming what is wrong."""
    return _reader().validate_json(text)


@cache
def _reader() -> TypeAdapter[Finding]:
    # Built at the first finding read: the tool's own findings are built without pydantic.
    from pydantic import TypeAdapter

    return TypeAdapter(Finding)


def worst(findings: list[Finding]) -> Status:
    """The worst status among findings (PASS when there are none)."""
    return max((f.status for f in findings), key=lambda s: s.rank, default=Status.PASS)


def verdict(findings: list[Finding]) -> Literal["ACCEPTED", "NOT ACCEPTED"]:
    """The verdict word: ACCEPTED when something was judged and nothing was bad. Fail
    closed, as the report's verdict: nothing judged is never accepted."""
    return "ACCEPTED" if findings and exit_code(findings) == 0 else "NOT ACCEPTED"


def exit_code(findings: list[Finding]) -> int:
    """0 when nothing failed, errored or was unreachable; 1 otherwise (README.md, exit codes)."""
    return 1 if any(f.status.bad for f in findings) else 0


# A SKIP that says another check owns its fault: "GPU 2: all 18 links down: judged by
# topology.nvlink (...)". One root cause gives one FAIL (docs/contributing.md): the other
# probe's check steps aside and says where the fault is judged.
_JUDGED_BY = re.compile(r"judged by ([a-z0-9_]+\.[a-z0-9_]+)")


def moved_to(f: Finding) -> str | None:
    """The check that judges this finding's fault instead ("topology.nvlink"), for a SKIP
    that stepped aside for it; None for any other finding."""
    if f.status is not Status.SKIP:
        return None
    found = _JUDGED_BY.search(f.message)
    return found.group(1) if found else None


# --- what the console, report.html and report.md show of findings ------------------------


def one_per_probe(findings: list[Finding]) -> list[Finding]:
    """The findings with the checks of a probe that could not run folded into one line.

    checks/catalog.py's judge_probe gives every check of such a probe an ERROR whose message
    is the probe's error, and every check is named after its probe ("gpu.count"): ERRORs of
    one node with one subject and one message, from two checks or more, are that one fault.
    They become one finding in the place of the first, named after the bare probe ("gpu"),
    its message saying how many checks were not judged.
    """
    groups = unrun_probes(findings)
    shown: list[Finding] = []
    for f in findings:
        group = groups.get(_probe_key(f)) if f.status is Status.ERROR else None
        if group is None:
            shown.append(f)
        elif f is group[0]:
            message = f"{f.message} - {checks_count(group)} checks not judged"
            shown.append(replace(f, check=_probe_key(f)[1], message=message))
    return shown


def unrun_probes(findings: list[Finding]) -> dict[tuple[str, str, str], list[Finding]]:
    """(node, probe, error) -> the ERRORs it gave, for each probe that fed two checks or more."""
    groups: dict[tuple[str, str, str], list[Finding]] = defaultdict(list)
    for f in findings:
        if f.status is Status.ERROR:
            groups[_probe_key(f)].append(f)
    return {key: group for key, group in groups.items() if checks_count(group) > 1}


def checks_count(group: list[Finding]) -> int:
    return len({f.check for f in group})


def _probe_key(f: Finding) -> tuple[str, str, str]:
    return (f.node, f.check.split(".")[0], f.message)


def is_probe_line(f: Finding) -> bool:
    """A line of one_per_probe: every check is named "<subject>.<what>", a probe line not."""
    return "." not in f.check


@dataclass(frozen=True, slots=True, kw_only=True)
class Cell:
    """One cell of the node × subject matrix, the same in the console (commands/show.py),
    report.html and report.md: the worst status of the checks of that node's probe, how
    many findings have it, and for a bad cell (WARN or worse) which checks."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"frozen": True}

    status: Status
    count: int
    checks: list[str] = field(default_factory=list)  # "not judged": a probe that did not run

    def lines(self) -> list[str]:
        """ "PASS 12"; "FAIL 1" over "count"; an unreachable node is that and nothing more."""
        if self.status is Status.UNREACHABLE:
            return [self.status.value]
        return [f"{self.status.value} {self.count}", *self.checks]


def matrix_cells(findings: list[Finding]) -> dict[tuple[str, str], Cell]:
    """(node, subject) -> its cell, in the findings' order. A probe that could not run is
    one finding (one_per_probe); a finding that says another check judges its fault (a
    SKIP "judged by topology.nvlink") is counted in that check's cell, not in its own: the
    console's rule since issue 27, and the reports'."""
    groups: dict[tuple[str, str], list[Finding]] = defaultdict(list)
    for f in one_per_probe(findings):
        if moved_to(f) is None:
            groups[(f.node, f.check.split(".")[0])].append(f)
    cells = {}
    for key, group in groups.items():
        status = worst(group)
        at_worst = [f for f in group if f.status == status]
        checks = []
        if status.rank >= Status.WARN.rank and status is not Status.UNREACHABLE:
            checks = list(dict.fromkeys(cell_name(f) for f in at_worst))
        cells[key] = Cell(status=status, count=len(at_worst), checks=checks)
    return cells


def cell_name(f: Finding) -> str:
    """A check as a bad cell names it: "count" under gpu; a probe that did not run."""
    return "not judged" if is_probe_line(f) else f.check.split(".", 1)[-1]
