"""The report: everything the renderers show, built from run directories only.

`build(run, profile, baseline)` is the one entry point. The report adds its own findings to
the run's (stragglers `fleet.*`, changes `baseline.*`, missing pieces `report.*`) so the
verdict, JUnit and the exporter all judge the same list. The order of everything is fixed
(nodes by name, checks in catalog order), so the same data gives the same report.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timezone

from pydantic import BaseModel, Field

from bringup import __version__
from bringup.checks import finding
from bringup.checks.catalog import CHECKS
from bringup.findings import Finding, Status, worst
from bringup.profile import DEFAULT_TOLERANCES, MetricTolerance, Profile
from bringup.report import compare as baseline_mod
from bringup.report.measurements import NodeMeasurements, measure
from bringup.report.rundata import RunData
from bringup.report.statistics import MetricStats, check_medians, statistics_of, straggler_findings

_CHECK_ORDER = {c.name: i for i, c in enumerate(CHECKS)}


class CheckRow(BaseModel):
    """One finding of a node, with the fleet's median of the same check beside it."""

    finding: Finding
    fleet_median: float | None = None
    vs_fleet_pct: float | None = None  # signed: (value - median) / median


class NodeReport(BaseModel):
    node: str
    status: Status
    measurements: NodeMeasurements
    checks: list[CheckRow] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)


class ActionGroup(BaseModel):
    """Bad findings that one action fixes, worst first."""

    status: Status
    action: str
    findings: list[Finding]


class Verdict(BaseModel):
    accepted: bool
    counts: dict[str, int]  # status -> findings
    nodes_failing: list[str]
    actions: list[ActionGroup]  # FAIL, ERROR, UNREACHABLE
    warnings: list[ActionGroup]  # WARN
    missing: list[str]  # run-level missing pieces


class RunInfo(BaseModel):
    path: str
    command: str | None = None
    profile: str | None = None
    suite: str | None = None
    status: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    bringup_version: str | None = None


class Report(BaseModel):
    title: str
    generated_at: str
    generated_by: str = f"bringup {__version__}"
    run: RunInfo
    profile_description: str | None = None
    verdict: Verdict
    subjects: list[str]  # columns of the node x subject matrix
    matrix: dict[str, dict[str, Status]]  # node -> subject -> worst status
    nodes: list[NodeReport]
    fleet: list[MetricStats]
    baseline: baseline_mod.Comparison | None = None
    findings: list[Finding]  # the run's and the report's, in report order


def check_order(f: Finding) -> tuple[str, int, str]:
    """Sort key: node, then the catalog's check order, then unknown checks by name."""
    return (f.node, _CHECK_ORDER.get(f.check, len(_CHECK_ORDER)), f.check)


def build(
    run: RunData,
    profile: Profile | None,
    baseline: RunData | None = None,
    generated_at: str | None = None,
) -> Report:
    """The report of a run (and its comparison with a baseline run)."""
    tolerances: dict[str, MetricTolerance] = (
        profile.tolerances if profile is not None else dict(DEFAULT_TOLERANCES)
    )
    nodes = run.nodes
    peak = profile.gpu.bf16_dense_tflops * 1e12 if profile is not None else None
    measured = {
        n: measure(run.facts[n], peak) if n in run.facts else NodeMeasurements(node=n)
        for n in nodes
    }
    findings = list(run.findings or [])
    findings.extend(_missing_findings(run))
    fleet = statistics_of(list(measured.values()), tolerances)
    findings.extend(straggler_findings(fleet))
    comparison = None
    if baseline is not None:
        then = [measure(baseline.facts[n], peak) for n in sorted(baseline.facts)]
        comparison = baseline_mod.compare(
            list(measured.values()),
            then,
            tolerances,
            baseline_run=baseline.path.name,
            baseline_started_at=baseline.manifest.started_at if baseline.manifest else None,
        )
        findings.extend(baseline_mod.findings_of(comparison))
    # A stable sort: findings of one node and check keep the order the check wrote them in.
    findings.sort(key=check_order)
    medians = check_medians(findings)
    node_reports = [
        _node_report(n, measured[n], findings, medians, run.node_problems.get(n, [])) for n in nodes
    ]
    subjects = list(dict.fromkeys(f.check.split(".")[0] for f in findings if f.node in nodes))
    manifest = run.manifest
    return Report(
        title=f"bringup acceptance report — {run.path.name}",
        generated_at=generated_at or datetime.now(timezone.utc).isoformat(timespec="seconds"),
        run=RunInfo(
            path=str(run.path),
            command=manifest.command if manifest else None,
            profile=manifest.profile if manifest else None,
            suite=manifest.suite if manifest else None,
            status=manifest.status if manifest else None,
            started_at=manifest.started_at if manifest else None,
            ended_at=manifest.ended_at if manifest else None,
            bringup_version=manifest.version if manifest else None,
        ),
        profile_description=profile.description if profile is not None else None,
        verdict=_verdict(findings, run),
        subjects=subjects,
        matrix=_matrix(findings, nodes, subjects),
        nodes=node_reports,
        fleet=fleet,
        baseline=comparison,
        findings=findings,
    )


def _missing_findings(run: RunData) -> list[Finding]:
    """ERROR findings for what the run should hold and does not: never read as a pass."""
    out: list[Finding] = []
    if run.findings is None:
        reason = next((p for p in run.problems if p.startswith("findings.jsonl")), "no findings")
        out.append(
            finding(
                "report.findings",
                Status.ERROR,
                reason,
                action=f"judge the recorded facts: `bringup check --replay {run.path}`",
            )
        )
    if run.manifest is not None and run.manifest.status not in ("complete", "interrupted"):
        # An interrupted run already carries its own `run` ERROR finding (cli.py).
        out.append(
            finding(
                "report.run",
                Status.ERROR,
                f"the run did not complete (status {run.manifest.status!r}): probes after the "
                "last recorded one did not run",
                action="rerun (`bringup check --resume RUN_DIR` where available)",
            )
        )
    for node, lines in sorted(run.node_problems.items()):
        for line in lines:
            f = finding(
                "report.missing",
                Status.ERROR,
                line,
                action="rerun the missing probes on this node, then report again",
            )
            out.append(f.model_copy(update={"node": node}))
    return out


def _node_report(
    node: str,
    measurements: NodeMeasurements,
    findings: list[Finding],
    medians: dict[str, float],
    missing: list[str],
) -> NodeReport:
    rows = []
    mine = [f for f in findings if f.node == node]
    for f in mine:
        median = medians.get(f.check)
        delta = None
        if median and isinstance(f.value, int | float) and not isinstance(f.value, bool):
            delta = (float(f.value) - median) / abs(median) * 100
        rows.append(CheckRow(finding=f, fleet_median=median, vs_fleet_pct=delta))
    return NodeReport(
        node=node,
        status=worst(mine) if mine else Status.ERROR,
        measurements=measurements,
        checks=rows,
        missing=missing,
    )


def _verdict(findings: list[Finding], run: RunData) -> Verdict:
    counts = {s.value: sum(1 for f in findings if f.status == s) for s in Status}
    bad = [f for f in findings if f.status.bad]
    return Verdict(
        accepted=not bad,
        counts={k: v for k, v in counts.items() if v},
        nodes_failing=sorted({f.node or "(run)" for f in bad}),
        actions=_groups(bad),
        warnings=_groups([f for f in findings if f.status == Status.WARN]),
        missing=list(run.problems),
    )


def _groups(findings: list[Finding]) -> list[ActionGroup]:
    """Findings grouped by their action, worst group first, then by action text."""
    groups: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        groups[f.action or "investigate: no action recorded for this check"].append(f)
    made = [ActionGroup(status=worst(g), action=a, findings=g) for a, g in groups.items()]
    return sorted(made, key=lambda g: (-g.status.rank, g.action))


def _matrix(
    findings: list[Finding], nodes: list[str], subjects: list[str]
) -> dict[str, dict[str, Status]]:
    cells: dict[tuple[str, str], list[Finding]] = defaultdict(list)
    for f in findings:
        cells[(f.node, f.check.split(".")[0])].append(f)
    return {
        node: {s: worst(cells[(node, s)]) for s in subjects if cells.get((node, s))}
        for node in nodes
    }
