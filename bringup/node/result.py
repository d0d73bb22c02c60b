"""What a probe hands back: facts plus the raw tool outputs they came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ProbeOutput:
    """Facts (a dataclass) and raw outputs ({file name: text}) kept for raw/<node>/<probe>/."""

    facts: Any
    raw: dict[str, str] = field(default_factory=dict)
    # What the facts were read from that only simulates the real thing ("GPUs": the NVML
    # simulator, "dcgmi": a stand-in), as the simulator said it (bringup/node/simulated.py).
    simulated: list[str] = field(default_factory=list)


class ProbeError(Exception):
    """A probe could not measure: the message is one line a user can act on.

    Raw outputs gathered before the failure travel with it, so nothing measured is lost.
    """

    def __init__(self, message: str, raw: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.raw = raw or {}


class ParseError(ValueError):
    """A tool's output could not be parsed; the message names what was wrong, in one line."""
