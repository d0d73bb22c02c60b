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
    per_check: dict[str, dict[str, list[float]]] = {}
    for f in findings:
        if f.node and isinstance(f.value, int | float) and not isinstance(f.value, bool):
            per_check.setdefault(f.check, {}).setdefault(f.node, []).append(float(f.value))
    medians = {}
    for check, by_node in per_check.items():
        if len(by_node) >= 2 and all(len(v) == 1 for v in by_node.values()):
            medians[check] = statistics.median(v[0] for v in by_node.values())
    return medians
