"""Fleet statistics as the report shows them: per metric, the median and spread over the
nodes of one run, and the stragglers bringup/checks/stragglers.py judged (its `fleet.<metric>`
findings). No verdict here: a straggler is shown because a finding says so. Pure.
"""

from __future__ import annotations

import statistics

from pydantic import BaseModel, Field

from bringup.findings import Finding
from bringup.measurements import METRICS, NodeMeasurements, metric_values, worse_pct
from bringup.profile import MetricTolerance


class Straggler(BaseModel):
    node: str
    value: float
    worse_pct: float  # how far from the median, in the worse direction


class MetricStats(BaseModel):
    """One metric over the fleet."""

    metric: str
    label: str
    unit: str
    better: str
    fleet_pct: float
    nodes: int
    median: float
    minimum: float
    maximum: float
    spread_pct: float  # (max - min) / median
    values: dict[str, float] = Field(default_factory=dict)  # node -> value
    stragglers: list[Straggler] = Field(default_factory=list)


def statistics_of(
    nodes: list[NodeMeasurements],
    tolerances: dict[str, MetricTolerance],
    findings: list[Finding],
) -> list[MetricStats]:
    """Median, spread and stragglers (as `findings` name them) of every metric measured."""
    judged = {(f.node, f.check) for f in findings}
    result: list[MetricStats] = []
    for metric, values in metric_values(nodes).items():
        info, tolerance = METRICS[metric], tolerances[metric]
        median = statistics.median(values.values())
        low, high = min(values.values()), max(values.values())
        stats = MetricStats(
            metric=metric,
            label=info.label,
            unit=info.unit,
            better=tolerance.better,
            fleet_pct=tolerance.fleet_pct,
            nodes=len(values),
            median=median,
            minimum=low,
            maximum=high,
            spread_pct=(high - low) / abs(median) * 100 if median else 0.0,
            values=values,
        )
        stats.stragglers = [
            Straggler(node=node, value=value, worse_pct=worse_pct(value, median, tolerance.better))
            for node, value in values.items()
            if (node, f"fleet.{metric}") in judged
        ]
        result.append(stats)
    return result


def check_medians(findings: list[Finding]) -> dict[str, float]:
    """Per check, the median of its numeric values over nodes (one value per node only).

    Checks that report several findings per node (one per GPU or path) have no single
    figure per node, so they get no fleet median.
    """
    by_node: dict[str, list[Finding]] = {}
    for f in findings:
        by_node.setdefault(f.node, []).append(f)
    medians = CheckMedians()
    for node, mine in by_node.items():
        medians.add(node, mine)
    return medians.medians()


class CheckMedians:
    """check_medians over findings given a node at a time (each node once): per check,
    its nodes' values (a float each), and whether a node had several."""

    def __init__(self) -> None:
        self._values: dict[str, list[float]] = {}
        self._several: set[str] = set()

    def add(self, node: str, mine: list[Finding]) -> None:
        """The findings whose `node` field is `node` (the run's own, "", have no figure)."""
        if not node:
            return
        seen: set[str] = set()
        for f in mine:
            if isinstance(f.value, int | float) and not isinstance(f.value, bool):
                if f.check in seen:
                    self._several.add(f.check)
                    continue
                seen.add(f.check)
                self._values.setdefault(f.check, []).append(float(f.value))

    def medians(self) -> dict[str, float]:
        return {
            check: statistics.median(values)
            for check, values in self._values.items()
            if len(values) >= 2 and check not in self._several
        }
