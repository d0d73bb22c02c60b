"""What a node's GPUs are: the facts of the `gpu` probe, whatever read them.

NVML (probes/gpu.py) and the nvidia-smi parsers (parsers/smi_*.py, nvlink_status.py) fill
the same dataclasses, so a log someone sent is judged exactly like a live node. None means
the source did not report a field (not zero, not false).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bringup.node.imex_facts import ImexFacts

# Clocks event reasons (nvml.h, nvmlClocksEventReason*; docs/reference.md#nvml).
CLOCK_EVENT_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


# nvmlValueType_t -> the member of the nvmlValue_t union that holds a field value (nvml.h:
# NVML_VALUE_TYPE_DOUBLE 0 ... NVML_VALUE_TYPE_UNSIGNED_SHORT 6).
NVML_VALUE_MEMBERS = {
    0: "dVal",
    1: "uiVal",
    2: "ulVal",
    3: "ullVal",
    4: "sllVal",
    5: "siVal",
    6: "usVal",
}


def nvml_field_number(value: Any) -> float | None:
    """The number in an nvmlFieldValue_t, read through the union member its valueType
    names; None for a type this table does not know. Reading another member would take
    the bytes around the written one, which the driver leaves as they were."""
    member = NVML_VALUE_MEMBERS.get(value.valueType)
    return float(getattr(value.value, member)) if member is not None else None


def decode_clock_event_reasons(mask: int) -> list[str]:
    """Names of the bits set in an NVML clocks event reasons mask, lowest bit first."""
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    if unknown:
        names.append(f"unknown_0x{unknown:x}")
    return names


@dataclass
class RemappedRows:
    """Row remapping counters (A100 and newer): pending needs a reset, failure needs RMA."""

    correctable: int
    uncorrectable: int
    pending: bool
    failure: bool


@dataclass
class NvLink:
    """One NVLink of a GPU."""

    link: int
    active: bool
    speed_bytes_per_s: float | None = None  # per direction, as `nvidia-smi nvlink -s`


@dataclass
class Gpu:
    """One GPU. None means the source did not report the field (not zero, not false)."""

    index: int
    name: str
    uuid: str | None = None
    serial: str | None = None
    pci_bus_id: str | None = None
    pci_device_id: str | None = None  # e.g. "0x2335"
    vbios_version: str | None = None
    compute_capability: str | None = None  # "9.0"
    memory_total_bytes: int | None = None
    persistence_mode: bool | None = None
    mig_mode: bool | None = None
    ecc_mode: bool | None = None  # current ECC mode enabled
    ecc_uncorrected_volatile: int | None = None
    ecc_uncorrected_aggregate: int | None = None
    ecc_corrected_volatile: int | None = None
    remapped_rows: RemappedRows | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None  # the GPU's own maximum (device max where reported)
    # The link's maximum: the lower of the GPU's and the host's (a Grace CPU's Gen5 ports
    # under a Gen6 GPU). None when the source does not say it apart from the GPU's own.
    pcie_link_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None  # enforced
    power_default_limit_w: float | None = None
    temperature_c: float | None = None
    memory_temperature_c: float | None = None  # HBM
    slowdown_temperature_c: float | None = None
    shutdown_temperature_c: float | None = None
    memory_max_temperature_c: float | None = None
    gpu_max_operating_temperature_c: float | None = None
    # Drivers 550+ report thresholds relative to T.Limit instead of as temperatures:
    # the T.Limit margin is how far the GPU is below its max operating limit (NVML
    # nvmlDeviceGetMarginTemperature, nvidia-smi "GPU T.Limit Temp"), and slowdown starts
    # at the T.Limit "GPU Slowdown T.Limit Temp" (e.g. -2 C: 2 degrees past the limit).
    tlimit_margin_c: float | None = None
    slowdown_tlimit_c: float | None = None
    # The HBM's max operating limit on the same T.Limit scale ("Memory Max Operating T.Limit
    # Temp : 0 C"): the HBM reaches its limit when the T.Limit margin falls to it.
    memory_max_tlimit_c: float | None = None
    sm_clock_hz: int | None = None
    sm_clock_max_hz: int | None = None
    memory_clock_hz: int | None = None
    memory_clock_max_hz: int | None = None
    clock_event_reasons: list[str] | None = None  # decoded names; None = not reported
    nvlink_version: int | None = None  # 4 = NVLink 4 (Hopper), 5 = NVLink 5 (Blackwell)
    nvlinks: list[NvLink] = field(default_factory=list)
    # `nvidia-smi nvlink -s` says all links are inactive instead of listing them: the GPU
    # has NVLink and none of it is up (not "no NVLink", which is a PCIe GPU).
    nvlinks_all_inactive: bool | None = None
    fabric_state: str | None = None  # "completed", "in_progress", "not_supported", ...
    fabric_status: str | None = None  # "success" or the error
    fabric_health_mask: int | None = None  # NVML's nvmlGpuFabricInfo_v2 healthMask, raw bits
    # The NVLink clique (partition) the fabric placed the GPU in: 0 on an HGX board (no
    # multi-node NVLink), the rack's clique on an NVL72 tray.
    fabric_clique_id: int | None = None
    # Why this GPU could not be read at all ("GPU is lost": it fell off the bus); its other
    # fields are then unknown, and gpu.count names it.
    error: str | None = None
    # The fields the GPU answered with an error instead of a value ("ECC Mode Current" for
    # `ECC Mode: Current : Unknown Error`): not "not reported", a GPU that cannot tell.
    unreadable: list[str] = field(default_factory=list)
    # The fields printed as "N/A" ("Remapped Rows" for `Remapped Rows : N/A`): on a field
    # the profile expects this GPU to have (GpuSpec.reports), the GPU or driver could not
    # report it; elsewhere the field does not exist on this GPU.
    not_available: list[str] = field(default_factory=list)
    # The output shows this GPU by its bus id only (`nvidia-smi -q -i 52:00.0` of a node of
    # 8): `index` is its place in the output, not nvidia-smi's index, so findings name it by
    # its bus id.
    by_bus_id: bool = False


@dataclass
class GpuFacts:
    """Everything the gpu probe saw on one node."""

    source: str  # "nvml", "nvidia-smi -q", "nvidia-smi -q -x", "nvidia-smi --query-gpu", ...
    driver_version: str | None = None
    cuda_driver_version: str | None = None  # the CUDA version the driver supports, "12.9"
    attached_gpus: int | None = None  # as the tool reported; may exceed len(gpus) in a trimmed log
    gpus: list[Gpu] = field(default_factory=list)
    # The IMEX service (NVL72 trays); None: the source did not look (an nvidia-smi log).
    imex: ImexFacts | None = None


# --- one GPU's name in a finding: index, serial, PCI address, UUID --------------------------


def pci_key(address: str) -> tuple[int, int, int] | None:
    """(domain, bus, device) of a PCI address however it is printed, or None when malformed.

    NVML and nvidia-smi print "00000000:BA:00.0" (32-bit domain); the kernel log prints
    "0000:ba:00" (no function) or "PCI:0000:ba:00": all name the same GPU.
    """
    text = address.strip().removeprefix("PCI:").partition(".")[0]
    parts = text.split(":")
    if len(parts) == 2:
        parts = ["0", *parts]  # "ba:00": lspci's short form, domain 0
    if len(parts) != 3:
        return None
    try:
        domain, bus, device = (int(p, 16) for p in parts)
    except ValueError:
        return None
    return domain, bus, device


def gpu_by_pci(gpus: list[Gpu], address: str | None) -> Gpu | None:
    """The GPU at a PCI address (any of the printed forms), or None when none is there."""
    key = pci_key(address) if address else None
    if key is None:
        return None
    return next((g for g in gpus if g.pci_bus_id and pci_key(g.pci_bus_id) == key), None)


def gpu_label(gpu: Gpu) -> str:
    """How a finding names one GPU: "GPU 6 (serial 1654922001234)", or "GPU 6" without one."""
    name = f"GPU {gpu_selector(gpu)}"
    return f"{name} (serial {gpu.serial})" if gpu.serial else name


def gpu_selector(gpu: Gpu) -> str:
    """What `nvidia-smi -i` takes for this GPU: its index, or its bus id when the output
    did not show the index (a partial `-i` selection)."""
    return gpu.pci_bus_id if gpu.by_bus_id and gpu.pci_bus_id else str(gpu.index)
