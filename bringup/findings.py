"""Findings: the verdicts of checks, one line each in findings.jsonl."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict


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


class Finding(BaseModel):
    """One judgement: what was measured, what was expected, and what to do about it."""

    model_config = ConfigDict(extra="forbid", use_enum_values=False)

    node: str = ""
    check: str
    status: Status
    message: str
    value: float | int | str | None = None
    expected: str | None = None
    unit: str | None = None
    action: str | None = None


def worst(findings: list[Finding]) -> Status:
    """The worst status among findings (PASS when there are none)."""
    return max((f.status for f in findings), key=lambda s: s.rank, default=Status.PASS)


def exit_code(findings: list[Finding]) -> int:
    """0 when nothing failed, errored or was unreachable; 1 otherwise (README.md, exit codes)."""
    return 1 if any(f.status.bad for f in findings) else 0
