"""The report: everything the renderers show, built from run directories and findings.

`build(run, profile, judged, check_order, baseline)` is the one entry point. The report
judges nothing: `judged` are the findings only a whole run shows (stragglers `fleet.*`,
changes `baseline.*`, missing pieces `report.*`, from bringup/checks), added to the run's
own so that the verdict, JUnit and the exporter all read the same list. The order of
everything is fixed (nodes by name, checks in `check_order`, the catalog's), so the same
data gives the same report.
"""

from __future__ import annotations

import shlex
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import overload

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from bringup import __version__, provenance
from bringup.baseline import CoverageRow
from bringup.facts import origin as facts_origin
from bringup.findings import Cell, Finding, Status, matrix_cells, worst
from bringup.measurements import METRICS, NodeMeasurements, measure_fleet, tolerances
from bringup.profile import Profile
from bringup.report import compare as baseline_mod
from bringup.report.figures import Brief, Figures
from bringup.report.findingstore import FindingsSpool, ReportFindings
from bringup.report.planned import PlanSection, plan_section
from bringup.report.rails import RailTable
from bringup.report.rails import load as load_rails
from bringup.report.rundata import RunData, measured
from bringup.report.statistics import CheckMedians, MetricStats, statistics_of
from bringup.rundir import Override


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
    missing: list[str] = Field(default_factory=list)  # the node's report.* findings

    @property
    def problem(self) -> bool:
        """WARN or worse: the node is shown in full; a passing node gets one line."""
        return self.status.rank >= Status.WARN.rank

    @property
    def troubles(self) -> list[str]:
        """Its checks at WARN or worse, worst first: "gpu.count FAIL", "gpu.ecc FAIL ×2"."""
        return troubles_of(row.finding for row in self.checks)


def troubles_of(findings: Iterable[Finding]) -> list[str]:
    """A node's checks at WARN or worse, worst first: "gpu.count FAIL", "gpu.ecc FAIL ×2"."""
    counts: dict[tuple[str, Status], int] = {}
    for f in findings:
        if f.status.rank >= Status.WARN.rank:
            counts[(f.check, f.status)] = counts.get((f.check, f.status), 0) + 1
    ranked = sorted(counts.items(), key=lambda item: -item[0][1].rank)
    return [
        f"{check} {status.value}" + (f" ×{n}" if n > 1 else "") for (check, status), n in ranked
    ]


@dataclass
class NodeSummary:
    """A node's line in the report's lists: what its section says in brief, held for every
    node while the sections themselves are built one at a time (NodeSections)."""

    node: str
    status: Status
    finding_count: int
    troubles: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # its report.* findings' messages
    brief: Brief = field(default_factory=Brief)

    @property
    def problem(self) -> bool:
        """WARN or worse, as NodeReport.problem."""
        return self.status.rank >= Status.WARN.rank


class NodeSections(Sequence[NodeReport]):
    """Every node's section, in node order, built when asked for: a section holds the
    node's full figures and a row per finding, so a report of ten thousand nodes holds
    the nodes' summaries (`rows`) and builds each section as it is written
    (docs/scale.md, "The streamed report")."""

    def __init__(
        self,
        rows: list[NodeSummary],
        findings: ReportFindings,
        medians: dict[str, float],
        figures: Figures,
    ) -> None:
        self._findings = findings  # each node's read back (from disk) when its section is
        self._medians = medians
        self._figures = figures
        self.rows = rows

    @property
    def problems(self) -> list[NodeSummary]:
        return [row for row in self.rows if row.problem]

    @property
    def passing(self) -> list[NodeSummary]:
        return [row for row in self.rows if not row.problem]

    def section(
        self,
        node: str,
        mine: list[Finding] | None = None,
        figures: NodeMeasurements | None = None,
    ) -> NodeReport:
        """One node's section, built now from its findings and its figures (`mine`,
        `figures`: read back already; the findings in report order)."""
        if mine is None:
            mine = self._findings.of(node)
        if figures is None:
            figures = self._figures.get(node)
        return _node_report(node, figures, mine, self._medians)

    def figures(self, node: str) -> NodeMeasurements:
        """A node's full figures (read back from the spool)."""
        return self._figures.get(node)

    @property
    def medians(self) -> dict[str, float]:
        """Each check's fleet median, which a section's rows show beside each finding."""
        return self._medians

    @property
    def findings(self) -> ReportFindings:
        return self._findings

    def sections(self, rows: Iterable[NodeSummary]) -> Iterator[NodeReport]:
        """These nodes' sections, one at a time."""
        for row in rows:
            yield self.section(row.node)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[NodeReport]:
        return self.sections(self.rows)

    @overload
    def __getitem__(self, index: int) -> NodeReport: ...
    @overload
    def __getitem__(self, index: slice) -> list[NodeReport]: ...
    def __getitem__(self, index: int | slice) -> NodeReport | list[NodeReport]:
        if isinstance(index, slice):
            return list(self.sections(self.rows[index]))
        return self.section(self.rows[index].node)


def _summary(node: str, mine: list[Finding], brief: Brief) -> NodeSummary:
    """A node's summary, by the rules its section follows (_node_report, troubles_of)."""
    return NodeSummary(
        node=node,
        status=worst(mine) if mine else Status.ERROR,
        finding_count=len(mine),
        troubles=troubles_of(mine),
        missing=[f.message for f in mine if is_gap(f)],
        brief=brief,
    )


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
    missing: list[str]  # the run's missing pieces (its report.* findings), then notes
    note: str | None = None  # where the facts came from, when not measured live by this run
    mode: str = "live"  # derived from every record: live, or "demo+replayed", "file", ...
    reasons: list[str] = Field(default_factory=list)  # why not live: "demo data", ...
    line: str = ""  # "ACCEPTED", "NOT ACCEPTED (demo data)": what every output heads with
    lacking: list[str] = Field(default_factory=list)  # a handover: "no burn-in MFU baseline"

    def origin_json(self) -> dict[str, object]:
        """--json's `provenance` (commands/envelope.py, Origin): mode, live, reasons."""
        return {"mode": self.mode, "live": not self.reasons, "reasons": list(self.reasons)}


class RunInfo(BaseModel):
    path: str
    command: str | None = None
    profile: str | None = None
    suite: str | None = None
    status: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    bringup_version: str | None = None
    # Provenance (bringup/provenance.py): None where the manifest does not record it.
    mode: str | None = None  # live, demo, replay, resume
    command_line: str | None = None  # `bringup check ...`, secrets redacted
    controller: str | None = None
    replay_of: str | None = None
    replay_manifest_sha256: str | None = None
    resumed_at: list[str] = Field(default_factory=list)
    probes: list[str] | None = None  # the plan every node is held to
    measured_from: str | None = None  # the earliest and latest record, by the nodes' clocks
    measured_to: str | None = None
    manifest_sha256: str | None = None  # quote it; `bringup verify` checks the files
    files_hashed: int | None = None  # evidence files whose SHA-256 the manifest holds
    parts_sha256: dict[str, str] = Field(default_factory=dict)  # a bundle: each part's manifest
    origin: str = ""  # the mode in words: "measured live by this run", "demo data: ..."
    derived_mode: str = "live"  # from every record (bringup/provenance.py): "demo+replayed"
    overrides: dict[str, list[Override]] = Field(default_factory=dict)  # node -> fields


class Report(BaseModel):
    # `nodes` is built one section at a time (NodeSections), not held as a list.
    model_config = ConfigDict(arbitrary_types_allowed=True)

    title: str
    generated_at: str
    generated_by: str = f"bringup {__version__}"
    run: RunInfo
    profile_description: str | None = None
    verdict: Verdict
    subjects: list[str]  # columns of the node x subject matrix
    matrix: dict[str, dict[str, Cell]]  # node -> subject -> its cell, as the console shows it
    nodes: NodeSections | list[NodeReport]  # a list: a report made by hand (tests)
    fleet: list[MetricStats]
    baseline: baseline_mod.Comparison | None = None
    # The run's and the report's, in report order: read back a node at a time
    # (report/findingstore.py); a list: a report made by hand (tests).
    findings: ReportFindings | list[Finding]
    plan: PlanSection | None = None  # a burn-in run: what its baseline means for a fine-tune
    # A handover bundle: what it holds and what it lacks (bringup/checks/coverage.py).
    coverage: list[CoverageRow] | None = None
    # The per-rail job's figures: nodes x rails against line rate (bringup/report/rails.py).
    rails: RailTable | None = None

    @field_serializer("nodes")
    def _every_node(self, nodes: Sequence[NodeReport]) -> list[NodeReport]:
        # A dump of the whole model (small runs, tests) holds every section: report.json
        # is written a node at a time instead (render.json_pieces).
        return list(nodes)

    @field_serializer("findings")
    def _every_finding(self, findings: Iterable[Finding]) -> list[Finding]:
        return list(findings)  # as nodes: report.json writes them one at a time


def build(
    run: RunData,
    profile: Profile | None,
    judged: list[Finding],
    check_order: list[str],
    baseline: RunData | None = None,
    generated_at: str | None = None,
    measurements: list[NodeMeasurements] | Figures | None = None,
    coverage: list[CoverageRow] | None = None,
    baseline_measurements: list[NodeMeasurements] | None = None,
) -> Report:
    """The report of a run (and its comparison with a baseline run).

    `judged`: the findings of the whole run (and of the baseline comparison) that the run
    directory does not hold; `check_order`: check names in the order tables show them;
    `measurements`: measure_fleet(run.facts, profile) when the caller has it already (at a
    thousand nodes measuring twice is a second of the report); `baseline_measurements`
    the same of the baseline's. A report of Figures (spooled) holds each node's metrics
    and builds each node's section as it is written (NodeSections).
    """
    limits = tolerances(profile)
    nodes = run.nodes
    if measurements is None:
        measurements = measure_fleet(run.facts, profile)
    figures = measurements if isinstance(measurements, Figures) else Figures.held(measurements)
    figures = figures.only(nodes)
    # Node, then the check order given, then unknown checks by name. A stable sort:
    # findings of one node and check keep the order the check wrote them in.
    findings = ReportFindings(_with_judged(run.findings, judged), check_order)
    passed = _Pass(nodes, findings, figures)
    fleet = statistics_of(figures.metrics_only(), limits, passed.stragglers)
    comparison = None
    if baseline is not None:
        # A comparison reads every finding of both runs, and every node's full figures.
        comparison = baseline_mod.compare(
            [figures.get(n) for n in nodes],
            baseline_measurements
            if baseline_measurements is not None
            else measure_fleet(baseline.facts, profile),
            limits,
            list(findings),
            baseline_run=baseline.path.name,
            baseline_started_at=baseline.manifest.started_at if baseline.manifest else None,
            baseline_findings=list(baseline.findings) if baseline.findings is not None else None,
            baseline_is_handover=baseline.parts is not None,
        )
    node_reports = NodeSections(passed.rows, findings, passed.medians.medians(), figures)
    return Report(
        title=f"bringup acceptance report — {run.path.name}",
        generated_at=generated_at or datetime.now(timezone.utc).isoformat(timespec="seconds"),
        run=_run_info(run),
        profile_description=profile.description if profile is not None else None,
        verdict=_verdict(findings, passed, run, coverage or []),
        subjects=passed.subjects,
        matrix=passed.matrix(),
        nodes=node_reports,
        fleet=fleet,
        baseline=comparison,
        findings=findings,
        plan=plan_section(run.path, profile),
        coverage=coverage,
        rails=load_rails(run.path) if run.path.is_dir() else None,
    )


def _with_judged(
    found: FindingsSpool | list[Finding] | None, judged: list[Finding]
) -> FindingsSpool:
    """The run's findings, then the ones judged of the whole run: one spool."""
    if isinstance(found, FindingsSpool):
        return found.extended(judged)  # the run's own stays as read
    return FindingsSpool.of_findings([*(found or []), *judged])


class _Pass:
    """What the whole report needs of every finding, taken in one pass over the findings
    a node at a time in report order: each node's summary row and matrix cells, the
    subjects, the checks' medians, the stragglers the fleet statistics mark, the run's own
    gaps. The findings are read back from disk for it, and let go of node by node."""

    def __init__(self, nodes: list[str], findings: ReportFindings, figures: Figures) -> None:
        shown = set(nodes)
        self.rows: list[NodeSummary] = []
        self._cells: dict[str, dict[str, Cell]] = {}
        self.medians = CheckMedians()
        self.stragglers: list[Finding] = []
        self.gaps: list[str] = []  # the run's own report.* findings' messages
        self.tally: Counter[Status] = Counter()  # findings per status
        subjects: dict[str, None] = {}
        for node in sorted(shown | set(findings.nodes)):
            mine = findings.of(node) if findings.count(node) else []
            self.tally.update(f.status for f in mine)
            self.medians.add(node, mine)
            self.stragglers += [f for f in mine if _straggler(f)]
            if not node:
                self.gaps = [f.message for f in mine if is_gap(f) and f.check != COVERAGE]
            if node not in shown:
                continue
            subjects.update(dict.fromkeys(f.check.split(".")[0] for f in mine))
            self.rows.append(_summary(node, mine, figures.brief(node)))
            cells = matrix_cells(mine)
            self._cells[node] = {subject: cell for (_, subject), cell in cells.items()}
        self.subjects = list(subjects)

    def matrix(self) -> dict[str, dict[str, Cell]]:
        """The console's cells (findings.matrix_cells: the rule is decided there, once),
        node by node, each row in the order of the subjects."""
        return {
            node: {s: cells[s] for s in self.subjects if s in cells}
            for node, cells in self._cells.items()
        }


def _straggler(f: Finding) -> bool:
    """A whole run's `fleet.<metric>` finding, which the fleet statistics mark."""
    return f.check.startswith("fleet.") and f.check.removeprefix("fleet.") in METRICS


def _run_info(run: RunData) -> RunInfo:
    """What the run was and where its facts came from: the report's first lines."""
    info = RunInfo(
        path=str(run.path), manifest_sha256=run.manifest_sha256, parts_sha256=run.parts_sha256
    )
    derived = run_origin(run)
    info.derived_mode = derived.mode
    info.origin = _origin(info, derived)
    # Each node's, as read (its facts as held may be only what the report keeps of them).
    found = (run.measured.get(node) or measured(facts) for node, facts in run.facts.items())
    spans = [span for span in found if span is not None]
    if spans:
        info.measured_from = min(first for first, _ in spans)
        info.measured_to = max(last for _, last in spans)
    manifest = run.manifest
    if manifest is None:
        return info
    info.command, info.profile, info.suite = manifest.command, manifest.profile, manifest.suite
    info.status, info.started_at, info.ended_at = (
        manifest.status,
        manifest.started_at,
        manifest.ended_at,
    )
    info.bringup_version = manifest.version
    info.probes = manifest.probes
    if manifest.files_sha256 is not None:
        info.files_hashed = len(manifest.files_sha256)
    made = manifest.provenance
    if made is not None:
        info.mode, info.controller = made.mode, made.controller or None
        info.command_line = shlex.join(["bringup", *made.argv]) if made.argv else None
        info.replay_of, info.replay_manifest_sha256 = made.replay_of, made.replay_manifest_sha256
        info.resumed_at = [r.at for r in made.resumed]
    info.overrides = dict(manifest.overrides)
    info.origin = _origin(info, derived)
    return info


def _origin(info: RunInfo, derived: provenance.Origin) -> str:
    """The mode in words. A run whose records are not all live says why first, whatever
    its manifest says of how it was made."""
    if not derived.live:
        # How the run was made, where that says more than "it probed its nodes".
        made = _made(info) if info.mode not in ("live", "resume") else None
        return f"not measured live: {derived.note}" + (f" ({made})" if made else "")
    return _made(info) or "provenance not recorded (a run from before bringup recorded it)"


def _made(info: RunInfo) -> str | None:
    """How the manifest says the run was made."""
    if info.command == "handover" and info.mode in ("live", "resume"):
        return f"a handover bundle of {len(info.parts_sha256)} runs, each measured live"
    if info.mode == "live":
        return "measured live by this run"
    if info.mode == "resume":
        return f"measured live by this run, resumed at {', '.join(info.resumed_at)}"
    if info.mode == "demo":
        return "demo data: the embedded demo fleet, not a measurement"
    if info.mode == "replay":
        sha = info.replay_manifest_sha256
        its = f"its manifest sha256 {sha}" if sha else "it has no manifest"
        return f"replay: the facts of {info.replay_of} judged again ({its})"
    return None


def _node_report(
    node: str,
    measurements: NodeMeasurements,
    mine: list[Finding],
    medians: dict[str, float],
) -> NodeReport:
    """One node's section from its own findings (in report order)."""
    rows = []
    for f in mine:
        median, delta = versus_fleet(f, medians)
        # Built from values of its fields' types (a median as a float, as validation made
        # it), not validated again: 29 rows a node of the scale run.
        median = None if median is None else float(median)
        rows.append(CheckRow.model_construct(finding=f, fleet_median=median, vs_fleet_pct=delta))
    return NodeReport(
        node=node,
        status=worst(mine) if mine else Status.ERROR,
        measurements=measurements,
        checks=rows,
        missing=[f.message for f in mine if is_gap(f)],
    )


def versus_fleet(f: Finding, medians: dict[str, float]) -> tuple[float | None, float | None]:
    """A finding's row beside the fleet: its check's median, and how far the finding's
    value is from it (signed percent; None where either is not a number)."""
    median = medians.get(f.check)
    delta = None
    if median and isinstance(f.value, int | float) and not isinstance(f.value, bool):
        delta = (float(f.value) - median) / abs(median) * 100
    return median, delta


def is_gap(f: Finding) -> bool:
    """A missing piece of the run (bringup/checks/completeness.py), not a measurement."""
    return f.check.startswith("report.")


def _verdict(
    findings: ReportFindings, passed: _Pass, run: RunData, coverage: list[CoverageRow]
) -> Verdict:
    # Counted in the one pass over the findings (at ten thousand nodes 300,000 of them);
    # the bad and the WARN ones are held (`noted`), in report order.
    counts = {s.value: passed.tally[s] for s in Status}
    bad = [f for f in findings.noted if f.status.bad]
    # A handover's missing parts are in its coverage table, not listed again here.
    gaps = passed.gaps
    origin = run_origin(run)
    # The one rule (bringup/provenance.py): fail closed, a run with nothing judged is never
    # accepted, nor one with a record not measured live by this run (demo, replayed, from
    # a file, simulated), whatever its findings.
    accepted = provenance.accepted_counted(len(findings), len(bad), origin)
    overrides = bool(run.manifest.overrides) if run.manifest is not None else False
    line = "ACCEPTED" + (" with overrides" if overrides else "") if accepted else "NOT ACCEPTED"
    # A handover without a part the verdict needs says which in its brackets (its
    # report.coverage ERRORs keep it from ACCEPTED): "NOT ACCEPTED (partial handover: no
    # burn-in MFU baseline)".
    lacking = [f"no {row.item}" for row in coverage if row.required and not row.measured]
    said = [
        *([origin.note] if origin.note else []),
        *([f"partial handover: {', '.join(lacking)}"] if lacking else []),
    ]
    return Verdict(
        accepted=accepted,
        note=origin.note,
        mode=origin.mode,
        reasons=list(origin.reasons),
        line=f"{line} ({'; '.join(said)})" if said else line,
        lacking=lacking,
        counts={k: v for k, v in counts.items() if v},
        nodes_failing=sorted({f.node or "(run)" for f in bad}),
        actions=_groups(bad),
        warnings=_groups([f for f in findings.noted if f.status == Status.WARN]),
        missing=[*gaps, *run.notes],
    )


COVERAGE = "report.coverage"  # bringup/checks/coverage.py: what a handover lacks


def run_origin(run: RunData) -> provenance.Origin:
    """Where the run's facts came from: every record's chain, and its manifest's mode."""
    made = run.manifest.provenance if run.manifest is not None else None
    return facts_origin(list(run.facts.values()), made)


def _groups(findings: list[Finding]) -> list[ActionGroup]:
    """Findings grouped by their action, worst group first, then by action text."""
    groups: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        groups[f.action or "investigate: no action recorded for this check"].append(f)
    made = [ActionGroup(status=worst(g), action=a, findings=g) for a, g in groups.items()]
    return sorted(made, key=lambda g: (-g.status.rank, g.action))
