"""A run on many nodes at once: plan each node's request, run them with bounded concurrency,
record every probe as it arrives, judge each node as it finishes.

    plans = [plan_node(host, ...) for host in inventory.load(path)]
    outcomes = run(plans, rundir, forks=64)

Each node is one task on a pool of `forks` threads (a thread holds a node only while
it runs, so a thousand nodes need no thousand threads). A node's records go into the run
directory the moment they arrive; when the node ends its facts are judged and its
findings appended. What can happen to a node, and the finding that says so:

- reached, every probe answered: its checks' findings, plus `node.reachable` PASS;
- not reached (refused, timeout, DNS, host key, auth): `node.reachable` UNREACHABLE
  with the reason, nothing else;
- reached but died or hung mid-run: `node.run` ERROR with the reason, the findings of
  every probe that answered, and ERROR for the checks of the probes that did not;
- Ctrl-C: `node.run` ERROR "run interrupted" for the nodes not finished; all kept;
- its facts file not written when it ends (a full disk): `node.run` ERROR saying so, the
  node judged from the records it sent (held until the run's end, which writes the file
  again); an unreachable node stays UNREACHABLE, the file's reason after its own.

A long probe's progress lines (`{"probe", "progress"}`, bringup/node/progress.py) go to
the progress display only; they are never records.

A node may be hostile (a provider's node reporting on itself), so what it may store is
bounded (`RecordGate`): one record per probe it was asked for, and at most
NodeCaps.raw_bytes of raw tool output in at most NodeCaps.raw_files files. The record
that breaks a rule is not stored, the node is stopped, and its `node.run` ERROR says why:
nothing more is written for it, whatever it goes on sending.

"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from bringup import jsondata
from bringup.checks.auto import CHECK as AUTO_CHECK
from bringup.checks.auto import NO_PROFILE, judge_node_by, judge_node_model
from bringup.checks.catalog import judge_node, judge_probe
from bringup.facts import NodeFacts, decode_record, decoded_once
from bringup.findings import Expected, Finding, Status
from bringup.fleet.plan import FleetError, NodePlan, node_profile, override_changes
from bringup.fleet.progress import FleetProgress, Silent
from bringup.fleet.transport import (
    Gathered,
    Interrupted,
    NodeCaps,
    TransportError,
    Unreachable,
    is_progress,
)
from bringup.profile import AUTO, Profile
from bringup.rundir import Override, RunDir, findings_bytes

if TYPE_CHECKING:
    # rich loads only for a console that shows something; the fleet checks' types are
    # loaded by fleet_values only: the health check judges without them
    from rich.console import Console

    from bringup.checks.consistency import Fields
    from bringup.checks.identity import Mark
    from bringup.fleet.tally import Tally

DEFAULT_FORKS = 64
FACTS_UNWRITTEN = "its facts file could not be written"  # a node's ERROR, then the reason
_WARN = Status.WARN.rank
State = Literal["complete", "unreachable", "error", "interrupted"]


# --- what one node may store: pure ---------------------------------------------------------


class Refused(TransportError):
    """A record the node may not store (a second one of a probe, a probe not asked for,
    raw output past the caps); the node is stopped. One line."""


class RecordGate:
    """Admits a node's records: one per probe of its request, raw output within the caps."""

    def __init__(self, node: str, planned: list[str], caps: NodeCaps) -> None:
        self.node = node
        self.planned = set(planned)
        self.caps = caps
        self.seen: set[str] = set()
        self.raw_bytes = 0
        self.raw_files = 0

    def admit(self, record: dict[str, object]) -> None:
        """Count the record in, or Refused saying why it is not stored."""
        probe = record.get("probe")
        if not isinstance(probe, str) or probe not in self.planned:
            raise Refused(
                f"refused: the node sent a record of probe {str(probe)[:80]!r}, which it was "
                "not asked to run; not stored, nothing more stored from the node"
            )
        if probe in self.seen:
            raise Refused(
                f"refused: the node sent a second record of probe {probe!r}; not stored, "
                "nothing more stored from the node"
            )
        raw = record.get("raw") or {}
        if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
            raise Refused(f"refused: probe {probe!r}'s raw outputs are not text files by name")
        files = self.raw_files + len(raw)
        # The bytes that land on disk (a file's name is cut to a bounded length there).
        size = self.raw_bytes + sum(len(v.encode("utf-8", "replace")) for v in raw.values())
        if files > self.caps.raw_files or size > self.caps.raw_bytes:
            raise Refused(
                f"refused: probe {probe!r} took the node's raw output past the cap of "
                f"{self.caps.raw_bytes // 2**20} MiB in {self.caps.raw_files} files "
                f"({size // 2**20} MiB in {files} files); not stored, nothing more stored "
                "from the node"
            )
        self.seen.add(probe)
        self.raw_files, self.raw_bytes = files, size


def _store(rundir: RunDir, node: str, record: dict[str, Any]) -> None:
    """The node's record in the run directory, or Refused when it is no record (a type, a
    key it lacks: bringup/jsondata.py): nothing of it stored, nothing more from the node."""
    try:
        rundir.add_record(node, record)
    except jsondata.Invalid as exc:
        raise Refused(
            f"refused: the node sent a record of probe {str(record.get('probe'))[:80]!r} that "
            f"is not one ({exc}); not stored, nothing more stored from the node"
        ) from None


# --- judging a node's outcome: pure -------------------------------------------------------


@dataclass
class NodeOutcome:
    node: str
    state: State
    reason: str | None = None
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0
    # What the fleet-wide checks compare of the node (checks/consistency.py,
    # checks/identity.py), taken when it was judged (run(compare=True)): its facts are
    # let go of then. None: not taken.
    fields: dict[str, Fields] | None = None
    marks: list[Mark] | None = None


class Shared:
    """Values many nodes of a run hold alike, held once: a probe's fields equal to another
    node's (a fleet of identical nodes, which the consistency check expects, keeps one copy
    of their two hundred fields), the words marks repeat ("GPU 3 serial"), the texts and
    expectations of findings (a check's message, action and threshold on every healthy
    node). Nothing in it is changed once in: the checks read fields, they never write
    them, and an expectation is frozen."""

    def __init__(
        self,
        compare: bool = False,
        tally: Tally | None = None,
        digest: Callable[[NodeFacts], None] | None = None,
    ) -> None:
        self.compare = compare  # take each judged node's fleet values (fleet_values)
        self.digest = digest  # given each judged node's facts (run's `digest`)
        # Each node's findings tallied, in findings.jsonl's order, and not held (run's
        # `tally`); the lock keeps the file's order and the tally's one.
        self.tally = tally
        self.lock = threading.Lock()
        self._fields: dict[tuple[tuple[str, Any], ...], Fields] = {}
        self._text: dict[str, str] = {}
        self._expected: dict[tuple[tuple[type, Any], ...], Expected] = {}

    def fields(self, fields: Fields) -> Fields:
        return self._fields.setdefault(tuple(fields.items()), fields)

    def text(self, text: str) -> str:
        return self._text.setdefault(text, text)

    def finding(self, finding: Finding) -> Finding:
        """The finding, its texts and expectation swapped for equal ones already held:
        the same values (each of the same type: 1 is not 1.0), one copy in memory."""
        finding.node = self.text(finding.node)
        finding.check = self.text(finding.check)
        finding.message = self.text(finding.message)
        if finding.unit is not None:
            finding.unit = self.text(finding.unit)
        if finding.action is not None:
            finding.action = self.text(finding.action)
        expected = finding.expected
        if expected is not None and not isinstance(expected.value, list):
            held = (
                expected.op,
                expected.value,
                expected.unit,
                expected.tolerance_pct,
                expected.note,
            )
            key = tuple((type(v), v) for v in held)
            finding.expected = self._expected.setdefault(key, expected)
        return finding


def fleet_values(
    facts: NodeFacts, shared: Shared | None = None
) -> tuple[dict[str, Fields], list[Mark]]:
    """What the fleet checks compare of one node, each record decoded once."""
    from bringup.checks.consistency import node_fields
    from bringup.checks.identity import Mark, decoded_marks

    shared = shared or Shared()
    decoded = {}
    for name, record in facts.probes.items():
        value, error = decode_record(record)
        if error is None:
            decoded[name] = value
    fields = {probe: shared.fields(mine) for probe, mine in node_fields(decoded).items()}
    marks = [
        Mark(shared.text(m.kind), shared.text(m.where), m.value) for m in decoded_marks(decoded)
    ]
    return fields, marks


def outcome_findings(
    plan: NodePlan, facts: NodeFacts, state: State, reason: str | None, unfiled: bool = False
) -> list[Finding]:
    """The node's findings: its checks' verdicts plus what happened to the node itself
    (`unfiled`: its facts file could not be written)."""
    node = plan.node
    profile, findings = _judged(plan, facts)
    if state == "unreachable":
        message = reason or "unreachable"
        return [
            Finding(
                node=node,
                check="node.reachable",
                status=Status.UNREACHABLE,
                message=message,
                action=_unreachable_action(message),
            ),
            *findings,
        ]
    extra: list[Finding] = []
    if plan.remote:
        extra.append(
            Finding(node=node, check="node.reachable", status=Status.PASS, message="reached")
        )
    if state != "complete":
        what = "run interrupted" if state == "interrupted" else (reason or "node side failed")
        missing = [p for p in plan.probes if p not in facts.probes]
        kept = f"; {len(facts.probes)} probe(s) recorded are kept" if facts.probes else ""
        extra.append(
            Finding(
                node=node,
                check="node.run",
                status=Status.ERROR,
                message=f"{what}{kept}",
                action=_resume_action(state, unfiled),
            )
        )
        for probe in missing:
            # An unmeasured probe's ERRORs read nothing of a profile: said with or without one.
            for f in judge_probe(probe, None, f"not measured: {what}", profile or NO_PROFILE):
                extra.append(replace(f, node=node))
    return [*extra, *findings]


def _resume_action(state: str, unfiled: bool = False) -> str:
    """What to do about a node whose run stopped early: what finished is kept. Told by
    `unfiled`, not by the reason's text, which may hold what the node printed."""
    resume = "`bringup check --resume RUN_DIR` measures what is missing"
    if state == "interrupted":
        return f"rerun: {resume}"
    if unfiled:
        return (
            "free space on the run directory's file system (`df -h RUN_DIR`): the run's end "
            f"writes the file again; if it could not, {resume}"
        )
    return f"read the node's console and `dmesg`, then {resume}"


def _judged(plan: NodePlan, facts: NodeFacts) -> tuple[Profile | None, list[Finding]]:
    """The profile that judges the node and its findings. --profile auto: its GPU's profile,
    or, when none fits, the one ERROR that says so (nothing is judged by a guess)."""
    if not plan.auto:
        assert plan.profile is not None
        return plan.profile, judge_node(facts, plan.profile)
    if not facts.probes:
        return None, []  # nothing answered (unreachable, interrupted): nothing to judge
    chosen, said = judge_node_model(facts)
    if chosen is None:
        return None, judge_node_by(facts, AUTO)
    try:
        profile = node_profile(chosen, plan.overrides, plan.node)
    except FleetError as exc:
        return None, [
            Finding(node=plan.node, check=AUTO_CHECK, status=Status.ERROR, message=str(exc))
        ]
    return profile, [said, *judge_node(facts, profile)]


def judged_overrides(plan: NodePlan, facts: NodeFacts) -> list[Override]:
    """The profile fields the node was judged by that its profile does not say (its
    `bringup_profile_overrides`, against the profile given or its GPU's): part of the
    verdict, recorded in the manifest and shown with it."""
    if plan.overrides is None:
        return []
    base = plan.base if not plan.auto else judge_node_model(facts)[0] if facts.probes else None
    if base is None:
        return []
    try:
        judged = node_profile(base, plan.overrides, plan.node)
    except FleetError:
        return []  # said as the node's ERROR by _judged
    return override_changes(base, judged)


def _unreachable_action(reason: str) -> str:
    if reason.startswith("host key mismatch"):
        return "verify the node's identity; if it was reinstalled, remove its old known_hosts line"
    if reason.startswith("host key unknown"):
        return "add the node's key to known_hosts, or rerun with --accept-new-hostkeys"
    if reason.startswith("authentication failed"):
        return "check ansible_user and ansible_ssh_private_key_file (or the agent) for this node"
    if reason.startswith("srun: "):  # --slurm: the step could not start on the node
        return "check the node's slurmd and state (scontrol show node, sinfo -R)"
    return "check that the node is up, sshd runs and the address and port are right"


# --- running ------------------------------------------------------------------------------


def run(
    plans: list[NodePlan],
    rundir: RunDir,
    forks: int = DEFAULT_FORKS,
    console: Console | Silent | None = None,
    caps: NodeCaps | None = None,
    compare: bool = False,
    tally: Tally | None = None,
    digest: Callable[[NodeFacts], None] | None = None,
) -> list[NodeOutcome]:
    """Run every plan, `forks` nodes at a time; outcomes in plan order. Ctrl-C stops all.

    Plans without a profile (snapshot) are recorded, not judged: no findings are written.
    `compare`: each judged node's outcome carries what the fleet checks compare of it
    (`check`'s judge_fleet), its facts being let go of once it is judged. `tally`: each
    node's findings are tallied there as they are written (fleet/tally.py), and its
    outcome holds none: a run of ten thousand nodes never holds every finding. `digest`:
    given each judged node's facts, as it was judged on them (its records decoded once
    for both): what the end of `check` takes of every node for the rules over the whole
    run (commands/report.py, WholeRunDigest.take), rather than read every file again.
    """
    rundir.add_nodes([p.node for p in plans])
    for plan in plans:  # a transport that starts nodes together learns every request first
        if isinstance(plan.runner, Gathered) and not plan.skip:
            plan.runner.announce(plan.request, plan.deadline_s, max(1, forks))
    stop = threading.Event()
    shared = Shared(compare, tally, digest)
    if console is None:
        from rich.console import Console

        console = Console(stderr=True)
    progress = FleetProgress(len(plans), console)
    outcomes: dict[str, NodeOutcome] = {}
    # Each node's future says it is done on a queue: taking them off one at a time costs
    # the same at a thousand nodes as at ten (wait() on every pending future each time a
    # node ends would grow with the square of the nodes).
    done: queue.SimpleQueue[Future[NodeOutcome]] = queue.SimpleQueue()
    with progress, ThreadPoolExecutor(max_workers=max(1, forks)) as pool:
        pending: set[Future[NodeOutcome]] = set()
        for index, plan in enumerate(plans):
            future = pool.submit(
                _run_node, plan, index, rundir, stop, progress, caps or NodeCaps(), shared
            )
            pending.add(future)
            future.add_done_callback(done.put)
        try:
            while pending:
                # A timeout keeps the main thread able to take Ctrl-C while nodes run.
                try:
                    future = done.get(timeout=0.5)
                except queue.Empty:
                    continue
                pending.discard(future)
                outcome = future.result()
                outcomes[outcome.node] = outcome
        except KeyboardInterrupt:
            stop.set()
            for future in pending:
                future.cancel()
            for future in pending:
                if not future.cancelled():
                    outcome = future.result()
                    outcomes[outcome.node] = outcome
        except BaseException:
            # A node's thread raised: the run directory could not take its findings (a
            # full disk). The run cannot record its verdict, so it ends; the other nodes
            # are stopped as by Ctrl-C, not waited for to their end (a burn-in: hours),
            # what they sent kept on disk. The command says why in one line (exit 2).
            stop.set()
            for future in pending:
                future.cancel()
            raise
    for index, plan in enumerate(plans):
        if plan.node not in outcomes:  # never started: Ctrl-C came first
            outcomes[plan.node] = _finish(plan, index, rundir, "interrupted", None, 0.0, shared)
    ordered = [outcomes[p.node] for p in plans]
    progress.print_summary([o.state for o in ordered])
    if stop.is_set():
        rundir.manifest.status = "interrupted"
    return ordered


def _run_node(
    plan: NodePlan,
    index: int,
    rundir: RunDir,
    stop: threading.Event,
    progress: FleetProgress,
    caps: NodeCaps,
    shared: Shared,
) -> NodeOutcome:
    """One node from connect to findings. Never raises: every failure is an outcome."""
    started = time.monotonic()
    if stop.is_set():
        return _finish(plan, index, rundir, "interrupted", None, 0.0, shared)
    if plan.skip:
        return _finish(plan, index, rundir, "complete", None, 0.0, shared, progress)
    names = [s["name"] for s in plan.request["probes"]]
    gate = RecordGate(plan.node, names, caps)
    answered = 0
    state: State = "complete"
    reason: str | None = None
    replay_written = False
    rundir.journal(plan.node)  # each record appended as it arrives; its facts file at the end

    def on_stage(what: str) -> None:
        nonlocal replay_written
        if what == "running" and not replay_written:
            # Recorded answers count only for a node that is there: written once connected.
            for record in plan.replayed:
                rundir.add_record(plan.node, dict(record))
            replay_written = True
        running = what == "running" and answered < len(names)
        doing = f"running {names[answered]}" if running else what
        progress.doing(plan.node, doing)

    progress.doing(plan.node, "starting")
    records: Iterator[dict[str, Any]] | None = None
    try:
        records = plan.runner(plan.request, plan.deadline_s, stop, on_stage)
        for record in records:
            if is_progress(record):  # what a long probe is doing: shown, not recorded
                fields = record["progress"]
                if isinstance(fields, dict):
                    progress.reported(plan.node, str(record["probe"]), fields)
                continue
            gate.admit(record)  # Refused: not stored, the node stopped (its runner closed)
            _store(rundir, plan.node, record)
            answered += 1
            if answered < len(names):
                progress.doing(plan.node, f"running {names[answered]}")
        if not replay_written:
            on_stage("running")
    except Unreachable as exc:
        state, reason = "unreachable", str(exc)
    except Interrupted:
        state = "interrupted"
    except TransportError as exc:
        state, reason = "error", str(exc)
    except Exception as exc:  # a controller bug on one node must not lose the others
        state, reason = "error", f"controller error: {type(exc).__name__}: {exc}"
    finally:
        # Closed whatever ended the loop: a refused node's transport ends its session now
        # (and stops reading it), not when the generator is collected.
        with contextlib.suppress(Exception):  # closing a dead session must not lose the node
            getattr(records, "close", lambda: None)()
    seconds = time.monotonic() - started
    return _finish(plan, index, rundir, state, reason, seconds, shared, progress)


def _finish(
    plan: NodePlan,
    index: int,
    rundir: RunDir,
    state: State,
    reason: str | None,
    seconds: float,
    shared: Shared,
    progress: FleetProgress | None = None,
) -> NodeOutcome:
    try:
        rundir.settle(plan.node)  # its facts file, every record in it, before it is judged
        filed = True
    except OSError as exc:
        # A full disk, a quota: the node is judged from what it sent, held in memory (not
        # let go of below) for the run's end to write its file again; an ERROR says so.
        filed = False
        why = f"{FACTS_UNWRITTEN} ({exc.strerror or exc})"
        if state == "complete":
            state, reason = "error", why
        else:  # an unreachable node stays one (never "reached"), its reason first
            reason = f"{reason}; {why}" if reason else why
    outcome = NodeOutcome(plan.node, state, reason, seconds=round(seconds, 3))
    if plan.profile is not None or plan.auto:
        facts = rundir.facts_of(plan.node)
        # Its checks, its profile (--profile auto: judged, then its overrides) and its
        # fleet values read the same records: each validated once.
        with decoded_once():
            found = outcome_findings(plan, facts, state, reason, unfiled=not filed)
            overrides = judged_overrides(plan, facts)
            if shared.compare:
                outcome.fields, outcome.marks = fleet_values(facts, shared)
            if shared.digest is not None:
                shared.digest(facts)
        # Texts held once where the findings are held to the end: every one, or with a
        # tally only those at WARN or worse (the rest are on disk, counted).
        held = (f for f in found if shared.tally is None or f.status.rank >= _WARN)
        for f in held:
            shared.finding(f)
        rundir.record_overrides(plan.node, overrides)
        if shared.tally is None:
            outcome.findings = found
            rundir.add_findings(found)
        else:
            # Their lines made before the lock is taken: every node's thread ends here, and
            # with the lines made under it they queued (docs/scale.md).
            data = findings_bytes(found)
            with shared.lock:
                rundir.add_findings(found, data)
                shared.tally.add(found, index)
    if filed:
        rundir.release(plan.node)  # judged: what is left to read is on disk and in the outcome
    if progress is not None:
        progress.finished(outcome.node, outcome.state)
    return outcome
