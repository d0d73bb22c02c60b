"""One rank of the torch engine: `python -m bringup.node.collective.worker PLAN_JSON`.

The launcher starts one per rank with the rendezvous environment. Each joins the job and
runs the size sweep: warm-up, timed iterations (CUDA events on GPUs; wall clock after a
barrier on CPU, where gloo calls return only when done), a check of the result (the
"#wrong" count); local rank 0 prints one JSON line per size as soon as it is measured.
torch is imported here only, in the rank's own process.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from typing import Any

from bringup.node.collective.measure import Plan, device_id_safe, in_place_exists, layout


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
    # device_id binds the process group to its GPU (eager NCCL init), except on the torch
    # releases where users saw it hang NCCL at random: there the group binds lazily.
    bind = {"device_id": device} if on_gpu and device_id_safe(torch.__version__) else {}
    dist.init_process_group(
        plan.backend, timeout=datetime.timedelta(seconds=plan.rendezvous_timeout_s), **bind
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
    # The copy belongs to reset, not to op: timed, it would add a memory copy to every
    # iteration and under-report the bus bandwidth.

    def _full(self, n: int, value: float) -> Any:
        return self.torch.full((n,), float(value), dtype=self.torch.float32, device=self.device)

    def _all_reduce(self, count: int, in_place: bool) -> tuple[Any, Any, Any]:
        expected = self.world * (self.world + 1) / 2
        send, recv = self._full(count, self.rank + 1), self._full(count, 0)

        def reset() -> None:
            (recv if in_place else send).fill_(self.rank + 1)
            if not in_place:
                recv.copy_(send)

        def op() -> None:
            self.dist.all_reduce(recv)

        return reset, op, lambda: (recv != expected).sum().item()

    def _broadcast(self, count: int, in_place: bool) -> tuple[Any, Any, Any]:
        send, recv = self._full(count, self.rank + 1), self._full(count, 0)

        def reset() -> None:
            (recv if in_place else send).fill_(self.rank + 1)
            if not in_place:
                recv.copy_(send)

        def op() -> None:
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
