"""Whether a run directory holds all a verdict needs: what is missing is never a pass.

A run is accepted only when its manifest is readable, it has at least one node, every
planned node x probe has a record or an explicit ERROR, and every findings line parses.
The report reads run directories tolerantly (a crashed run still makes a report) and
records what it could not read (bringup/report/rundata.py); these are the verdicts on that:
one ERROR `report.*` finding per missing piece, naming it.

    report.manifest   manifest.json missing or unreadable: the plan is unknown
    report.nodes      no node at all: nothing was measured
    report.findings   findings.jsonl missing, unreadable, lines that do not parse, or
                      fewer verdicts than the run's own exit code says it had
    report.run        the run did not complete
    report.missing    one node's missing piece: no facts, a planned probe not measured
                      (no record of it), no findings, an unmeasured probe whose ERRORs
                      are gone; a node of a joint job that did not run is covered by
                      the job's bad verdict (one cause, one finding)
    report.suite      the run's suite is not known: completeness cannot be judged against
                      a plan, so the run cannot be accepted (each node is still held to
                      the probes any node of the run recorded)
    report.profile    the run records no profile: its findings were not judged against a
                      profile's thresholds (a burn-in on a GPU no profile knows); not
                      where a finding says why already (a CPU burn-in's burnin.mfu)

Pure: over what the reader found (`RunContents`, which RunData provides). Of the findings
it reads only which nodes have any and the bad ones (`Tallied`): the report holds those
while it spools the rest to disk (bringup/report/findingstore.py), so a run of ten
thousand nodes is judged without every finding in memory.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from bringup.checks import finding
from bringup.checks.catalog import checks_for
from bringup.facts import NodeFacts, origin
from bringup.findings import Finding, Status
from bringup.rundir import Manifest


class Tallied(Protocol):
    """findings.jsonl's findings as the report holds them (report/findingstore.py)."""

    @property
    def nodes(self) -> Collection[str]: ...  # every finding's `node` field
    @property
    def noted(self) -> Sequence[Finding]: ...  # those at WARN or worse (and more), in order


class RunContents(Protocol):
    """What a run directory held, as bringup/report/rundata.py read it."""

    @property
    def path(self) -> Path: ...
    @property
    def manifest(self) -> Manifest | None: ...
    @property
    def manifest_problem(self) -> str | None: ...  # why there is no manifest
    @property
    def facts(self) -> Mapping[str, NodeFacts]: ...
    @property
    def facts_problems(self) -> Mapping[str, str]: ...  # node -> why its file is unreadable
    @property
    def findings(self) -> Sequence[Finding] | Tallied | None: ...
    @property
    def findings_problem(self) -> str | None: ...  # why there are no findings
    @property
    def unreadable_lines(self) -> Sequence[int]: ...  # findings.jsonl lines that do not parse
    @property
    def planned(self) -> Sequence[str] | None: ...  # the suite's probes; None: not known
    @property
    def plan_problem(self) -> str | None: ...  # why the suite is not known
    @property
    def nodes(self) -> list[str]: ...


def judge_completeness(run: RunContents) -> list[Finding]:
    """One ERROR finding per piece the run lacks."""
    replay = f"judge the recorded facts again: `bringup check --replay {run.path}`"
    whole, plan = _whole_run(run), [*_plan(run), *_profile(run)]
    nodes: list[Finding] = []
    judged, bad = _judged(run.findings)
    by_node: dict[str, list[Finding]] = {}
    for f in bad:
        by_node.setdefault(f.node, []).append(f)
    for node in run.nodes:
        mine = [*by_node.get(node, []), *_failed_job(run, node, by_node)]
        for line in _node_gaps(run, node, mine, node in judged or bool(mine)):
            f = finding(
                "report.missing",
                Status.ERROR,
                line,
                action="rerun the missing probes on this node, then report again",
            )
            nodes.append(replace(f, node=node))
    # The run's exit code is explained by its findings or by the other gaps (a check
    # records these same gaps, and its exit code says them).
    files = _findings_file(run, replay, [*whole, *plan, *nodes], bad)
    return [*whole, *files, *plan, *nodes]


def _judged(findings: Sequence[Finding] | Tallied | None) -> tuple[Collection[str], list[Finding]]:
    """The `node` field of every finding, and the bad findings (FAIL, ERROR, UNREACHABLE)
    in order: all the rules here read of them."""
    if findings is None:
        return set(), []
    if isinstance(findings, Sequence):
        return {f.node for f in findings}, [f for f in findings if f.status.bad]
    return findings.nodes, [f for f in findings.noted if f.status.bad]


def _whole_run(run: RunContents) -> list[Finding]:
    """The manifest, at least one node, a run that completed."""
    out = []
    if run.manifest is None:
        why = run.manifest_problem or "manifest.json is missing"
        action = "report on the directory the run wrote, with its manifest.json; or rerun"
        out.append(finding("report.manifest", Status.ERROR, why, action=action))
    if not run.nodes:
        out.append(
            finding(
                "report.nodes",
                Status.ERROR,
                "the run has no node: nothing was measured",
                action="check the inventory (and --limit), then rerun",
            )
        )
    status = run.manifest.status if run.manifest is not None else None
    if status is not None and status != "complete":
        out.append(
            finding(
                "report.run",
                Status.ERROR,
                f"the run did not complete (status {status!r}): probes after the last "
                "recorded one did not run; what was measured before it stopped is shown",
                action="rerun (`bringup check --resume RUN_DIR` where available)",
            )
        )
    return out


def _findings_file(
    run: RunContents, replay: str, gaps: list[Finding], bad: list[Finding]
) -> list[Finding]:
    """`bad`: the bad findings of findings.jsonl."""
    if run.findings is None:
        why = run.findings_problem or "findings.jsonl is missing: the run was never judged"
        return [finding("report.findings", Status.ERROR, why, action=replay)]
    out = []
    if run.unreadable_lines:
        numbers = ", ".join(str(n) for n in run.unreadable_lines)
        one = len(run.unreadable_lines) == 1
        which = f"line {numbers} does" if one else f"lines {numbers} do"
        whose = "its verdict is" if one else "their verdicts are"
        out.append(
            finding(
                "report.findings",
                Status.ERROR,
                f"findings.jsonl {which} not parse (cut short or edited): {whose} unknown",
                action=replay,
            )
        )
    # The run recorded how many FAIL, ERROR and UNREACHABLE findings it wrote (commands/
    # common.py finish_run): fewer in findings.jsonl means verdicts were lost.
    wrote = run.manifest.findings_bad if run.manifest is not None else None
    # The gaps judged here count as held: a check records these same findings (and the
    # report judges them again in place of the recorded ones).
    holds = len(bad) + sum(1 for f in gaps if f.status.bad)
    if wrote is not None and holds < wrote:
        out.append(
            finding(
                "report.findings",
                Status.ERROR,
                f"the run wrote {wrote} FAIL, ERROR or UNREACHABLE findings but "
                f"findings.jsonl holds {holds}: verdicts are missing from it",
                action=replay,
            )
        )
        return out
    # A run that did not record it: its exit code came from its verdict, so a failing
    # exit code over findings that all pass, of facts all measured live (else the origin
    # is why, bringup/provenance.py), means verdicts were lost.
    code = run.manifest.exit_code if run.manifest is not None and wrote is None else None
    made = run.manifest.provenance if run.manifest is not None else None
    if code == 1 and not origin(list(run.facts.values()), made).live:
        code = None
    if code and not (bad or any(f.status.bad for f in gaps)):
        out.append(
            finding(
                "report.findings",
                Status.ERROR,
                f"the run ended with exit code {code} but findings.jsonl holds no FAIL, "
                "ERROR or UNREACHABLE finding: verdicts are missing from it",
                action=replay,
            )
        )
    return out


def _plan(run: RunContents) -> list[Finding]:
    if run.manifest is None or run.planned is not None:
        return []  # no manifest is its own ERROR; a known suite is judged node by node
    why = run.plan_problem or "the run records no suite"
    # Fail closed: without the plan, a probe no node recorded would pass unnoticed.
    return [
        finding(
            "report.suite",
            Status.ERROR,
            f"{why}: completeness against a suite cannot be judged, so the run cannot be "
            "accepted; each node is held to the probes any node of the run recorded",
            action=f"judge it against its suite: `bringup check --replay {run.path} --suite NAME`",
        )
    ]


# A job's verdict, on its first node: when bad, it is the verdict of every node of the job.
JOB_CHECKS = ("burnin.job",)


def _failed_job(
    run: RunContents, node: str, by_node: Mapping[str, Sequence[Finding]]
) -> list[Finding]:
    """The bad verdict of a job `node` was part of (not as its first node): it explains
    that node's missing findings. A job that did not run judged nothing on any of its
    nodes; the one finding that names why stands on the first, and a "never judged" gap
    on each other node would repeat it. Only a bad verdict covers: it keeps the run
    from ACCEPTED whatever the manifest says the job was."""
    jobs = run.manifest.jobs if run.manifest is not None else []
    return [
        f
        for job in jobs
        if node in job[1:]
        for f in by_node.get(job[0], [])
        if f.check in JOB_CHECKS and f.status.bad
    ]


# Commands whose findings do not depend on a profile's thresholds.
_WITHOUT_PROFILE = ("provision",)


def _profile(run: RunContents) -> list[Finding]:
    manifest = run.manifest
    if manifest is None or manifest.profile or manifest.command in _WITHOUT_PROFILE:
        return []
    if _no_profile_said(run):
        return []
    return [
        finding(
            "report.profile",
            Status.ERROR,
            "the run records no profile: its findings were not judged against a profile's "
            "thresholds, so the run cannot be accepted",
            action="run it again with --profile NAME (the GPU's profile)",
        )
    ]


def _no_profile_said(run: RunContents) -> bool:
    """Whether a bad finding already says why no profile judged the run, with the action
    that fits (one cause, one finding; report.profile's "give --profile" fits neither):

    - a CPU burn-in: `burnin.mfu` ERROR "no GPU peak to judge MFU by" (no profile is a
      CPU's; the burn-in must run on the GPUs), on a run whose every burn-in ran on the CPU
    - a job that did not run (`burnin.job` ERROR): nothing was judged, against a profile
      or without one
    """
    _, bad = _judged(run.findings)
    if any(f.check in JOB_CHECKS for f in bad):
        return True
    kinds = [_burnin_device(node) for node in run.facts.values()]
    ran = [kind for kind in kinds if kind is not None]
    on_cpu = bool(ran) and all(kind != "cuda" for kind in ran)
    return on_cpu and any(f.check == "burnin.mfu" for f in bad)


def _burnin_device(node: NodeFacts) -> str | None:
    """The device a node's burn-in trained on ("cuda", "cpu"); None: no burn-in facts."""
    record = node.probes.get("burnin")
    facts = record.facts if record is not None and record.ok else None
    if not isinstance(facts, dict):
        return None  # not trained: its own ERROR says so
    kind = facts.get("device_kind")
    return kind if isinstance(kind, str) else "unknown"  # unknown is never taken for a CPU


def _node_gaps(run: RunContents, node: str, mine: list[Finding], judged: bool) -> list[str]:
    """What one node lacks (`mine`: its bad findings; `judged`: whether it has any): its
    facts, a planned probe, its findings, a probe's ERRORs."""
    if any(f.status == Status.UNREACHABLE for f in mine):
        return []  # never reached: its UNREACHABLE finding is the explicit verdict
    if node in run.facts_problems:
        return [run.facts_problems[node]]
    recorded = run.facts.get(node)
    if recorded is None:
        return ["no facts recorded: the node never reported a probe"]
    lines = []
    for probe in _expected(run):
        explicit = any(f.status.bad and f.check.startswith(f"{probe}.") for f in mine)
        if probe not in recorded.probes and not explicit:
            lines.append(
                f"not measured: probe {probe!r} has no record on {node} "
                "(it did not run or did not finish)"
            )
    if run.findings is None:
        return lines  # findings.jsonl itself is missing: said once for the run
    if not judged:
        return [*lines, "no findings for this node: its facts were never judged"]
    for record in recorded.probes.values():
        if record.ok and record.error is None:
            continue
        # An unmeasured probe gives every check that reads it an ERROR (catalog.judge_probe).
        errors = {f.check for f in mine if f.status == Status.ERROR}
        # A check that applies only under some profiles (Check.applies: gpu.imex) has an
        # ERROR only where it applies, which this rule cannot tell from the run alone.
        lost = [
            c.name for c in checks_for(record.probe) if c.name not in errors and c.applies is None
        ]
        if lost:
            whose = "ERROR of its check" if len(lost) == 1 else "ERRORs of its checks"
            lines.append(
                f"probe {record.probe!r} failed but the {whose} {', '.join(lost)} "
                f"{'is' if len(lost) == 1 else 'are'} missing from findings.jsonl"
            )
    return lines


def _expected(run: RunContents) -> list[str]:
    """The probes every node should have: the suite's when known, else any node's."""
    if run.planned is not None:
        return list(run.planned)
    seen: dict[str, None] = {}
    for node in sorted(run.facts):
        seen.update(dict.fromkeys(run.facts[node].probes))
    return list(seen)
