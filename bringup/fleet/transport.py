"""What every transport shares: how a probe request reaches a node and its JSON lines come
back, and the three ways that can go wrong.

A transport bound to one node is a `Runner`: given the request, a deadline, a stop event
(Ctrl-C) and a callback that says what the node is doing, it yields each probe record as
the node side prints it, and each progress line of a long probe between them
(`is_progress`). `fleet.local` runs the node side as a child process (`--local`),
`fleet.ssh` over SSH; both take the same path through `fleet.run`.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import msgspec


class TransportError(Exception):
    """The node side could not be run or stopped answering; one line."""


class Unreachable(TransportError):
    """The node could not be reached: refused, timed out, unknown name, host key, auth."""


class Interrupted(TransportError):
    """The run was stopped (Ctrl-C) while this node was running; what arrived is kept."""


@dataclass(frozen=True)
class NodeCaps:
    """The most raw tool output one node's records may store (docs/reference.md): far over
    what the probes write (a few MiB, tens of files), far under a full disk. Given by the
    target (--max-raw-mib, --max-raw-files), kept by fleet.run's RecordGate."""

    raw_bytes: int = 256 * 2**20
    raw_files: int = 2000


# How often a waiting transport looks at its stop event (Ctrl-C reaches only the main thread).
STOP_POLL_S = 0.2

Stage = Callable[[str], None]
# A transport bound to one node: (request, deadline_s, stop, on_stage) -> records.
Runner = Callable[[dict[str, Any], float, threading.Event, Stage], Iterator[dict[str, Any]]]


@runtime_checkable
class Gathered(Protocol):
    """A runner whose transport starts many nodes together (Slurm: one step per wave of
    nodes, fleet/slurm_step.py): fleet.run tells it every node's request, deadline and the
    run's --forks before any node runs."""

    def announce(self, request: dict[str, Any], deadline_s: float, wave: int) -> None: ...


def decode_line(line: bytes) -> dict[str, Any]:
    """One probe record from one line the node side printed; TransportError if it is not.

    A number JSON has no form for (`NaN`, `Infinity`, `-Infinity`: Python's json.dumps on
    the node writes them for a float that is not finite; `1e999`, past any float) is taken
    as null, as the run's files write it. The node is judged on what its facts file holds,
    and a NaN figure is one not given, never one that passes: it compares false with every
    floor, and a node that said its sequential read was NaN was judged PASS (docs/security.md,
    "A hostile node")."""
    try:
        record = msgspec.json.decode(line)  # strict JSON: every line of a healthy node
    except msgspec.DecodeError:
        record = _with_nulls(line)  # a number JSON has no form for, or no JSON at all
    if not isinstance(record, dict) or "probe" not in record:
        raise TransportError(f"node sent an unexpected record: {line[:120]!r}")
    return record


def _with_nulls(line: bytes) -> Any:
    """The line read as Python's json reads it, each number that is not a finite float
    taken as null; TransportError when it is no JSON."""
    try:
        return json.loads(line, parse_constant=lambda _: None, parse_float=_finite)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise TransportError(f"node sent a line that is not JSON: {line[:120]!r}") from None


def _finite(text: str) -> float | None:
    number = float(text)
    return number if math.isfinite(number) else None


def is_progress(record: dict[str, Any]) -> bool:
    """A progress line of a running probe (`{"probe", "progress"}`, node/progress.py), not
    its result: a transport counts only results as answers, and fleet.run only shows it."""
    return "progress" in record


# Seconds a probe may overrun its own timeout before the controller gives up on the node:
# the node side kills a stuck probe at timeout_s and reports it, this covers the rest.
PROBE_GRACE_S = 20.0


class ProbeWatch:
    """Which probe of a request the node side is on, and whether it has overrun its timeout
    (plus grace): the deadline every remote transport enforces per probe. A progress line is
    not an answer: it neither moves on to the next probe nor restarts the clock."""

    def __init__(self, request: dict[str, Any], grace_s: float = PROBE_GRACE_S) -> None:
        self.steps = [(s["name"], float(s.get("timeout_s") or 120.0)) for s in request["probes"]]
        self.grace_s = grace_s
        self.answered = 0
        self._since = time.monotonic()

    def saw(self, record: dict[str, Any]) -> None:
        if not is_progress(record):  # the probe's result: the next one starts
            self.answered += 1
            self._since = time.monotonic()

    def check(self, now: float, why: str) -> None:
        """TransportError when the probe running is past its timeout and the grace."""
        if self.answered < len(self.steps):
            name, timeout_s = self.steps[self.answered]
            if now - self._since > timeout_s + self.grace_s:
                raise TransportError(
                    f"probe {name} gave no answer within {timeout_s + self.grace_s:g} s ({why})"
                )

    def unanswered(self) -> str | None:
        """The first probe without an answer, if any."""
        return self.steps[self.answered][0] if self.answered < len(self.steps) else None


# The most bytes kept of one line a node has not finished: a record is a few MiB at most
# (raw tool outputs are capped node side), so a line past this is a node side gone wrong,
# and buffering it without end would take the controller's memory with it.
MAX_LINE_BYTES = 64 * 1024 * 1024


class LineBuffer:
    """Splits what a node sends into whole lines, keeping at most MAX_LINE_BYTES of the
    unfinished one; past that, TransportError naming the node."""

    def __init__(self, node: str, limit: int | None = None) -> None:
        self.node = node
        self.limit = MAX_LINE_BYTES if limit is None else limit
        # The unfinished line in pieces: joined only when its newline arrives, so a long
        # line costs one copy, not one per chunk.
        self._parts: list[bytes] = []
        self._size = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines `chunk` completes (newline removed, blank ones dropped)."""
        if b"\n" not in chunk:
            self._parts.append(chunk)
            self._size += len(chunk)
            lines: list[bytes] = []
        else:
            *lines, rest = b"".join([*self._parts, chunk]).split(b"\n")
            self._parts, self._size = [rest], len(rest)
        if self._size > self.limit:
            raise TransportError(
                f"{self.node} sent a line of over {_size(self.limit)} without its end "
                "(node side gone wrong?); stopped reading it"
            )
        return [line for line in lines if line.strip()]


def _size(n: int) -> str:
    return f"{n // 2**20} MiB" if n % 2**20 == 0 else f"{n} bytes"
