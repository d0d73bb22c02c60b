"""A node runner for in-process fleet runs: it answers with recorded records."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from bringup.fleet import run as fleet


def answering(records: list[dict[str, Any]]) -> fleet.Runner:
    """A runner whose node answers each probe asked with its record among `records`."""

    def runner(
        request: dict[str, Any], deadline: float, stop: threading.Event, on_stage: fleet.Stage
    ) -> Iterator[dict[str, Any]]:
        on_stage("running")
        asked = {s["name"] for s in request["probes"]}
        yield from (dict(r) for r in records if r["probe"] in asked)

    return runner
