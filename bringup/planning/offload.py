"""What offloading costs in time: the bytes DeepSpeed moves between a GPU and the host's
memory or NVMe for each micro-batch, at the host's bandwidth (a run's, else assumed).

- ZeRO-Offload (Ren et al. 2021, "ZeRO-Offload: Democratizing Billion-Scale Model
  Training", arXiv:2101.06840, section 4): the optimizer steps on the CPU; each step the
  16-bit gradients go down and the updated 16-bit weights come back, 2 + 2 bytes per
  trainable parameter over PCIe (4 bytes for LoRA's fp32 adapters).
- ZeRO-Infinity (Rajbhandari et al. 2021, "ZeRO-Infinity: Breaking the GPU Memory Wall for
  Extreme Scale Deep Learning", arXiv:2104.07857): parameters kept on the CPU or NVMe come
  to the GPU for every pass that uses them (forward, backward, the recompute); optimizer
  states on NVMe are read and written back each step.

Counted as not overlapped with the compute: an upper bound (DeepSpeed overlaps part of the
transfers), and one optimizer step per micro-batch (no gradient accumulation), as the
ZeRO traffic is. The CPU's own Adam step is not counted; the plan says so.
docs/plan.md ("Offload"), docs/reference.md#offload.
"""

from __future__ import annotations

from dataclasses import dataclass

from bringup.planning.memory import (
    ADAM_BYTES,
    ADAPTER_BYTES,
    MASTER_AND_ADAM_BYTES,
    Device,
    Setup,
    trainable_parameters,
    weight_bytes,
)

# PCI-SIG base specifications: transfer rate per lane (GT/s) and the share of it that is
# data (8b/10b up to Gen2, 128b/130b Gen3-5, Gen6's FLIT mode 242 of 256 bytes).
_GT_S = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
_ENCODING = {1: 0.8, 2: 0.8, 3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 242 / 256}


def pcie_bytes_per_s(gen: int, width: int) -> float | None:
    """What a PCIe link carries each way, at the specification's rate; None if unknown."""
    if gen not in _GT_S or width < 1:
        return None
    return _GT_S[gen] * 1e9 * width * _ENCODING[gen] / 8


@dataclass(frozen=True)
class Bandwidth:
    bytes_per_s: float
    source: str  # where the figure comes from, in words
    measured: bool  # False: assumed (the source says from what)


# DeepSpeed's memory estimators multiply what the CPU holds by this (their
# `additional_buffer_factor` default): pinned buffers and the allocator's slack.
HOST_BUFFER_FACTOR = 1.5


@dataclass(frozen=True)
class Host:
    """What a node offers offloading: one GPU's host link (each way), the node's NVMe
    (sequential read and write) and, when a run read it, its memory."""

    pcie: Bandwidth | None
    nvme_read: Bandwidth | None
    nvme_write: Bandwidth | None
    memory_bytes: int | None = None  # the smallest node's MemTotal; None: not known
    memory_source: str | None = None

    def holds(self, cpu_bytes: int) -> bool | None:
        """Whether a node's memory holds what is offloaded to its CPU, with DeepSpeed's
        buffer factor; None when the memory is not known."""
        if self.memory_bytes is None:
            return None
        return cpu_bytes * HOST_BUFFER_FACTOR <= self.memory_bytes


def assumed_host(device: Device) -> Host:
    """The profile's figures, marked assumed: its PCIe link at the specification's rate (an
    upper bound) and its NVMe floors (what an accepted node measured at least)."""
    pcie = None
    if device.pcie_gen is not None and device.pcie_width is not None:
        rate = pcie_bytes_per_s(device.pcie_gen, device.pcie_width)
        if rate is not None:
            pcie = Bandwidth(
                rate,
                f"assumed: profile {device.name}'s PCIe Gen{device.pcie_gen} "
                f"x{device.pcie_width} at the PCI-SIG rate, an upper bound (give --from RUN "
                "for the link a run read)",
                measured=False,
            )

    def floor(gb_s: float | None, what: str) -> Bandwidth | None:
        if gb_s is None:
            return None
        source = (
            f"assumed: profile {device.name}'s NVMe {what} floor (give --from RUN for what "
            "fio measured)"
        )
        return Bandwidth(gb_s * 1e9, source, measured=False)

    return Host(pcie, floor(device.nvme_read_gb_s, "read"), floor(device.nvme_write_gb_s, "write"))


@dataclass(frozen=True)
class Traffic:
    """Bytes moved per micro-batch: over one GPU's PCIe link, and by one node's NVMe."""

    pcie_bytes: float
    nvme_read_bytes: float
    nvme_write_bytes: float

    @property
    def any(self) -> bool:
        return bool(self.pcie_bytes or self.nvme_read_bytes or self.nvme_write_bytes)


def traffic(setup: Setup, per_node: int) -> Traffic:
    """What offloading moves per micro-batch (none when nothing is offloaded)."""
    g = setup.gpus
    on_node = min(g, per_node)
    trainable = trainable_parameters(setup)
    frozen, trainable_weights = weight_bytes(setup)
    full = setup.method == "full"
    grad = setup.element_bytes if full else ADAPTER_BYTES
    element = setup.element_bytes if full else ADAPTER_BYTES
    pcie = nvme_read = nvme_write = 0.0
    if setup.offload_optimizer != "gpu":
        # Gradients down, updated weights up: each GPU its partition.
        pcie += trainable * (grad + element) / g
        if setup.offload_optimizer == "nvme":
            per = MASTER_AND_ADAM_BYTES if full and setup.precision == "bf16" else ADAM_BYTES
            states = trainable * per / g * on_node
            nvme_read += states
            nvme_write += states
    if setup.offload_params != "gpu":
        passes = 3 if setup.gradient_checkpointing else 2
        weights = (frozen + trainable_weights) / g
        pcie += passes * weights
        if setup.offload_params == "nvme":
            nvme_read += passes * weights * on_node
            if setup.offload_optimizer != "gpu":
                nvme_write += trainable_weights / g * on_node  # the updated weights
    return Traffic(pcie, nvme_read, nvme_write)


@dataclass(frozen=True)
class OffloadTime:
    traffic: Traffic
    seconds: float | None  # per micro-batch; None when a bandwidth it needs is unknown
    sources: tuple[str, ...]  # the bandwidths used, with their source
    assumed: bool  # some bandwidth used is not measured


def offload_time(setup: Setup, per_node: int, links: Host) -> OffloadTime | None:
    """The transfers' time per micro-batch at `links`; None when nothing is offloaded."""
    moved = traffic(setup, per_node)
    if not moved.any:
        return None
    seconds: float | None = 0.0
    sources: list[str] = []
    assumed = False
    for amount, link, what in (
        (moved.pcie_bytes, links.pcie, "PCIe"),
        (moved.nvme_read_bytes, links.nvme_read, "NVMe read"),
        (moved.nvme_write_bytes, links.nvme_write, "NVMe write"),
    ):
        if not amount:
            continue
        if link is None:
            seconds = None
            sources.append(f"{what}: no figure")
            continue
        if seconds is not None:
            seconds += amount / link.bytes_per_s
        sources.append(f"{what} {link.bytes_per_s / 1e9:.3g} GB/s ({link.source})")
        assumed = assumed or not link.measured
    return OffloadTime(moved, seconds, tuple(sources), assumed)
