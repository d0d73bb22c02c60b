"""The launcher of the torch engine: runs in the probe's process, standard library only.

It starts one worker process per rank of this node with the rendezvous environment
(MASTER_ADDR/PORT, RANK, WORLD_SIZE, LOCAL_RANK), watches them under a deadline, and turns
what local rank 0 printed into `NcclFacts`. We start the ranks ourselves rather than
through torchrun so that each rank's stderr is kept apart: a rank that cannot reach the
rendezvous is named with its own error.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bringup.node import progress
from bringup.node.collective.measure import (
    SUPPORTED,
    Layout,
    Plan,
    in_place_exists,
    layout,
    make_row,
    render_table,
    sweep,
)
from bringup.node.nccl_facts import NcclFacts, NcclRow, Params, run_environment, summarise
from bringup.node.rendezvous import free_port, interface_towards
from bringup.node.result import ProbeError, ProbeOutput
from bringup.node.tool import package_root
from bringup.node.workdir import work_dir

WORKER = "bringup.node.collective.worker"  # run with `python -m`, one process per rank
GRACE_S = 10.0  # after one rank fails, how long the others get to fail with their own reason
STDERR_KEPT = 64 * 1024  # tail of each rank's stderr kept as raw output


@dataclass
class Job:
    """Where this node's ranks sit in the whole job."""

    nnodes: int
    node_rank: int
    ranks_per_node: int
    master_addr: str
    master_port: int

    @property
    def world_size(self) -> int:
        return self.nnodes * self.ranks_per_node

    def global_rank(self, local_rank: int) -> int:
        return self.node_rank * self.ranks_per_node + local_rank


@dataclass
class RankOutcome:
    """How one local rank ended, with its output."""

    rank: int
    returncode: int | None  # None: we stopped it (deadline, or another rank failed first)
    stdout: str
    stderr: str
    ended_at: float  # monotonic time its exit was seen: who failed first


@dataclass
class Outcome:
    ranks: list[RankOutcome] = field(default_factory=list)
    timed_out: bool = False


def collect(params: Params, gpus: int) -> ProbeOutput:
    """Run the sweep on this node's ranks and return the facts of every collective."""
    unsupported = [c for c in params.collectives if c not in SUPPORTED]
    if unsupported:
        raise ProbeError(f"the torch engine measures {', '.join(SUPPORTED)}; not {unsupported[0]}")
    backend = choose_backend(params, gpus)
    ranks = params.ranks or gpus
    if backend == "nccl" and ranks > gpus:
        raise ProbeError(f"ranks={ranks} but this node has {gpus} GPUs (one rank per GPU)")
    if params.nnodes > 1 and params.master_port == 0:
        raise ProbeError("across nodes the rendezvous needs a master_port")
    plan = Plan(
        collectives=list(params.collectives),
        sizes=sweep(params.min_bytes, params.max_bytes, params.step_factor),
        iters=params.iters,
        warmup_iters=params.warmup_iters,
        check=params.check,
        backend=backend,
        rendezvous_timeout_s=params.rendezvous_timeout_s,
    )
    job = Job(
        nnodes=params.nnodes,
        node_rank=params.node_rank,
        ranks_per_node=ranks,
        master_addr=params.master_addr,
        master_port=params.master_port or free_port(params.master_addr),
    )
    env = worker_environment(params, plan, job)
    what = ", ".join(plan.collectives)
    progress.report(phase=f"{what}: {len(plan.sizes)} sizes on {ranks} ranks ({backend})")
    outcome = launch(plan, job, env, params.timeout_s)
    runs = facts_from_outcome(plan, job, outcome, params.timeout_s)
    raw = raw_outputs(runs, outcome)
    main, *others = runs
    main.others = others
    return ProbeOutput(facts=main, raw=raw)


def choose_backend(params: Params, gpus: int) -> str:
    """nccl on GPUs; gloo on CPU, which has no GPU count to size the job by."""
    if params.backend != "auto":
        if params.backend == "nccl" and gpus == 0:
            raise ProbeError("backend nccl needs NVIDIA GPUs and none was found on this node")
        if params.backend == "gloo" and params.ranks is None:
            raise ProbeError("backend gloo runs on CPU: say how many ranks (ranks=N)")
        return params.backend
    if gpus > 0:
        return "nccl"
    if params.ranks is None:
        raise ProbeError(
            "no NVIDIA GPU found on this node (nvidia-smi -L lists none); "
            "to exercise the collectives on CPU set backend=gloo and ranks=N"
        )
    return "gloo"


def worker_environment(params: Params, plan: Plan, job: Job) -> dict[str, str]:
    """The environment every worker shares; the launcher adds RANK and LOCAL_RANK."""
    env = run_environment(params)
    env.update(
        MASTER_ADDR=job.master_addr,
        MASTER_PORT=str(job.master_port),
        WORLD_SIZE=str(job.world_size),
        LOCAL_WORLD_SIZE=str(job.ranks_per_node),
        GROUP_RANK=str(job.node_rank),
        PYTHONPATH=os.pathsep.join(p for p in (package_root(), env.get("PYTHONPATH")) if p),
    )
    env.setdefault("OMP_NUM_THREADS", "1")  # as torchrun does: N ranks must not oversubscribe
    if plan.backend == "gloo" and "GLOO_SOCKET_IFNAME" not in env:
        interface = interface_towards(job.master_addr)
        if interface:
            env["GLOO_SOCKET_IFNAME"] = interface
    return env


def launch(plan: Plan, job: Job, env: dict[str, str], timeout_s: float) -> Outcome:
    """Start this node's ranks and wait for them: all done, one failed, or the deadline."""
    argv = [sys.executable, "-m", WORKER, json.dumps(dataclasses.asdict(plan))]
    outcome = Outcome()
    # The ranks' outputs go to a new private directory in this user's cache, not /tmp.
    tmp = work_dir("nccl")
    try:
        procs: list[tuple[int, subprocess.Popen[bytes], Path, Path]] = []
        for local_rank in range(job.ranks_per_node):
            rank = job.global_rank(local_rank)
            out_path, err_path = Path(tmp, f"{rank}.out"), Path(tmp, f"{rank}.err")
            rank_env = dict(env, RANK=str(rank), LOCAL_RANK=str(local_rank))
            # Files rather than pipes: N ranks writing while we wait would fill pipes.
            with out_path.open("wb") as out, err_path.open("wb") as err:
                proc = subprocess.Popen(
                    argv,
                    stdout=out,
                    stderr=err,
                    stdin=subprocess.DEVNULL,
                    env=rank_env,
                    start_new_session=True,  # so a kill takes whatever the rank started
                )
            procs.append((rank, proc, out_path, err_path))
        ended = _wait(procs, timeout_s, outcome, SweepProgress(plan, procs[0][2]).tick)
        for rank, proc, out_path, err_path in procs:
            outcome.ranks.append(
                RankOutcome(
                    rank=rank,
                    returncode=ended.get(rank, (None, 0.0))[0],
                    stdout=out_path.read_text(errors="replace"),
                    stderr=_tail(err_path.read_text(errors="replace")),
                    ended_at=ended.get(rank, (None, float("inf")))[1],
                )
            )
            del proc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return outcome


class SweepProgress:
    """Which size of which collective the sweep is at, from the rows local rank 0 has
    printed so far (its output file), reported when it moves (bringup/node/progress.py)."""

    def __init__(self, plan: Plan, first_out: Path) -> None:
        self.first_out = first_out
        self.total = len(plan.collectives) * len(plan.sizes)  # at most: tiny sizes are skipped
        self.rows = 0
        self.read_at = 0.0

    def tick(self, now: float) -> None:
        if now - self.read_at < 1.0:
            return
        self.read_at = now
        try:
            text = self.first_out.read_text(errors="replace")
        except OSError:
            return
        rows = [e for e in events(text) if e.get("event") == "row"]
        if len(rows) > self.rows:
            self.rows = len(rows)
            last = rows[-1]
            phase = f"{last.get('collective')} {_bytes(last.get('size_bytes'))}"
            progress.report(phase=phase, index=len(rows), of=self.total)


def _bytes(size: object) -> str:
    if not isinstance(size, int):
        return "?"
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size / (1 << shift):g} {unit}"
    return f"{size} B"


def _wait(
    procs: list[tuple[int, subprocess.Popen[bytes], Path, Path]],
    timeout_s: float,
    outcome: Outcome,
    tick: Callable[[float], None] | None = None,
) -> dict[int, tuple[int | None, float]]:
    """Exit codes as seen (rank -> (code, when)); stops the rest after a failure or deadline.
    `tick` is called with the time on each look (the sweep's progress)."""
    deadline = time.monotonic() + timeout_s
    ended: dict[int, tuple[int | None, float]] = {}
    failed_at: float | None = None
    try:
        while len(ended) < len(procs):
            now = time.monotonic()
            for rank, proc, _, _ in procs:
                code = proc.poll()
                if rank not in ended and code is not None:
                    ended[rank] = (code, now)
                    if code != 0 and failed_at is None:
                        failed_at = now
            if len(ended) == len(procs):
                break
            if now > deadline:
                outcome.timed_out = True
                break
            if failed_at is not None and now - failed_at > GRACE_S:
                break
            if tick is not None:
                tick(now)
            time.sleep(0.05)
    finally:
        for rank, proc, _, _ in procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            ended.setdefault(rank, (None, float("inf")))
    return ended


def _tail(text: str) -> str:
    return text if len(text) <= STDERR_KEPT else "[...]\n" + text[-STDERR_KEPT:]


def events(stdout: str) -> list[dict[str, Any]]:
    """The JSON lines a worker printed (NCCL may print its own lines in between)."""
    found = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                event = json.loads(line)
                if isinstance(event, dict) and "event" in event:
                    found.append(event)
    return found


def facts_from_outcome(plan: Plan, job: Job, outcome: Outcome, timeout_s: float) -> list[NcclFacts]:
    """NcclFacts per collective from local rank 0's lines, with every failure kept."""
    first = min(outcome.ranks, key=lambda r: r.rank)
    seen = events(first.stdout)
    start = next((e for e in seen if e["event"] == "start"), {})
    errors = failure_lines(outcome, timeout_s)
    runs = []
    for collective in plan.collectives:
        rows = [e for e in seen if e["event"] == "row" and e["collective"] == collective]
        expected = [s for s in plan.sizes if layout(collective, s, job.world_size).count > 0]
        nranks = int(start.get("nranks") or job.world_size)
        facts = NcclFacts(
            collective=collective,
            nranks=nranks,
            devices=list(start.get("devices") or []),
            version=start.get("version"),
            rows=[_row(collective, e, nranks) for e in rows],
            engine="torch",
            backend=plan.backend,
            launched_ranks=job.world_size,
            nodes=job.nnodes,
            in_place_measured=in_place_exists(collective),
        )
        facts.complete = len(rows) == len(expected) and not errors
        summarise(facts)
        if facts.complete and facts.rows:
            both = [r.oop_busbw_bytes_per_s for r in facts.rows]
            if facts.in_place_measured:
                both += [r.ip_busbw_bytes_per_s for r in facts.rows]
            facts.avg_busbw_bytes_per_s = sum(both) / len(both)  # as nccl-tests: every size
            wrong = [w for r in facts.rows for w in (r.oop_wrong, r.ip_wrong) if w is not None]
            facts.out_of_bounds = sum(wrong) if plan.check else None
        if not facts.complete:
            facts.errors = list(errors)
        runs.append(facts)
    if errors and all(f.complete for f in runs):  # cannot happen today; never drop errors
        runs[0].errors = list(errors)
    return runs


def _row(collective: str, event: dict[str, Any], nranks: int) -> NcclRow:
    size = Layout(count=int(event["count"]), size_bytes=int(event["size_bytes"]))
    times = (float(event["oop_time_s"]), float(event["ip_time_s"]))
    return make_row(collective, size, nranks, times, (event["oop_wrong"], event["ip_wrong"]))


def failure_lines(outcome: Outcome, timeout_s: float) -> list[str]:
    """Why the run did not finish: NCCL WARN lines, the first failed rank, the deadline."""
    lines = [
        " ".join(line.split())
        for r in outcome.ranks
        for line in (r.stdout + "\n" + r.stderr).splitlines()
        if "NCCL WARN" in line
    ]
    failed = sorted(
        (r for r in outcome.ranks if r.returncode not in (0, None)), key=lambda r: r.ended_at
    )
    if failed:
        r = failed[0]
        more = f" ({len(failed) - 1} more ranks failed)" if len(failed) > 1 else ""
        why = last_error(r.stderr)
        lines.append(f"rank {r.rank} on {platform.node()} exited {r.returncode}: {why}{more}")
    if outcome.timed_out:
        lines.append(f"torch engine timed out after {timeout_s:g} s; ranks were stopped")
    return lines


def last_error(stderr: str) -> str:
    """The line of a rank's stderr that says why: a Python exception, else its last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in reversed(lines):
        head = line.split(":", 1)[0]
        if head.endswith(("Error", "Exception")) or head.endswith("Interrupt"):
            return line
    return lines[-1] if lines else "no output on stderr"


def raw_outputs(runs: list[NcclFacts], outcome: Outcome) -> dict[str, str]:
    """Tables in nccl-tests form, local rank 0's lines, and every rank's stderr."""
    raw = {f"torch-{f.collective}.txt": render_table(f) for f in runs}
    first = min(outcome.ranks, key=lambda r: r.rank)
    raw[f"rank{first.rank}-events.jsonl"] = first.stdout
    for r in outcome.ranks:
        if r.stderr.strip():
            raw[f"rank{r.rank}.stderr.txt"] = r.stderr
    return raw
