"""The whole plan: memory and what would make it fit, time, cost, and the model checked
against the baseline's own measurement. `make` builds it, `to_json` is its document.

The check against reality: for every baseline given, the plan of the baseline's own recipe
(shape, sequence length, micro-batch, checkpointing, ZeRO stage, ranks, precision) must
give back what the burn-in measured: tokens/s and step time within 10% (the issue's
tolerance), the memory peak within 25% (bringup policy: the allocator's caching and the
runtime are coarser than FLOPs; docs/reference.md#plan-assumptions). A ratio outside is
flagged, so the memory or FLOP model gets fixed rather than trusted.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from bringup.node.burnin import flops
from bringup.planning.memory import (
    Device,
    Fit,
    Memory,
    Method,
    Option,
    Place,
    Setup,
    by_gpu_count,
    cpu_device,
    fit,
    memory,
    offloaded_bytes,
)
from bringup.planning.models import PlannedModel, from_recipe
from bringup.planning.offload import Host, OffloadTime, assumed_host, offload_time
from bringup.planning.search import Candidate, search
from bringup.planning.throughput import (
    Communication,
    Efficiency,
    Measured,
    Timing,
    choose,
    communication,
    timing,
)

SCHEMA_VERSION = 1
KIND = "bringup.plan"
TIME_TOLERANCE = 0.10  # tokens/s and step time of the baseline's own shape
MEMORY_TOLERANCE = 0.25  # its memory peak
DEFAULT_SEQ_LEN = 4096  # a config.json without a recipe: a common fine-tuning length
REPORT_TOKENS = 1e9  # the job size `bringup report` plans for: one billion tokens
SCALING_COUNTS = (1, 2, 4, 8)  # GPU counts every plan shows its memory for


class PlanError(Exception):
    """The request cannot be planned; one line."""


@dataclass(frozen=True)
class Request:
    model: PlannedModel
    method: Method
    seq_len: int | None = None  # None: the recipe's, else DEFAULT_SEQ_LEN
    micro_batch: int | None = None  # None: the recipe's, else 1
    gradient_checkpointing: bool | None = None  # None: the recipe's, else off
    zero_stage: int = 3
    gpus: int | None = None  # None: one node of the device
    tokens: float | None = None
    price_per_gpu_hour: float | None = None
    offload_optimizer: Place = "gpu"
    offload_params: Place = "gpu"
    links: Host | None = None  # a run's measured bandwidths; None: the profile's, assumed


@dataclass(frozen=True)
class Acceptance:
    """What the acceptance run itself takes on each node: the suite and the burn-in."""

    suite: str
    suite_budget_s: float  # the suite's budget: an upper bound
    burnin_s: float
    burnin_source: str

    @property
    def seconds(self) -> float:
        return self.suite_budget_s + self.burnin_s


@dataclass(frozen=True)
class Cost:
    price_per_gpu_hour: float | None
    gpu_hours: float | None
    amount: float | None
    gpu_hours_per_billion_tokens: float | None
    acceptance_gpu_hours: float | None
    acceptance_amount: float | None


@dataclass(frozen=True)
class Ratio:
    figure: str
    unit: str
    predicted: float
    measured: float
    tolerance: float

    @property
    def ratio(self) -> float:
        return self.predicted / self.measured

    @property
    def flagged(self) -> bool:
        return abs(self.ratio - 1) > self.tolerance


@dataclass(frozen=True)
class RealityCheck:
    baseline: str  # its origin
    recipe: str
    ratios: tuple[Ratio, ...] = ()
    problem: str | None = None  # why nothing could be compared

    @property
    def flagged(self) -> list[Ratio]:
        return [r for r in self.ratios if r.flagged]


@dataclass(frozen=True)
class Plan:
    model: PlannedModel
    setup: Setup
    device: Device
    nodes: int
    memory: Memory
    fit: Fit
    by_gpus: tuple[Option, ...]
    options: tuple[Candidate, ...]  # what would make it fit, cheapest first
    offload: OffloadTime | None  # the plan's own transfers, when it offloads
    offloaded_per_node: dict[str, int]  # bytes a node keeps off its GPUs, by place
    efficiency: Efficiency
    mfu: float | None
    timing: Timing
    communication: Communication | None
    cost: Cost
    acceptance: Acceptance | None
    checks: tuple[RealityCheck, ...]
    notes: tuple[str, ...]


# --- building the plan -----------------------------------------------------------------


def setup_for(request: Request, device: Device) -> Setup:
    recipe = request.model.recipe
    train = recipe.train if recipe is not None else None
    checkpointing = request.gradient_checkpointing
    if checkpointing is None:
        checkpointing = train.gradient_checkpointing if train else False
    # GPUs train in bf16; a CPU in the recipe's precision, as its burn-in did.
    precision = "bf16" if device.kind == "gpu" else (train.dtype if train else "fp32")

    def given(value: int | None, default: int) -> int:
        return default if value is None else value

    try:
        return Setup(
            shape=request.model.shape,
            method=request.method,
            lora=request.model.lora,
            seq_len=given(request.seq_len, train.seq_len if train else DEFAULT_SEQ_LEN),
            micro_batch=given(request.micro_batch, train.micro_batch if train else 1),
            gradient_checkpointing=checkpointing,
            zero_stage=request.zero_stage,
            gpus=given(request.gpus, device.per_node),
            precision=precision,
            offload_optimizer=request.offload_optimizer,
            offload_params=request.offload_params,
        )
    except ValueError as exc:
        raise PlanError(str(exc)) from None


def make(
    request: Request,
    device: Device,
    measured: list[Measured],
    acceptance: Acceptance | None = None,
) -> Plan:
    if request.tokens is not None and request.tokens <= 0:
        raise PlanError("tokens must be positive")
    if request.price_per_gpu_hour is not None and request.price_per_gpu_hour < 0:
        raise PlanError("the price per GPU-hour must not be negative")
    setup = setup_for(request, device)
    nodes = -(-setup.gpus // device.per_node)
    mem = memory(setup, device)
    verdict = fit(mem, device)
    counts = sorted({*SCALING_COUNTS, setup.gpus})
    efficiency = choose(setup, device, measured)
    links = request.links or assumed_host(device)
    moved = offload_time(setup, device.per_node, links)
    stall = moved.seconds if moved is not None and moved.seconds is not None else 0.0
    times = timing(setup, efficiency, request.tokens, stall)
    comm = communication(setup, device, nodes, efficiency)
    price = request.price_per_gpu_hour
    plan = Plan(
        model=request.model,
        setup=setup,
        device=device,
        nodes=nodes,
        memory=mem,
        fit=verdict,
        by_gpus=tuple(by_gpu_count(setup, device, counts)),
        options=tuple(search(setup, device, measured, links, request.tokens)),
        offload=moved,
        offloaded_per_node=offloaded_bytes(setup, device.per_node),
        efficiency=efficiency,
        mfu=efficiency.mfu(setup, device),
        timing=times,
        communication=comm,
        cost=cost_of(setup, times, acceptance, price),
        acceptance=acceptance,
        checks=tuple(reproduce(m) for m in measured),
        notes=(),
    )
    return dataclasses.replace(plan, notes=tuple(notes_for(plan)))


def cost_of(
    setup: Setup, times: Timing, acceptance: Acceptance | None, price: float | None
) -> Cost:
    def money(hours: float | None) -> float | None:
        return hours * price if hours is not None and price is not None else None

    gpu_hours = times.seconds * setup.gpus / 3600 if times.seconds is not None else None
    per_billion = times.seconds_per_billion_tokens
    accept = acceptance.seconds * setup.gpus / 3600 if acceptance is not None else None
    return Cost(
        price_per_gpu_hour=price,
        gpu_hours=gpu_hours,
        amount=money(gpu_hours),
        gpu_hours_per_billion_tokens=per_billion * setup.gpus / 3600 if per_billion else None,
        acceptance_gpu_hours=accept,
        acceptance_amount=money(accept),
    )


def notes_for(plan: Plan) -> list[str]:
    setup, mem = plan.setup, plan.memory
    notes = list(plan.model.notes)
    if setup.seq_len > setup.shape.max_position_embeddings:
        notes.append(
            f"sequence length {setup.seq_len} is beyond the model's "
            f"max_position_embeddings {setup.shape.max_position_embeddings}"
        )
    if plan.device.kind == "cpu":
        notes.append("a CPU: memory is not judged (no capacity to judge it against)")
    if mem.adapter_input_copies > 0.05 * mem.activations.bytes:
        notes.append(
            f"{mem.adapter_input_copies / 1e9:.3g} GB of the activations are fp32 copies of "
            "the adapters' inputs: peft keeps LoRA adapters in fp32 on a 16-bit base "
            "(autocast_adapter_dtype=False keeps them 16-bit)"
        )
    if setup.method == "qlora":
        notes.append(
            "QLoRA's time assumes LoRA's FLOP rate: dequantizing the 4-bit weights in every "
            "pass costs time no burn-in measured (the burn-in trains 16-bit LoRA)"
        )
    if plan.nodes > 1 and setup.gpus % plan.device.per_node:
        notes.append(f"{setup.gpus} GPUs do not fill {plan.nodes} nodes of {plan.device.per_node}")
    offloads = [plan.offload] if plan.offload is not None else []
    offloads += [c.offload for c in plan.options if c.offload is not None]
    if offloads:
        notes.append(
            "offload's time is its transfers per micro-batch at the bandwidths named, not "
            "overlapped with the compute (an upper bound); the CPU's own Adam step is not "
            "counted: measure it with a burn-in that offloads"
        )
    if plan.fit.fits is False and not plan.options:
        notes.append("nothing the search turns makes it fit on up to 64 nodes")
    comm = plan.communication
    if comm is not None and comm.bound and comm.seconds and plan.timing.tokens is not None:
        steps = plan.timing.tokens / (setup.tokens_per_micro_batch * setup.gpus)
        notes.append(
            f"ZeRO's collectives take {comm.seconds:.3g} s per micro-batch at "
            f"{comm.busbw_gb_s:g} GB/s against {comm.compute_seconds:.3g} s of compute: "
            f"bound by communication, about {steps * comm.seconds / 3600:.3g} h"
        )
    for check in plan.checks:
        for r in check.flagged:
            notes.append(
                f"the model misses {check.recipe}'s measured {r.figure} by "
                f"{r.ratio - 1:+.0%} (tolerance ±{r.tolerance:.0%}): fix the model"
            )
    return notes


# --- the check against reality -----------------------------------------------------------


def baseline_setup(m: Measured) -> tuple[Setup, Device] | None:
    """The baseline's own job as a Setup, and its device; None without its recipe."""
    recipe = m.recipe
    if recipe is None:
        return None
    ranks = m.world_size
    if m.device_kind == "cpu":
        device = cpu_device(ranks)
    else:
        name = m.baseline.profile or m.device_name or "gpu"
        device = Device(name, m.device_name or name, "gpu", None, None, ranks)
    t = recipe.train
    setup = Setup(
        shape=recipe.model,
        method="lora",  # the burn-in trains LoRA
        lora=recipe.lora,
        seq_len=t.seq_len,
        micro_batch=t.micro_batch,
        gradient_checkpointing=t.gradient_checkpointing,
        zero_stage=recipe.deepspeed.zero_stage,
        gpus=ranks,
        precision=t.dtype,
    )
    return setup, device


def reproduce(m: Measured) -> RealityCheck:
    """The plan of the baseline's own job against what the burn-in measured."""
    own = baseline_setup(m)
    if own is None:
        return RealityCheck(m.origin, m.baseline.recipe, problem="its recipe does not load")
    setup, device = own
    efficiency = choose(setup, device, [m])
    times = timing(setup, efficiency, None)
    ratios = []
    measured_tps = m.median("tokens_per_s_per_gpu")
    if times.tokens_per_s_per_gpu and measured_tps:
        predicted_tps = times.tokens_per_s_per_gpu
        ratios.append(
            Ratio("tokens/s per GPU", "tokens/s", predicted_tps, measured_tps, TIME_TOLERANCE)
        )
        assert m.recipe is not None  # baseline_setup returned a setup
        step_tokens = setup.tokens_per_micro_batch * m.recipe.train.grad_accum
        step = m.median("step_time_median_s")
        if step:
            predicted = step_tokens / times.tokens_per_s_per_gpu
            ratios.append(Ratio("step time", "s", predicted, step, TIME_TOLERANCE))
    peak = m.peak_memory_bytes
    if peak:
        mem = memory(setup, device)
        kind = m.baseline.nodes[0].memory_kind if m.baseline.nodes else None
        predicted_peak = mem.peak if kind == "cpu_max_rss" else mem.allocated
        ratios.append(Ratio("memory peak", "bytes", predicted_peak, peak, MEMORY_TOLERANCE))
    problem = None if ratios else "the baseline holds no tokens/s and no memory peak"
    return RealityCheck(m.origin, m.baseline.recipe, tuple(ratios), problem)


def for_baseline(m: Measured, device: Device | None, tokens: float = REPORT_TOKENS) -> Plan | None:
    """The plan of the baseline's own recipe on its own GPUs for `tokens`, as the report
    shows it; `device` (the run's profile) judges the memory. None without its recipe."""
    own = baseline_setup(m)
    if own is None or m.recipe is None:
        return None
    setup, ran_on = own
    # The run's profile judges the memory, when the baseline ran on that GPU.
    target = device if device is not None and m.on(device) else ran_on
    request = Request(
        model=from_recipe(m.recipe),
        method="lora",
        seq_len=setup.seq_len,
        micro_batch=setup.micro_batch,
        gradient_checkpointing=setup.gradient_checkpointing,
        zero_stage=setup.zero_stage,
        gpus=setup.gpus,
        tokens=tokens,
    )
    return make(request, target, [m])


# --- the document ------------------------------------------------------------------------


def _option(o: Option) -> dict[str, Any]:
    s = o.setup
    return {
        "change": o.change,
        "gpus": s.gpus,
        "zero_stage": s.zero_stage,
        "method": s.method,
        "micro_batch": s.micro_batch,
        "gradient_checkpointing": s.gradient_checkpointing,
        "allocated_bytes": o.fit.allocated_bytes,
        "headroom_bytes": o.fit.headroom_bytes,
        "fits": o.fit.fits,
    }


def _offload(moved: OffloadTime | None, per_node: dict[str, int]) -> dict[str, Any] | None:
    if moved is None:
        return None
    t = moved.traffic
    return {
        "pcie_bytes_per_micro_batch": t.pcie_bytes,
        "nvme_read_bytes_per_micro_batch": t.nvme_read_bytes,
        "nvme_write_bytes_per_micro_batch": t.nvme_write_bytes,
        "seconds_per_micro_batch": moved.seconds,
        "bandwidths": list(moved.sources),
        "assumed": moved.assumed,
        "offloaded_bytes_per_node": per_node,
    }


def _candidate(c: Candidate) -> dict[str, Any]:
    s, t = c.setup, c.timing
    return {
        "change": c.change,
        "changed": list(c.changed),
        "method": s.method,
        "gpus": s.gpus,
        "zero_stage": s.zero_stage,
        "micro_batch": s.micro_batch,
        "gradient_checkpointing": s.gradient_checkpointing,
        "offload_optimizer": s.offload_optimizer,
        "offload_params": s.offload_params,
        "allocated_bytes": c.fit.allocated_bytes,
        "headroom_bytes": c.fit.headroom_bytes,
        "fits": c.fit.fits,
        "seconds": t.seconds,
        "seconds_per_billion_tokens": t.seconds_per_billion_tokens,
        "gpu_hours": c.gpu_hours,
        "gpu_hours_per": "job" if t.tokens is not None else "billion tokens",
        "nccl_bound": c.nccl_bound,
        "offload": _offload(c.offload, c.offloaded_per_node),
    }


VERDICTS = {True: "FITS", False: "DOES NOT FIT", None: "NOT JUDGED"}


def verdict(plan: Plan) -> str:
    """FITS, DOES NOT FIT, or NOT JUDGED (a CPU: no capacity to judge against)."""
    return VERDICTS[plan.fit.fits]


def to_json(plan: Plan) -> dict[str, Any]:
    """The plan as one JSON document (`bringup plan --json`)."""
    setup, mem, t = plan.setup, plan.memory, plan.timing
    counts = flops.parameter_counts(setup.shape)
    comm = plan.communication
    return {
        "kind": KIND,
        "schema_version": SCHEMA_VERSION,
        "verdict": verdict(plan),
        "model": {
            "name": plan.model.name,
            "origin": plan.model.origin,
            "parameters": counts.total,
            "adapter_parameters": (
                None
                if setup.method == "full"
                else flops.adapter_parameters(setup.shape, setup.lora)
            ),
            "shape": dataclasses.asdict(setup.shape),
        },
        "setup": {
            "method": setup.method,
            "precision": setup.precision,
            "seq_len": setup.seq_len,
            "micro_batch": setup.micro_batch,
            "gradient_checkpointing": setup.gradient_checkpointing,
            "zero_stage": setup.zero_stage,
            "offload_optimizer": setup.offload_optimizer,
            "offload_params": setup.offload_params,
            "gpus": setup.gpus,
            "nodes": plan.nodes,
            "lora": (
                None
                if setup.method == "full"
                else {"r": setup.lora.r, "targets": list(setup.lora.targets)}
            ),
        },
        "device": dataclasses.asdict(plan.device),
        "memory": {
            **{
                c.name.replace(" ", "_"): {
                    "bytes": c.bytes,
                    "parts": [{"what": p.what, "bytes": p.bytes} for p in c.parts],
                }
                for c in mem.consumers
            },
            "allocated_bytes": mem.allocated,
            "runtime_bytes": mem.runtime_bytes,
            "reserve_bytes": plan.fit.reserve_bytes,
            "capacity_bytes": plan.fit.capacity_bytes,
            "headroom_bytes": plan.fit.headroom_bytes,
            "fits": plan.fit.fits,
        },
        "by_gpus": [_option(o) for o in plan.by_gpus],
        "options": [_candidate(c) for c in plan.options],
        "offload": _offload(plan.offload, plan.offloaded_per_node),
        "time": {
            "tokens": t.tokens,
            "model_flops_per_token": t.model_flops_per_token,
            "hardware_flops_per_token": t.hardware_flops_per_token,
            "tokens_per_s_per_gpu": t.tokens_per_s_per_gpu,
            "tokens_per_s": (
                t.tokens_per_s_per_gpu * setup.gpus if t.tokens_per_s_per_gpu else None
            ),
            "seconds": t.seconds,
            "hours": t.hours,
            "seconds_per_billion_tokens": t.seconds_per_billion_tokens,
            "mfu": plan.mfu,
            "mfu_source": plan.efficiency.source,
            "mfu_label": plan.efficiency.label,
            "baseline": plan.efficiency.baseline,
        },
        "communication": (
            None
            if comm is None
            else {
                "busbw_gb_s": comm.busbw_gb_s,
                "source": comm.source,
                "bus_bytes_per_micro_batch": comm.bus_bytes,
                "seconds_per_micro_batch": comm.seconds,
                "compute_seconds_per_micro_batch": comm.compute_seconds,
                "bound": comm.bound,
            }
        ),
        "cost": dataclasses.asdict(plan.cost),
        "acceptance": (
            None
            if plan.acceptance is None
            else {**dataclasses.asdict(plan.acceptance), "seconds": plan.acceptance.seconds}
        ),
        "checks": [
            {
                "baseline": c.baseline,
                "recipe": c.recipe,
                "problem": c.problem,
                "ratios": [
                    {
                        "figure": r.figure,
                        "unit": r.unit,
                        "predicted": r.predicted,
                        "measured": r.measured,
                        "ratio": r.ratio,
                        "tolerance": r.tolerance,
                        "flagged": r.flagged,
                    }
                    for r in c.ratios
                ],
            }
            for c in plan.checks
        ],
        "notes": list(plan.notes),
    }
