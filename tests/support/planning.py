"""The recorded CPU burn-in of the tiny recipe as a plan's baseline (tests/fixtures/burnin/)."""

from __future__ import annotations

import json

from bringup import baseline as baselines
from bringup import recipe as recipes
from bringup.facts import ProbeRecord, decode
from bringup.planning.throughput import Measured
from tests.support import REPO

TINY_CPU_RECORD = REPO / "tests" / "fixtures" / "burnin" / "cpu-tiny-2ranks.json"


def tiny_cpu_baseline() -> Measured:
    """The 2-rank CPU burn-in of `tiny`, summarised as its baseline.json would be."""
    record = json.loads(TINY_CPU_RECORD.read_text())
    facts = decode(ProbeRecord.model_validate(record))
    node = baselines.summarize("vm", facts, None, None)
    base = baselines.build([node], "tiny", None, "2026-01-01T00:00:00+00:00")
    return Measured(TINY_CPU_RECORD.name, base, recipes.load("tiny"))
