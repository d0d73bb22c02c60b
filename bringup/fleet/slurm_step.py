"""Many nodes in one Slurm step: one `srun` over a wave of nodes, each task streaming its
node's records back through it, told apart by srun's task label.

Why (measured, benchmarks/slurm_launch.py, docs/scale.md#slurm-launch): a step costs the
controller a srun process (13 to 22 ms of CPU) and slurmctld three RPCs and about 3 ms of
CPU, whatever it runs. One step per node is 10,000 srun processes and 30,000 RPCs for a
10,000-node check (20,000 steps on a first run, with the code uploads: Slurm's default
MaxStepCount is 40,000 per job); one step per wave of nodes is a few hundred.

How a run goes (`StepLauncher`, one per run; a runner per node, as every transport):

- fleet.run announces every node's request before any runs (`Gathered.announce`); the
  first node of a wave to start starts the wave: the next `wave` announced nodes (the
  run's --forks), in the order fleet.run starts them;
- a wave runs one step per distinct request (usually one): the node code's own start
  command (fleet/node_code.py's BOOT) on every task, the request framed on every task's
  stdin, `--label` on its output; each node answers first whether the zip in its cache is
  the controller's (size and sha256, checked at every start) and runs it, or exits 97
  when it is not there: those nodes run again together in one more step, the zip behind
  the request on every task's stdin, stored on the node (checked as over SSH) and run.
  One step per wave when the nodes have the code, two on a first run;
- task i of a step runs on the i-th of its nodes in the job's order (Slurm's block
  distribution, one task per node); each task says its node's name (`$SLURMD_NODENAME`)
  first and its exit status last, and a node that names another is that node's ERROR;
- the request asks the node side (node/protocol.py's PIECES_FIELD, DEADLINE_FIELD) to
  write each record in pieces of at most 1000 bytes (srun cuts a longer line and labels
  each part) and to stop itself at the node's deadline (the probe tree killed, exit 124):
  one step's nodes keep their own deadlines;
- a node whose task cannot start (srun: `Task launch ... failed on node X`) is
  UNREACHABLE with srun's reason, and a node whose slurmstepd srun loses mid-step (the
  node died: `aborting, io error with slurmstepd on node I`) is that node's ERROR; srun
  ends the whole step for either, so the step's other silent nodes (no exit status said)
  run again in a new step, each with the probes it has not answered yet, and at most
  MAX_RERUNS times (a flapping allocation cannot loop: a node cut off again is its ERROR);
- the controller keeps each node's probe deadline as for any transport (ProbeWatch):
  a node that hangs or dies mid-run is that node's ERROR, and its step is ended when
  every node in it has ended; Ctrl-C ends every step (SIGTERM to srun, which ends the
  tasks; SIGKILL after STOP_WAIT_S), and the allocation is released by its owner.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import queue
import re
import signal
import subprocess
import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bringup.fleet.inventory import Host
from bringup.fleet.node_code import (
    NEED_CODE_EXIT,
    NodeCode,
    code_answer,
    remote_command,
    request_frame,
)
from bringup.fleet.slurm import STDERR_KEPT, STOP_WAIT_S, Allocation, launch_failure
from bringup.fleet.transport import (
    MAX_LINE_BYTES,
    STOP_POLL_S,
    Interrupted,
    ProbeWatch,
    Stage,
    TransportError,
    Unreachable,
    decode_line,
    is_progress,
)
from bringup.node.protocol import DEADLINE_EXIT, DEADLINE_FIELD, PIECES_FIELD

PIECE_BYTES = 1000  # under srun's 1 KiB cut of a labelled line
NODE_MARK = "bringup-node "
EXIT_MARK = "bringup-exit "
ENDING_S = 2.0  # srun's own end after its last task's exit status
MAX_RERUNS = 1  # steps a node may run again in, when srun ended its step over another node
_LABEL = re.compile(rb"^\s*(\d+): ?(.*)$")
_LAUNCH = re.compile(r"failed on node (\S+?):")
# srun (src/api/step_launch.c, step_launch_notify_io_failure) when its I/O connection to a
# node's slurmstepd breaks: it ends the whole step. I is the node's index in the step.
_IO_ABORT = re.compile(
    r"(?:aborting, io error with slurmstepd|io error and missing step) on node (\d+)"
)


# --- pure: command lines and what srun prints ----------------------------------------------


def step_argv(job_id: str, nodes: Sequence[str], command: str) -> list[str]:
    """One task on each of `nodes`, stdin to every task, each output line labelled."""
    return [
        "srun",
        f"--jobid={job_id}",
        f"--nodelist={','.join(nodes)}",
        f"--nodes={len(nodes)}",
        f"--ntasks={len(nodes)}",
        "--ntasks-per-node=1",
        "--distribution=block",
        "--overlap",
        "--quiet",
        "--label",
        "--input=all",
        "--job-name=bringup",
        "sh",
        "-c",
        command,
    ]


def _marked(body: str) -> str:
    """`body` between the task's name and its exit status, each on a line of its own."""
    return f'echo "{NODE_MARK}$SLURMD_NODENAME"; {body}; s=$?; echo; echo "{EXIT_MARK}$s"'


def run_command(code: NodeCode, python: str, store: bool = False) -> str:
    """The node code's start command (fleet/node_code.py's BOOT) in a subshell, so that
    its exit status is said after it; `store`: the zip follows the request on stdin."""
    return _marked(f"({remote_command(code, python, store=store)})")


def node_request(request: dict[str, Any], deadline_s: float) -> bytes:
    """The request as a task's stdin: framed for BOOT, asking the node side for pieces
    under srun's cut and to stop itself at the node's deadline (whole seconds, rounded up)."""
    seconds = max(1, math.ceil(deadline_s))
    return request_frame({**request, PIECES_FIELD: PIECE_BYTES, DEADLINE_FIELD: seconds})


def job_order(nodes: Sequence[str], order: Sequence[str]) -> list[str]:
    """`nodes` in the job's order (Slurm's node order: task i runs on the i-th)."""
    rank = {name: i for i, name in enumerate(order)}
    return sorted(nodes, key=lambda n: (rank.get(n, len(rank)), n))


def launch_failures(stderr: str) -> dict[str, str]:
    """Node -> srun's reason, for each node where the step's task could not start."""
    failed = {}
    for line in stderr.splitlines():
        match = _LAUNCH.search(line)
        if line.startswith("srun: error:") and match:
            failed[match.group(1)] = line.removeprefix("srun: error:").strip()
    return failed


def io_failures(stderr: str, nodes: Sequence[str]) -> dict[str, str]:
    """Node -> srun's reason, for each node of the step (`nodes`, in the step's order) whose
    slurmstepd srun lost mid-step (the node died): the I/O error srun said before it
    gave up on the node, else its giving up."""
    lost: dict[str, str] = {}
    before = ""
    for line in stderr.splitlines():
        said = line.removeprefix("srun: error:").strip()
        match = _IO_ABORT.search(line)
        if line.startswith("srun: error:") and match:
            index = int(match.group(1))
            if index < len(nodes):
                lost.setdefault(nodes[index], before or said)
            before = ""
        elif line.startswith("srun: error:"):
            before = said
    return lost


def runs_again(
    silent: Sequence[str], blamed: Collection[str], reruns: Mapping[str, int]
) -> list[str]:
    """The nodes of a step that run again in a new one: those that said no exit status
    (`silent`), when srun ended the step over other nodes (`blamed`: a launch that failed
    there, their slurmstepd lost), each at most MAX_RERUNS times (`reruns`: so far). A step
    that ended with no node to blame is no one's to run again."""
    if not blamed:
        return []
    return [n for n in silent if n not in blamed and reruns.get(n, 0) < MAX_RERUNS]


class TaskLines:
    """One task's lines from a labelled step: pieces joined, marks read, bounded."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.named: str | None = None
        self.exit: int | None = None
        self.code: str | None = None  # BOOT's first line: "cached" or "needed"
        self._parts: list[bytes] = []
        self._size = 0

    def feed(self, text: bytes) -> bytes | None:
        """A whole JSON line once its last piece is here (node/protocol.py `pieces`); None
        for a piece, a mark or a blank. A record cut short (the node side killed in the
        middle of it: the shell's blank line and exit status follow) is dropped."""
        if text.startswith(b"+"):
            self._parts.append(text[1:])
            self._size += len(text) - 1
            if self._size > MAX_LINE_BYTES:
                raise TransportError(
                    f"{self.node} sent a line of over {MAX_LINE_BYTES // 2**20} MiB without "
                    "its end (node side gone wrong?); stopped reading it"
                )
            return None
        if text.startswith(b"="):
            line = b"".join([*self._parts, text[1:]])
            self._parts, self._size = [], 0
            return line if self.code is not None else None
        self._parts, self._size = [], 0
        said = text.decode(errors="replace")
        if said.startswith(NODE_MARK) and self.named is None:
            self.named = said.removeprefix(NODE_MARK).strip()
        elif said.startswith(EXIT_MARK):
            with contextlib.suppress(ValueError):
                self.exit = int(said.removeprefix(EXIT_MARK))
        elif self.code is None:  # before BOOT's word on the zip, nothing is a record
            self.code = code_answer(text)
        elif text.strip():
            return text
        return None

    @property
    def settled(self) -> bool:
        """Running its cached code, or ended: nothing more to learn about its zip."""
        return self.code == "cached" or self.exit is not None


# --- one step over many nodes ---------------------------------------------------------------

Item = tuple[str, Any]  # ("record", dict) | ("failed", TransportError) | ("ended", Step)


class Step:
    """One srun over `nodes` (in the job's order), its output sorted out per node."""

    def __init__(
        self,
        job_id: str,
        nodes: list[str],
        command: str,
        stdin: bytes,
        deliver: dict[str, NodeRun] | None = None,
        store: bool = False,
    ) -> None:
        self.nodes = nodes
        self.store = store  # the zip follows the request on every task's stdin
        self.settled = threading.Event()  # every task runs its cached code, or has ended
        self._unsettled = len(nodes)
        self.tasks = [TaskLines(n) for n in nodes]
        self.deliver = deliver or {}
        self.stderr: dict[str, bytes] = {n: b"" for n in nodes}
        self.srun_stderr = ""
        self.broken: set[str] = set()  # nodes whose output was refused: nothing more read
        self.again: list[str] = []  # its nodes that run again in a new step (`runs_again`)
        self.proc = subprocess.Popen(
            step_argv(job_id, nodes, command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # Ctrl-C reaches the controller, which ends the step
        )
        self._err = threading.Thread(target=self._read_stderr, daemon=True)
        self._err.start()
        self._feeder = threading.Thread(target=self._feed, args=(stdin,), daemon=True)
        self._feeder.start()
        self._out = threading.Thread(target=self._read_stdout, daemon=True)
        self._out.start()

    def _feed(self, stdin: bytes) -> None:
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, OSError):
            self.proc.stdin.write(stdin)
        with contextlib.suppress(BrokenPipeError, OSError):
            self.proc.stdin.close()

    def _task(self, label: bytes) -> TaskLines | None:
        index = int(label)
        return self.tasks[index] if index < len(self.tasks) else None

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            match = _LABEL.match(raw.rstrip(b"\n"))
            task = self._task(match.group(1)) if match else None
            if task is None or task.node in self.broken:
                continue
            try:
                was_settled = task.settled
                line = task.feed(match.group(2))  # type: ignore[union-attr]
                if task.settled and not was_settled:
                    self._unsettled -= 1
                    if not self._unsettled:
                        self.settled.set()
                if task.named is not None and task.named != task.node:
                    raise TransportError(
                        f"the step's task for {task.node} ran on {task.named[:80]!r}"
                    )
                if line is not None:
                    record = decode_line(line)
                    target = self.deliver.get(task.node)
                    if target is not None and not is_progress(record):
                        # Counted as it arrives, not as the runner takes it: a node run
                        # again is asked only what it has not answered, never twice.
                        target.answered += 1
                    self._put(task.node, ("record", record))
                elif task.exit is not None:  # the task is over: its node need not wait for srun
                    self._put(task.node, ("ended", self))
            except TransportError as exc:
                self.broken.add(task.node)
                self._put(task.node, ("failed", exc))
        self.proc.wait()
        self._err.join()
        self.again = self._cut_off()  # decided once, before any node hears its step ended
        self.settled.set()
        for task in self.tasks:
            if task.exit is None:  # said "ended" already when its exit status came
                self._put(task.node, ("ended", self))

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        own: list[str] = []
        for raw in self.proc.stderr:
            match = _LABEL.match(raw.rstrip(b"\n"))
            task = self._task(match.group(1)) if match else None
            if task is not None and match is not None:
                kept = self.stderr[task.node] + match.group(2) + b"\n"
                self.stderr[task.node] = kept[-STDERR_KEPT:]
            else:
                own = [*own, raw.decode(errors="replace").rstrip()][-200:]
        self.srun_stderr = "\n".join(own)

    def _put(self, node: str, item: Item) -> None:
        """To the node's runner, unless it has ended (nothing more is kept of it)."""
        target = self.deliver.get(node)
        if target is not None and not target.done:
            target.items.put(item)

    def join(self) -> None:
        """Until srun has ended and every node of the step has had its "ended"."""
        self._out.join()

    def wait(self, timeout_s: float) -> None:
        """Until srun ends (ended at `timeout_s`)."""
        self._out.join(timeout_s)
        if self._out.is_alive():
            self.end()
            self._out.join()

    def end(self) -> None:
        """Stop srun if it still runs: SIGTERM ends the step's tasks, then SIGKILL."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def task(self, node: str) -> TaskLines:
        return self.tasks[self.nodes.index(node)]

    def needs_code(self, node: str) -> bool:
        """The node said its cache lacks the zip and exited for it (a step without it):
        the wave runs it again with the zip. The node's runner and the wave both ask."""
        task = self.task(node)
        return not self.store and task.code == "needed" and task.exit == NEED_CODE_EXIT

    def _cut_off(self) -> list[str]:
        """The nodes that run again, each counted against its MAX_RERUNS."""
        waiting = {n: run for n, run in self.deliver.items() if n not in self.broken}
        silent = [
            name
            for name, run in waiting.items()
            if self.task(name).exit is None and not run.done and run.remaining()["probes"]
        ]
        reruns = {n: self.deliver[n].reruns for n in silent}
        again = runs_again(silent, self.blamed(), reruns)
        for name in again:
            self.deliver[name].reruns += 1
        return again

    def failures(self) -> dict[str, str]:
        """Node -> srun's reason, for each node where the step's task could not start."""
        return launch_failures(self.srun_stderr)

    def blamed(self) -> dict[str, str]:
        """Node -> srun's reason, for each node srun ended the whole step over."""
        return {**io_failures(self.srun_stderr, self.nodes), **self.failures()}

    def last_line(self, node: str) -> str:
        text = self.stderr.get(node, b"").decode(errors="replace")
        lines = [x for x in text.strip().splitlines() if x.strip()]
        return lines[-1][:200] if lines else ""


# --- a wave: the nodes started together -----------------------------------------------------


@dataclass
class NodeRun:
    """One announced node of a run: what it asked and what it answered so far."""

    host: Host
    request: dict[str, Any]
    deadline_s: float
    end: float = 0.0  # its deadline on the node side (time.monotonic()), from its wave's start
    items: queue.SimpleQueue[Item] = field(default_factory=queue.SimpleQueue)
    answered: int = 0  # results (not progress lines) delivered, counted by the step
    reruns: int = 0  # steps it ran again in, cut off by another node's failure (MAX_RERUNS)
    done: bool = False  # its runner has ended: nothing more is read for it
    wave: Wave | None = None

    def remaining(self) -> dict[str, Any]:
        return {**self.request, "probes": self.request["probes"][self.answered :]}


class Wave:
    """Up to --forks nodes started together: their steps (with the code where it lacks)."""

    def __init__(self, launcher: StepLauncher, nodes: list[NodeRun]) -> None:
        self.launcher = launcher
        self.nodes = {n.host.name: n for n in nodes}
        started = time.monotonic()
        for node in nodes:  # each node's deadline runs from its wave's start
            node.end = started + node.deadline_s
        self.steps: list[Step] = []
        self.lock = threading.Lock()
        self.closed = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self._run_steps(list(self.nodes), store=False)
        except Exception as exc:  # a controller bug must end each node, not hang them
            for node in self.nodes.values():
                node.items.put(("failed", TransportError(f"controller error: {exc}")))

    def _step(self, nodes: list[str], command: str, stdin: bytes, store: bool) -> Step | None:
        """A step over `nodes` (None when the wave was closed: Ctrl-C, the run ended)."""
        launcher = self.launcher
        ordered = job_order(nodes, launcher.allocation.nodes)
        queues = {n: self.nodes[n] for n in ordered}
        with self.lock:
            if self.closed:
                return None
            step = Step(launcher.allocation.job_id, ordered, command, stdin, queues, store)
            self.steps.append(step)
        return step

    def _run_steps(self, names: list[str], store: bool) -> None:
        """One step per distinct request (what each node has still to answer), all at once;
        the nodes that lack the code run again in a step that brings it, as soon as every
        node of their step has said; the nodes cut off when srun ended a step over another
        node run again (`Step.again`)."""
        groups: dict[str, list[str]] = {}
        for name in names:
            node = self.nodes[name]
            if node.done or not node.remaining()["probes"]:
                continue
            key = json.dumps([node.remaining(), node.deadline_s, node.host.python], sort_keys=True)
            groups.setdefault(key, []).append(name)
        code = self.launcher.code
        steps = []
        for key, members in groups.items():
            request, _, python = json.loads(key)
            # What is left of the members' deadlines: one step, one deadline for its nodes.
            left = min(self.nodes[n].end for n in members) - time.monotonic()
            stdin = node_request(request, left) + (code.data if store else b"")
            step = self._step(members, run_command(code, python, store), stdin, store)
            if step is not None:
                steps.append(step)
                for name in members:  # each node's probe clock starts with its step
                    self.nodes[name].items.put(("started", step))
        if not store:
            for step in steps:
                self._wait_settled(step)
            needed = [n for step in steps for n in step.nodes if step.needs_code(n)]
            if needed:
                self._run_steps(needed, store=True)
        for step in steps:
            step.join()
        again = [name for step in steps for name in step.again]
        if again:
            self._run_steps(again, store)

    def _wait_settled(self, step: Step) -> None:
        """Until every node of `step` runs its cached code or has ended (or its runner has
        given up on it: a node hung before its first line holds no other node back)."""
        while not step.settled.wait(STOP_POLL_S):
            if self.closed or all(t.settled or self.nodes[t.node].done for t in step.tasks):
                return

    def close(self) -> None:
        """End every step of the wave (Ctrl-C, or the run is over)."""
        with self.lock:
            self.closed = True
            steps = list(self.steps)
        for step in steps:
            step.end()

    def node_ended(self, at_once: bool = False) -> None:
        """A node's runner ended: when all have, nothing of the wave is needed any more
        (srun, whose tasks have all said their exit status, is given a moment to end on
        its own: no step is cancelled that was ending anyway; none on Ctrl-C)."""
        if all(n.done for n in self.nodes.values()):
            with self.lock:
                steps = list(self.steps)
            for step in steps if not at_once else []:
                step.wait(ENDING_S)
            self.close()


# --- the run: waves of announced nodes, a runner per node -------------------------------------


class StepLauncher:
    """The Slurm transport of one run: every node in a step shared with its wave."""

    def __init__(self, allocation: Allocation, code: NodeCode) -> None:
        self.allocation = allocation
        self.code = code
        self.lock = threading.Lock()
        self.announced: list[tuple[NodeRun, int]] = []
        self.waves: list[Wave] = []

    def runner(self, host: Host) -> NodeRunner:
        return NodeRunner(self, host)

    def wave_of(self, node: NodeRun) -> Wave:
        """The node's wave, started with the next announced nodes when it has none."""
        with self.lock:
            if node.wave is None:
                waiting = [(n, w) for n, w in self.announced if n.wave is None]
                size = next((w for n, w in waiting if n is node), 1)
                others = [n for n, _ in waiting if n is not node]
                chosen = [node, *others[: max(0, size - 1)]]
                names = [n.host.name for n in chosen]
                # A node twice in one wave (two plans of one node) waits for the next.
                chosen = [n for i, n in enumerate(chosen) if n.host.name not in names[:i]]
                wave = Wave(self, chosen)
                for member in chosen:
                    member.wave = wave
                self.waves.append(wave)
            assert node.wave is not None
            return node.wave

    def close(self) -> None:
        """End every step still running (the run is over, or interrupted)."""
        with self.lock:
            waves = list(self.waves)
        for wave in waves:
            wave.close()


class NodeRunner:
    """The runner of one node (fleet.run calls it in the node's thread)."""

    def __init__(self, launcher: StepLauncher, host: Host) -> None:
        self.launcher = launcher
        self.host = host
        self.node: NodeRun | None = None

    def announce(self, request: dict[str, Any], deadline_s: float, wave: int) -> None:
        """What the node will be asked, before any node runs: its wave is formed with it."""
        self.node = NodeRun(self.host, request, deadline_s)
        with self.launcher.lock:
            self.launcher.announced.append((self.node, max(1, wave)))

    def __call__(
        self,
        request: dict[str, Any],
        deadline_s: float,
        stop: threading.Event,
        on_stage: Stage,
    ) -> Iterator[dict[str, Any]]:
        if self.node is None or self.node.request is not request:
            self.announce(request, deadline_s, 1)  # called without fleet.run's announce
        node = self.node
        assert node is not None
        end = time.monotonic() + deadline_s
        watch = ProbeWatch(request)
        wave = self.launcher.wave_of(node)
        on_stage("running")
        stage = "running"
        try:
            while True:
                now = time.monotonic()
                if stop.is_set():
                    raise Interrupted("interrupted")
                if now >= end:
                    raise TransportError(f"node did not finish within {deadline_s:g} s")
                watch.check(now, "node hung or step stuck")
                try:
                    kind, value = node.items.get(timeout=min(end - now, STOP_POLL_S))
                except queue.Empty:
                    continue
                if kind == "failed":
                    raise value
                if kind == "started":
                    watch = ProbeWatch(node.remaining())
                    continue
                if kind == "record":
                    if stage != "running":  # the code stored, the node side runs
                        stage = "running"
                        on_stage(stage)
                    watch.saw(value)
                    yield value
                    continue
                step: Step = value  # "ended": the step that ran the node is over
                name = node.host.name
                if watch.unanswered() is None and step.task(name).exit is None:
                    return  # every probe answered, then srun ended the step
                failed = step.failures()
                if name in failed and not watch.answered:
                    raise Unreachable(f"srun: {failed[name]}")
                if name in step.again:
                    continue  # srun ended it over another node: it runs again
                if step.needs_code(name) and not watch.answered:
                    stage = "uploading probe code"  # the wave runs it again with the zip
                    on_stage(stage)
                    continue
                self._finished(step, watch)
                return
        finally:
            node.done = True
            wave.node_ended(at_once=stop.is_set())

    def _why(self, step: Step) -> str:
        """Why the node's task said no exit status, as far as srun says."""
        name = self.host.name
        blamed = step.blamed()
        if name in blamed:
            lost = name not in step.failures()
            return f"srun lost the node's slurmstepd: {blamed[name]}" if lost else blamed[name]
        if blamed:  # cut off over others, and run again as often as it may
            others = ", ".join(sorted(blamed))
            return f"srun ended the step over {others}: {next(iter(blamed.values()))}"
        return launch_failure(step.srun_stderr) or step.last_line(name) or "no exit status"

    def _finished(self, step: Step, watch: ProbeWatch) -> None:
        """Nothing when the node's step ended as it should, else TransportError (why)."""
        name = self.host.name
        task = step.task(name)
        status = task.exit
        last = step.last_line(name)
        if status is None:
            raise TransportError(
                f"the node's task ended without its exit status: {self._why(step)}"
            )
        if status == DEADLINE_EXIT:
            node = self.node
            deadline = f"{node.deadline_s:g} s" if node else "its deadline"
            raise TransportError(f"the node side stopped itself at the node's deadline, {deadline}")
        if status == 127:
            raise TransportError(f"python3 not found on the node: {last}")
        if step.store and status != 0 and not watch.answered:
            raise TransportError(f"cannot store the probe code on the node: {last}")
        if status != 0:
            raise TransportError(f"node side exited {status}: {last}")
        if (missing := watch.unanswered()) is not None:
            raise TransportError(f"node side ended before probe {missing} answered")
