"""Fleet statistics: per metric, the median and spread over the nodes of one run.

A node worse than the median by more than the profile's `fleet_pct` is a straggler: it
may still clear the profile's floor, but it is slower than its identical peers, which is
what a synchronous training job waits for. Pure functions, no I/O.
"""

from __future__ import annotations

import statistics

from pydantic import BaseModel, Field

from bringup.checks import finding
from bringup.findings import Finding, Status
from bringup.profile import MetricTolerance
from bringup.report.measurements import METRICS, NodeMeasurements, shown

MIN_NODES_FOR_STRAGGLERS = 3  # with two nodes the median cannot say which one is slow


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


def worse_pct(value: float, reference: float, better: str) -> float:
    """How much worse `value` is than `reference`, in percent (negative: better)."""
    if reference == 0:
        return 0.0
    change = (value - reference) / abs(reference) * 100
    return -change if better == "higher" else change


def statistics_of(
    nodes: list[NodeMeasurements], tolerances: dict[str, MetricTolerance]
) -> list[MetricStats]:
    """Median, spread and stragglers of every metric at least one node measured."""
    result: list[MetricStats] = []
    for metric, info in METRICS.items():
        values = {m.node: m.metrics[metric] for m in nodes if metric in m.metrics}
        if not values:
            continue
        tolerance = tolerances[metric]
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
            values=dict(sorted(values.items())),
        )
        if len(values) >= MIN_NODES_FOR_STRAGGLERS:
            for node, value in sorted(values.items()):
                worse = worse_pct(value, median, tolerance.better)
                if worse > tolerance.fleet_pct:
                    stats.stragglers.append(Straggler(node=node, value=value, worse_pct=worse))
        result.append(stats)
    return result


def straggler_findings(stats: list[MetricStats]) -> list[Finding]:
    """A WARN per straggler: slower than its peers, even if above the profile's floor."""
    findings = []
    for s in stats:
        for straggler in s.stragglers:
            direction = "below" if s.better == "higher" else "above"
            message = (
                f"{s.label} {shown(s.metric, straggler.value)} is {straggler.worse_pct:.1f}% "
                f"{direction} the fleet median {shown(s.metric, s.median)} "
                f"(tolerance {s.fleet_pct:g}%, {s.nodes} nodes)"
            )
            f = finding(
                f"fleet.{s.metric}",
                Status.WARN,
                message,
                value=round(straggler.value / METRICS[s.metric].scale, 2),
                expected=f"within {s.fleet_pct:g}% of {shown(s.metric, s.median)}",
                unit=s.unit,
                action="compare with its peers: rerun the probe on this node, then look for "
                "throttling (clock event reasons), a degraded link or a slower disk",
            )
            findings.append(f.model_copy(update={"node": straggler.node}))
    return findings


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
