"""`bringup report RUN_DIR [--baseline OLD_RUN] [--format ...] [--out DIR]`.

Reads a run directory only (never probes) and writes HTML, Markdown, JUnit or JSON.
What only the whole run shows is judged here by bringup/checks (completeness, stragglers,
the baseline comparison), then bringup/report shows it all: `build_report`, which the
exporter uses too.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bringup.commands import complete
from bringup.commands.common import JsonOpt, LimitOpt, ProfileOpt, QuietOpt, fail, print_envelope

if TYPE_CHECKING:
    from bringup import profile as profile_mod
    from bringup.baseline import CoverageRow
    from bringup.checks.identity import Mark
    from bringup.facts import NodeFacts, ProbeRecord
    from bringup.findings import Finding
    from bringup.fleet.tally import Tally
    from bringup.measurements import NodeMeasurements
    from bringup.report.figures import Figures
    from bringup.report.model import Report
    from bringup.report.rundata import RunData
    from bringup.rundir import Manifest, RunDir

FORMATS = ("html", "md", "junit", "json")
DEFAULT_FORMATS = ("html", "md")
FILE_NAMES = {
    "html": "report.html",
    "md": "report.md",
    "junit": "report.junit.xml",
    "json": "report.json",
}


def parse_formats(values: list[str] | None) -> list[str]:
    """`--format html --format md`, `--format html,md` or `--format all`, in FORMATS order."""
    chosen: set[str] = set()
    for value in values or list(DEFAULT_FORMATS):
        for part in value.split(","):
            name = part.strip().lower()
            if name == "all":
                chosen.update(FORMATS)
            elif name in FORMATS:
                chosen.add(name)
            elif name:
                fail(f"--format {name!r}: choose from {', '.join(FORMATS)} or all")
    return [f for f in FORMATS if f in chosen]


def resolve_profile(
    name: str | None, run: RunData, digest: FactsDigest | None = None
) -> profile_mod.Profile | None:
    """--profile when given (bad: exit 2), else (auto) the run's own profile when it still
    loads; a run judged with --profile auto: the profile of its nodes' GPU, when they share
    one (`digest`: each node's, taken as its facts were read)."""
    from bringup import profile as profile_mod

    if name is not None and name != profile_mod.AUTO:
        try:
            return profile_mod.load(name)
        except profile_mod.ProfileError as exc:
            fail(str(exc))
    recorded = run.manifest.profile if run.manifest else None
    if recorded is None or recorded == profile_mod.AUTO:
        return _detected_profile(run, digest)
    try:
        return profile_mod.load(recorded)
    except profile_mod.ProfileError as exc:
        run.notes.append(f"the run's profile cannot be loaded ({exc}): default tolerances used")
        return None


def _detected_profile(
    run: RunData, digest: FactsDigest | None = None
) -> profile_mod.Profile | None:
    """The profile of the run's GPUs when every node with a known GPU has the same one."""
    from bringup.checks.auto import judge_node_model

    if digest is not None:
        models = [digest.models.get(node) for node in run.facts]
    else:
        models = [judge_node_model(node)[0] for node in run.facts.values()]
    chosen = {p.name: p for p in models if p is not None}
    if len(chosen) == 1:
        return next(iter(chosen.values()))
    why = "nodes of several GPU profiles" if chosen else "no profile fits the run's GPUs"
    run.notes.append(f"{why}: default tolerances used (give --profile NAME)")
    return None


def restrict(run: RunData, limit: str) -> set[str]:
    """Keep the nodes an Ansible --limit pattern selects (and the findings of the whole
    run), say so in the report, and return the nodes kept.

    It narrows what is shown, never what is judged: the run's completeness (lost verdicts,
    a status not complete, missing probes) is judged on the whole run before
    (`judge_run`), and the manifest keeps the whole run's exit code.
    """
    from bringup.commands.common import select_nodes

    every = run.nodes
    kept = set(select_nodes(every, limit, f"the nodes of {run.path}"))
    run.facts = {n: f for n, f in run.facts.items() if n in kept}
    run.facts_problems = {n: p for n, p in run.facts_problems.items() if n in kept}
    if isinstance(run.findings, list):
        run.findings = [f for f in run.findings if shown_for(f, kept)]
    elif run.findings is not None:
        run.findings = run.findings.filtered(lambda f: shown_for(f, kept))
    if run.manifest is not None:
        nodes = [n for n in run.manifest.nodes if n in kept]
        run.manifest = replace(run.manifest, nodes=nodes)
    run.notes.append(f"--limit {limit!r}: {len(kept)} of the run's {len(every)} nodes")
    return kept


def shown_for(f: Finding, kept: set[str]) -> bool:
    """Whether a limited view keeps a finding: the run-wide ones, and its nodes'."""
    return not f.node or bool(set(f.node.split(",")) & kept)


def drop_recorded_whole_run(run: RunData) -> None:
    """Leave out what `check` recorded of the whole run (checks/whole_run.py): the report
    judges it again from the facts, by the same functions."""
    from bringup.checks.whole_run import is_whole_run

    if isinstance(run.findings, list):
        run.findings = [f for f in run.findings if not is_whole_run(f.check)]
    elif run.findings is not None and any(is_whole_run(c) for c in run.findings.checks):
        # Read back and spooled anew: `make_report` leaves them out as it reads instead.
        run.findings = run.findings.filtered(lambda f: not is_whole_run(f.check))


def judge_run(run: RunData) -> list[Finding]:
    """What the recorded run lacks (checks/completeness.py), and for a handover bundle each
    of its parts judged as a run (checks/bundle.py) and what a handover must hold that it
    lacks (checks/coverage.py): before any --limit narrows it."""
    from bringup.checks.bundle import judge_bundle
    from bringup.checks.completeness import judge_completeness
    from bringup.checks.coverage import judge_coverage

    judged = judge_completeness(run)
    if run.parts is not None:
        judged = judge_bundle(run.parts, run.bundle_changes, judged)
        judged += judge_coverage(coverage_of(run) or [])
    return judged


def coverage_of(run: RunData) -> list[CoverageRow] | None:
    """A bundle's coverage table (checks/coverage.py); None for a run that is no bundle."""
    from bringup import suite as suite_mod
    from bringup.checks.coverage import bundle_coverage

    if run.parts is None:
        return None
    try:
        acceptance = [step.name for step in suite_mod.load("acceptance").probes]
    except (suite_mod.SuiteError, OSError, ValueError):
        acceptance = []  # no suite to hold the parts to: the row says "not run"
    return bundle_coverage(run.parts, run.nodes, acceptance)


def build_report(
    run: RunData,
    prof: profile_mod.Profile | None,
    baseline: RunData | None = None,
    generated_at: str | None = None,
    complete: list[Finding] | None = None,
    digest: FactsDigest | None = None,
    baseline_digest: FactsDigest | None = None,
) -> Report:
    """Judge what the run as a whole shows, then build its report from facts and findings.

    `complete`: the run's completeness findings, judged already on the whole run (a view
    narrowed by --limit); None: judged here. `digest`, `baseline_digest`: what was taken
    of each node's facts as they were read (the run's facts are then its records' headers
    only); None: the facts are whole and measured here."""
    from bringup.checks.catalog import CHECKS
    from bringup.checks.identity import CHECK as IDENTITY
    from bringup.checks.identity import judge_identity
    from bringup.checks.regression import Known, judge_override_changes, judge_regressions
    from bringup.checks.whole_run import judge_whole_run
    from bringup.measurements import measure_fleet, tolerances
    from bringup.report.figures import Figures
    from bringup.report.model import build

    limits = tolerances(prof)
    if digest is not None:
        now = digest.measurements(run)
    else:
        now = Figures.held(measure_fleet(run.facts, prof))
    # What `check` recorded of the whole run is judged again here, by the same function.
    drop_recorded_whole_run(run)
    lacking = judge_run(run) if complete is None else list(complete)
    if IDENTITY not in checks_of(run):
        # One machine, one node: judged here too for a run whose check did not (a run of
        # an older bringup); a run that judged it holds its findings already.
        if digest is not None:
            lacking += digest.marks.judge(list(run.facts))
        else:
            lacking += judge_identity(list(run.facts.values()))
    judged = judge_whole_run(run, prof, now.metrics_only(), lacking)
    then = None
    if baseline is not None:
        # A comparison reads every node's full figures, of both runs.
        if baseline_digest is not None:
            then = baseline_digest.measurements(baseline).every()
        else:
            then = measure_fleet(baseline.facts, prof)
        known_now = Known(run.nodes, run.facts_problems)
        known_then = Known(baseline.nodes, baseline.facts_problems)
        judged += judge_regressions(
            now.every(),
            then,
            limits,
            baseline.path.name,
            known_now=known_now,
            known_then=known_then,
        )
        if run.manifest is not None and baseline.manifest is not None:
            overrides = (run.manifest.overrides, baseline.manifest.overrides)
            judged += judge_override_changes(*overrides, baseline.path.name)
    order = [check.name for check in CHECKS]
    coverage = coverage_of(run)
    return build(
        run,
        prof,
        judged,
        order,
        baseline,
        generated_at,
        measurements=now,
        coverage=coverage,
        baseline_measurements=then,
    )


def checks_of(run: RunData) -> set[str]:
    """The checks the run's findings name."""
    if isinstance(run.findings, list):
        return {f.check for f in run.findings}
    return set(run.findings.checks) if run.findings is not None else set()


def dropped(f: Finding) -> bool:
    """A finding of findings.jsonl the report leaves out as it reads: what `check`
    recorded of the whole run, judged again here (drop_recorded_whole_run)."""
    from bringup.checks.whole_run import is_whole_run

    return is_whole_run(f.check)


class FactsDigest:
    """What the report takes from each node's whole facts as the node is read (rundata's
    `keep`): its figures (spooled to disk: report/figures.py), its identity marks and,
    under --profile auto, its GPU's profile. The run then holds only its records' headers
    (NodeFacts.headers): a report of ten thousand nodes never holds every node's facts, nor
    every node's figures, at once (docs/scale.md).

    `peak_flops_per_s`: the profile's, for the burn-in MFU; under --profile auto it is
    known only once every node is read, and the nodes that trained are measured again
    (`remeasure`)."""

    def __init__(self, peak_flops_per_s: float | None, auto: bool) -> None:
        from bringup.report.compact import Compact
        from bringup.report.figures import Figures

        self.peak = peak_flops_per_s
        self.auto = auto
        self.figures = Figures.spooled()
        self.marks = SpooledMarks()
        self.models: dict[str, profile_mod.Profile | None] = {}
        self._compact = Compact()  # the records kept of each node: texts shared
        # Equal records, and equal sets of them, held once: a fleet of healthy nodes
        # keeps one record per probe and one set of them.
        self._records: dict[tuple[object, ...], ProbeRecord] = {}
        self._sets: dict[tuple[int, ...], dict[str, ProbeRecord]] = {}

    def __call__(self, node: NodeFacts) -> NodeFacts:
        from bringup.checks.auto import judge_node_model
        from bringup.checks.identity import node_marks
        from bringup.facts import decoded_once
        from bringup.measurements import measure

        with decoded_once():  # three readers of the node's records: each validated once
            self.figures.add(measure(node, self.peak))
            self.marks.add(node.node, node_marks(node))
            if self.auto:
                self.models[node.node] = judge_node_model(node)[0]
        return self._essentials(node)

    def _essentials(self, node: NodeFacts) -> NodeFacts:
        """The node with each record cut to what the rules over the whole run read of it
        (checks/completeness.py: which probes it has, which ran and how they ended, a
        burn-in's device; bringup/provenance.py: where it came from). The times are taken
        before, as the node is read (rundata.measured); the rest is in the figures."""
        from bringup.facts import ProbeRecord

        probes: dict[str, ProbeRecord] = {}
        for name, record in node.probes.items():
            device = None
            if record.facts is not None:
                kind = record.facts.get("device_kind", _ABSENT)
                device = {} if kind is _ABSENT or not _scalar(kind) else {"device_kind": kind}
            chain = tuple((s.kind, s.of, s.sha256) for s in record.provenance)
            key = (name, record.probe, record.ok, record.error, repr(device), chain)
            kept = self._records.get(key)
            if kept is None:
                kept = self._records[key] = self._compact(
                    ProbeRecord(
                        probe=record.probe,
                        ok=record.ok,
                        error=record.error,
                        facts=device,
                        provenance=list(record.provenance),
                    )
                )
            probes[name] = kept
        shared = self._sets.setdefault(tuple(id(r) for r in probes.values()), probes)
        version = self._compact(node.bringup_version)
        return replace(node, probes=shared, bringup_version=version)

    def measurements(self, run: RunData) -> Figures:
        """The figures of the run's nodes (as narrowed by --limit)."""
        return self.figures.only(run.facts)

    def remeasure(self, run_dir: Path, prof: profile_mod.Profile | None) -> None:
        """Measure again, with the profile's peak, the nodes whose burn-in the MFU reads."""
        from bringup.measurements import measure
        from bringup.rundir import iter_facts

        peak = prof.gpu.bf16_dense_tflops * 1e12 if prof is not None else None
        if peak == self.peak or not self.figures.trained:
            return
        measured = set(self.figures.names)
        for entry in iter_facts(run_dir):
            node = entry.facts
            if node is not None and node.node in measured and "burnin" in node.probes:
                self.figures.add(measure(node, peak))
        self.peak = peak


_ABSENT = object()


def _scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


class SpooledMarks:
    """Each node's identity marks (checks/identity.py: its GPUs' serials and UUIDs, its
    system serial and machine id; 18 of a B300 node) on disk, as its figures are, and in
    memory a hash of each mark beside its node's number: at ten thousand nodes the marks
    were 25 MB, the hashes are 3. Judging reads back only the nodes that share a hash
    with another (those that share a value, and any whose hashes merely collide), and
    judges them as judge_marks judges the whole fleet: a node shares a value only with
    nodes that share its hash."""

    def __init__(self) -> None:
        from array import array

        from bringup.report.figures import Spool

        self._spool = Spool()
        self._names: list[str] = []
        self._hashes = array("q")  # each mark's hash((kind, value))
        self._owners = array("q")  # its node's number in _names

    def add(self, node: str, marks: list[Mark]) -> None:
        self._spool.put(node, marks)
        number = len(self._names)
        self._names.append(node)
        for mark in marks:
            self._hashes.append(hash((mark.kind, mark.value)))
            self._owners.append(number)

    def judge(self, nodes: list[str]) -> list[Finding]:
        """judge_marks of these nodes' marks (in this order)."""
        from bringup.checks.identity import judge_marks

        shown = set(nodes)
        hashes, owners, names = self._hashes, self._owners, self._names
        marks = [i for i in range(len(hashes)) if names[owners[i]] in shown]
        marks.sort(key=hashes.__getitem__)
        sharing: set[str] = set()
        start = 0
        for end in range(1, len(marks) + 1):
            if end < len(marks) and hashes[marks[end]] == hashes[marks[start]]:
                continue
            group = {names[owners[i]] for i in marks[start:end]}
            if len(group) > 1:
                sharing |= group
            start = end
        held: dict[str, list[Mark]] = {}
        for node in nodes:
            if node in sharing:
                back = self._spool.get(node)
                assert isinstance(back, list)  # written by add() alone
                held[node] = back
        return judge_marks(held)


class WholeRunDigest(FactsDigest):
    """What judge_whole takes of each node as its facts are read: its metrics alone (the
    stragglers compare nothing else) and, under --profile auto, its GPU's profile; then
    what the rules over the whole run read of its records, as the report keeps them
    (`_essentials`: equal records held once). Not every record's headers: at ten
    thousand nodes those were a second copy of about 60 MB at the end of `check`."""

    def __init__(self, peak_flops_per_s: float | None, auto: bool) -> None:
        super().__init__(peak_flops_per_s, auto)
        self.metrics: dict[str, dict[str, float]] = {}
        # What `take` kept of each node (its records' essentials) and its records' span.
        self.taken: dict[str, NodeFacts] = {}
        self.spans: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()

    @classmethod
    def of_run(cls, manifest: Manifest) -> WholeRunDigest:
        """The digest judge_whole takes a run's nodes with."""
        return cls(*_judged_by(manifest))

    def take(self, node: NodeFacts) -> None:
        """What a reader of the node's facts file keeps of it, taken from the facts the
        run judged it on as it ends (fleet.run's `digest`, in every node's thread): its
        file holds exactly those (a number that is not finite was read as null from the
        node's line, as the file writes it: fleet/transport.py), so the end of the check
        reads no facts file again (its end 0.5 ms a node less at ten thousand, the nodes'
        threads 0.4 ms more for this: docs/scale.md)."""
        from bringup.report.rundata import measured

        # Measured outside the lock (every node's thread ends here); kept under it.
        metrics, model = self._measure(node)
        span = measured(node)
        with self._lock:
            self.metrics[node.node] = metrics
            if self.auto:
                self.models[node.node] = model
            if span is not None:
                self.spans[node.node] = span
            self.taken[node.node] = self._essentials(node)

    def took(
        self, manifest: Manifest
    ) -> tuple[dict[str, NodeFacts], dict[str, tuple[str, str]]] | None:
        """Every node of the manifest as `take` kept it (in file-name order, as a reader
        lists the files), with its span; None when one of them was not taken (a run that
        did not end every node through fleet.run) or this digest's profile is not the
        run's now: then the files are read."""
        from bringup.rundir import file_name

        if set(self.taken) != set(manifest.nodes) or (self.peak, self.auto) != _judged_by(manifest):
            return None
        order = sorted(self.taken, key=file_name)
        return {name: self.taken[name] for name in order}, dict(self.spans)

    def __call__(self, node: NodeFacts) -> NodeFacts:
        self.metrics[node.node], model = self._measure(node)
        if self.auto:
            self.models[node.node] = model
        return self._essentials(node)

    def _measure(self, node: NodeFacts) -> tuple[dict[str, float], profile_mod.Profile | None]:
        """The node's metrics and, under --profile auto, its GPU's profile."""
        from bringup.checks.auto import judge_node_model
        from bringup.measurements import node_metrics

        model = judge_node_model(node)[0] if self.auto else None
        return node_metrics(node, self.peak), model

    def metrics_of(self, run: RunData) -> list[NodeMeasurements]:
        """The metrics of the run's nodes, in node-name order (Figures.metrics_only)."""
        from bringup.measurements import NodeMeasurements

        measured = sorted(n for n in self.metrics if n in run.facts)
        return [NodeMeasurements(node=n, metrics=self.metrics[n]) for n in measured]

    def remeasure(self, run_dir: Path, prof: profile_mod.Profile | None) -> None:
        """Measure again, with the profile's peak, the nodes whose burn-in the MFU reads."""
        from bringup.measurements import node_metrics
        from bringup.rundir import iter_facts

        peak = prof.gpu.bf16_dense_tflops * 1e12 if prof is not None else None
        if peak == self.peak:
            return
        for entry in iter_facts(run_dir):
            node = entry.facts
            if node is not None and node.node in self.metrics and "burnin" in node.probes:
                self.metrics[node.node] = node_metrics(node, peak)
        self.peak = peak


def _judged_by(manifest: Manifest) -> tuple[float | None, bool]:
    """The run's profile's peak FLOP/s and whether it is --profile auto (no peak then:
    each node's GPU's profile is taken instead)."""
    from bringup import profile as profile_mod

    named = None
    if manifest.profile is not None and manifest.profile != profile_mod.AUTO:
        with contextlib.suppress(profile_mod.ProfileError):  # resolve_profile notes it
            named = profile_mod.load(manifest.profile)
    peak = named.gpu.bf16_dense_tflops * 1e12 if named is not None else None
    return peak, named is None


def judge_whole(
    run: RunDir,
    held: list[Finding] | Tally | None = None,
    taken: WholeRunDigest | None = None,
) -> list[Finding]:
    """What only the whole run shows (its gaps against the plan, its stragglers), judged
    by the function `report` calls on the same directory afterwards, and recorded: the
    console, the exit code and the report then count the same findings.

    The facts are read as the report reads them, node by node (WholeRunDigest: each
    node's metrics taken, then only its records' headers kept): at the end of a check of
    ten thousand nodes, never every node's facts at once (docs/scale.md). `held`: the
    findings the run wrote, as the caller holds them: taken for findings.jsonl's when the
    file holds as many lines (RunDir.findings_written), not read back (a second copy of
    290,000 findings at 10,000 nodes); else the file is read, as the report reads it.
    `check` gives its Tally (fleet/tally.py): what those rules read of the findings, the
    nodes that have any and the bad ones, without every finding; and `taken`, the digest
    its run gave every node's facts as it judged it (WholeRunDigest.take): then no facts
    file is read again, where every node of the manifest was taken with the run's
    profile."""
    from bringup.checks.whole_run import judge_whole_run
    from bringup.report.rundata import RunDataError, load, planned_probes

    # Judged as the run will stand once closed: its manifest as this process holds it (a
    # burn-in sets its profile in memory), its status final, its exit code these
    # findings' own (not yet written).
    status = "complete" if run.manifest.status == "running" else run.manifest.status
    manifest = replace(run.manifest, status=status, exit_code=None)
    given = taken.took(manifest) if taken is not None else None
    digest = taken if taken is not None and given is not None else WholeRunDigest.of_run(manifest)
    if held is not None:
        # What this run wrote, counted as it wrote it (a 65 MB file is not read to count
        # its lines at ten thousand nodes); a reopened run's file counted from the file.
        written = run.findings_written()
        if written is None:
            written = findings_lines(run.path, len(manifest.nodes))
        if written != len(held):
            held = None  # not what the file holds: read it
    try:
        data = load(run.path, digest, held, given=given)
    except RunDataError:
        return []  # nothing written at all: nothing for a report to read either
    data.manifest = manifest
    data.manifest_problem = None
    data.planned, data.plan_problem = planned_probes(data.manifest)
    prof = resolve_profile(None, data, digest)
    digest.remeasure(run.path, prof)  # --profile auto: the nodes' own GPU's peak
    found = judge_whole_run(data, prof, digest.metrics_of(data), judge_run(data))
    run.add_findings(found)
    return found


def findings_lines(run_dir: Path, nodes: int) -> int | None:
    """How many lines findings.jsonl holds (a blank one not counted); None: it cannot be
    read within the caps the report reads it with (a run of `nodes` nodes), which then
    says why."""
    from bringup.files import InputError, read_lines_in
    from bringup.report.rundata import FINDINGS_LINE_BYTES, findings_cap

    try:
        cap = findings_cap(nodes)
        lines = read_lines_in(run_dir, "findings.jsonl", "findings", cap, FINDINGS_LINE_BYTES)
        return sum(1 for line in lines if line.strip())
    except InputError:
        return None


def _refuse_incomplete_burnin(path: Path) -> None:
    """A --baseline whose burn-in baseline lacks figures is bad input (exit 2, one line):
    compared against nulls, a later run would look neither better nor worse."""
    from bringup import baseline as baselines

    has_burnin = (path / "baseline.json").exists()
    if baselines.is_bundle(path):
        try:
            has_burnin = any(p.kind == "burnin" for p in baselines.load_bundle(path).parts)
        except baselines.BundleError:
            return  # the report says what is wrong with the bundle
    if not has_burnin:
        return  # a check run: compared by its facts
    try:
        baselines.load_complete(path)
    except baselines.BaselineError as exc:
        fail(f"--baseline {exc}")


def make_report(
    run_dir: Path, baseline_dir: Path | None, profile_name: str | None, limit: str | None = None
) -> tuple[Report, profile_mod.Profile | None]:
    """Read the run (and baseline) directories and build the report; bad input exits 2."""
    from bringup.report.rundata import RunDataError, load

    if baseline_dir is not None and baseline_dir.is_dir():
        _refuse_incomplete_burnin(baseline_dir)
    try:
        digest = _digest_for(run_dir, profile_name)
        baseline_digest = _digest_for(baseline_dir, profile_name) if baseline_dir else None
        run = load(run_dir, digest, skip=dropped)
        baseline = load(baseline_dir, baseline_digest) if baseline_dir is not None else None
    except RunDataError as exc:
        fail(str(exc))
    except OSError as exc:
        # The findings and figures are spooled to an anonymous temporary file as read
        # (report/findingstore.py, report/figures.py): a full or missing temporary folder.
        fail(f"cannot spool the report's data to a temporary file ({exc.strerror}): set TMPDIR")
    drop_recorded_whole_run(run)  # judged again below, never taken from the file
    complete = None
    if limit:
        whole = judge_run(run)  # judged on all the run recorded, then narrowed
        kept = restrict(run, limit)
        complete = [f for f in whole if shown_for(f, kept)]
        if baseline is not None:
            restrict(baseline, limit)
    prof = resolve_profile(profile_name, run, digest)
    for each, folder in ((digest, run_dir), (baseline_digest, baseline_dir)):
        if each is not None and folder is not None:
            each.remeasure(folder, prof)
    try:
        built = build_report(
            run, prof, baseline, complete=complete, digest=digest, baseline_digest=baseline_digest
        )
    except OSError as exc:
        fail(f"cannot read the report's data back from its temporary file ({exc.strerror})")
    return built, prof


def _digest_for(run_dir: Path | None, profile_name: str | None) -> FactsDigest | None:
    """How the report reads a run's facts: node by node into a FactsDigest, with the
    profile's peak when the run (or --profile) names one. None for a handover bundle: its
    parts' records are merged per node first (rundata._bundle), and it is read whole."""
    from bringup import profile as profile_mod
    from bringup.baseline import is_bundle
    from bringup.report.rundata import read_manifest

    if run_dir is None or not run_dir.is_dir() or is_bundle(run_dir):
        return None
    name = profile_name
    if name is None or name == profile_mod.AUTO:
        manifest, _ = read_manifest(run_dir)
        name = manifest.profile if manifest is not None else None
    prof = None
    if name is not None and name != profile_mod.AUTO:
        with contextlib.suppress(profile_mod.ProfileError):
            prof = profile_mod.load(name)  # a bad one: resolve_profile says so
    peak = prof.gpu.bf16_dense_tflops * 1e12 if prof is not None else None
    return FactsDigest(peak, auto=prof is None)


def write(
    report: Report, prof: profile_mod.Profile | None, formats: list[str], out: Path
) -> list[Path]:
    """Write each format's file into `out` (bringup/files.py: a random temporary name,
    then rename; no symlink at `out` or at a file's name is followed)."""
    # matplotlib and the templates load here, not at start-up: `bringup --help` stays fast.
    from bringup.files import make_dir, write_atomic
    from bringup.report import junit, render

    try:
        make_dir(out)
    except OSError as exc:
        fail(f"cannot create {out}: {exc.strerror}")
    # Each node's part of report.md, JUnit and report.json, made in one pass over the
    # nodes (report/nodepass.py), then each file written in turn around its parts.
    try:
        parts = render.node_parts(report, formats)
    except OSError as exc:
        fail(f"cannot spool the report's parts to a temporary file ({exc.strerror}): set TMPDIR")
    texts = {
        "html": lambda: render.html_pieces(report, render.make_plots(report, prof)),
        "md": lambda: render.markdown_pieces(report, parts),
        "junit": lambda: junit.junit_pieces(report, parts),
        "json": lambda: render.json_pieces(report, parts),
    }
    written = []
    try:
        for name in formats:
            target = out / FILE_NAMES[name]
            try:
                write_atomic(target, texts[name]())
            except OSError as exc:
                fail(f"cannot write {target}: {exc.strerror}")
            written.append(target)
    finally:
        if parts is not None:
            parts.close()
    return written


def report(
    run_dir: Annotated[Path, typer.Argument(help="The run directory to report on.")],
    baseline: Annotated[
        Path | None,
        typer.Option("--baseline", help="An earlier run or handover bundle to compare with."),
    ] = None,
    formats: Annotated[
        list[str] | None,
        typer.Option(
            "--format",
            help="html, md, junit, json or all (repeatable or comma-separated; "
            "default html and md).",
            autocompletion=complete.formats,
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Where to write (default RUN_DIR).")
    ] = None,
    profile_name: ProfileOpt = "auto",
    limit: LimitOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Write report.html / report.md / JUnit / JSON from a run directory (never probes).

    --profile (tolerances): auto takes the run's own, else its GPUs'. --limit reports on
    some of the run's nodes: it needs --out, so the run's whole report is not replaced."""

    chosen = parse_formats(formats)
    if limit and out is None:
        fail("--limit reports on part of the run: give --out DIR for it")
    _not_into_a_bundle(run_dir, out or run_dir)
    built, prof = make_report(run_dir, baseline, profile_name, limit)
    # What the report holds now (its summaries, the findings the verdict lists) is held
    # while the files are written: the garbage collector need not walk it again at each
    # of its collections (a tenth of the writing's CPU, docs/scale.md). Let go after: a
    # process that goes on (tests, the exporter's) collects as before.
    gc.freeze()
    try:
        written = write(built, prof, chosen, out or run_dir)
    finally:
        gc.unfreeze()
    if as_json:
        data = {"summary": summary(built), "written": [str(p) for p in written]}
        verdict = built.verdict
        made = verdict.origin_json()
        print_envelope(built.findings, accepted=verdict.accepted, provenance=made, data=data)
    else:
        lines = verdict_lines(built)
        for line in lines[:1] if quiet else lines:
            print(line)
        for path in written if not quiet else []:
            print(f"wrote {path}")
    # The exit status follows the verdict: 0 only for ACCEPTED (docs/json.md).
    raise typer.Exit(0 if built.verdict.accepted else 1)


def _not_into_a_bundle(run_dir: Path, out: Path) -> None:
    """A handover bundle's reports are part of its evidence (its manifest.json records
    their hashes): a report written over them would break the bundle; one elsewhere not."""
    from bringup.baseline import is_bundle

    with contextlib.suppress(OSError):
        if is_bundle(run_dir) and out.exists() and out.samefile(run_dir):
            fail(
                f"{run_dir} is a handover bundle: its reports are recorded in its "
                "manifest.json; write this one elsewhere with --out DIR"
            )


def summary(built: Report) -> dict[str, Any]:
    """What --json says of the report: the verdict, the node x subject matrix and the fleet's
    figures; the per-node measurements stay in report.json (`--format json`)."""
    verdict = built.verdict.model_dump(mode="json", exclude={"actions", "warnings"})
    return {
        "title": built.title,
        "generated_at": built.generated_at,
        "run": built.run.model_dump(mode="json"),
        "verdict": verdict,
        "subjects": built.subjects,
        "matrix": {
            node: {k: v.status.value for k, v in row.items()} for node, row in built.matrix.items()
        },
        "fleet": [m.model_dump(mode="json") for m in built.fleet],
        "baseline": built.baseline.model_dump(mode="json") if built.baseline else None,
    }


def verdict_lines(built: Report, skip: tuple[str, ...] = ()) -> list[str]:
    """The verdict with its counts, then each piece the run lacks (its report.* findings).

    Plain text: node names and messages go through escape.one_line, so nothing a node
    sent can act on the terminal.
    """
    from bringup.report.escape import one_line
    from bringup.report.findingstore import in_report_order

    counts = ", ".join(f"{n} {s}" for s, n in built.verdict.counts.items())
    lines = [one_line(f"{built.verdict.line}: {counts or 'no findings'}")]
    # The report.* findings are held (`noted`): the others are not read back for this.
    for f in in_report_order(built.findings).noted:
        if f.check.startswith("report.") and f.check not in skip:
            where = f" ({f.node})" if f.node else ""
            lines.append("  " + one_line(f"{f.status.value} {f.check}{where}: {f.message}"))
    return lines


def coverage_lines(built: Report) -> list[str]:
    """A handover's coverage table as plain lines: each measurement, measured (part,
    time) or not run with the command that adds it (bringup/checks/coverage.py)."""
    from bringup.report.escape import one_line

    if built.coverage is None:
        return []
    lines = ["what this handover holds:"]
    width = max(len(row.item) for row in built.coverage)
    for row in built.coverage:
        where = f" ({row.part}, {row.at or 'time not recorded'})" if row.part else ""
        add = f"; to add it: {row.command}" if row.command else ""
        lines.append(f"  {one_line(row.item):<{width}}  {one_line(row.shown + where + add)}")
    return lines
