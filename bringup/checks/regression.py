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
- a node judged with other profile overrides than at the baseline (a host's
  `bringup_profile_overrides`, recorded in each manifest) is a WARN `baseline.overrides`:
  the two verdicts held it to different figures (`judge_override_changes`).

Pure: over both runs' measurements (bringup/measurements.py) and the profile's tolerances.
"""

from __future__ import annotations

from collections.abc import Mapping

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


def judge_regressions(
    current: list[NodeMeasurements],
    baseline: list[NodeMeasurements],
    tolerances: dict[str, MetricTolerance],
    baseline_run: str,
) -> list[Finding]:
    """Every node of both runs against itself in the baseline; nodes only in the baseline.

    Regressions first, then identity changes, new XIDs and missing nodes, each in node order.
    """
    now = {m.node: m for m in current}
    then = {m.node: m for m in baseline}
    since = f"the baseline {baseline_run}"
    both = sorted(set(now) & set(then))

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
        for node in sorted(set(then) - set(now))
    ]
    return [*regressed, *identity, *settings, *counters, *xids, *missing]


def _on(node: str, f: Finding) -> Finding:
    return f.model_copy(update={"node": node})


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
