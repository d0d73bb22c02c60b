"""What changed since a baseline run, as the report's tables.

Every metric both runs measured on a node with its change, identity changes (GPU serial,
VBIOS, driver, GPU count), Xid/SXid lines new since the baseline, and the nodes in one run
only. Which change is a regression is bringup/checks/regression.py's verdict: a metric
is marked regressed because a `baseline.<metric>` finding says so. Pure, no I/O.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from bringup.findings import Finding
from bringup.measurements import (
    METRICS,
    IdentityChange,
    NodeMeasurements,
    XidRow,
    change_pct,
    identity_changes,
    new_xids,
)
from bringup.profile import MetricTolerance


class MetricChange(BaseModel):
    node: str
    metric: str
    baseline: float
    current: float
    change_pct: float  # signed: (current - baseline) / baseline
    tolerance_pct: float
    better: str
    regressed: bool


class NewXid(BaseModel):
    node: str
    event: XidRow


class Comparison(BaseModel):
    """The whole comparison, in node then metric order."""

    baseline_run: str
    baseline_started_at: str | None = None
    metrics: list[MetricChange] = Field(default_factory=list)
    identity: list[IdentityChange] = Field(default_factory=list)
    new_xids: list[NewXid] = Field(default_factory=list)
    missing_nodes: list[str] = Field(default_factory=list)  # in the baseline, not measured now
    new_nodes: list[str] = Field(default_factory=list)  # measured now, not in the baseline

    @property
    def regressions(self) -> list[MetricChange]:
        return [c for c in self.metrics if c.regressed]


def compare(
    current: list[NodeMeasurements],
    baseline: list[NodeMeasurements],
    tolerances: dict[str, MetricTolerance],
    findings: list[Finding],
    baseline_run: str,
    baseline_started_at: str | None = None,
) -> Comparison:
    """Both runs side by side; regressions as `findings` name them."""
    now = {m.node: m for m in current}
    then = {m.node: m for m in baseline}
    judged = {(f.node, f.check) for f in findings}
    result = Comparison(
        baseline_run=baseline_run,
        baseline_started_at=baseline_started_at,
        missing_nodes=sorted(set(then) - set(now)),
        new_nodes=sorted(set(now) - set(then)),
    )
    for node in sorted(set(now) & set(then)):
        a, b = then[node], now[node]
        for metric in METRICS:
            if metric in a.metrics and metric in b.metrics:
                old, new = a.metrics[metric], b.metrics[metric]
                tolerance = tolerances[metric]
                result.metrics.append(
                    MetricChange(
                        node=node,
                        metric=metric,
                        baseline=old,
                        current=new,
                        change_pct=change_pct(old, new),
                        tolerance_pct=tolerance.baseline_pct,
                        better=tolerance.better,
                        regressed=(node, f"baseline.{metric}") in judged,
                    )
                )
        result.identity.extend(identity_changes(node, a, b))
        result.new_xids.extend(NewXid(node=node, event=x) for x in new_xids(a.xids, b.xids))
    return result
