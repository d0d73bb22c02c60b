"""What got worse since a baseline run: metrics beyond tolerance, identity, new XIDs.

At handover the renter keeps the run directory as the baseline; later,
`bringup report NEW_RUN --baseline OLD_RUN` compares node by node (by node name):

- a metric worse than the baseline by more than the profile's `baseline_pct`, in the
  metric's own direction (busbw down, a latency up), is a FAIL `baseline.<metric>`;
- an identity change (GPU serial, VBIOS, driver, GPU count) is a WARN `baseline.identity`:
  the hardware or software is not what was measured at handover, and the provider should
  say why;
- a changed setting (power limit, maximum clocks, persistence or ECC mode, PCIe width) is a
  WARN `baseline.setting`: a node set differently delivers differently;
- a counter that grew (ECC uncorrected, remapped or retired rows) is a FAIL
  `baseline.counter`; corrected ECC errors that grew are a WARN;
- an Xid/SXid line that the baseline's kernel log did not hold is a FAIL `baseline.xid`;
- a node of the baseline absent from the new run is an ERROR `baseline.node`;
- a node of both runs that cannot be compared (its facts unreadable or absent on either
  side) is an ERROR `baseline.compare`, and so, once, is a baseline with no node in common
  with the run: a comparison fails closed, and "nothing changed since handover" means
  every node was compared.
- a node judged with other profile overrides than at the baseline (a host's
  `bringup_profile_overrides`, recorded in each manifest) is a WARN `baseline.overrides`:
  the two verdicts held it to different figures (`judge_override_changes`).

Pure: over both runs' measurements (bringup/measurements.py) and the profile's tolerances.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from bringup.checks import finding
from bringup.findings import Finding, Status
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
    worse_pct,
)
from bringup.profile import MetricTolerance
from bringup.rundir import Override


@dataclass(frozen=True)
class Known:
    """Every node a run knows of (manifest, facts, findings), and why the facts of some of
    them cannot be read (node -> why): a node without readable facts is not compared."""

    nodes: Sequence[str]
    unreadable: Mapping[str, str] = field(default_factory=dict)


def judge_regressions(
    current: list[NodeMeasurements],
    baseline: list[NodeMeasurements],
    tolerances: dict[str, MetricTolerance],
    baseline_run: str,
    known_now: Known | None = None,
    known_then: Known | None = None,
) -> list[Finding]:
    """Every node of both runs against itself in the baseline; nodes only in the baseline.

    `known_now`, `known_then`: every node of each run (None: the nodes measured), so that
    a node with no readable facts is an ERROR, never a node with nothing changed. Nodes
    that cannot be compared first, then regressions, identity changes, new XIDs and
    missing nodes, each in node order.
    """
    now = {m.node: m for m in current}
    then = {m.node: m for m in baseline}
    since = f"the baseline {baseline_run}"
    known_now = known_now or Known(nodes=sorted(now))
    known_then = known_then or Known(nodes=sorted(then))
    common = set(known_now.nodes) & set(known_then.nodes)
    if not common:
        return [_nothing_in_common(known_now, known_then, since)]
    gaps = {
        node: why
        for node in sorted(common)
        if (why := _why_not_compared(node, now, then, known_now, known_then, since))
    }
    uncompared = [_on(node, _cannot_compare(node, why)) for node, why in gaps.items()]
    both = sorted(common - set(gaps))

    def pair(node: str) -> tuple[NodeMeasurements, NodeMeasurements]:
        return then[node], now[node]

    regressed = [
        f
        for node in both
        for metric in METRICS
        if metric in then[node].metrics and metric in now[node].metrics
        for f in _metric(node, metric, then[node], now[node], tolerances[metric], since)
    ]
    identity = [
        _identity(node, changes, since)
        for node in both
        if (changes := identity_changes(node, then[node], now[node]))
    ]
    settings = [
        _setting(change, since) for node in both for change in setting_changes(node, *pair(node))
    ]
    counters = [
        _counter(change, since) for node in both for change in counter_increases(node, *pair(node))
    ]
    xids = [
        _xids(node, events, since)
        for node in both
        if (events := new_xids(then[node].xids, now[node].xids))
    ]
    missing = [
        _on(
            node,
            finding(
                "baseline.node",
                Status.ERROR,
                f"in {since} but not in this run: not measured",
                action="include the node in the run (--limit, inventory) and rerun",
            ),
        )
        for node in sorted(set(known_then.nodes) - set(known_now.nodes))
    ]
    return [*uncompared, *regressed, *identity, *settings, *counters, *xids, *missing]


def _why_not_compared(
    node: str,
    now: Mapping[str, NodeMeasurements],
    then: Mapping[str, NodeMeasurements],
    known_now: Known,
    known_then: Known,
    since: str,
) -> str | None:
    """Why a node of both runs cannot be compared, or None when it can."""
    for known, measured, where in ((known_then, then, since), (known_now, now, "this run")):
        if node in known.unreadable:
            return f"facts unreadable in {where} ({known.unreadable[node]})"
        # No record at all measures as the empty NodeMeasurements: nothing to compare.
        if measured.get(node, NodeMeasurements(node=node)) == NodeMeasurements(node=node):
            return f"{where} records no facts of it"
    return None


def _cannot_compare(node: str, why: str) -> Finding:
    return finding(
        "baseline.compare",
        Status.ERROR,
        f"cannot compare {node}: {why}: what changed on it since handover is unknown",
        action="compare with an intact baseline (`bringup verify BASELINE`), or measure "
        "the node again (`bringup check --limit NODE`)",
    )


def _nothing_in_common(known_now: Known, known_then: Known, since: str) -> Finding:
    def some(nodes: Sequence[str]) -> str:
        names = sorted(nodes)
        more = f" and {len(names) - 5} more" if len(names) > 5 else ""
        return ", ".join(names[:5]) + more if names else "none"

    return finding(
        "baseline.compare",
        Status.ERROR,
        f"{since} has no node in common with this run: nothing was compared "
        f"(there: {some(known_then.nodes)}; here: {some(known_now.nodes)})",
        action="compare with the handover of these nodes: `bringup report RUN --baseline HANDOVER`",
    )


def _on(node: str, f: Finding) -> Finding:
    return replace(f, node=node)


def _metric(
    node: str,
    metric: str,
    then: NodeMeasurements,
    now: NodeMeasurements,
    tolerance: MetricTolerance,
    since: str,
) -> list[Finding]:
    """A FAIL when the metric is worse than the baseline by more than `baseline_pct`."""
    old, new = then.metrics[metric], now.metrics[metric]
    if worse_pct(new, old, tolerance.better) <= tolerance.baseline_pct:
        return []
    info, change = METRICS[metric], change_pct(old, new)
    word = "down" if change < 0 else "up"
    message = (
        f"{info.label} {word} {abs(change):.1f}% since {since}: "
        f"{shown(metric, new)} now, {shown(metric, old)} "
        f"then (tolerance {tolerance.baseline_pct:g}%)"
    )
    f = finding(
        f"baseline.{metric}",
        Status.FAIL,
        message,
        value=round(new / info.scale, 2),
        expected=f"within {tolerance.baseline_pct:g}% of {shown(metric, old)}",
        unit=info.unit,
        action="worse than at handover: rerun the probe, then ask the provider what changed "
        "(firmware, driver, cabling, a replaced part)",
    )
    return [_on(node, f)]


def _identity(node: str, changes: list[IdentityChange], since: str) -> Finding:
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
    return _on(node, f)


def _setting(change: Change, since: str) -> Finding:
    f = finding(
        "baseline.setting",
        Status.WARN,
        f"{change.field} {change.baseline} -> {change.current} since {since}",
        value=change.current,
        expected=change.baseline,
        action="ask the provider why the setting changed and to restore it; "
        "a node set differently from handover does not deliver what was measured",
    )
    return _on(change.node, f)


# Counter families whose growth is a FAIL; the others (corrected ECC errors) are a WARN.
FAILING_COUNTERS = ("ECC uncorrected", "remapped rows", "retired pages")


def _counter(change: Change, since: str) -> Finding:
    failing = change.field.split(" ", 2)[-1] in FAILING_COUNTERS
    f = finding(
        "baseline.counter",
        Status.FAIL if failing else Status.WARN,
        f"{change.field} grew since {since}: {change.current} now, {change.baseline} then",
        value=change.current,
        expected=change.baseline,
        action="memory errors since handover: drain the node, run `bringup diagnose` and "
        "report the GPU (index and serial) to the provider for RMA",
    )
    return _on(change.node, f)


def _xids(node: str, events: list[XidRow], since: str) -> Finding:
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
    return _on(node, f)


def judge_override_changes(
    now: Mapping[str, list[Override]], then: Mapping[str, list[Override]], since: str
) -> list[Finding]:
    """A WARN per node whose profile overrides differ from the baseline's (by node name)."""
    found = []
    for node in sorted(set(now) | set(then)):
        mine, theirs = _overridden(now.get(node, [])), _overridden(then.get(node, []))
        if mine == theirs:
            continue
        message = f"judged with {mine or 'no overrides'}; at {since}: {theirs or 'no overrides'}"
        action = (
            "compare the host's bringup_profile_overrides with the baseline's: a verdict "
            "against other figures is not the same acceptance"
        )
        found.append(_on(node, finding("baseline.overrides", Status.WARN, message, action=action)))
    return found


def _overridden(changes: list[Override]) -> str:
    """The overrides as the console says them: "gpu.count 8 -> 7, ..."."""
    return ", ".join(change.line() for change in changes)
