"""Simulated NVML states built from what a node is known to show: a recorded nvidia-smi
capture (read by bringup's own parsers), the demo fleet's B300 GPUs, or any GPU facts.
The state holds exactly what the source gives; state.py is the schema.
"""

from __future__ import annotations

import functools
import json
import re
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bringup.facts import decode
from bringup.node.gpu_facts import CLOCK_EVENT_REASONS, Gpu, GpuFacts
from bringup.node.parsers.smi_text import parse_q_text
from bringup.node.parsers.smi_xml import parse_q_xml
from bringup.node.result import ParseError
from bringup.sim.demo import demo_nodes
from bringup.sim.nvml import branches
from bringup.sim.nvml.state import (
    RETURN_TEXTS,
    SCHEMA,
    FabricState,
    FieldValue,
    GpuState,
    NvLinkState,
    NvmlSimError,
    State,
)

# --- building a state from the GPU facts --------------------------------------------------------

NVIDIA_VENDOR_ID = 0x10DE  # the low half of NVML's pciDeviceId
MIB = 1 << 20
# NVLink generation (as Gpu.nvlink_version gives it) -> NVML's nvmlNvlinkVersion_t.
_NVLINK_VERSION_ENUM = {1: 1, 2: 2, 3: 4, 4: 6, 5: 7}
_BIT_OF_REASON = {name: bit for bit, name in CLOCK_EVENT_REASONS.items()}


def state_from_facts(facts: GpuFacts, driver: str | None = None) -> State:
    """The state of a node whose GPUs are `facts`; `driver` overrides its driver version
    (and with it the branch's field ids and the CUDA version it reports)."""
    version = driver or facts.driver_version
    if not version:
        raise NvmlSimError("the facts carry no driver version: give one (driver=...)")
    branch = branches.branch_for_major(_driver_major(version))
    cuda = branch.cuda if driver else facts.cuda_driver_version
    state: State = {
        "schema": SCHEMA,
        "driver_version": version,
        "branch": branch.name,
        "field_ids": [list(r) for r in branch.field_ids],
        "gpus": [_gpu_state(gpu) for gpu in facts.gpus],
    }
    cuda_number = _cuda_number(cuda)
    if cuda_number is not None:
        state["cuda_driver_version"] = cuda_number
    return state


def state_from_capture(path: Path | str, driver: str | None = None) -> State:
    """The state of the node a recorded `nvidia-smi -q -x` (XML) or `-q` (text) shows."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise NvmlSimError(f"cannot read {path}: {exc.strerror}") from None
    xml = text.lstrip().startswith("<")
    try:
        facts = parse_q_xml(text) if xml else parse_q_text(text)
    except ParseError as exc:
        raise NvmlSimError(f"{path.name}: {exc}") from None
    if not facts.gpus:
        raise NvmlSimError(f"{path.name}: no GPU in the capture")
    return state_from_facts(facts, driver)


def _b300() -> GpuFacts:
    healthy = demo_nodes()[0]  # the demo fleet lists its healthy node first
    return decode(healthy.probes["gpu"])


# Shipped profiles: a name -> the GPU facts of one node.
PROFILES: dict[str, Callable[[], GpuFacts]] = {
    "b300": _b300,  # the demo fleet's eight healthy B300 GPUs (bringup/sim/demo.py)
}


def state_from_profile(name: str, driver: str | None = None) -> State:
    """The state of a shipped profile (PROFILES), e.g. "b300": a new copy at each call."""
    if name not in PROFILES:
        raise NvmlSimError(f"no profile {name!r}; known: {', '.join(sorted(PROFILES))}")
    state: State = json.loads(_profile_state(name, driver))
    return state


@functools.cache
def _profile_state(name: str, driver: str | None) -> str:
    """The profile's state as JSON, made once per process: a simulated cluster asks for it
    twice per node (NVML and dcgmi), and each time built the whole demo fleet anew."""
    return json.dumps(state_from_facts(PROFILES[name](), driver))


def _driver_major(version: str) -> int:
    match = re.match(r"\s*([0-9]+)(\.[0-9]+)*\s*$", version)
    if not match:
        raise NvmlSimError(f"driver version {version!r} is not like 580.95.05")
    return int(match.group(1))


def _cuda_number(version: str | None) -> int | None:
    """ "12.9" -> 12090, NVML's form (1000 * major + 10 * minor)."""
    match = re.fullmatch(r"([0-9]+)\.([0-9]+)", version or "")
    return int(match.group(1)) * 1000 + int(match.group(2)) * 10 if match else None


def _gpu_state(gpu: Gpu) -> GpuState:
    """One GPU's state from its facts: each known fact, and nothing the facts do not give."""
    s: dict[str, Any] = {}

    def put(section: str, key: str, value: Any) -> None:
        if value is not None:
            s.setdefault(section, {})[key] = value

    for key in ("name", "uuid", "serial", "vbios_version"):
        if getattr(gpu, key) is not None:
            s[key] = getattr(gpu, key)
    if gpu.pci_bus_id:
        put("pci", "bus_id", gpu.pci_bus_id)
        if gpu.pci_device_id:
            put("pci", "device_id", int(gpu.pci_device_id, 16) << 16 | NVIDIA_VENDOR_ID)
    if gpu.compute_capability:
        s["compute_capability"] = [int(p) for p in gpu.compute_capability.split(".")[:2]]
    put("memory", "total", gpu.memory_total_bytes)
    if gpu.persistence_mode is not None:
        s["persistence_mode"] = int(gpu.persistence_mode)
    put("mig_mode", "current", _int(gpu.mig_mode))
    put("ecc_mode", "current", _int(gpu.ecc_mode))
    ecc = {
        "uncorrected": {
            "volatile": gpu.ecc_uncorrected_volatile,
            "aggregate": gpu.ecc_uncorrected_aggregate,
        },
        "corrected": {"volatile": gpu.ecc_corrected_volatile},
    }
    ecc = {k: {c: n for c, n in v.items() if n is not None} for k, v in ecc.items()}
    if any(ecc.values()):
        s["ecc_errors"] = {k: v for k, v in ecc.items() if v}
    if gpu.remapped_rows is not None:
        rows = gpu.remapped_rows
        s["remapped_rows"] = {
            "correctable": rows.correctable,
            "uncorrectable": rows.uncorrectable,
            "pending": int(rows.pending),
            "failure": int(rows.failure),
        }
    put("pcie", "gen_current", gpu.pcie_gen_current)
    # NVML's MaxPcieLinkGeneration is the link's (Gen5 under a Gen6 GPU on a Grace host),
    # GpuMaxPcieLinkGeneration the GPU's own.
    put("pcie", "gen_max", gpu.pcie_link_gen_max or gpu.pcie_gen_max)
    put("pcie", "gpu_gen_max", gpu.pcie_gen_max)  # Gpu.pcie_gen_max is the GPU's own max
    put("pcie", "width_current", gpu.pcie_width_current)
    put("pcie", "width_max", gpu.pcie_width_max)
    put("power", "usage_mw", _milli(gpu.power_draw_w))
    put("power", "enforced_limit_mw", _milli(gpu.power_limit_w))
    put("power", "default_limit_mw", _milli(gpu.power_default_limit_w))
    put("temperature", "gpu", gpu.temperature_c)
    put("temperature", "margin", gpu.tlimit_margin_c)
    thresholds = {
        "slowdown": gpu.slowdown_temperature_c,
        "shutdown": gpu.shutdown_temperature_c,
        "mem_max": gpu.memory_max_temperature_c,
        "gpu_max": gpu.gpu_max_operating_temperature_c,
    }
    for name, value in thresholds.items():
        if value is not None:
            s.setdefault("temperature", {}).setdefault("thresholds", {})[name] = value
    put("clocks", "sm", _mhz(gpu.sm_clock_hz))
    put("clocks", "mem", _mhz(gpu.memory_clock_hz))
    put("max_clocks", "sm", _mhz(gpu.sm_clock_max_hz))
    put("max_clocks", "mem", _mhz(gpu.memory_clock_max_hz))
    if gpu.clock_event_reasons is not None:
        s["clocks_event_reasons"] = reasons_mask(gpu.clock_event_reasons)
    fields: dict[str, FieldValue] = {}
    if gpu.memory_temperature_c is not None:
        fields[str(branches.MEMORY_TEMP)] = _field("unsigned_int", gpu.memory_temperature_c)
    if gpu.slowdown_tlimit_c is not None:
        key = str(branches.TEMPERATURE_SLOWDOWN_TLIMIT)
        fields[key] = _field("signed_int", gpu.slowdown_tlimit_c)
    if gpu.memory_max_tlimit_c is not None:
        key = str(branches.TEMPERATURE_MEM_MAX_TLIMIT)
        fields[key] = _field("signed_int", gpu.memory_max_tlimit_c)
    if gpu.nvlinks:
        version = _NVLINK_VERSION_ENUM.get(gpu.nvlink_version or 0)
        s["nvlinks"] = []
        for position, link in enumerate(gpu.nvlinks):
            if link.link != position:  # NVML numbers links 0..n-1: a gap cannot be told
                raise NvmlSimError(f"GPU {gpu.index}: NVLinks are not numbered 0..n-1")
            entry: NvLinkState = {"active": int(link.active)}
            if version is not None:
                entry["version"] = version
            s["nvlinks"].append(entry)
            if link.speed_bytes_per_s is not None:
                mbps = round(link.speed_bytes_per_s / 1e6)
                fields[f"{branches.NVLINK_GET_SPEED}:{link.link}"] = _field("unsigned_int", mbps)
    if gpu.fabric_state in typing.get_args(FabricState):
        s["fabric"] = {"state": gpu.fabric_state}
        if gpu.fabric_status is not None:
            status = RETURN_TEXTS.get(gpu.fabric_status.lower(), "UNKNOWN")
            s["fabric"]["status"] = status
        if gpu.fabric_clique_id is not None:
            s["fabric"]["clique_id"] = gpu.fabric_clique_id
    if fields:
        s["fields"] = fields
    return typing.cast(GpuState, s)


def reasons_mask(names: list[str]) -> int:
    """The nvmlClocksEventReason* mask of decoded reason names ("unknown_0x200" included).

    A name with no known bit (nvidia-smi printed a reason this project does not know) cannot
    be put back into a mask and is left out.
    """
    mask = 0
    for name in names:
        if name in _BIT_OF_REASON:
            mask |= _BIT_OF_REASON[name]
        elif re.fullmatch(r"unknown_0x[0-9a-f]+", name):
            mask |= int(name.removeprefix("unknown_"), 16)
    return mask


def _field(value_type: str, value: float) -> FieldValue:
    return typing.cast(FieldValue, {"type": value_type, "value": value})


def _int(flag: bool | None) -> int | None:
    return None if flag is None else int(flag)


def _milli(watts: float | None) -> int | None:
    return None if watts is None else round(watts * 1000)


def _mhz(hz: int | None) -> int | None:
    return None if hz is None else round(hz / 1_000_000)
