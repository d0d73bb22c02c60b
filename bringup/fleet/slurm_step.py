"""Many nodes in one Slurm step: one `srun` over a wave of nodes, each task streaming its
node's records back through it, told apart by srun's task label.

Why (measured, benchmarks/slurm_launch.py, docs/scale.md#slurm-launch): a step costs the
controller a srun process (about 19 ms of CPU) and slurmctld three RPCs and about 3 ms of
CPU, whatever it runs. One step per node is 10,000 srun processes and 30,000 RPCs for a
10,000-node check (up to 30,000 steps on a first run, with the code uploads: Slurm's
default MaxStepCount is 40,000 per job); one step per wave of nodes is a few hundred.

How a run goes (`StepLauncher`, one per run; a runner per node, as every transport):

- fleet.run announces every node's request before any runs (`Gathered.announce`); the
  first node of a wave to start starts the wave: the next `wave` announced nodes (the
  run's --forks), in the order fleet.run starts them;
- a wave asks its nodes whether the probe code is in their cache (one short step), stores
  it where it is not (one step over those nodes, the zip on every task's stdin, size and
  sha256 checked on the node as over SSH), then runs one step per distinct request
  (usually one): the request on every task's stdin, `--label` on its output;
- task i of a step runs on the i-th of its nodes in the job's order (Slurm's block
  distribution, one task per node); each task says its node's name (`$SLURMD_NODENAME`)
  first and its exit status last, and a node that names another is that node's ERROR;
- the node side writes each record in pieces of at most 1000 bytes (srun cuts a longer
  line and labels each part), and stops itself at the node's deadline (`--deadline-s`:
  the probe tree killed, exit 124): one step's nodes keep their own deadlines;
- a node whose task cannot start (srun: `Task launch ... failed on node X`) is
  UNREACHABLE with srun's reason; srun then ends the whole step, so the wave's other
  nodes run again in a new step, each with the probes it has not answered yet;
- the controller keeps each node's probe deadline as for any transport (ProbeWatch):
  a node that hangs or dies mid-run is that node's ERROR, and its step is ended when
  every node in it has ended; Ctrl-C ends every step (SIGTERM to srun, which ends the
  tasks; SIGKILL after STOP_WAIT_S), and the allocation is released by its owner.

A node whose cached code is there but will not start is repaired on its own: the zip
stored again over the old one and the node run in a step of its own (fleet/slurm.py's
run_slurm), as the per-node path has always done.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from bringup.fleet.inventory import Host
from bringup.fleet.node_code import (
    CACHE_SHELL,
    NEED_CODE_EXIT,
    PRIVATE_SHELL,
    NodeCode,
    upload_command,
)
from bringup.fleet.slurm import STDERR_KEPT, STOP_WAIT_S, Allocation, launch_failure, run_slurm
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

PIECE_BYTES = 1000  # under srun's 1 KiB cut of a labelled line
NODE_MARK = "bringup-node "
EXIT_MARK = "bringup-exit "
HAVE_MARK = "bringup-code "
DEADLINE_EXIT = 124  # the node side stopped at its own deadline (node/protocol.py)
CHECK_S = 60.0  # the most the code check and an upload step may take
ENDING_S = 2.0  # srun's own end after its last task's exit status
_LABEL = re.compile(rb"^\s*(\d+): ?(.*)$")
_LAUNCH = re.compile(r"failed on node (\S+?):")


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


def run_command(code: NodeCode, python: str, deadline_s: float) -> str:
    """The cached zip with the node's deadline and pieced output; 97 when it is not there."""
    node_side = (
        f'{CACHE_SHELL}f="$d/{code.file_name}"; '
        f'if {PRIVATE_SHELL} && [ -f "$f" ]; then '
        f'{shlex.quote(python)} "$f" --pieces {PIECE_BYTES} --deadline-s {deadline_s:.0f}; '
        f"else (exit {NEED_CODE_EXIT}); fi"
    )
    return _marked(node_side)


def check_command(code: NodeCode) -> str:
    """Whether the zip is in the node's cache: `bringup-code yes|no`."""
    have = f'{CACHE_SHELL}f="$d/{code.file_name}"; {PRIVATE_SHELL} && [ -f "$f" ]'
    return _marked(f'if {have}; then echo "{HAVE_MARK}yes"; else echo "{HAVE_MARK}no"; fi')


def store_command(code: NodeCode, python: str) -> str:
    return _marked(f"sh -c {shlex.quote(upload_command(code, python))}")


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


class TaskLines:
    """One task's lines from a labelled step: pieces joined, marks read, bounded."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.named: str | None = None
        self.exit: int | None = None
        self.have: bool | None = None
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
            return line
        self._parts, self._size = [], 0
        said = text.decode(errors="replace")
        if said.startswith(NODE_MARK) and self.named is None:
            self.named = said.removeprefix(NODE_MARK).strip()
        elif said.startswith(EXIT_MARK):
            with contextlib.suppress(ValueError):
                self.exit = int(said.removeprefix(EXIT_MARK))
        elif said.startswith(HAVE_MARK):
            self.have = said.removeprefix(HAVE_MARK).strip() == "yes"
        elif text.strip():
            return text
        return None


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
    ) -> None:
        self.nodes = nodes
        self.tasks = [TaskLines(n) for n in nodes]
        self.deliver = deliver or {}
        self.stderr: dict[str, bytes] = {n: b"" for n in nodes}
        self.srun_stderr = ""
        self.broken: set[str] = set()  # nodes whose output was refused: nothing more read
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
                line = task.feed(match.group(2))  # type: ignore[union-attr]
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

    def failures(self) -> dict[str, str]:
        return launch_failures(self.srun_stderr)

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
    items: queue.SimpleQueue[Item] = field(default_factory=queue.SimpleQueue)
    answered: int = 0  # results (not progress lines) delivered, counted by the step
    done: bool = False  # its runner has ended: nothing more is read for it
    wave: Wave | None = None

    def remaining(self) -> dict[str, Any]:
        return {**self.request, "probes": self.request["probes"][self.answered :]}


class Wave:
    """Up to --forks nodes started together: the code check, the uploads, the steps."""

    def __init__(self, launcher: StepLauncher, nodes: list[NodeRun]) -> None:
        self.launcher = launcher
        self.nodes = {n.host.name: n for n in nodes}
        self.steps: list[Step] = []
        self.lock = threading.Lock()
        self.closed = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            ready = self._with_code(list(self.nodes))
            self._run_steps(ready)
        except Exception as exc:  # a controller bug must end each node, not hang them
            for node in self.nodes.values():
                node.items.put(("failed", TransportError(f"controller error: {exc}")))

    def _step(self, nodes: list[str], command: str, stdin: bytes, deliver: bool) -> Step | None:
        """A step over `nodes` (None when the wave was closed: Ctrl-C, the run ended)."""
        launcher = self.launcher
        ordered = job_order(nodes, launcher.allocation.nodes)
        queues = {n: self.nodes[n] for n in ordered} if deliver else None
        with self.lock:
            if self.closed:
                return None
            step = Step(launcher.allocation.job_id, ordered, command, stdin, queues)
            self.steps.append(step)
        return step

    def _unreachable(self, failed: dict[str, str]) -> None:
        for name, reason in failed.items():
            if name in self.nodes:
                self.nodes[name].items.put(("failed", Unreachable(f"srun: {reason}")))

    def _with_code(self, names: list[str]) -> list[str]:
        """The nodes that have the code in their cache (stored where it was not); the
        others have been told why not."""
        code = self.launcher.code
        while names:
            step = self._step(names, check_command(code), b"", deliver=False)
            if step is None:
                return []
            step.wait(CHECK_S)
            failed = step.failures()
            self._unreachable(failed)
            answered = [n for n in names if n not in failed and step.task(n).have is not None]
            if failed and len(answered) < len(names) - len(failed):
                names = [n for n in names if n not in failed]
                continue  # srun ended the step at the failed launch: ask the others again
            lost = [n for n in names if n not in failed and n not in answered]
            for name in lost:
                why = step.last_line(name) or launch_failure(step.srun_stderr) or "no answer"
                self.nodes[name].items.put(
                    ("failed", TransportError(f"cannot look for the probe code: {why}"))
                )
            missing = [n for n in answered if not step.task(n).have]
            return [n for n in answered if n not in missing] + self._store(missing)
        return []

    def _store(self, names: list[str]) -> list[str]:
        """Store the zip on `names`, one step per python the nodes name; those where it
        was stored."""
        pythons: dict[str, list[str]] = {}
        for name in names:
            pythons.setdefault(self.nodes[name].host.python, []).append(name)
        return [n for python, group in pythons.items() for n in self._store_with(python, group)]

    def _store_with(self, python: str, names: list[str]) -> list[str]:
        code = self.launcher.code
        step = self._step(names, store_command(code, python), code.data, deliver=False)
        if step is None:
            return []
        step.wait(CHECK_S)
        failed = step.failures()
        self._unreachable(failed)
        stored = [n for n in names if step.task(n).exit == 0]
        rest = [n for n in names if n not in failed and n not in stored]
        if failed and rest:  # srun ended the step at the failed launch: the rest again
            return stored + self._store_with(python, rest)
        for name in rest:
            why = step.last_line(name) or "no answer"
            self.nodes[name].items.put(
                ("failed", TransportError(f"cannot store the probe code on the node: {why}"))
            )
        return stored

    def _run_steps(self, names: list[str]) -> None:
        """One step per distinct request (what each node has still to answer), all at once;
        the nodes of a step whose launch failed elsewhere run again."""
        groups: dict[str, list[str]] = {}
        for name in names:
            node = self.nodes[name]
            if node.done or not node.remaining()["probes"]:
                continue
            key = json.dumps([node.remaining(), node.deadline_s, node.host.python], sort_keys=True)
            groups.setdefault(key, []).append(name)
        steps = []
        for key, members in groups.items():
            request, deadline_s, python = json.loads(key)
            command = run_command(self.launcher.code, python, deadline_s)
            step = self._step(members, command, json.dumps(request).encode(), deliver=True)
            if step is not None:
                steps.append(step)
                for name in members:  # each node's probe clock starts with its step
                    self.nodes[name].items.put(("started", step))
        for step in steps:
            step.join()
        again = []
        for step in steps:
            failed = step.failures()
            if failed:
                again += [n for n in step.nodes if n not in failed and step.task(n).exit is None]
        if again:
            self._run_steps(again)

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
        return self._records(request, deadline_s, stop, on_stage)

    def _records(
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
                    watch.saw(value)
                    yield value
                    continue
                step: Step = value  # "ended": the step that ran the node is over
                if watch.unanswered() is None and step.task(node.host.name).exit is None:
                    return  # every probe answered, then srun ended the step
                failed = step.failures()
                if (
                    failed
                    and node.host.name not in failed
                    and step.task(node.host.name).exit is None
                ):
                    continue  # srun ended it for another node's launch: it runs again
                if self._finished(step, watch):
                    return
                yield from self._repair(node, stop, end, on_stage)
                return
        finally:
            node.done = True
            wave.node_ended(at_once=stop.is_set())

    def _finished(self, step: Step, watch: ProbeWatch) -> bool:
        """True when the node's step ended as it should; TransportError when it did not;
        False when its cached code would not start (repair it)."""
        name = self.host.name
        status = step.task(name).exit
        last = step.last_line(name)
        if status is None:
            why = launch_failure(step.srun_stderr) or last or "no exit status"
            raise TransportError(f"the node's task ended without its exit status: {why}")
        if not watch.answered and status not in (0, 127, NEED_CODE_EXIT, DEADLINE_EXIT):
            return False  # exited before any record: the cached code will not start
        if status == NEED_CODE_EXIT and not watch.answered:
            raise TransportError("the node lost the probe code right after it was stored")
        if status == DEADLINE_EXIT:
            node = self.node
            deadline = f"{node.deadline_s:g} s" if node else "its deadline"
            raise TransportError(f"the node side stopped itself at the node's deadline, {deadline}")
        if status == 127:
            raise TransportError(f"python3 not found on the node: {last}")
        if status != 0:
            raise TransportError(f"node side exited {status}: {last}")
        if (missing := watch.unanswered()) is not None:
            raise TransportError(f"node side ended before probe {missing} answered")
        return True

    def _repair(
        self, node: NodeRun, stop: threading.Event, end: float, on_stage: Stage
    ) -> Iterator[dict[str, Any]]:
        """The cached code would not start: stored again and run in a step of its own."""
        left = max(1.0, end - time.monotonic())
        # run_slurm sees the broken start itself, replaces the zip and runs the node again.
        yield from run_slurm(
            node.host,
            self.launcher.allocation,
            node.remaining(),
            left,
            code=self.launcher.code,
            stop=stop,
            on_stage=on_stage,
        )
