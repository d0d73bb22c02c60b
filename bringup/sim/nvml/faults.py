"""Faults: overrides of a simulated NVML state, written `KIND[:GPU][=VALUE]`.

Without `:GPU` a fault applies to every GPU; GPU is the index in the state's `gpus` (the
capture's numbering, which `missing` GPUs keep). START_S is seconds after nvmlInit.

    lost[:G][=START_S]          the handle and every call on the GPU: NVML_ERROR_GPU_IS_LOST
                                (from START_S on; default at once)
    missing[:G]                 the driver does not count the GPU
    not-supported[:G]=FUNCTION  that entry point answers NVML_ERROR_NOT_SUPPORTED
    unknown[:G]=FUNCTION        ... NVML_ERROR_UNKNOWN (a system function, such as
                                nvmlInitWithFlags or nvmlSystemGetDriverVersion, takes no GPU)
    fabric[:G]=in_progress      fabric registration not finished
    fabric[:G]=failure          fabric probe completed with an error (NVML_ERROR_UNKNOWN)
    nvlink-down[:G]=LINKS       `all` or `0,3,5`: those links inactive
    remap-pending[:G]           a row remap waits for a GPU reset
    remap-failure[:G]           a row remap failed (the GPU needs replacing)
    ecc-uncorrected[:G]=N       N more uncorrected ECC errors, volatile and aggregate
    power-limit[:G]=WATTS       enforced power limit lowered (default limit unchanged); the
                                draw is capped at it
    hw-slowdown[:G]=START_S     from START_S: the clocks event reason bit(s) switch on, the
    hw-thermal[:G]=START_S      matching throttle-time counter field (where the driver
    power-brake[:G]=START_S     branch has one) accumulates 1e9 ns per second, and the SM
    sw-thermal[:G]=START_S      (and graphics) clock drops

HW thermal and power brake slowdowns also set the HW slowdown bit: nvml.h describes HW
slowdown as engaged by either, and nvidia-smi lists them under it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from bringup.sim.nvml import branches
from bringup.sim.nvml.state import (
    ALIASES,
    DEVICE_ENTRY_POINTS,
    OVERRIDABLE,
    SYSTEM_ENTRY_POINTS,
    NvmlSimError,
    check_state,
    switch_at,
)

NS_PER_S = 1e9


class _Slowdown:
    """A clocks event reason that switches on: its bits, counter and clock factor."""

    def __init__(self, bits: int, counter: str | None, clock_factor: float) -> None:
        self.bits = bits
        self.counter = counter  # the reason whose throttle-time counter field grows
        self.clock_factor = clock_factor


# Bits from nvml.h nvmlClocksEventReason*: HwSlowdown 0x8, SwThermalSlowdown 0x20,
# HwThermalSlowdown 0x40, HwPowerBrakeSlowdown 0x80. nvml.h says HW slowdowns reduce the
# clocks "by a factor of 2 or more"; the SW thermal factor is illustrative.
_SLOWDOWNS = {
    "hw-slowdown": _Slowdown(0x8, None, 0.5),
    "hw-thermal": _Slowdown(0x8 | 0x40, "hw_thermal_slowdown", 0.5),
    "power-brake": _Slowdown(0x8 | 0x80, "hw_power_brake_slowdown", 0.5),
    "sw-thermal": _Slowdown(0x20, "sw_thermal_slowdown", 0.75),
}

# Each kind: whether it takes a value (True: required, False: none, None: optional).
_KINDS: dict[str, bool | None] = {
    "lost": None,
    "missing": False,
    "not-supported": True,
    "unknown": True,
    "fabric": True,
    "nvlink-down": True,
    "remap-pending": False,
    "remap-failure": False,
    "ecc-uncorrected": True,
    "power-limit": True,
    **dict.fromkeys(_SLOWDOWNS, True),
}


def apply_fault(state: dict[str, Any], spec: str) -> dict[str, Any]:
    """A copy of `state` with the fault `spec` (KIND[:GPU][=VALUE]) applied."""
    kind, gpu_index, value = parse_fault(spec)
    state = copy.deepcopy(state)
    check_state(state)
    if kind in ("not-supported", "unknown"):
        return _inject(state, spec, gpu_index, value, kind)
    gpus = state["gpus"]
    if gpu_index is not None and gpu_index >= len(gpus):
        raise NvmlSimError(f"fault {spec!r}: no GPU {gpu_index} (the state has {len(gpus)})")
    targets = [gpus[gpu_index]] if gpu_index is not None else gpus
    apply = _APPLY[kind] if kind in _APPLY else _slowdown(_SLOWDOWNS[kind])
    for index, gpu in enumerate(targets):
        try:
            apply(gpu, value, state)
        except NvmlSimError as exc:
            number = gpu_index if gpu_index is not None else index
            raise NvmlSimError(f"fault {spec!r} on GPU {number}: {exc}") from None
    return state


def parse_fault(spec: str) -> tuple[str, int | None, str | None]:
    """`KIND[:GPU][=VALUE]` -> (kind, GPU index or None, value or None)."""
    head, sep, value = spec.strip().partition("=")
    kind, colon, gpu = head.partition(":")
    if kind not in _KINDS:
        raise NvmlSimError(f"fault {spec!r}: unknown kind {kind!r}; known: {', '.join(_KINDS)}")
    if colon and not gpu.isdigit():
        raise NvmlSimError(f"fault {spec!r}: GPU must be an index, got {gpu!r}")
    takes = _KINDS[kind]
    if takes is True and not value:
        raise NvmlSimError(f"fault {spec!r}: {kind} needs a value ({kind}=...)")
    if takes is False and sep:
        raise NvmlSimError(f"fault {spec!r}: {kind} takes no value")
    return kind, int(gpu) if colon else None, value if sep else None


# --- the kinds -----------------------------------------------------------------------------------


def _inject(
    state: dict[str, Any], spec: str, gpu_index: int | None, function: str | None, kind: str
) -> dict[str, Any]:
    function = ALIASES.get(function or "", function or "")
    if function not in OVERRIDABLE:
        raise NvmlSimError(f"fault {spec!r}: {function!r} is not an entry point it can override")
    code = "NOT_SUPPORTED" if kind == "not-supported" else "UNKNOWN"
    if function in SYSTEM_ENTRY_POINTS:
        if gpu_index is not None:
            raise NvmlSimError(f"fault {spec!r}: {function} is not per GPU")
        state.setdefault("errors", {})[function] = code
        return state
    assert function in DEVICE_ENTRY_POINTS
    gpus = state["gpus"]
    if gpu_index is not None and gpu_index >= len(gpus):
        raise NvmlSimError(f"fault {spec!r}: no GPU {gpu_index} (the state has {len(gpus)})")
    for gpu in [gpus[gpu_index]] if gpu_index is not None else gpus:
        gpu.setdefault("errors", {})[function] = code
    return state


def _lost(gpu: dict[str, Any], value: str | None, state: dict[str, Any]) -> None:
    start = _seconds(value) if value else 0.0
    gpu["lost"] = switch_at(0, start, lambda _: 1)


def _missing(gpu: dict[str, Any], value: str | None, state: dict[str, Any]) -> None:
    gpu["missing"] = True


def _fabric(gpu: dict[str, Any], value: str | None, state: dict[str, Any]) -> None:
    fabric = gpu.setdefault("fabric", {})
    if value == "in_progress":
        # nvml.h: the status "must be checked only if Probe state returns 'complete'".
        fabric.update(state="in_progress", status="SUCCESS")
    elif value == "failure":
        fabric.update(state="completed", status="UNKNOWN")
    else:
        raise NvmlSimError(f"fabric={value}: expected in_progress or failure")


def _nvlink_down(gpu: dict[str, Any], value: str | None, state: dict[str, Any]) -> None:
    links = gpu.get("nvlinks")
    if not links:
        raise NvmlSimError("the GPU has no NVLinks")
    if value == "all":
        chosen = range(len(links))
    else:
        try:
            chosen = [int(part) for part in (value or "").split(",")]
        except ValueError:
            raise NvmlSimError(f"nvlink-down={value}: expected `all` or 0,3,5") from None
    for link in chosen:
        if not 0 <= link < len(links):
            raise NvmlSimError(f"no NVLink {link} (the GPU has {len(links)})")
        links[link]["active"] = 0


def _remap(flag: str) -> Callable[[dict[str, Any], str | None, dict[str, Any]], None]:
    def apply(gpu: dict[str, Any], value: str | None, state: dict[str, Any]) -> None:
        rows = gpu.setdefault(
            "remapped_rows", {"correctable": 0, "uncorrectable": 0, "pending": 0, "failure": 0}
        )
        rows[flag] = 1

    return apply


def _ecc_uncorrected(gpu: dict[str, Any], value: str | None, state: dict[str, Any]) -> None:
    count = _count(value)
    counters = gpu.setdefault("ecc_errors", {}).setdefault("uncorrected", {})
    for counter in ("volatile", "aggregate"):
        counters[counter] = switch_at(counters.get(counter, 0), 0, lambda n: n + count)


def _power_limit(gpu: dict[str, Any], value: str | None, state: dict[str, Any]) -> None:
    try:
        limit_mw = round(float(value or "") * 1000)
    except ValueError:
        raise NvmlSimError(f"power-limit={value}: expected watts") from None
    if limit_mw <= 0:
        raise NvmlSimError(f"power-limit={value}: expected watts above 0")
    power = gpu.setdefault("power", {})
    power["enforced_limit_mw"] = limit_mw
    if "usage_mw" in power:
        power["usage_mw"] = switch_at(power["usage_mw"], 0, lambda mw: min(mw, limit_mw))


def _slowdown(slowdown: _Slowdown) -> Callable[[dict[str, Any], str | None, dict[str, Any]], None]:
    def apply(gpu: dict[str, Any], value: str | None, state: dict[str, Any]) -> None:
        start = _seconds(value)
        reasons = gpu.get("clocks_event_reasons", 0)
        gpu["clocks_event_reasons"] = switch_at(reasons, start, lambda m: int(m) | slowdown.bits)
        factor = slowdown.clock_factor
        clocks = gpu.get("clocks", {})
        for domain in ("sm", "graphics"):
            if domain in clocks:
                clocks[domain] = switch_at(clocks[domain], start, lambda mhz: round(mhz * factor))
        branch = branches.BRANCHES.get(state.get("branch", ""))
        field_id = branch.throttle_counters.get(slowdown.counter or "") if branch else None
        if field_id is not None:
            fields = gpu.setdefault("fields", {})
            fields[str(field_id)] = {
                "type": "unsigned_long_long",
                "value": _accumulating(fields.get(str(field_id)), start),
            }

    return apply


def _accumulating(field: dict[str, Any] | None, start: float) -> dict[str, Any]:
    """A counter that grows 1 s per second from `start`, on top of what it already counts."""
    before = field["value"] if field else 0
    if before == 0:
        return {"accumulate": [[start, NS_PER_S]]}
    if isinstance(before, dict) and "accumulate" in before:
        points = before["accumulate"]
        times = sorted({t for t, _ in points} | {start})
        return {
            "accumulate": [[t, _rate(points, t) + (NS_PER_S if t >= start else 0)] for t in times]
        }
    raise NvmlSimError("its throttle counter already has a value it cannot add to")


def _rate(points: list[list[float]], t: float) -> float:
    rate = 0.0
    for ti, ri in points:
        if ti <= t:
            rate = ri
    return rate


_APPLY: dict[str, Callable[[dict[str, Any], str | None, dict[str, Any]], None]] = {
    "lost": _lost,
    "missing": _missing,
    "fabric": _fabric,
    "nvlink-down": _nvlink_down,
    "remap-pending": _remap("pending"),
    "remap-failure": _remap("failure"),
    "ecc-uncorrected": _ecc_uncorrected,
    "power-limit": _power_limit,
}


def _seconds(value: str | None) -> float:
    try:
        seconds = float(value or "")
    except ValueError:
        raise NvmlSimError(f"expected seconds after nvmlInit, got {value!r}") from None
    if not seconds >= 0:
        raise NvmlSimError(f"expected seconds after nvmlInit (0 or more), got {value!r}")
    return seconds


def _count(value: str | None) -> int:
    if not (value or "").isdigit():
        raise NvmlSimError(f"expected a count, got {value!r}")
    return int(value or "0")
