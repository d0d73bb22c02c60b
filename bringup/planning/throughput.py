"""How fast a plan trains: the FLOP rate it rests on, the time, and ZeRO's traffic.

    time = tokens x model FLOPs per token / (GPUs x peak x MFU)

FLOPs per token come from bringup/node/burnin/flops.py, the module the burn-in counts with.
The rate is taken, in this order, from:

1. a baseline of the plan's own shape (`measured`);
2. the nearest measured recipe by parameter count (`nearest`, labelled with its recipe);
3. an assumed MFU (`assumed`, stated and marked "not measured"), taken as the hardware
   rate (MFU 35% without recompute; checkpointing's recompute lowers it, as it does a
   measured rate).

What carries over from a baseline is the GPU's hardware FLOP rate (HFU x peak): a plan that
recomputes the forward (gradient checkpointing) where the baseline did not does that much
more work per token, and its MFU is lower by the same factor. With the same checkpointing
this is the baseline's MFU itself. On the baseline's own device the measured rate is used
as it is; on another GPU its HFU is applied to that GPU's peak.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Literal

from bringup.baseline import Baseline
from bringup.node.burnin import flops
from bringup.node.burnin.recipe import Recipe
from bringup.planning.memory import (
    ADAPTER_BYTES,
    NF4_BITS,
    Device,
    Setup,
    quantized_parameters,
    trainable_parameters,
)
from bringup.planning.models import count_text

# Last resort when nothing was measured: torchtitan reports 33-39% MFU for Llama 3 8B on
# H100 (docs/reference.md#flops-and-mfu); 35% sits inside that range. bringup policy
# (docs/reference.md#plan-assumptions).
ASSUMED_MFU = 0.35


@dataclass(frozen=True)
class Measured:
    """One burn-in baseline, with the recipe it ran (None: that recipe no longer loads)."""

    origin: str  # the path given
    baseline: Baseline
    recipe: Recipe | None
    duration_s: float | None = None  # the burn-in run's wall time, when its manifest says

    def median(self, field: str) -> float | None:
        values = [getattr(n, field) for n in self.baseline.nodes]
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    @property
    def peak_memory_bytes(self) -> int | None:
        peaks = [p for n in self.baseline.nodes for p in n.peak_memory_bytes if p is not None]
        return max(peaks) if peaks else None

    @property
    def device_kind(self) -> str:
        return self.baseline.nodes[0].device_kind if self.baseline.nodes else "unknown"

    @property
    def device_name(self) -> str | None:
        return self.baseline.nodes[0].device_name if self.baseline.nodes else None

    @property
    def world_size(self) -> int:
        return self.baseline.nodes[0].world_size if self.baseline.nodes else 1

    def on(self, device: Device) -> bool:
        """Whether this baseline ran on the plan's kind of device."""
        if device.kind == "cpu":
            return self.device_kind == "cpu"
        return self.device_kind == "cuda" and (
            self.device_name == device.model or self.baseline.profile == device.name
        )

    def hardware_rate(self, device: Device) -> float | None:
        """Hardware FLOP/s per GPU this baseline carries to `device`, when it can."""
        if self.on(device):
            rate = self.median("hardware_flops_per_s_per_gpu")
            return rate if rate is not None else self.median("model_flops_per_s_per_gpu")
        hfu = self.median("hfu")
        if hfu is None:
            hfu = self.median("mfu")
        if hfu is None or device.peak_flops is None:
            return None
        return hfu * device.peak_flops


@dataclass(frozen=True)
class Efficiency:
    hardware_flops_per_s: float | None  # per GPU; None: no rate known (time not given)
    source: Literal["measured", "nearest", "assumed", "none"]
    label: str
    baseline: str | None = None  # the origin of the baseline used

    def mfu(self, setup: Setup, device: Device) -> float | None:
        """The MFU the plan's time rests on: model FLOP/s over the peak."""
        if self.hardware_flops_per_s is None or device.peak_flops is None:
            return None
        per = per_token(setup)
        return self.hardware_flops_per_s * per.model / per.hardware / device.peak_flops


def per_token(setup: Setup) -> flops.FlopsPerToken:
    """FLOPs per trained token: 6N (+ attention) for full, the LoRA formula for (Q)LoRA."""
    lora = None if setup.method == "full" else setup.lora
    return flops.per_token(setup.shape, setup.seq_len, lora, setup.gradient_checkpointing)


def differences(setup: Setup, device: Device, m: Measured) -> list[str]:
    """How the plan differs from what a baseline of its shape measured."""
    found = []
    if setup.method != "lora":
        found.append(f"method {setup.method} (the burn-in trains LoRA)")
    if not m.on(device):
        found.append(f"measured on {m.device_name or m.device_kind}, planned on {device.name}")
    if m.recipe is not None:
        t = m.recipe.train
        for name, planned, ran in (
            ("sequence length", setup.seq_len, t.seq_len),
            ("micro-batch", setup.micro_batch, t.micro_batch),
            ("checkpointing", setup.gradient_checkpointing, t.gradient_checkpointing),
        ):
            if planned != ran:
                found.append(f"{name} {_on_off(planned)} (measured {_on_off(ran)})")
    return found


def _on_off(value: object) -> str:
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def choose(setup: Setup, device: Device, measured: list[Measured]) -> Efficiency:
    """The rate of the baseline that fits the plan best, or the assumed MFU."""
    size = flops.parameter_counts(setup.shape).total
    usable = [(m, r) for m in measured if (r := m.hardware_rate(device)) is not None]

    def distance(pair: tuple[Measured, float]) -> tuple[float, bool]:
        # The same shape first, then the closest parameter count; this device breaks ties.
        m = pair[0]
        if m.recipe is None:
            return math.inf, not m.on(device)
        if m.recipe.model == setup.shape:
            return -1.0, not m.on(device)
        ratio = flops.parameter_counts(m.recipe.model).total / size
        return abs(math.log(ratio)), not m.on(device)

    if usable:
        m, rate = min(usable, key=distance)
        where = m.device_name or m.device_kind
        if m.recipe is not None and m.recipe.model == setup.shape:
            differ = differences(setup, device, m)
            label = f"measured: {m.baseline.recipe} on {where} ({m.origin})"
            if differ:
                label += "; differs: " + "; ".join(differ)
            return Efficiency(rate, "measured", label, m.origin)
        if m.recipe is None:
            shown = f"{m.baseline.recipe} (its recipe does not load: shape unknown)"
        else:
            params = count_text(flops.parameter_counts(m.recipe.model).total)
            shown = f"{m.baseline.recipe} ({params} parameters, plan {count_text(size)})"
        label = f"nearest measured recipe: {shown} on {where} ({m.origin})"
        return Efficiency(rate, "nearest", label, m.origin)
    if device.peak_flops is None:
        return Efficiency(None, "none", f"no FLOP rate: no usable baseline for {device.name}")
    # Assumed as the hardware rate, as a measured one carries over: MFU 35% without
    # recompute, lower by the recompute's share with checkpointing (it is work, not free).
    rate = ASSUMED_MFU * device.peak_flops
    why = "no --baseline" if not measured else "no baseline usable on this device"
    label = (
        f"assumed HFU {ASSUMED_MFU:.0%} (MFU {ASSUMED_MFU:.0%} without recompute), "
        f"not measured ({why})"
    )
    return Efficiency(rate, "assumed", label)


@dataclass(frozen=True)
class Timing:
    tokens: float | None
    model_flops_per_token: int
    hardware_flops_per_token: int
    tokens_per_s_per_gpu: float | None
    seconds: float | None  # for `tokens`; None without tokens or without a rate
    seconds_per_billion_tokens: float | None

    @property
    def hours(self) -> float | None:
        return None if self.seconds is None else self.seconds / 3600


def timing(
    setup: Setup, efficiency: Efficiency, tokens: float | None, stall_s: float = 0.0
) -> Timing:
    """The job's time at the rate; `stall_s` per micro-batch the GPU waits on top of its
    compute (offload's transfers, counted as not overlapped)."""
    per = per_token(setup)
    rate = efficiency.hardware_flops_per_s
    tps = rate / per.hardware if rate else None
    if tps and stall_s:
        tokens_per_micro_batch = setup.tokens_per_micro_batch
        tps = tokens_per_micro_batch / (tokens_per_micro_batch / tps + stall_s)
    total = tps * setup.gpus if tps else None
    return Timing(
        tokens=tokens,
        model_flops_per_token=per.model,
        hardware_flops_per_token=per.hardware,
        tokens_per_s_per_gpu=tps,
        seconds=tokens / total if tokens is not None and total else None,
        seconds_per_billion_tokens=1e9 / total if total else None,
    )


# --- communication -------------------------------------------------------------------------


@dataclass(frozen=True)
class Communication:
    """ZeRO's collectives per micro-batch at the profile's NCCL floor, against compute."""

    busbw_gb_s: float | None
    source: str  # where the bandwidth figure comes from
    bus_bytes: int  # bytes x bus factor, the quantity busbw is quoted for
    seconds: float | None  # per micro-batch
    compute_seconds: float | None  # per micro-batch

    @property
    def bound(self) -> bool | None:
        """True when the collectives take longer than the compute they could hide behind."""
        if self.seconds is None or self.compute_seconds is None:
            return None
        return self.seconds > self.compute_seconds


def bus_bytes(setup: Setup) -> int:
    """What ZeRO moves per micro-batch and GPU, times the nccl-tests bus factor.

    ZeRO-3 gathers every weight for the forward and again for the backward (and once more
    for the recompute), and reduce-scatters the trainable gradients; stages 0-2 all-reduce
    the trainable gradients (bus factor 2(G-1)/G) and stages 1-2 gather the updated
    weights. Counted per micro-batch: an upper bound when gradients are accumulated.
    """
    g = setup.gpus
    f = (g - 1) / g
    shape, e = setup.shape, setup.element_bytes
    total = flops.parameter_counts(shape).total
    trainable = trainable_parameters(setup)
    grad = e if setup.method == "full" else ADAPTER_BYTES
    if setup.zero_stage == 3:
        if setup.method == "qlora":
            q = quantized_parameters(shape)
            weights = q * NF4_BITS / 8 + (total - q) * e + trainable * ADAPTER_BYTES
        elif setup.method == "lora":
            weights = total * e + trainable * ADAPTER_BYTES
        else:
            weights = total * e
        gathers = 3 if setup.gradient_checkpointing else 2
        return round(f * (gathers * weights + trainable * grad))
    moved = 2 * f * trainable * grad
    if setup.zero_stage >= 1:
        moved += f * trainable * grad
    return round(moved)


def communication(
    setup: Setup, device: Device, nodes: int, efficiency: Efficiency
) -> Communication | None:
    if setup.gpus == 1 or device.kind == "cpu":
        return None
    if nodes > 1:
        busbw = device.multinode_busbw_gb_s
        source = (
            f"profile {device.name}: nccl.allreduce_busbw_multinode_min_gb_s (floor)"
            if busbw is not None
            else f"none: profile {device.name} states no multi-node NCCL floor "
            "(docs/reference.md#nccl-floors); the time assumes one node's rate holds"
        )
    else:
        busbw = device.busbw_gb_s
        source = f"profile {device.name}: nccl.allreduce_busbw_min_gb_s (floor, one node)"
    moved = bus_bytes(setup)
    per = per_token(setup)
    rate = efficiency.hardware_flops_per_s
    compute = setup.tokens_per_micro_batch * per.hardware / rate if rate else None
    seconds = moved / (busbw * 1e9) if busbw else None
    return Communication(busbw, source, moved, seconds, compute)
