"""What a long probe is doing now, sent to the controller while it runs.

A probe calls `report(...)` at each phase ("randread 4k", 2 of 4) or step of its work:

    progress.report(phase="randread 4k", index=2, of=4)
    progress.report(step=12, of=50, loss=2.31, tokens_per_s=5711.0, step_s=0.71, eta_s=27)

The node side's request loop (protocol.py) gives each probe child a pipe to write these to
and prints each as one JSON line, `{"probe": "nvme", "progress": {...}}`, between the
probe records on stdout; the controller shows it in its progress line and never records
it as a result. Run in-process (no pipe attached), `report` does nothing.

Standard library only: this runs on the nodes.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

# One progress line stays under the pipe's atomic write size, so lines from a probe never
# interleave; a field too long for it is cut.
MAX_LINE_BYTES = 2048
_MAX_TEXT = 200

_channel: int | None = None


def attach(fd: int | None) -> None:
    """Send what `report` is given to `fd` (a pipe to the request loop); None: nowhere."""
    global _channel
    _channel = fd


def report(**fields: Any) -> None:
    """Tell the controller what this probe is doing now (nothing when no one listens)."""
    if _channel is None:
        return
    plain = {k: v[:_MAX_TEXT] if isinstance(v, str) else v for k, v in fields.items()}
    line = (json.dumps(plain, default=str) + "\n").encode()
    if len(line) > MAX_LINE_BYTES:
        return  # progress is a courtesy: never worth breaking the probe
    # The request loop may have gone away: the probe's own result still matters.
    with contextlib.suppress(OSError):
        os.write(_channel, line)
