"""How long a test waits: every deadline a test waits on goes through `scaled`.

BRINGUP_TEST_TIME_SCALE (default 1) multiplies them all, so the same suite passes on a
loaded or slow machine (`BRINGUP_TEST_TIME_SCALE=3 pytest ...`, benchmarks/under_load.sh).
A deadline here is a bound on a hang, never the thing a test measures: timing tests assert
the order of events and their outcome, and a bound only has to be far from both.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable


def time_scale(text: str | None) -> float:
    """The factor BRINGUP_TEST_TIME_SCALE gives (unset: 1); all but a number >= 1 is refused."""
    if text is None or not text.strip():
        return 1.0
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= 1:  # also nan; a factor below 1 would make a bound tighter than it is
        raise ValueError(f"BRINGUP_TEST_TIME_SCALE={text!r}: give a number >= 1")
    return value


TIME_SCALE = time_scale(os.environ.get("BRINGUP_TEST_TIME_SCALE"))


def scaled(seconds: float) -> float:
    """`seconds` times BRINGUP_TEST_TIME_SCALE: a test's bound on how long it waits."""
    return seconds * TIME_SCALE


def wait_until(done: Callable[[], bool], seconds: float, step: float = 0.1) -> bool:
    """Poll `done` until it is true (True) or `scaled(seconds)` pass (False)."""
    end = time.monotonic() + scaled(seconds)
    while True:
        if done():
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(step)
