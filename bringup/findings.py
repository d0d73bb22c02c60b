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
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


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


class Expected(BaseModel):
    """What a check expects, typed: an operator, a value (a number where it is one), its unit."""

    # Every key is always written: the published schema says so (docs/json.md).
    model_config = ConfigDict(
        extra="forbid", frozen=True, json_schema_serialization_defaults_required=True
    )

    op: Op
    value: Scalar | list[Scalar]
    unit: str | None = None
    tolerance_pct: float | None = Field(default=None, description='"within" only: the percent')
    note: str | None = Field(default=None, description="A qualifier for people: 'of the time'")

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
    def parse(cls, text: str) -> Expected:
        """The typed form of an expectation written as text (findings recorded before it
        was typed, and checks that say it in words): '>= 3.0 GB/s' -> >=, 3.0, GB/s."""
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


class Finding(BaseModel):
    """One judgement: what was measured, what was expected, and what to do about it."""

    model_config = ConfigDict(
        extra="forbid", use_enum_values=False, json_schema_serialization_defaults_required=True
    )

    node: str = ""
    check: str
    status: Status
    message: str
    value: Scalar | None = None  # what was measured, in `unit`
    expected: Expected | None = None  # a text given is typed by Expected.parse
    unit: str | None = None
    action: str | None = None

    @field_validator("expected", mode="before")
    @classmethod
    def _typed_expected(cls, given: Any) -> Any:
        return Expected.parse(given) if isinstance(given, str) else given

    @model_validator(mode="after")
    def _expected_unit(self) -> Finding:
        # One unit for value and expected unless the check said otherwise.
        given = self.expected
        if given is None or given.unit is not None or not self.unit:
            return self
        if given.op not in ("text", "in") and not isinstance(given.value, str):
            self.expected = given.model_copy(update={"unit": self.unit})
        return self


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
            shown.append(f.model_copy(update={"check": _probe_key(f)[1], "message": message}))
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


class Cell(BaseModel):
    """One cell of the node × subject matrix, the same in the console (commands/show.py),
    report.html and report.md: the worst status of the checks of that node's probe, how
    many findings have it, and for a bad cell (WARN or worse) which checks."""

    model_config = ConfigDict(frozen=True)

    status: Status
    count: int
    checks: list[str] = Field(default_factory=list)  # "not judged": a probe that did not run

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
            checks = list(dict.fromkeys(_cell_name(f) for f in at_worst))
        cells[key] = Cell(status=status, count=len(at_worst), checks=checks)
    return cells


def _cell_name(f: Finding) -> str:
    """A check as a bad cell names it: "count" under gpu; a probe that did not run."""
    return "not judged" if is_probe_line(f) else f.check.split(".", 1)[-1]
