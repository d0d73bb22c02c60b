"""What a run directory holds, read tolerantly: a crashed run still makes a report.

Nothing here judges: every piece that is absent or unreadable is recorded as such (why
the manifest or findings.jsonl could not be read, which findings lines do not parse, which
facts files fail), and bringup/checks/completeness.py turns each into an ERROR finding, so
the report can say exactly what is missing instead of failing or, worse, looking complete.

A handover bundle (bringup/baseline.py) reads as one run: its parts' facts merged per
node (a later part's record of a probe replaces an earlier one's), their findings one
after the other, and the plan of its acceptance check. Each part is kept as read too
(`parts`), to be judged as the run it is, with where the bundle differs from its manifest.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pydantic import ValidationError

from bringup import baseline as baseline_mod
from bringup import suite as suite_mod
from bringup.facts import NodeFacts
from bringup.files import MAX_BYTES, InputError, is_link, read_bytes_in, read_lines_in
from bringup.findings import Finding, read_finding
from bringup.provenance import MANIFEST, Provenance, manifest_sha256
from bringup.report.compact import Compact
from bringup.report.findingstore import FindingsSpool, noted
from bringup.rundir import Manifest, iter_facts, parse_manifest

# What a reader keeps of each node's facts as they are read (report's FactsDigest): the
# whole run is never held at once. None: every node's facts kept as read.
Keep = Callable[[NodeFacts], NodeFacts]


class Tallied(Protocol):
    """Findings as a check tallies them (fleet/tally.py), which the rules over the whole
    run read (checks/completeness.py): every `node` field, those at WARN or worse."""

    @property
    def nodes(self) -> Collection[str]: ...
    @property
    def noted(self) -> Sequence[Finding]: ...


class RunDataError(Exception):
    """The directory is no run directory at all; the message is one line."""


@dataclass
class Part:
    """One part of a handover bundle: the run directory as read, or why it cannot be."""

    kind: str
    path: str  # relative to the bundle
    run: RunData | None
    problem: str | None = None  # why `run` is None


@dataclass
class RunData:
    """Manifest, facts and findings of one run, with what could not be read and why."""

    path: Path
    manifest: Manifest | None
    facts: dict[str, NodeFacts]  # node -> its facts file
    # findings.jsonl's, spooled by node (report/findingstore.py); a list where the run's
    # findings are held already (a bundle's parts one after the other); what `check`
    # tallied of them at its end (fleet/tally.py: the nodes, the bad ones). None:
    # findings.jsonl absent or unreadable.
    findings: FindingsSpool | list[Finding] | Tallied | None
    manifest_problem: str | None = None  # why `manifest` is None
    findings_problem: str | None = None  # why `findings` is None
    unreadable_lines: list[int] = field(default_factory=list)  # findings.jsonl, from 1
    facts_problems: dict[str, str] = field(default_factory=dict)  # node -> its file's fault
    # node -> its records' earliest and latest start, taken before `keep` (which may
    # leave the times out of what it keeps of a node).
    measured: dict[str, tuple[str, str]] = field(default_factory=dict)
    planned: list[str] | None = None  # the probes of the run's suite; None: not known
    plan_problem: str | None = None  # why `planned` is None (with a manifest)
    notes: list[str] = field(default_factory=list)  # said in the report, not findings
    manifest_sha256: str | None = None  # of manifest.json as read: the string both sides quote
    parts_sha256: dict[str, str] = field(default_factory=dict)  # a bundle: part -> its manifest's
    # A bundle: each part read as the run it is (judged as one: checks/bundle.py), and
    # where the bundle no longer matches what its manifest.json records. None: not a bundle.
    parts: list[Part] | None = None
    bundle_changes: list[baseline_mod.BundleChange] = field(default_factory=list)

    @property
    def nodes(self) -> list[str]:
        """Every node the run knows of (manifest, facts or findings), sorted by name.

        Sorted, not in manifest order: nodes are appended as they answer, so the order of
        a fan-out run differs between two runs of the same fleet.
        """
        names = set(self.facts) | set(self.facts_problems)
        if self.manifest:
            names.update(self.manifest.nodes)
        names.update(n for n in written_nodes(self.findings) if n and "," not in n)
        return sorted(names)


def written_nodes(findings: FindingsSpool | list[Finding] | Tallied | None) -> set[str]:
    """The `node` field of every finding ("" for the run's own, "a,b" for several)."""
    if findings is None:
        return set()
    if isinstance(findings, list):
        return {f.node for f in findings}
    return set(findings.nodes)  # spooled here, or tallied by `check` (fleet/tally.py)


def load(
    path: Path,
    keep: Keep | None = None,
    findings: list[Finding] | Tallied | None = None,
    skip: Callable[[Finding], bool] | None = None,
    given: tuple[dict[str, NodeFacts], dict[str, tuple[str, str]]] | None = None,
) -> RunData:
    """Read a run directory (or a bundle); RunDataError when it holds neither manifest,
    facts nor findings.

    `keep`: each node's facts pass through it as they are read, and what it returns is
    kept (a bundle's nodes once their parts' records are merged). `findings`: those of
    findings.jsonl as the run writing it holds them, or tallies them (the end of a
    check): not read back.
    `skip`: findings.jsonl's findings left out as they are read (what the report judges
    again itself: never spooled to be dropped after). `given`: every node's facts as
    `keep` kept them, and their spans, taken as the run that writes the directory judged
    each node (the end of a check: commands/report.py, WholeRunDigest.take): no facts
    file is read."""
    if not path.is_dir():
        raise RunDataError(f"{path}: not a directory")
    if baseline_mod.is_bundle(path):
        run = _bundle(path)
        run.measured = {n: span for n, f in run.facts.items() if (span := measured(f))}
        if keep is not None:
            run.facts = {name: keep(facts) for name, facts in run.facts.items()}
        return run
    if not any(os.path.lexists(path / n) for n in ("manifest.json", "facts", "findings.jsonl")):
        raise RunDataError(
            f"{path}: not a run directory (no manifest.json, facts/ or findings.jsonl)"
        )
    run = RunData(path, None, {}, None)
    run.manifest, run.manifest_problem = read_manifest(path)
    if run.manifest is not None:
        with contextlib.suppress(OSError):  # read a moment ago; else its hash is not shown
            run.manifest_sha256 = manifest_sha256(path)
    if given is None:
        run.facts, run.facts_problems, run.measured = _facts(path, keep)
    else:
        run.facts, run.measured = given
    if findings is None:
        known = {*run.facts, *run.facts_problems, *(run.manifest.nodes if run.manifest else [])}
        run.findings, run.findings_problem, run.unreadable_lines = _findings(path, len(known), skip)
    else:
        run.findings = findings
    if run.manifest is not None:
        run.planned, run.plan_problem = planned_probes(run.manifest)
    return run


def _bundle(path: Path) -> RunData:
    """The parts of a handover bundle, read as one run."""
    try:
        bundle = baseline_mod.load_bundle(path)
    except baseline_mod.BundleError as exc:
        raise RunDataError(str(exc)) from None
    manifest = Manifest(
        version=bundle.version,
        command="handover",
        profile=bundle.profile,
        suite=bundle.suite,
        started_at=bundle.started_at,
        ended_at=bundle.ended_at,
        status=bundle.status,
        exit_code=bundle.exit_code,
        nodes=bundle.nodes,
    )
    run = RunData(path, manifest, {}, [], parts=[])
    run.bundle_changes = baseline_mod.bundle_changes(path, bundle, everything=False)
    made: list[Provenance] = []
    for part in bundle.parts:
        assert run.parts is not None
        try:
            piece = load(path / part.path)
        except RunDataError as exc:
            run.parts.append(Part(part.kind, part.path, None, str(exc)))
            continue
        run.parts.append(Part(part.kind, part.path, piece))
        if piece.manifest_sha256 is not None:
            run.parts_sha256[part.path] = piece.manifest_sha256
        if piece.manifest is not None and piece.manifest.provenance is not None:
            made.append(piece.manifest.provenance)
        if piece.manifest is not None:
            manifest.overrides.update(piece.manifest.overrides)
        for name, facts in piece.facts.items():
            mine = run.facts.setdefault(name, copy.deepcopy(facts))
            mine.probes.update(facts.probes)
        for name, why in piece.facts_problems.items():
            run.facts_problems[name] = f"{part.path}: {why}"
        # A part's missing pieces (no findings, lines that do not parse, no manifest) are
        # its own completeness findings, judged part by part: not lost in the merge.
        assert isinstance(run.findings, list)  # a bundle's: held, its parts' in turn
        run.findings.extend(piece.findings or [])
        if part.kind in ("check", "snapshot") and run.planned is None:
            run.planned, run.plan_problem = piece.planned, piece.plan_problem
        manifest.nodes = sorted(
            {*manifest.nodes, *(piece.manifest.nodes if piece.manifest else [])}
        )
    if run.planned is None and run.plan_problem is None:
        run.plan_problem = "the bundle holds no acceptance check"
    # What the verdict must say of the parts: demo data or a replay in any of them.
    manifest.provenance = next(
        (m for mode in ("demo", "replay") for m in made if m.mode == mode),
        made[0] if made else None,
    )
    return run


def read_manifest(path: Path) -> tuple[Manifest | None, str | None]:
    """The run's manifest, or None and why; never raises."""
    if not os.path.lexists(path / MANIFEST):
        return None, "manifest.json is missing: which nodes and probes the run planned is unknown"
    try:
        return parse_manifest(read_bytes_in(path, MANIFEST, "manifest")), None
    except (InputError, ValueError) as exc:  # jsondata.Invalid is a ValueError
        return None, f"manifest.json unreadable ({_first_line(exc)}): the run's plan is unknown"


def measured(facts: NodeFacts) -> tuple[str, str] | None:
    """The earliest and latest start of a node's records; None: none records one."""
    times = [r.started_at for r in facts.probes.values() if r.started_at]
    return (min(times), max(times)) if times else None


def _facts(
    path: Path, keep: Keep | None = None
) -> tuple[dict[str, NodeFacts], dict[str, str], dict[str, tuple[str, str]]]:
    facts: dict[str, NodeFacts] = {}
    problems: dict[str, str] = {}
    spans: dict[str, tuple[str, str]] = {}
    folder = path / "facts"
    if is_link(folder):
        # Never followed: the facts would be whatever the link points to.
        problems["facts/"] = "facts/ is a symbolic link, not followed: no node's probes are shown"
        return facts, problems, spans
    # Both layouts (facts/<node>.json, facts/<shard>/<node>.json), one node at a time;
    # facts/ unreadable: every node then shows as having no facts.
    where: dict[str, str] = {}
    for entry in iter_facts(path):
        if entry.facts is None:
            problems[entry.name] = (
                f"{entry.relative} unreadable ({entry.problem}): its probes are not shown"
            )
            continue
        node = entry.facts.node
        if node in where:
            # Which of two files of one node was measured is not for the report to guess.
            problems[node] = (
                f"{entry.relative} is a second facts file of {node} (besides "
                f"{where[node]}): neither is shown"
            )
            facts.pop(node, None)
            spans.pop(node, None)
            continue
        where[node] = entry.relative
        span = measured(entry.facts)
        if span is not None:
            spans[node] = span
        facts[node] = keep(entry.facts) if keep is not None else entry.facts
    return facts, problems, spans


# findings.jsonl is read a line at a time, so its size no longer sets the report's memory
# as a whole file's does; its cap grows with the run's nodes instead (docs/scale.md): at
# 10,000 nodes of the scale benchmark it is 65 MB, past the 64 MiB of any other file.
# A node's findings: 5.8 kB of the demo fleet's acceptance suite, 6.5 kB of the scale
# benchmark's; the cap allows ten times that. One line (one finding) at most 1 MiB.
FINDINGS_BYTES_PER_NODE = 64 << 10
FINDINGS_LINE_BYTES = 1 << 20


def findings_cap(nodes: int) -> int:
    """The most of findings.jsonl a run of `nodes` nodes may hold (the manifest's, the
    facts files'): the cap on any file, or 64 KiB a node when that is more."""
    return max(MAX_BYTES, nodes * FINDINGS_BYTES_PER_NODE)


def _findings(
    path: Path, nodes: int = 0, skip: Callable[[Finding], bool] | None = None
) -> tuple[FindingsSpool | None, str | None, list[int]]:
    """The findings (spooled by node as they are read: report/findingstore.py), why there
    are none, and the numbers of the lines that do not parse (`nodes`: how many the run
    knows of, for findings_cap; `skip`: findings left out)."""
    if not os.path.lexists(path / "findings.jsonl"):
        why = (
            "findings.jsonl is missing: the run was never judged "
            f"(judge its facts with `bringup check --replay {path}`)"
        )
        return None, why, []
    findings = FindingsSpool()
    unreadable: list[int] = []
    compact = Compact()  # for the findings held (report/findingstore.py, `noted`)
    # Read a line at a time (at ten thousand nodes the file is 60 MB: never one string).
    # Lines end at "\n" alone: JSON keeps U+2028 or U+0085 from a node's text as they are,
    # and str.splitlines would cut a line there.
    try:
        lines = read_lines_in(
            path, "findings.jsonl", "findings", findings_cap(nodes), FINDINGS_LINE_BYTES
        )
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                found = read_finding(line)
            except (ValidationError, ValueError):
                unreadable.append(number)  # cut short by a crash, or edited: judged
                continue
            if skip is None or not skip(found):
                findings.add(compact(found) if noted(found) else found)
    except InputError as exc:
        return None, f"findings.jsonl unreadable ({exc}): no verdict is known", []
    return findings, None, unreadable


def planned_probes(manifest: Manifest) -> tuple[list[str] | None, str | None]:
    """The probes the run's suite asks of every node, or None and why that is not known.

    The manifest's own list first (what the run asked for, a replay's the original's);
    a run from before it was recorded: its suite loaded again.
    """
    if manifest.probes is not None:
        return list(manifest.probes), None
    source = manifest.suite_source or manifest.suite
    if not source:
        return None, "the run records no suite"
    try:
        return [step.name for step in suite_mod.load(source).probes], None
    except (suite_mod.SuiteError, OSError, ValueError) as exc:
        return None, f"the run's suite {source!r} cannot be loaded ({_first_line(exc)})"


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def dump(obj: object) -> str:
    """Stable JSON text of plain data (sorted keys), for generic display."""
    return json.dumps(obj, sort_keys=True, default=str)
