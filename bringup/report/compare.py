"""What changed since a baseline run: metrics beyond tolerance, identity, new XIDs.

At handover the renter keeps the run directory as the baseline; later,
`bringup report NEW_RUN --baseline OLD_RUN` compares node by node (by node name):

- a metric worse than the baseline by more than the profile's `baseline_pct`, in the
  metric's own direction (busbw down, a latency up), is a FAIL;
- an identity change (GPU serial, VBIOS, driver, GPU count) is a WARN: the hardware or
  software is not what was measured at handover, and the provider should say why;
- an Xid/SXid line that the baseline's kernel log did not hold is a FAIL;
- a node of the baseline absent from the new run is an ERROR (it was not measured).

Pure functions over measurements; no I/O.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from bringup.checks import finding
from bringup.findings import Finding, Status
from bringup.profile import MetricTolerance
from bringup.report.measurements import METRICS, NodeMeasurements, XidRow, shown
from bringup.report.statistics import worse_pct


class MetricChange(BaseModel):
    node: str
    metric: str
    baseline: float
    current: float
    change_pct: float  # signed: (current - baseline) / baseline
    tolerance_pct: float
    better: str
    regressed: bool


class IdentityChange(BaseModel):
    node: str
    field: str  # "GPU 3 serial", "driver", ...
    baseline: str
    current: str


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
    baseline_run: str,
    baseline_started_at: str | None = None,
) -> Comparison:
    now = {m.node: m for m in current}
    then = {m.node: m for m in baseline}
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
                result.metrics.append(_change(node, metric, a, b, tolerances[metric]))
        result.identity.extend(identity_changes(node, a, b))
        result.new_xids.extend(NewXid(node=node, event=x) for x in new_xids(a.xids, b.xids))
    return result


def _change(
    node: str,
    metric: str,
    then: NodeMeasurements,
    now: NodeMeasurements,
    tolerance: MetricTolerance,
) -> MetricChange:
    old, new = then.metrics[metric], now.metrics[metric]
    change = (new - old) / abs(old) * 100 if old else 0.0
    return MetricChange(
        node=node,
        metric=metric,
        baseline=old,
        current=new,
        change_pct=change,
        tolerance_pct=tolerance.baseline_pct,
        better=tolerance.better,
        regressed=worse_pct(new, old, tolerance.better) > tolerance.baseline_pct,
    )


def identity_changes(
    node: str, then: NodeMeasurements, now: NodeMeasurements
) -> list[IdentityChange]:
    """Serial and VBIOS per GPU index, driver, CUDA and GPU count; unknown on either side: skip."""
    a, b = then.identity, now.identity
    changes: list[IdentityChange] = []

    def differ(field: str, old: object, new: object) -> None:
        if old is not None and new is not None and old != new:
            changes.append(
                IdentityChange(node=node, field=field, baseline=str(old), current=str(new))
            )

    differ("GPU count", a.gpu_count, b.gpu_count)
    differ("driver", a.driver, b.driver)
    differ("CUDA (driver)", a.cuda, b.cuda)
    for index in range(min(len(a.serials), len(b.serials))):
        differ(f"GPU {index} serial", a.serials[index], b.serials[index])
    for index in range(min(len(a.vbios), len(b.vbios))):
        differ(f"GPU {index} VBIOS", a.vbios[index], b.vbios[index])
    return changes


def new_xids(then: list[XidRow], now: list[XidRow]) -> list[XidRow]:
    """Events of the new kernel log whose line the baseline's log did not hold.

    By the whole line: the same event read again (the log window covers both runs) has
    the same text and timestamp; a new event differs at least in its timestamp.
    """
    seen = {(x.line or f"{x.xid} {x.pci} {x.timestamp} {x.message}") for x in then}
    return [x for x in now if (x.line or f"{x.xid} {x.pci} {x.timestamp} {x.message}") not in seen]


def findings_of(comparison: Comparison) -> list[Finding]:
    """The comparison as findings, one per node and subject, so verdicts and CI see them."""
    out: list[Finding] = []
    since = f"the baseline {comparison.baseline_run}"
    for change in comparison.regressions:
        info = METRICS[change.metric]
        word = "down" if change.change_pct < 0 else "up"
        message = (
            f"{info.label} {word} {abs(change.change_pct):.1f}% since {since}: "
            f"{shown(change.metric, change.current)} now, {shown(change.metric, change.baseline)} "
            f"then (tolerance {change.tolerance_pct:g}%)"
        )
        f = finding(
            f"baseline.{change.metric}",
            Status.FAIL,
            message,
            value=round(change.current / info.scale, 2),
            expected=f"within {change.tolerance_pct:g}% of {shown(change.metric, change.baseline)}",
            unit=info.unit,
            action="worse than at handover: rerun the probe, then ask the provider what changed "
            "(firmware, driver, cabling, a replaced part)",
        )
        out.append(f.model_copy(update={"node": change.node}))
    by_node: dict[str, list[IdentityChange]] = {}
    for ident in comparison.identity:
        by_node.setdefault(ident.node, []).append(ident)
    for node, changes in by_node.items():
        text = "; ".join(f"{c.field} {c.baseline} -> {c.current}" for c in changes)
        f = finding(
            "baseline.identity",
            Status.WARN,
            f"changed since {since}: {text}",
            value=len(changes),
            unit="changes",
            action="ask the provider for the reason (an RMA'd GPU, a firmware or driver update); "
            "the baseline figures of a replaced part no longer apply",
        )
        out.append(f.model_copy(update={"node": node}))
    xids: dict[str, list[XidRow]] = {}
    for new in comparison.new_xids:
        xids.setdefault(new.node, []).append(new.event)
    for node, events in xids.items():
        codes = ", ".join(sorted({("SXid " if x.sxid else "Xid ") + str(x.xid) for x in events}))
        f = finding(
            "baseline.xid",
            Status.FAIL,
            f"{len(events)} new Xid/SXid events since {since}: {codes} "
            f"(first: {(events[0].line or events[0].message).strip()})",
            value=len(events),
            expected="0 new events",
            unit="events",
            action="see the xid check's action for each code; report them to the provider",
        )
        out.append(f.model_copy(update={"node": node}))
    for node in comparison.missing_nodes:
        f = finding(
            "baseline.node",
            Status.ERROR,
            f"in {since} but not in this run: not measured",
            action="include the node in the run (--limit, inventory) and rerun",
        )
        out.append(f.model_copy(update={"node": node}))
    return out
