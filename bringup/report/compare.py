"""What changed since a baseline run (the handover), as the report's tables.

`changed` is the list the report shows first: every identity change, changed setting,
grown counter, regressed metric, new Xid/SXid line and check that is WARN or worse now but
was not at handover, one entry each. A check that went bad because of a change listed
(gpu.power because the power limit was lowered) is named on that change's entry instead of
being an entry of its own (RELATED). Checks that were already as bad at handover are in
`already`, apart: they are what the renter accepted, not what changed since.

Below that, every metric both runs measured with its change, and the nodes in one run
only. Which change is a regression is bringup/checks/regression.py's verdict: a metric
is marked regressed because a `baseline.<metric>` finding says so, and a node is not
compared because a `baseline.compare` finding says so. Pure, no I/O.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from bringup.findings import Finding, Status, worst
from bringup.measurements import (
    METRICS,
    Change,
    IdentityChange,
    NodeMeasurements,
    XidRow,
    change_pct,
    counter_increases,
    identity_changes,
    new_xids,
    setting_changes,
    shown,
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


class Changed(BaseModel):
    """One thing that differs from the handover, with the checks now bad because of it."""

    node: str
    kind: str  # identity, setting, counter, metric, xid, check, node
    what: str  # "GPU 3 power limit", "gpu.ecc", "Xid 79"
    baseline: str
    current: str
    checks: list[str] = Field(default_factory=list)  # "gpu.power WARN": went bad with it


class StatusThen(BaseModel):
    """A check that is WARN or worse now and was as bad at handover."""

    node: str
    check: str
    baseline: Status | None  # None: not judged at handover
    current: Status


# Which checks judge a changed field: their new WARN or FAIL is that change's, not a
# change of its own. By the words the measurement names its field with.
RELATED: dict[str, tuple[str, ...]] = {
    "power limit": ("gpu.power",),
    "clock": ("gpu.clock_events",),
    "persistence mode": ("gpu.persistence",),
    "ECC": ("gpu.ecc",),
    "PCIe": ("gpu.pcie",),
    "remapped rows": ("gpu.remapped_rows",),
    "retired pages": ("gpu.ecc",),
    "driver": ("gpu.driver",),
    "CUDA": ("gpu.driver",),
    "GPU count": ("gpu.count", "topology."),
    "GPU model": ("gpu.model",),
    "Xid": ("xid.",),
    # A metric beyond its tolerance: its own checks, and the straggler check of the fleet.
    "NCCL": ("nccl.", "fleet.nccl."),
    "GEMM": ("gemm.", "fleet.gemm."),
    "NVMe": ("nvme.", "storage.", "fleet.nvme."),
    "burn-in": ("burnin.", "fleet.burnin."),
}


class NotCompared(BaseModel):
    """A node (or, node "", the whole baseline) that could not be compared, and why."""

    node: str
    why: str


class Comparison(BaseModel):
    """The whole comparison, in node then metric order."""

    baseline_run: str
    baseline_started_at: str | None = None
    # A handover bundle (bringup/baseline.py) is called "the handover"; any other run
    # "the baseline run": a plain check run is no handover.
    baseline_is_handover: bool = False
    changed: list[Changed] = Field(default_factory=list)  # what changed since handover
    already: list[StatusThen] = Field(default_factory=list)  # as bad at handover
    settings: list[Change] = Field(default_factory=list)
    counters: list[Change] = Field(default_factory=list)
    metrics: list[MetricChange] = Field(default_factory=list)
    identity: list[IdentityChange] = Field(default_factory=list)
    new_xids: list[NewXid] = Field(default_factory=list)
    missing_nodes: list[str] = Field(default_factory=list)  # in the baseline, not measured now
    new_nodes: list[str] = Field(default_factory=list)  # measured now, not in the baseline
    # What could not be compared (regression.py's `baseline.compare` ERRORs): while any is
    # here, no change found is not "nothing changed".
    not_compared: list[NotCompared] = Field(default_factory=list)

    @property
    def baseline_name(self) -> str:
        """What the baseline is called: "handover" or "baseline run"."""
        return "handover" if self.baseline_is_handover else "baseline run"

    @property
    def then(self) -> str:
        """When the baseline was measured, in words: "at handover", "at baseline"."""
        return "at handover" if self.baseline_is_handover else "at baseline"

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
    baseline_findings: list[Finding] | None = None,
    baseline_is_handover: bool = False,
) -> Comparison:
    """Both runs side by side; regressions as `findings` name them.

    `baseline_findings`: the handover's own findings, to tell a check that went bad since
    from one that was already bad (None: not known, no check is compared).
    """
    now = {m.node: m for m in current}
    then = {m.node: m for m in baseline}
    judged = {(f.node, f.check) for f in findings}
    result = Comparison(
        baseline_run=baseline_run,
        baseline_started_at=baseline_started_at,
        baseline_is_handover=baseline_is_handover,
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
        result.settings.extend(setting_changes(node, a, b))
        result.counters.extend(counter_increases(node, a, b))
        result.new_xids.extend(NewXid(node=node, event=x) for x in new_xids(a.xids, b.xids))
    result.changed = _changed(result)
    result.not_compared = [
        NotCompared(node=f.node, why=f.message) for f in findings if f.check == "baseline.compare"
    ]
    if baseline_findings is not None:
        both = set(now) & set(then)
        new, result.already = _statuses(findings, baseline_findings, both)
        result.changed = _attach(result.changed, new)
    return result


def _changed(c: Comparison) -> list[Changed]:
    """Every change of facts, in node order, then by kind as the section lists them."""
    found = [
        *(_of(x, "identity") for x in c.identity),
        *(_of(x, "setting") for x in c.settings),
        *(_of(x, "counter") for x in c.counters),
        *(
            Changed(
                node=m.node,
                kind="metric",
                what=METRICS[m.metric].label,
                baseline=shown(m.metric, m.baseline),
                current=f"{shown(m.metric, m.current)} ({m.change_pct:+.1f}%)",
            )
            for m in c.regressions
        ),
        *(
            Changed(
                node=x.node,
                kind="xid",
                what=("SXid " if x.event.sxid else "Xid ") + str(x.event.xid),
                baseline="not in the kernel log",
                current=(x.event.line or x.event.message).strip(),
            )
            for x in c.new_xids
        ),
        *(
            Changed(node=n, kind="node", what="node", baseline="measured", current="not measured")
            for n in c.missing_nodes
        ),
    ]
    return sorted(found, key=lambda x: x.node)  # stable: kinds keep their order per node


def _of(change: Change | IdentityChange, kind: str) -> Changed:
    return Changed(
        node=change.node,
        kind=kind,
        what=change.field,
        baseline=change.baseline,
        current=change.current,
    )


def _statuses(
    findings: list[Finding], baseline: list[Finding], nodes: set[str]
) -> tuple[list[StatusThen], list[StatusThen]]:
    """Checks WARN or worse now, split into new (or worse) since handover and already there.

    Per node and check, the worst status of its findings. The `baseline.*` findings are
    this comparison's own and `report.*` say what the run lacks: neither is compared.
    """
    now, then = _worst(findings, nodes), _worst(baseline, nodes)
    new: list[StatusThen] = []
    already: list[StatusThen] = []
    for (node, check), status in now.items():
        if status.rank < Status.WARN.rank:
            continue
        before = then.get((node, check))
        row = StatusThen(node=node, check=check, baseline=before, current=status)
        (already if before is not None and before.rank >= status.rank else new).append(row)
    return new, already


def _worst(findings: list[Finding], nodes: set[str]) -> dict[tuple[str, str], Status]:
    cells: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        if f.node in nodes and not f.check.startswith(("baseline.", "report.")):
            cells.setdefault((f.node, f.check), []).append(f)
    return {key: worst(group) for key, group in sorted(cells.items())}


def _attach(changed: list[Changed], new: list[StatusThen]) -> list[Changed]:
    """Each newly bad check onto the change that explains it, or an entry of its own."""
    for status in new:
        label = f"{status.check} {status.current.value}"
        owner = next(
            (c for c in changed if c.node == status.node and _judges(c, status.check)), None
        )
        if owner is not None:
            owner.checks.append(label)
        else:
            changed.append(
                Changed(
                    node=status.node,
                    kind="check",
                    what=status.check,
                    baseline=status.baseline.value if status.baseline else "not judged",
                    current=status.current.value,
                )
            )
    return sorted(changed, key=lambda x: x.node)


def _judges(change: Changed, check: str) -> bool:
    """Whether `check` judges what `change` is about (RELATED, by the words of its name)."""
    return any(
        word in change.what and check.startswith(prefix)
        for word, prefixes in RELATED.items()
        for prefix in prefixes
    )
