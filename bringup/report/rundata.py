"""What a run directory holds, read tolerantly: a crashed run still makes a report.

Every piece that is absent or unreadable becomes one line in `RunData.problems` (for the
report as a whole) or in `RunData.node_problems` (for one node), so the report can say
exactly what is missing instead of failing or, worse, looking complete.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from bringup.facts import NodeFacts
from bringup.findings import Finding
from bringup.rundir import Manifest


class RunDataError(Exception):
    """The directory is no run directory at all; the message is one line."""


@dataclass
class RunData:
    """Manifest, facts and findings of one run, with what could not be read."""

    path: Path
    manifest: Manifest | None
    facts: dict[str, NodeFacts]  # node -> its facts file
    findings: list[Finding] | None  # None: findings.jsonl absent (the run was never judged)
    problems: list[str] = field(default_factory=list)  # one line each, for the whole run
    node_problems: dict[str, list[str]] = field(default_factory=dict)  # node -> lines

    @property
    def nodes(self) -> list[str]:
        """Every node the run knows of (manifest, facts or findings), sorted by name.

        Sorted, not in manifest order: nodes are appended as they answer, so the order of
        a fan-out run differs between two runs of the same fleet.
        """
        names = set(self.facts)
        if self.manifest:
            names.update(self.manifest.nodes)
        names.update(f.node for f in self.findings or [] if f.node and "," not in f.node)
        return sorted(names)


def load(path: Path) -> RunData:
    """Read a run directory; RunDataError when it holds neither manifest, facts nor findings."""
    if not path.is_dir():
        raise RunDataError(f"{path}: not a directory")
    problems: list[str] = []
    manifest = _manifest(path, problems)
    facts, node_problems = _facts(path)
    findings = _findings(path, problems)
    if manifest is None and not facts and findings is None:
        raise RunDataError(
            f"{path}: not a run directory (no manifest.json, facts/ or findings.jsonl)"
        )
    run = RunData(path, manifest, facts, findings, problems, node_problems)
    _missing_pieces(run)
    return run


def _manifest(path: Path, problems: list[str]) -> Manifest | None:
    file = path / "manifest.json"
    if not file.exists():
        problems.append("manifest.json is missing: run, profile and node list unknown")
        return None
    try:
        return Manifest.model_validate_json(file.read_text())
    except (OSError, ValidationError, ValueError) as exc:
        problems.append(f"manifest.json unreadable ({_first_line(exc)})")
        return None


def _facts(path: Path) -> tuple[dict[str, NodeFacts], dict[str, list[str]]]:
    facts: dict[str, NodeFacts] = {}
    node_problems: dict[str, list[str]] = {}
    for file in sorted((path / "facts").glob("*.json")):
        try:
            node = NodeFacts.model_validate_json(file.read_text())
        except (OSError, ValidationError, ValueError) as exc:
            node_problems.setdefault(file.stem, []).append(
                f"facts/{file.name} unreadable ({_first_line(exc)}): its probes are not shown"
            )
            continue
        facts[node.node] = node
    return facts, node_problems


def _findings(path: Path, problems: list[str]) -> list[Finding] | None:
    file = path / "findings.jsonl"
    if not file.exists():
        problems.append(
            "findings.jsonl is missing: the run was never judged "
            f"(judge its facts with `bringup check --replay {path}`)"
        )
        return None
    findings: list[Finding] = []
    for number, line in enumerate(file.read_text(errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            findings.append(Finding.model_validate_json(line))
        except (ValidationError, ValueError):
            # A run killed mid-write leaves its last line cut short: skip it, say so.
            problems.append(f"findings.jsonl line {number} unreadable (cut short?): skipped")
    return findings


def _missing_pieces(run: RunData) -> None:
    """Nodes without facts, probes that never recorded, a run that did not finish."""
    manifest = run.manifest
    if manifest is not None and manifest.status != "complete":
        ended = "no end time" if manifest.ended_at is None else f"ended {manifest.ended_at}"
        run.problems.append(
            f"the run did not complete (status {manifest.status!r}, {ended}): "
            "what was measured before it stopped is shown"
        )
    expected = expected_probes(run)
    judged = {f.node for f in run.findings or []}
    for node in run.nodes:
        lines = run.node_problems.setdefault(node, [])
        recorded = run.facts.get(node)
        if recorded is None:
            if not any(line.startswith("facts/") for line in lines):
                lines.append("no facts recorded: the node never reported a probe")
            continue
        for probe in expected:
            if probe not in recorded.probes:
                lines.append(f"probe {probe!r} never recorded (it did not run or did not finish)")
        if run.findings is not None and node not in judged:
            lines.append("no findings for this node: its facts were never judged")
    run.node_problems = {n: lines for n, lines in run.node_problems.items() if lines}


def expected_probes(run: RunData) -> list[str]:
    """The probes every node should have: the suite's when known, else any node's."""
    if run.manifest is not None and run.manifest.suite:
        from bringup import suite  # lazily: only a run with a named suite needs it

        try:
            return [step.name for step in suite.load(run.manifest.suite).probes]
        except suite.SuiteError:
            pass  # a suite file that moved: fall back to what the nodes recorded
    seen: dict[str, None] = {}
    for node in sorted(run.facts):
        seen.update(dict.fromkeys(run.facts[node].probes))
    return list(seen)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def dump(obj: object) -> str:
    """Stable JSON text of plain data (sorted keys), for generic display."""
    return json.dumps(obj, sort_keys=True, default=str)
