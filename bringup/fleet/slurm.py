"""The Slurm transport: the nodes of a Slurm allocation, each reached with its own `srun`.

Allocation (`--slurm`):

- inside an allocation (`SLURM_JOB_ID` set: an `salloc` shell, an `sbatch` script) the
  run uses it: its nodes, or those of `--nodelist` among them; it is never released;
- otherwise the run asks for one as `salloc --no-shell` does (waiting in the queue like
  any job; `--partition`, `--nodelist`, `--nodes-count`, `--account`, `--time`), and
  releases it (`scancel`) when the run ends, also on Ctrl-C or an error.

Nodes are named by their Slurm node names (`scontrol show hostnames`), never by hostname:
in containers and at some sites every node has the same hostname.

Each node is one step: `srun --jobid J --nodelist NODE --nodes 1 --ntasks-per-node 1
--overlap sh -c CMD`, the request on its stdin, one JSON line per probe back on its
stdout through the same LineBuffer/decode_line path as SSH. One srun per node rather than
one over all nodes: each node keeps its own request (per-node parameters, recorded
probes), its own deadline and its own outcome (a node that fails is that node's ERROR,
not the whole step's), and the fleet's `forks` bound how many run at once, as over SSH.
`--overlap` lets the steps share the nodes with each other and with the job's own steps;
a step gets every CPU of its node and the job's GPUs (Slurm's defaults for steps).

The node code travels as over SSH (fleet/node_code.py): the step runs the zip cached on
the node under its hash once its bytes are checked, and when it is not there (or not the
same bytes) a second step brings it on stdin behind the request, and the node stores it
(size and sha256 checked) and runs it, once per node and version. Two steps, not one as
over SSH: srun's stdin is written before the node can say what it holds. Real sites do
not always share a filesystem between the controller and the nodes, and `srun --bcast`
copies to a path per step (every run would copy it again); the cache makes the second run
start at once.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from bringup.fleet.inventory import Host
from bringup.fleet.node_code import (
    NEED_CODE_EXIT,
    NodeCode,
    code_answer,
    remote_command,
    request_frame,
)
from bringup.fleet.transport import (
    STOP_POLL_S,
    Interrupted,
    LineBuffer,
    ProbeWatch,
    Runner,
    Stage,
    TransportError,
    Unreachable,
    decode_line,
)

STDERR_KEPT = 16 * 1024
STOP_WAIT_S = 5.0  # srun forwards SIGTERM to the step's task; then it is killed
ALLOCATE_TIMEOUT_S = 24 * 3600.0  # salloc waits in the queue; Ctrl-C withdraws the request


class SlurmError(TransportError):
    """An allocation could not be had or used; one line."""


@dataclass(frozen=True)
class SlurmChoice:
    """The command line's `--slurm` options."""

    partition: str | None = None
    nodelist: str | None = None
    nodes_count: int | None = None
    account: str | None = None
    time: str | None = None


@dataclass
class Allocation:
    """A Slurm job whose nodes the run uses; `owned` when this run asked for it."""

    job_id: str
    nodes: list[str]
    owned: bool

    @property
    def nodelist(self) -> str:
        return ",".join(self.nodes)


# --- pure: command lines and what Slurm prints --------------------------------------------


def salloc_argv(choice: SlurmChoice, nodes: Sequence[str], job_name: str) -> list[str]:
    """`salloc --no-shell` for the choice; `nodes` (named nodes) win over --nodelist."""
    argv = ["salloc", "--no-shell", f"--job-name={job_name}"]
    named = ",".join(nodes) if nodes else choice.nodelist
    count = choice.nodes_count or (len(nodes) if nodes else None)
    if named:
        argv.append(f"--nodelist={named}")
    if count:
        argv.append(f"--nodes={count}")
    if choice.partition:
        argv.append(f"--partition={choice.partition}")
    if choice.account:
        argv.append(f"--account={choice.account}")
    if choice.time:
        argv.append(f"--time={choice.time}")
    return argv


_GRANTED = re.compile(r"Granted job allocation (\d+)")
_ANY_JOB = re.compile(r"job allocation (\d+)")


def granted_job(stderr: str) -> str | None:
    """The job id of `salloc: Granted job allocation 123`; None when none was granted."""
    match = _GRANTED.search(stderr)
    return match.group(1) if match else None


def node_addresses(scontrol_oneliners: str) -> dict[str, str]:
    """NodeName -> NodeAddr from `scontrol show node -o` (one node per line): where a
    rendezvous on the node is reached, as Slurm itself reaches it."""
    found = {}
    for line in scontrol_oneliners.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if fields.get("NodeName"):
            found[fields["NodeName"]] = fields.get("NodeAddr") or fields["NodeName"]
    return found


def srun_argv(job_id: str, node: str, command: str) -> list[str]:
    """One step of one task on one node, running `command` under sh."""
    return [
        "srun",
        f"--jobid={job_id}",
        f"--nodelist={node}",
        "--nodes=1",
        "--ntasks=1",
        "--ntasks-per-node=1",
        "--overlap",
        "--quiet",
        "--job-name=bringup",
        "sh",
        "-c",
        command,
    ]


_TASK_LINE = re.compile(r"^srun: error: \S+: task \d+: ")


def launch_failure(stderr: str) -> str | None:
    """Slurm's own error (step not created, node not answering), not the task's exit."""
    for line in stderr.splitlines():
        if line.startswith("srun: error:") and not _TASK_LINE.match(line):
            return line.removeprefix("srun: error:").strip()
    return None


# --- the allocation: the I/O edge -----------------------------------------------------------


def available() -> str | None:
    """None when Slurm's client commands are here, else the reason."""
    for tool in ("srun", "salloc", "scontrol", "scancel", "squeue"):
        if shutil.which(tool) is None:
            return f"no `{tool}` on PATH: --slurm needs Slurm's client commands"
    return None


def _client(argv: Sequence[str], timeout_s: float = 30.0) -> str:
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        raise SlurmError(f"`{' '.join(argv[:3])}` did not answer within {timeout_s:g} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise SlurmError(f"{argv[0]}: {last}")
    return done.stdout


def hostnames(nodelist: str) -> list[str]:
    """The node names of a Slurm node list (`node[01-04]`), as `scontrol` expands it."""
    return _client(["scontrol", "show", "hostnames", nodelist]).split()


def addresses(nodes: Sequence[str]) -> dict[str, str]:
    """Each node's address as Slurm knows it (NodeAddr); its name where Slurm says none."""
    listed = _client(["scontrol", "show", "node", "-o", ",".join(nodes)])
    return {name: node_addresses(listed).get(name, name) for name in nodes}


def allocate(choice: SlurmChoice, nodes: Sequence[str], job_name: str) -> Allocation:
    """The allocation the run uses: the one it is inside, else a new one (see module doc)."""
    reason = available()
    if reason:
        raise SlurmError(reason)
    job = os.environ.get("SLURM_JOB_ID")
    if job:
        given = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
        if not given:
            given = _client(["squeue", "-h", "-j", job, "-o", "%N"]).strip()
        inside = hostnames(given)
        wanted = list(nodes) or (hostnames(choice.nodelist) if choice.nodelist else inside)
        outside = [n for n in wanted if n not in inside]
        if outside:
            raise SlurmError(f"{', '.join(outside)} not in the allocation of job {job} ({given})")
        if choice.nodes_count:
            wanted = wanted[: choice.nodes_count]
        return Allocation(job, wanted, owned=False)
    if not (nodes or choice.nodelist or choice.nodes_count):
        raise SlurmError(
            "say which nodes to allocate: --nodelist LIST or --nodes-count N "
            "(or run inside an allocation: salloc, sbatch)"
        )
    # salloc runs in this process group: a Ctrl-C while it waits in the queue reaches it
    # too, and it withdraws the request.
    argv = salloc_argv(choice, nodes, job_name)
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=ALLOCATE_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise SlurmError(f"no allocation within {ALLOCATE_TIMEOUT_S:g} s") from None
    job = granted_job(done.stderr)
    if job is None:
        pending = _ANY_JOB.search(done.stderr)
        if pending:
            subprocess.run(["scancel", pending.group(1)], capture_output=True, check=False)
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise SlurmError(f"no allocation: {last}")
    try:
        listed = _client(["squeue", "-h", "-j", job, "-o", "%N"]).strip()
        return Allocation(job, hostnames(listed), owned=True)
    except BaseException:
        release(Allocation(job, [], owned=True))
        raise


def release(allocation: Allocation) -> None:
    """End the allocation this run asked for (never one it was started inside)."""
    if allocation.owned:
        subprocess.run(["scancel", allocation.job_id], capture_output=True, check=False)


# --- one node: a step ---------------------------------------------------------------------


class _Step:
    """One srun: stdin in, records (and stderr) out, the deadlines enforced."""

    def __init__(
        self, job_id: str, node: str, command: str, stdin: bytes, watch: ProbeWatch
    ) -> None:
        self.node = node
        self.watch = watch
        self.answer: str | None = None  # the node's first line: "cached" or "needed"
        self.proc = subprocess.Popen(
            srun_argv(job_id, node, command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # Ctrl-C reaches the controller, which ends the step
        )
        self.stderr = b""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(stdin)
            self.proc.stdin.close()
        except BrokenPipeError:
            pass  # srun ended already: its exit status says why

    def records(
        self, end: float, deadline_s: float, stop: threading.Event | None
    ) -> Iterator[dict[str, Any]]:
        proc = self.proc
        assert proc.stdout is not None and proc.stderr is not None
        lines = LineBuffer(self.node)
        open_streams = 2
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(proc.stdout, selectors.EVENT_READ, "out")
                sel.register(proc.stderr, selectors.EVENT_READ, "err")
                while open_streams:
                    now = time.monotonic()
                    if stop is not None and stop.is_set():
                        raise Interrupted("interrupted")
                    if now >= end:
                        raise TransportError(f"node did not finish within {deadline_s:g} s")
                    self.watch.check(now, "node hung or step stuck")
                    for key, _ in sel.select(timeout=min(end - now, STOP_POLL_S)):
                        chunk = os.read(key.fileobj.fileno(), 1 << 16)  # type: ignore[union-attr]
                        if not chunk:
                            sel.unregister(key.fileobj)
                            open_streams -= 1
                        elif key.data == "err":
                            self.stderr = (self.stderr + chunk)[-STDERR_KEPT:]
                        else:
                            for line in lines.feed(chunk):
                                if self.answer is None:  # the node's word on its zip first
                                    self.answer = code_answer(line)
                                    continue
                                record = decode_line(line)
                                self.watch.saw(record)
                                yield record
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=STOP_WAIT_S)  # output closed: its exit status follows
        finally:
            self.end()

    def end(self) -> None:
        """Stop srun if it still runs: SIGTERM ends the step on the node, then SIGKILL."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    @property
    def exit_status(self) -> int | None:
        return self.proc.returncode

    def stderr_text(self) -> str:
        return self.stderr.decode(errors="replace")

    def last_line(self) -> str:
        lines = [x for x in self.stderr_text().strip().splitlines() if x.strip()]
        return lines[-1][:200] if lines else ""


def run_slurm(
    host: Host,
    allocation: Allocation,
    request: dict[str, Any],
    deadline_s: float,
    *,
    code: NodeCode,
    stop: threading.Event | None = None,
    on_stage: Stage | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield each probe record of `request` as the node prints it (see the module doc)."""
    stage = on_stage or (lambda _: None)
    end = time.monotonic() + deadline_s
    payload = request_frame(request)
    for attempt in (1, 2):
        stage("running")
        store = attempt == 2
        command = remote_command(code, host.python, store=store)
        stdin = payload + code.data if store else payload
        step = _Step(allocation.job_id, host.name, command, stdin, ProbeWatch(request))
        yield from step.records(end, deadline_s, stop)
        status = step.exit_status
        if not step.watch.answered:
            failure = launch_failure(step.stderr_text())
            if failure is not None:
                raise Unreachable(f"srun: {failure}")
        if attempt == 1 and status == NEED_CODE_EXIT and not step.watch.answered:
            stage("uploading probe code")  # not cached, or not the same bytes
            continue
        if store and status not in (0, None) and not step.watch.answered:
            raise TransportError(f"cannot store the probe code on the node: {step.last_line()}")
        _raise_for_status(step)
        return


def _raise_for_status(step: _Step) -> None:
    status, last = step.exit_status, step.last_line()
    if status is None or status < 0:
        killed = f"srun was killed (signal {-(status or 0)})"
        raise TransportError(f"{killed}: {last}" if last else killed)
    if status == 127:
        raise TransportError(f"python3 not found on the node: {last}")
    if status != 0:
        raise TransportError(f"node side exited {status}: {last}")
    if (missing := step.watch.unanswered()) is not None:
        raise TransportError(f"node side ended before probe {missing} answered")


def slurm_runner(host: Host, allocation: Allocation, code: NodeCode) -> Runner:
    """A node of a Slurm allocation, reached with srun; one code zip for the whole run."""

    def runner(
        request: dict[str, Any], deadline_s: float, stop: threading.Event, on_stage: Stage
    ) -> Iterator[dict[str, Any]]:
        return run_slurm(
            host, allocation, request, deadline_s, code=code, stop=stop, on_stage=on_stage
        )

    return runner
