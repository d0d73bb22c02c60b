"""Stragglers: a node worse than the fleet's median on a metric by more than its tolerance.

It may still clear the profile's floor, but it is slower than its identical peers, which
is what a synchronous training job waits for. One WARN `fleet.<metric>` per straggler.
Pure: over the nodes' measurements (bringup/measurements.py) and the profile's tolerances.
"""

from __future__ import annotations

import statistics
from dataclasses import replace

from bringup.checks import finding
from bringup.findings import Finding, Status
from bringup.measurements import METRICS, NodeMeasurements, metric_values, shown, worse_pct
from bringup.profile import MetricTolerance

MIN_NODES_FOR_STRAGGLERS = 3  # with two nodes the median cannot say which one is slow


def judge_stragglers(
    nodes: list[NodeMeasurements], tolerances: dict[str, MetricTolerance]
) -> list[Finding]:
    """A WARN per node and metric worse than the median by more than `fleet_pct`."""
    findings = []
    for metric, values in metric_values(nodes).items():
        if len(values) < MIN_NODES_FOR_STRAGGLERS:
            continue
        tolerance, info = tolerances[metric], METRICS[metric]
        median = statistics.median(values.values())
        direction = "below" if tolerance.better == "higher" else "above"
        for node, value in values.items():
            worse = worse_pct(value, median, tolerance.better)
            if worse <= tolerance.fleet_pct:
                continue
            message = (
                f"{info.label} {shown(metric, value)} is {worse:.1f}% "
                f"{direction} the fleet median {shown(metric, median)} "
                f"(tolerance {tolerance.fleet_pct:g}%, {len(values)} nodes)"
            )
            f = finding(
                f"fleet.{metric}",
                Status.WARN,
                message,
                value=round(value / info.scale, 2),
                expected=f"within {tolerance.fleet_pct:g}% of {shown(metric, median)}",
                unit=info.unit,
                action="compare with its peers: rerun the probe on this node, then look for "
                "throttling (clock event reasons), a degraded link or a slower disk",
            )
            findings.append(replace(f, node=node))
    return findings
