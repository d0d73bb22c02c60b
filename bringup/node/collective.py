"""The torch engine of the `nccl` probe: our own nccl-tests, on torch.distributed.

It runs where nccl-tests is absent, across nodes, and on CPU with gloo (which is how the
tests run it for real). Two halves:

  - the launcher (the probe's process, standard library only): starts one worker process
    per rank of this node with the rendezvous environment (MASTER_ADDR/PORT, RANK,
    WORLD_SIZE, LOCAL_RANK), watches them under a deadline, and turns what local rank 0
    printed into `NcclFacts`;
  - the worker (`python -m bringup.node.collective PLAN_JSON`, torch imported there):
    the size sweep with warm-up, timed iterations (CUDA events on GPUs; wall clock after a
    barrier on CPU, where gloo calls return only when done), a check of the result (the
    "#wrong" count), and one JSON line per size as soon as it is measured.

We start the ranks ourselves rather than through torchrun so that each rank's stderr is
kept apart: a rank that cannot reach the rendezvous is named with its own error.

Measured as nccl-tests measures (PERFORMANCE.md): size = the larger of a rank's send and
receive buffers, time = the mean over ranks of the time per iteration, algbw = size / time,
busbw = algbw x the collective's bus factor, GB = 1e9.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bringup.node.probes.nccl import GB, US, NcclFacts, NcclRow, Params, run_environment, summarise
from bringup.node.rendezvous import free_port, interface_towards
from bringup.node.result import ProbeError, ProbeOutput
from bringup.node.tool import package_root

ELEMENT_BYTES = 4  # float32, nccl-tests' default type ("float")
SUPPORTED = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast")
GRACE_S = 10.0  # after one rank fails, how long the others get to fail with their own reason
STDERR_KEPT = 64 * 1024  # tail of each rank's stderr kept as raw output


# --- what is measured (pure) ---------------------------------------------------------------


def bus_factor(collective: str, nranks: int) -> float:
    """busbw / algbw of a collective on n ranks (nccl-tests PERFORMANCE.md)."""
    n = nranks
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    if collective == "broadcast":
        return 1.0
    raise ValueError(f"no bus factor for {collective!r}")


def in_place_exists(collective: str) -> bool:
    """torch defines no in-place all-to-all (gloo returns wrong values when asked for one)."""
    return collective != "alltoall"


def sweep(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """Message sizes as nccl-tests -b/-e/-f: min, min*f, ... up to max."""
    sizes = []
    size = max(min_bytes, ELEMENT_BYTES)
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    return sizes


@dataclass(frozen=True)
class Layout:
    """Buffers of one size: nccl-tests' "count" column and the bytes it reports."""

    count: int  # elements per rank in the column nccl-tests prints
    size_bytes: int  # the larger of send and receive buffer of one rank


def layout(collective: str, size_bytes: int, nranks: int) -> Layout:
    """The buffers nccl-tests would use for `size_bytes` (its *GetCollByteCount)."""
    elements = size_bytes // ELEMENT_BYTES
    if collective in ("all_reduce", "broadcast"):
        return Layout(elements, elements * ELEMENT_BYTES)
    per_rank = elements // nranks  # all_gather, reduce_scatter, alltoall: a chunk per rank
    return Layout(per_rank, per_rank * nranks * ELEMENT_BYTES)


def make_row(
    collective: str,
    size: Layout,
    nranks: int,
    times_s: tuple[float, float],
    wrong: tuple[int | None, int | None],
) -> NcclRow:
    """One result row from measured times (out-of-place, in-place): algbw, busbw."""
    factor = bus_factor(collective, nranks)

    def algbw(time_s: float) -> float:
        return size.size_bytes / time_s if time_s > 0 else 0.0

    oop, ip = times_s
    return NcclRow(
        size_bytes=size.size_bytes,
        count=size.count,
        dtype="float",
        redop="sum" if collective in ("all_reduce", "reduce_scatter") else "none",
        root=0 if collective == "broadcast" else -1,
        oop_time_s=oop,
        oop_algbw_bytes_per_s=algbw(oop),
        oop_busbw_bytes_per_s=algbw(oop) * factor,
        oop_wrong=wrong[0],
        ip_time_s=ip,
        ip_algbw_bytes_per_s=algbw(ip),
        ip_busbw_bytes_per_s=algbw(ip) * factor,
        ip_wrong=wrong[1],
    )


def render_table(facts: NcclFacts) -> str:
    """The rows as nccl-tests prints them, so people (and `bringup inspect`) can read them."""
    lines = [
        f"# torch.distributed engine of bringup, backend {facts.backend}, "
        f"{facts.collective}_perf equivalent, nranks {facts.nranks}",
        *(f"#  Rank {i} on {d}" for i, d in enumerate(facts.devices)),
        "#",
        "#                                                              out-of-place"
        "                       in-place",
        "#       size         count      type   redop    root     time   algbw   busbw"
        " #wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
        "            (us)  (GB/s)  (GB/s)",
    ]
    gb, us = float(GB), float(US)
    for r in facts.rows:
        cells = [f"{r.size_bytes:12d}", f"{r.count:12d}", f"{r.dtype:>8}", f"{r.redop:>7}"]
        cells.append(f"{r.root:7d}")
        cases = [(r.oop_time_s, r.oop_algbw_bytes_per_s, r.oop_busbw_bytes_per_s, r.oop_wrong)]
        if facts.in_place_measured:
            cases.append((r.ip_time_s, r.ip_algbw_bytes_per_s, r.ip_busbw_bytes_per_s, r.ip_wrong))
        for t, a, b, w in cases:
            cells += [f"{t / us:8.1f}", f"{a / gb:7.2f}", f"{b / gb:7.2f}"]
            cells.append(f"{'N/A' if w is None else w:>6}")
        if not facts.in_place_measured:
            cells.append("  (no in-place form)")
        lines.append(" ".join(cells))
    if facts.complete:
        lines.append(f"# Out of bounds values : {facts.out_of_bounds or 0} OK")
        lines.append(f"# Avg bus bandwidth    : {(facts.avg_busbw_bytes_per_s or 0) / gb:.4g}")
    lines.extend(f"# error: {e}" for e in facts.errors)
    return "\n".join(lines) + "\n"


# --- the launcher (stdlib only) --------------------------------------------------------------


@dataclass
class Plan:
    """What every worker runs: passed to it as JSON on its command line."""

    collectives: list[str]
    sizes: list[int]
    iters: int
    warmup_iters: int
    check: bool
    backend: str  # "nccl" or "gloo"
    rendezvous_timeout_s: float


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
    argv = [sys.executable, "-m", "bringup.node.collective", json.dumps(dataclasses.asdict(plan))]
    outcome = Outcome()
    with tempfile.TemporaryDirectory(prefix="bringup-nccl-") as tmp:
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
        ended = _wait(procs, timeout_s, outcome)
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
    return outcome


def _wait(
    procs: list[tuple[int, subprocess.Popen[bytes], Path, Path]], timeout_s: float, outcome: Outcome
) -> dict[int, tuple[int | None, float]]:
    """Exit codes as seen (rank -> (code, when)); stops the rest after a failure or deadline."""
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


# --- the worker (one per rank; torch is imported only here) -----------------------------------


def worker_main(argv: list[str]) -> int:
    """One rank: join the job, run the sweep, print results (local rank 0) as JSON lines."""
    import datetime

    import torch
    import torch.distributed as dist

    plan = Plan(**json.loads(argv[0]))
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    on_gpu = plan.backend == "nccl"
    if on_gpu:
        torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank) if on_gpu else torch.device("cpu")
    dist.init_process_group(
        plan.backend,
        timeout=datetime.timedelta(seconds=plan.rendezvous_timeout_s),
        device_id=device if on_gpu else None,
    )
    report = local_rank == 0
    bench = _Bench(torch, dist, device, rank, world, plan)
    devices: list[Any] = [None] * world
    dist.all_gather_object(devices, _describe_device(torch, device, local_rank))
    if report:
        _emit(event="start", nranks=world, devices=devices, version=_version(torch, on_gpu))
    for collective in plan.collectives:
        for size_bytes in plan.sizes:
            size = layout(collective, size_bytes, world)
            if size.count == 0:
                continue  # fewer bytes than ranks x one element: nothing to send
            oop, ip = bench.measure(collective, size.count)
            if report:
                _emit(
                    event="row",
                    collective=collective,
                    size_bytes=size.size_bytes,
                    count=size.count,
                    oop_time_s=oop[0],
                    ip_time_s=ip[0],
                    oop_wrong=oop[1],
                    ip_wrong=ip[1],
                )
    if report:
        _emit(event="done")
    dist.destroy_process_group()
    return 0


def _emit(**event: Any) -> None:
    print(json.dumps(event), flush=True)


def _describe_device(torch: Any, device: Any, local_rank: int) -> str:
    """One rank's device, in nccl-tests' "host device N [bus] name" form."""
    host = platform.node()
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        bus = getattr(props, "pci_bus_id", None)
        return (
            f"{host} device {local_rank} [0x{bus:02x}] {props.name}"
            if bus is not None
            else (f"{host} device {local_rank} [?] {props.name}")
        )
    return f"{host} device {local_rank} [cpu pid {os.getpid()}] {platform.machine()} CPU"


def _version(torch: Any, on_gpu: bool) -> str:
    if on_gpu:
        nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
        return f"{nccl} (torch {torch.__version__})"
    return f"gloo (torch {torch.__version__})"


class _Bench:
    """Buffers, timing and result checks of one rank."""

    def __init__(self, torch: Any, dist: Any, device: Any, rank: int, world: int, plan: Plan):
        self.torch, self.dist, self.device = torch, dist, device
        self.rank, self.world, self.plan = rank, world, plan
        self.on_gpu = device.type == "cuda"
        # torch 2.13 renamed all_gather_into_tensor and reduce_scatter_tensor; older has only those.
        self.gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        self.scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

    def measure(self, collective: str, count: int) -> tuple[tuple[float, int | None], ...]:
        """(time per iteration mean over ranks, wrong values summed over ranks), oop then ip."""
        results = []
        for in_place in (False, True) if in_place_exists(collective) else (False,):
            reset, op, wrong = getattr(self, f"_{collective}")(count, in_place)
            reset()
            elapsed = self._time(op)
            errors = self._check(reset, op, wrong) if self.plan.check else 0
            results.append((elapsed, errors))
            del reset, op, wrong  # free this case's buffers before the next one
            if self.on_gpu:
                self.torch.cuda.empty_cache()
        if len(results) == 1:
            results.append((0.0, 0))  # not measured: the facts say so (in_place_measured)
        # One all-reduce of both cases: times averaged (nccl-tests' default), wrongs summed.
        t = self.torch.tensor([v for pair in results for v in pair], dtype=self.torch.float64)
        t = t.to(self.device)
        self.dist.all_reduce(t)
        total = t.tolist()
        wrong = (int(total[1]), int(total[3])) if self.plan.check else (None, None)
        if not in_place_exists(collective):
            wrong = (wrong[0], None)
        return (total[0] / self.world, wrong[0]), (total[2] / self.world, wrong[1])

    def _sync(self) -> None:
        if self.on_gpu:
            self.torch.cuda.synchronize(self.device)

    def _barrier(self) -> None:
        if self.on_gpu:
            self.dist.barrier(device_ids=[self.device.index])
        else:
            self.dist.barrier()

    def _time(self, op: Any) -> float:
        """Seconds per iteration after warm-up: CUDA events on GPU, wall clock on CPU."""
        for _ in range(self.plan.warmup_iters):
            op()
        self._sync()
        self._barrier()  # every rank starts the timed loop together
        if self.on_gpu:
            start = self.torch.cuda.Event(enable_timing=True)
            end = self.torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(self.plan.iters):
                op()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3 / self.plan.iters  # elapsed_time is in ms
        began = time.perf_counter()
        for _ in range(self.plan.iters):
            op()  # gloo: returns when this rank's part is done
        return (time.perf_counter() - began) / self.plan.iters

    def _check(self, reset: Any, op: Any, wrong: Any) -> int:
        """Fresh inputs, one operation, and the count of elements that are not what they must be."""
        reset()
        op()
        self._sync()
        return int(wrong())

    # Each case returns (reset, op, wrong): inputs are rank-dependent small integers, so the
    # expected result is exact in float32. torch has no out-of-place all-reduce or broadcast:
    # there out-of-place is a copy then the in-place operation, as functional collectives do.

    def _full(self, n: int, value: float) -> Any:
        return self.torch.full((n,), float(value), dtype=self.torch.float32, device=self.device)

    def _all_reduce(self, count: int, in_place: bool) -> tuple[Any, Any, Any]:
        expected = self.world * (self.world + 1) / 2
        send, recv = self._full(count, self.rank + 1), self._full(count, 0)

        def reset() -> None:
            (recv if in_place else send).fill_(self.rank + 1)

        def op() -> None:
            if not in_place:
                recv.copy_(send)
            self.dist.all_reduce(recv)

        return reset, op, lambda: (recv != expected).sum().item()

    def _broadcast(self, count: int, in_place: bool) -> tuple[Any, Any, Any]:
        send, recv = self._full(count, self.rank + 1), self._full(count, 0)

        def reset() -> None:
            (recv if in_place else send).fill_(self.rank + 1)

        def op() -> None:
            if not in_place:
                recv.copy_(send)
            self.dist.broadcast(recv, src=0)

        return reset, op, lambda: (recv != 1).sum().item()  # root 0 sent its rank + 1

    def _chunks(self, tensor: Any, count: int) -> list[Any]:
        return [tensor[i * count : (i + 1) * count] for i in range(self.world)]

    def _all_gather(self, count: int, in_place: bool) -> tuple[Any, Any, Any]:
        recv = self._full(count * self.world, 0)
        mine = self._chunks(recv, count)[self.rank]
        send = mine if in_place else self._full(count, self.rank + 1)

        def reset() -> None:
            send.fill_(self.rank + 1)

        def wrong() -> int:
            return sum((c != i + 1).sum().item() for i, c in enumerate(self._chunks(recv, count)))

        return reset, lambda: self.gather(recv, send), wrong

    def _reduce_scatter(self, count: int, in_place: bool) -> tuple[Any, Any, Any]:
        expected = self.world * (self.world + 1) / 2
        send = self._full(count * self.world, 0)
        recv = self._chunks(send, count)[self.rank] if in_place else self._full(count, 0)

        def reset() -> None:
            send.fill_(self.rank + 1)

        op = lambda: self.scatter(recv, send)  # noqa: E731
        return reset, op, lambda: (recv != expected).sum().item()

    def _alltoall(self, count: int, in_place: bool) -> tuple[Any, Any, Any]:
        # Chunk j of rank r holds r*world + j + 1; after the exchange chunk i holds i*world + r + 1.
        torch = self.torch
        pattern = torch.arange(self.world, dtype=torch.float32, device=self.device)
        pattern = (pattern + self.rank * self.world + 1).repeat_interleave(count)
        del in_place  # never asked for: see in_place_exists
        send = self._full(count * self.world, 0)
        recv = self._full(count * self.world, 0)

        def reset() -> None:
            send.copy_(pattern)

        def wrong() -> int:
            chunks = self._chunks(recv, count)
            return sum(
                (c != i * self.world + self.rank + 1).sum().item() for i, c in enumerate(chunks)
            )

        return reset, lambda: self.dist.all_to_all_single(recv, send), wrong


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
