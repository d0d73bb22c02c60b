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
- Ctrl-C: `node.run` ERROR "run interrupted" for the nodes not finished; all kept.

Per-node host variables (inventory): `bringup_profile_overrides` (a mapping merged onto
the profile, validated by its schema), `bringup_data_dirs` (where host and nvme measure),
`bringup_probe_params` ({probe: {param: value}}) and `bringup_replay` (a facts file whose
recorded probes answer for the node: how GPU facts reach GPU-less simulated nodes).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from bringup import profile as profiles
from bringup.checks.catalog import judge_node, judge_probe
from bringup.facts import NodeFacts
from bringup.findings import Finding, Status
from bringup.rundir import RunDir, RunDirError, load_facts
from bringup.suite import Suite
from bringup.transport import Interrupted, TransportError, Unreachable

# Probes whose `paths` parameter --data-dir (or bringup_data_dirs) replaces.
PATH_PROBES = ("host", "nvme")
DEFAULT_FORKS = 64
# Seconds a node may take beyond the sum of its probes' timeouts (connect, upload, start).
NODE_SLACK_S = 60.0

Stage = Callable[[str], None]
# A transport bound to one node: (request, deadline_s, stop, on_stage) -> records.
Runner = Callable[[dict[str, Any], float, threading.Event, Stage], Iterator[dict[str, Any]]]
State = Literal["complete", "unreachable", "error", "interrupted"]


class FleetError(Exception):
    """A node's inventory variables are invalid; one line naming the node."""


# --- planning: pure functions of inventory, suite and profile -----------------------------


def build_request(
    suite: Suite,
    data_dirs: list[str] | None = None,
    probe_params: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The node-side request: the suite's probes, with --data-dir and per-node params."""
    steps = []
    for step in suite.probes:
        params = dict(step.params)
        if data_dirs and step.name in PATH_PROBES:
            params["paths"] = list(data_dirs)
        params.update((probe_params or {}).get(step.name, {}))
        steps.append({"name": step.name, "params": params, "timeout_s": step.timeout_s})
    return {"probes": steps}


def merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """`overrides` laid over `base`, mappings merged key by key."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def node_profile(base: profiles.Profile, overrides: object, node: str) -> profiles.Profile:
    """The profile for one node: `bringup_profile_overrides` merged on, schema-checked."""
    if overrides is None:
        return base
    if not isinstance(overrides, dict):
        raise FleetError(f"host {node}: bringup_profile_overrides must be a mapping")
    data = merge(base.model_dump(mode="json"), overrides)
    try:
        return profiles.parse(data, f"host {node}: bringup_profile_overrides")
    except profiles.ProfileError as exc:
        raise FleetError(str(exc)) from None


def _data_dirs(value: object, node: str) -> list[str] | None:
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise FleetError(f"host {node}: bringup_data_dirs must be a path or a list of paths")
    return items


def _probe_params(value: object, node: str) -> dict[str, dict[str, Any]] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise FleetError(f"host {node}: bringup_probe_params must map probe -> {{param: value}}")
    from bringup.probes.catalog import PROBES
    from bringup.probes.node import build_params

    for probe, params in value.items():
        if probe not in PROBES:
            raise FleetError(f"host {node}: bringup_probe_params: unknown probe {probe!r}")
        try:
            build_params(probe, params)
        except (TypeError, ValueError) as exc:
            raise FleetError(f"host {node}: bringup_probe_params: {exc}") from None
    return value


def load_replay(path: object, node: str) -> NodeFacts:
    """The recording named by `bringup_replay`: one node's facts file."""
    try:
        recorded = load_facts(Path(str(path)))
    except RunDirError as exc:
        raise FleetError(f"host {node}: bringup_replay: {exc}") from None
    if len(recorded) != 1:
        raise FleetError(f"host {node}: bringup_replay must name one facts/<node>.json file")
    return recorded[0]


@dataclass
class NodePlan:
    """What to do on one node."""

    node: str
    runner: Runner
    request: dict[str, Any]  # the probes to run on the node itself
    replayed: list[dict[str, Any]] = field(default_factory=list)  # answered from a recording
    profile: profiles.Profile | None = None
    remote: bool = True  # an SSH node: its reachability is a finding
    deadline_s: float = 0.0
    skip: bool = False  # resume: every probe already answered, judge what is recorded

    @property
    def probes(self) -> list[str]:
        """Every probe this plan records, replayed or run."""
        return [r["probe"] for r in self.replayed] + [s["name"] for s in self.request["probes"]]


def plan_node(
    node: str,
    host_vars: dict[str, object],
    runner: Runner,
    suite: Suite,
    profile: profiles.Profile | None,
    data_dirs: list[str] | None = None,
    done: NodeFacts | None = None,
    remote: bool = True,
) -> NodePlan:
    """A node's plan from its inventory variables; `done` (resume) drops probes that ran."""
    dirs = _data_dirs(host_vars.get("bringup_data_dirs"), node) or data_dirs
    request = build_request(suite, dirs, _probe_params(host_vars.get("bringup_probe_params"), node))
    finished = {p for p, r in (done.probes.items() if done else []) if r.ok}
    steps = [s for s in request["probes"] if s["name"] not in finished]
    replayed: list[dict[str, Any]] = []
    if host_vars.get("bringup_replay") is not None:
        recording = load_replay(host_vars["bringup_replay"], node)
        for step in list(steps):
            record = recording.probes.get(step["name"])
            if record is not None:
                copy = record.model_dump(mode="json")
                copy["params"] = {**copy.get("params", {}), "replayed": True}
                replayed.append(copy)
                steps.remove(step)
    overrides = host_vars.get("bringup_profile_overrides")
    judged_by = node_profile(profile, overrides, node) if profile is not None else None
    if done is not None and not steps and not replayed:
        return NodePlan(
            node,
            runner,
            {"probes": []},
            [],
            judged_by,
            remote,
            0.0,
            skip=True,
        )
    return NodePlan(
        node=node,
        runner=runner,
        request={"probes": steps},
        replayed=replayed,
        profile=judged_by,
        remote=remote,
        deadline_s=sum(float(s["timeout_s"]) for s in steps) + NODE_SLACK_S,
    )


# --- judging a node's outcome: pure -------------------------------------------------------


@dataclass
class NodeOutcome:
    node: str
    state: State
    reason: str | None = None
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0


def outcome_findings(
    plan: NodePlan, facts: NodeFacts, state: State, reason: str | None
) -> list[Finding]:
    """The node's findings: its checks' verdicts plus what happened to the node itself."""
    profile = plan.profile
    assert profile is not None
    findings = judge_node(facts, profile)
    node = plan.node
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
                action=None if state == "interrupted" else "check the node (console, dmesg)",
            )
        )
        for probe in missing:
            for f in judge_probe(probe, None, f"not measured: {what}", profile):
                extra.append(f.model_copy(update={"node": node}))
    return [*extra, *findings]


def _unreachable_action(reason: str) -> str:
    if reason.startswith("host key mismatch"):
        return "verify the node's identity; if it was reinstalled, remove its old known_hosts line"
    if reason.startswith("host key unknown"):
        return "add the node's key to known_hosts, or rerun with --accept-new-hostkeys"
    if reason.startswith("authentication failed"):
        return "check ansible_user and ansible_ssh_private_key_file (or the agent) for this node"
    return "check that the node is up, sshd runs and the address and port are right"


# --- live progress on stderr --------------------------------------------------------------


class FleetProgress:
    """Nodes done / running / failed, and the slowest node and what it is doing (rich)."""

    def __init__(self, total: int, console: Console) -> None:
        self.total = total
        self.console = console
        self._lock = threading.Lock()
        self._running: dict[str, tuple[float, str]] = {}  # node -> (started, doing)
        self.done = 0
        self.failed = 0
        self.started = time.monotonic()
        self._live = Live(get_renderable=self.render, console=console, refresh_per_second=4)

    def __enter__(self) -> FleetProgress:
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.stop()

    def doing(self, node: str, what: str) -> None:
        with self._lock:
            started = self._running.get(node, (time.monotonic(), ""))[0]
            self._running[node] = (started, what)

    def finished(self, outcome: NodeOutcome) -> None:
        with self._lock:
            self._running.pop(outcome.node, None)
            self.done += 1
            if outcome.state in ("unreachable", "error"):
                self.failed += 1

    def render(self) -> Group:
        with self._lock:
            running = dict(self._running)
            done, failed = self.done, self.failed
        now = time.monotonic()
        line = Text()
        line.append(f"nodes {done}/{self.total} done", style="bold")
        line.append(f"  {len(running)} running  ")
        line.append(f"{failed} failed", style="bold red" if failed else "dim")
        line.append(f"  {now - self.started:.0f} s", style="dim")
        bar = Table.grid()  # a grid row ends its line, a bare ProgressBar does not
        bar.add_row(ProgressBar(total=self.total, completed=done, width=50))
        parts: list[Any] = [line, bar]
        if running:
            node, (started, what) = min(running.items(), key=lambda kv: kv[1][0])
            parts.append(Text(f"slowest: {node} {what} ({now - started:.0f} s)", style="cyan"))
        return Group(*parts)

    def summary(self, outcomes: list[NodeOutcome]) -> Text:
        counts: dict[str, int] = {}
        for o in outcomes:
            counts[o.state] = counts.get(o.state, 0) + 1
        text = ", ".join(f"{n} {state}" for state, n in counts.items())
        return Text(f"{len(outcomes)} nodes in {time.monotonic() - self.started:.1f} s: {text}")


# --- running ------------------------------------------------------------------------------


def run(
    plans: list[NodePlan],
    rundir: RunDir,
    forks: int = DEFAULT_FORKS,
    console: Console | None = None,
) -> list[NodeOutcome]:
    """Run every plan, `forks` nodes at a time; outcomes in plan order. Ctrl-C stops all.

    Plans without a profile (snapshot) are recorded, not judged: no findings are written.
    """
    rundir.add_nodes([p.node for p in plans])
    stop = threading.Event()
    progress = FleetProgress(len(plans), console or Console(stderr=True))
    outcomes: dict[str, NodeOutcome] = {}
    with progress, ThreadPoolExecutor(max_workers=max(1, forks)) as pool:
        futures: dict[Future[NodeOutcome], NodePlan] = {
            pool.submit(_run_node, plan, rundir, stop, progress): plan for plan in plans
        }
        pending = set(futures)
        try:
            while pending:
                # A timeout keeps the main thread able to take Ctrl-C while nodes run.
                finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for future in finished:
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
    for plan in plans:
        if plan.node not in outcomes:  # never started: Ctrl-C came first
            outcomes[plan.node] = _finish(plan, rundir, "interrupted", None, 0.0)
    ordered = [outcomes[p.node] for p in plans]
    progress.console.print(progress.summary(ordered), highlight=False)
    if stop.is_set():
        rundir.manifest.status = "interrupted"
    return ordered


def _run_node(
    plan: NodePlan, rundir: RunDir, stop: threading.Event, progress: FleetProgress
) -> NodeOutcome:
    """One node from connect to findings. Never raises: every failure is an outcome."""
    started = time.monotonic()
    if stop.is_set():
        return _finish(plan, rundir, "interrupted", None, 0.0)
    if plan.skip:
        return _finish(plan, rundir, "complete", None, 0.0, progress)
    names = [s["name"] for s in plan.request["probes"]]
    answered = 0
    state: State = "complete"
    reason: str | None = None
    replay_written = False

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
    try:
        for record in plan.runner(plan.request, plan.deadline_s, stop, on_stage):
            rundir.add_record(plan.node, record)
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
    return _finish(plan, rundir, state, reason, time.monotonic() - started, progress)


def local_runner() -> Runner:
    """The node side as a child process of this one (`--local`): the same path, no SSH."""
    from bringup.transport import run_local

    def runner(
        request: dict[str, Any], deadline_s: float, stop: threading.Event, on_stage: Stage
    ) -> Iterator[dict[str, Any]]:
        on_stage("running")
        yield from run_local(request, deadline_s, stop)

    return runner


def ssh_runner(host: Any, connector: Any, code: Any) -> Runner:
    """A node reached over SSH (bringup.ssh), sharing one connector and one code zip."""
    from bringup.ssh import run_ssh

    def runner(
        request: dict[str, Any], deadline_s: float, stop: threading.Event, on_stage: Stage
    ) -> Iterator[dict[str, Any]]:
        return run_ssh(
            host, request, deadline_s, connector=connector, code=code, stop=stop, on_stage=on_stage
        )

    return runner


def _finish(
    plan: NodePlan,
    rundir: RunDir,
    state: State,
    reason: str | None,
    seconds: float,
    progress: FleetProgress | None = None,
) -> NodeOutcome:
    findings: list[Finding] = []
    if plan.profile is not None:
        findings = outcome_findings(plan, rundir.facts_of(plan.node), state, reason)
        rundir.add_findings(findings)
    outcome = NodeOutcome(plan.node, state, reason, findings, round(seconds, 3))
    if progress is not None:
        progress.finished(outcome)
    return outcome
