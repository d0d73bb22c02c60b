"""What would make a plan fit: a search over the knobs a practitioner turns, cheapest first.

The knobs: the GPU count (powers of two within a node, then whole nodes), the ZeRO stage,
gradient checkpointing, the micro-batch (the plan's, halved down to 1), DeepSpeed's
offload of the optimizer (CPU or NVMe) and of the parameters (with it), and the method
(full -> LoRA -> QLoRA). For every combination of the other knobs the fewest GPUs that fit
are found (memory per GPU only falls as GPUs are added, so a bisection finds them), and
that option is timed as the plan is: its compute at the rate the plan's baseline gives
(the same choice: measured, nearest, assumed), or ZeRO's collectives at the profile's
NCCL floor when they take longer, plus offload's transfers at the host's bandwidth
(bringup/planning/offload.py).

The order: options that keep the method first (LoRA and QLoRA train something else than a
full fine-tune; QLoRA a quantized base); then the fewest GPU-hours, then the fewest GPUs,
then the fewest knobs changed; an option another beats on both GPU-hours and GPUs is left out.
docs/plan.md ("What would make it fit").
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from bringup.planning.memory import (
    Device,
    Fit,
    Memory,
    Place,
    Setup,
    fit,
    gpu_counts,
    memory,
    offloaded_bytes,
)
from bringup.planning.offload import Host, OffloadTime, offload_time
from bringup.planning.throughput import Measured, Timing, choose, communication, timing

SHOWN = 5  # options a plan lists that keep the method
SHOWN_OTHER_METHODS = 2  # and that change it
# The offload settings tried, per ZeRO stage (DeepSpeed: the optimizer from stage 1, NVMe
# and the parameters only under stage 3).
_OFFLOADS: dict[int, tuple[tuple[Place, Place], ...]] = {
    0: (("gpu", "gpu"),),
    1: (("gpu", "gpu"), ("cpu", "gpu")),
    2: (("gpu", "gpu"), ("cpu", "gpu")),
    3: (
        ("gpu", "gpu"),
        ("cpu", "gpu"),
        ("gpu", "cpu"),
        ("cpu", "cpu"),
        ("nvme", "gpu"),
        ("gpu", "nvme"),
        ("nvme", "nvme"),
    ),
}
_CHEAPER_METHODS = {"full": ("lora", "qlora"), "lora": ("qlora",), "qlora": ()}
_METHOD_WORDS = {
    "full": "full fine-tune",
    "lora": "LoRA",
    "qlora": "QLoRA (4-bit base)",
}


@dataclass(frozen=True)
class Candidate:
    """One way to run the job that fits, with its memory and its time."""

    setup: Setup
    memory: Memory
    fit: Fit
    changed: tuple[str, ...]  # the knobs it turns, in words ("4 GPUs", "ZeRO-2", ...)
    timing: Timing
    gpu_hours: float | None  # for the job's tokens; per billion tokens without them
    offload: OffloadTime | None
    nccl_bound: bool  # ZeRO's collectives take longer than the compute
    offloaded_per_node: dict[str, int]  # bytes a node keeps off its GPUs, by place

    @property
    def change(self) -> str:
        return ", ".join(self.changed)

    @property
    def keeps_method(self) -> bool:
        return not any(word in self.changed for word in _METHOD_WORDS.values())


def knobs(setup: Setup, device: Device) -> Iterator[Setup]:
    """Every combination of the knobs but the GPU count (the bisection's)."""
    batches = []
    b = setup.micro_batch
    while b >= 1:
        batches.append(b)
        b //= 2
    for method in (setup.method, *_CHEAPER_METHODS[setup.method]):
        for checkpointing in dict.fromkeys((setup.gradient_checkpointing, True)):
            for micro_batch in batches:
                for stage in (3, 2, 1, 0):
                    for optimizer, params in _OFFLOADS[stage]:
                        yield setup.but(
                            method=method,
                            gradient_checkpointing=checkpointing,
                            micro_batch=micro_batch,
                            zero_stage=stage,
                            offload_optimizer=optimizer,
                            offload_params=params,
                        )


def fewest_gpus(setup: Setup, device: Device) -> Setup | None:
    """The setup on the fewest GPUs that fit, None when no count up to 64 nodes does."""
    counts = gpu_counts(device.per_node)

    def fits(g: int) -> bool:
        candidate = setup.but(gpus=g)
        return bool(fit(memory(candidate, device), device).fits)

    if not fits(counts[-1]):
        return None
    low, high = 0, len(counts) - 1
    while low < high:
        middle = (low + high) // 2
        if fits(counts[middle]):
            high = middle
        else:
            low = middle + 1
    return setup.but(gpus=counts[low])


def changes(was: Setup, now: Setup, per_node: int) -> tuple[str, ...]:
    """The knobs `now` turns against `was`, in words."""
    said = []
    if now.method != was.method:
        said.append(_METHOD_WORDS[now.method])
    if now.gpus != was.gpus:
        nodes = -(-now.gpus // per_node)
        where = f" ({nodes} nodes)" if nodes > 1 else ""
        said.append(f"{now.gpus} GPU{'s' if now.gpus > 1 else ''}{where}")
    if now.zero_stage != was.zero_stage:
        said.append(f"ZeRO-{now.zero_stage}")
    if now.gradient_checkpointing != was.gradient_checkpointing:
        said.append(f"checkpointing {'on' if now.gradient_checkpointing else 'off'}")
    if now.micro_batch != was.micro_batch:
        said.append(f"micro-batch {now.micro_batch}")
    places = {"cpu": "CPU", "nvme": "NVMe"}
    if (now.offload_optimizer, now.offload_params) != (was.offload_optimizer, was.offload_params):
        if now.offload_params != "gpu" and now.offload_params == now.offload_optimizer:
            said.append(f"optimizer and weights to {places[now.offload_params]}")
        else:
            if now.offload_optimizer != "gpu":
                said.append(f"optimizer to {places[now.offload_optimizer]}")
            if now.offload_params != "gpu":
                said.append(f"weights to {places[now.offload_params]}")
    return tuple(said)


def evaluate(
    was: Setup,
    setup: Setup,
    device: Device,
    measured: list[Measured],
    links: Host,
    tokens: float | None,
) -> Candidate:
    """One fitting setup with its time: compute, or NCCL when slower, plus offload."""
    efficiency = choose(setup, device, measured)
    nodes = -(-setup.gpus // device.per_node)
    comm = communication(setup, device, nodes, efficiency)
    moved = offload_time(setup, device.per_node, links)
    stall = moved.seconds if moved is not None and moved.seconds is not None else 0.0
    bound = bool(comm is not None and comm.bound)
    if bound and comm is not None and comm.seconds and comm.compute_seconds:
        stall += comm.seconds - comm.compute_seconds
    times = timing(setup, efficiency, tokens, stall)
    seconds = times.seconds if tokens is not None else times.seconds_per_billion_tokens
    if moved is not None and moved.seconds is None:
        seconds = None  # a bandwidth it needs is unknown: no time, ranked last
    mem = memory(setup, device)
    return Candidate(
        setup=setup,
        memory=mem,
        fit=fit(mem, device),
        changed=changes(was, setup, device.per_node),
        timing=times,
        gpu_hours=seconds * setup.gpus / 3600 if seconds is not None else None,
        offload=moved,
        nccl_bound=bound,
        offloaded_per_node=offloaded_bytes(setup, device.per_node),
    )


def _hours(c: Candidate) -> float:
    # Six significant digits: the same work on other knobs must tie, not differ in the
    # last bit of a float.
    return float(f"{c.gpu_hours:.6g}") if c.gpu_hours is not None else math.inf


def _rank(c: Candidate) -> tuple[bool, float, int, int]:
    return (not c.keeps_method, _hours(c), c.setup.gpus, len(c.changed))


def _dominated(c: Candidate, by: Candidate) -> bool:
    """`by` is as cheap, on as few GPUs, and keeps as much of the job: `c` adds nothing."""
    return (
        by.keeps_method >= c.keeps_method
        and _hours(by) <= _hours(c)
        and by.setup.gpus <= c.setup.gpus
    )


def search(
    setup: Setup,
    device: Device,
    measured: list[Measured],
    links: Host,
    tokens: float | None,
    shown: int = SHOWN,
) -> list[Candidate]:
    """The cheapest ways to make the plan fit, first; empty when it fits already or the
    device's memory is not judged (a CPU)."""
    if fit(memory(setup, device), device).fits is not False:
        return []
    found: dict[tuple[object, ...], Candidate] = {}
    counts = gpu_counts(device.per_node)
    for knobbed in knobs(setup, device):
        fitting = fewest_gpus(knobbed, device)
        if fitting is None:
            continue
        # More GPUs than the fewest can cost fewer GPU-hours (each moves a smaller share of
        # what is offloaded or gathered): the next counts up to a node are tried too.
        first = counts.index(fitting.gpus)
        for g in counts[first : max(first + 3, counts.index(device.per_node) + 1)]:
            more = fitting.but(gpus=g)
            # A node whose memory a run read must hold what is offloaded to its CPU.
            if links.holds(offloaded_bytes(more, device.per_node).get("cpu", 0)) is False:
                continue
            if _knobs_of(more) not in found:
                found[_knobs_of(more)] = evaluate(setup, more, device, measured, links, tokens)
    # Only what no other option beats: an option that costs more GPU-hours on as many GPUs
    # or more, or changes the method where another keeps it at that price, is left out.
    kept: list[Candidate] = []
    for c in sorted(found.values(), key=_rank):
        if not any(_dominated(c, k) for k in kept):
            kept.append(c)
    same = [c for c in kept if c.keeps_method][:shown]
    return same + [c for c in kept if not c.keeps_method][:SHOWN_OTHER_METHODS]


def _knobs_of(s: Setup) -> tuple[object, ...]:
    """What the search turns, as a key (a Setup holds a list, so is no key itself)."""
    turned = (s.method, s.gpus, s.zero_stage, s.gradient_checkpointing, s.micro_batch)
    return (*turned, s.offload_optimizer, s.offload_params)
