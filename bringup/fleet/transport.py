"""What every transport shares: how a probe request reaches a node and its JSON lines come
back, and the three ways that can go wrong.

A transport bound to one node is a `Runner`: given the request, a deadline, a stop event
(Ctrl-C) and a callback that says what the node is doing, it yields each probe record as
the node side prints it. `fleet.local` runs the node side as a child process (`--local`),
`fleet.ssh` over SSH; both take the same path through `fleet.run`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any


class TransportError(Exception):
    """The node side could not be run or stopped answering; one line."""


class Unreachable(TransportError):
    """The node could not be reached: refused, timed out, unknown name, host key, auth."""


class Interrupted(TransportError):
    """The run was stopped (Ctrl-C) while this node was running; what arrived is kept."""


# How often a waiting transport looks at its stop event (Ctrl-C reaches only the main thread).
STOP_POLL_S = 0.2

Stage = Callable[[str], None]
# A transport bound to one node: (request, deadline_s, stop, on_stage) -> records.
Runner = Callable[[dict[str, Any], float, threading.Event, Stage], Iterator[dict[str, Any]]]


def decode_line(line: bytes) -> dict[str, Any]:
    """One probe record from one line the node side printed; TransportError if it is not."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        raise TransportError(f"node sent a line that is not JSON: {line[:120]!r}") from None
    if not isinstance(record, dict) or "probe" not in record:
        raise TransportError(f"node sent an unexpected record: {line[:120]!r}")
    return record
