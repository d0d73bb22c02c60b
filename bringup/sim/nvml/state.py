"""The simulated NVML's state: its JSON schema, its checks and its time values.

What is simulated
-----------------
`nvml_sim.c` (next to this file) is compiled into a libnvidia-ml.so.1 that the real pynvml
loads in place of NVIDIA's (see build.py). At nvmlInit it reads the JSON state named by the
environment variable BRINGUP_NVMLSIM_STATE and answers every NVML call the project makes
from it: a driver, its GPUs, and what each GPU reports. This module defines that JSON
(the TypedDicts below are the schema, and `check_state` enforces them); captures.py builds
states from a recorded nvidia-smi capture or a shipped profile, and faults.py overrides parts.

How time works
--------------
Every number a GPU reports is a *time value*: a function of t, the seconds since nvmlInit,
written as data, so that a sampler sees a real timeline:

    42                                   constant
    {"steps": [[t, v], ...]}             piecewise constant: the v of the last point with
                                         t_i <= t (before the first point, the first v)
    {"ramp": [[t, v], ...]}              piecewise linear between points, flat outside
    {"accumulate": [[t, rate], ...]}     the integral from 0 to t of a rate that is rate_i
                                         from t_i on (0 before the first point); for the
                                         throttle-time counters, in ns, so rate 1e9 = 1 s/s

Points are in increasing t. Integers the driver returns are the value rounded.

The schema (every key is optional unless marked required; an absent key means the GPU does
not support that query, and NVML answers NVML_ERROR_NOT_SUPPORTED, exactly as a real driver
does for a feature the GPU lacks)
-----------------------------------------------------------------------------------------
Top level (State):
    schema              required, 1
    driver_version      str, nvmlSystemGetDriverVersion: "580.95.05"
    cuda_driver_version int, nvmlSystemGetCudaDriverVersion(_v2): 1000*major + 10*minor
    branch              str, the driver branch whose field ids are served: "r580"
                        (branches.py); informative, `field_ids` is what the library uses
    field_ids           [[lo, hi], ...] inclusive ranges of the NVML field ids this driver
                        branch defines; any other id is answered NOT_SUPPORTED
    errors              {SYMBOL: RETURN}: this entry point answers RETURN for every GPU
                        (and the system ones, e.g. nvmlInitWithFlags, at all); SYMBOL is an
                        exported name from ENTRY_POINTS, RETURN a name from RETURN_NAMES
    gpus                required, [Gpu, ...] in index order

Gpu (all numbers are time values unless said otherwise):
    name, uuid, serial, vbios_version   str
    pci                 {bus_id: "00000000:18:00.0", device_id: int (NVML's pciDeviceId:
                        device << 16 | vendor, 0x233510DE), subsystem_id: int};
                        no bus_id = nvmlDeviceGetPciInfo_v3 not supported
    compute_capability  [major, minor]
    memory              {total, reserved, used}: bytes; reserved and used default to 0
    persistence_mode    0/1
    mig_mode, ecc_mode  {current: 0/1, pending: 0/1 (default: current)}
    ecc_errors          {corrected|uncorrected: {volatile, aggregate}}: counts
    remapped_rows       {correctable, uncorrectable, pending: 0/1, failure: 0/1}
    pcie                {gen_current, gen_max (nvmlDeviceGetMaxPcieLinkGeneration),
                        gpu_gen_max (nvmlDeviceGetGpuMaxPcieLinkGeneration),
                        width_current, width_max}
    power               {usage_mw, enforced_limit_mw, default_limit_mw}: milliwatts
    temperature         {gpu: C, margin: C (nvmlDeviceGetMarginTemperature, the T.Limit
                        margin), thresholds: {shutdown|slowdown|mem_max|gpu_max|
                        acoustic_min|acoustic_curr|acoustic_max|gps_curr: C}}
    clocks, max_clocks  {graphics|sm|mem|video: MHz} (nvmlDeviceGetClockInfo /
                        nvmlDeviceGetMaxClockInfo)
    clocks_event_reasons  the nvmlClocksEventReason* bit mask (both the event- and the
                        older throttle-reasons call)
    utilization         {gpu, memory}: percent
    nvlinks             [{active: 0/1, version: int, NVML's nvmlNvlinkVersion_t
                        (6 = NVLink 4.0, 7 = 5.0)}, ...] one per link; absent = no NVLink
    fabric              {state: not_supported|not_started|in_progress|completed,
                        status: RETURN (default SUCCESS), clique_id: int, cluster_uuid:
                        32 hex digits, health_mask: int, health_summary: int}
    fields              {"ID" or "ID:SCOPE": {type: VALUE_TYPE, value: time value}}:
                        nvmlDeviceGetFieldValues by numeric field id; "ID:SCOPE" answers
                        that scope (the link, for per-link fields) before "ID" does;
                        VALUE_TYPE is nvmlValueType_t's name: double, unsigned_int,
                        unsigned_long, unsigned_long_long, signed_long_long, signed_int,
                        unsigned_short
    lost                0/1 (a time value: lost from a given second): the handle and every
                        call on the GPU answer NVML_ERROR_GPU_IS_LOST
    missing             true/false, not a time value: the driver does not count the GPU
                        (it keeps its place in `gpus`, so indexes in faults stay those of
                        the capture; the visible GPUs are renumbered as a driver does)
    errors              {SYMBOL: RETURN}, as at the top level, for this GPU only

How to add an entry point: nvml_sim.c's header comment; then add its symbol to
ENTRY_POINTS, its key to the TypedDicts here, and fill it in `_gpu_state`.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, NewType, TypedDict

from bringup.node.simulated import NVML_MARKER as MARKER

SCHEMA = 1
ENV_STATE = "BRINGUP_NVMLSIM_STATE"  # the variable nvml_sim.c reads at nvmlInit


class NvmlSimError(Exception):
    """A state, fault or build the simulator cannot use; the message is one line."""


# --- what the library implements ------------------------------------------------------------

# Every symbol libnvidia-ml.so.1 exports: the names pynvml looks up (nm -D must list exactly
# these; a test checks it). Grouped as in nvml_sim.c.
SYSTEM_ENTRY_POINTS = (
    "nvmlInitWithFlags",
    "nvmlInit_v2",
    "nvmlShutdown",
    "nvmlErrorString",
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetCudaDriverVersion",
    "nvmlSystemGetCudaDriverVersion_v2",
    "nvmlDeviceGetCount_v2",
)
DEVICE_ENTRY_POINTS = (
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetSerial",
    "nvmlDeviceGetVbiosVersion",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetCudaComputeCapability",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetPersistenceMode",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetEccMode",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetGpuMaxPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetPowerManagementDefaultLimit",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetTemperatureV",
    "nvmlDeviceGetTemperatureThreshold",
    "nvmlDeviceGetMarginTemperature",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetMaxClockInfo",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetNvLinkVersion",
    "nvmlDeviceGetGpuFabricInfo",
    "nvmlDeviceGetGpuFabricInfoV",
    "nvmlDeviceGetFieldValues",
)
# Not NVML: the simulator's own mark (MARKER), which the probes look up to say their
# records are simulated (bringup/node/simulated.py). No state can override it.
ENTRY_POINTS = SYSTEM_ENTRY_POINTS + DEVICE_ENTRY_POINTS + (MARKER,)

# Entry points whose answer a state can override ("errors"): all but these, which have no
# error to give (nvmlInit_v2 is nvmlInitWithFlags(0): override that one).
_NOT_OVERRIDABLE = {"nvmlShutdown", "nvmlErrorString", "nvmlInit_v2", MARKER}
OVERRIDABLE = tuple(name for name in ENTRY_POINTS if name not in _NOT_OVERRIDABLE)
# The names nvml.h and pynvml's wrappers use for the versioned symbols.
ALIASES = {
    "nvmlInit": "nvmlInitWithFlags",
    "nvmlInit_v2": "nvmlInitWithFlags",
    "nvmlDeviceGetCount": "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex": "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetPciInfo": "nvmlDeviceGetPciInfo_v3",
}

# nvmlReturn_t by name (nvml.h's NVML_SUCCESS / NVML_ERROR_*), as nvml_sim.c knows them.
RETURN_NAMES = (
    "SUCCESS",
    "UNINITIALIZED",
    "INVALID_ARGUMENT",
    "NOT_SUPPORTED",
    "NO_PERMISSION",
    "ALREADY_INITIALIZED",
    "NOT_FOUND",
    "INSUFFICIENT_SIZE",
    "INSUFFICIENT_POWER",
    "DRIVER_NOT_LOADED",
    "TIMEOUT",
    "IRQ_ISSUE",
    "LIBRARY_NOT_FOUND",
    "FUNCTION_NOT_FOUND",
    "CORRUPTED_INFOROM",
    "GPU_IS_LOST",
    "RESET_REQUIRED",
    "OPERATING_SYSTEM",
    "LIB_RM_VERSION_MISMATCH",
    "IN_USE",
    "MEMORY",
    "NO_DATA",
    "INSUFFICIENT_RESOURCES",
    "ARGUMENT_VERSION_MISMATCH",
    "DEPRECATED",
    "NOT_READY",
    "GPU_NOT_FOUND",
    "INVALID_STATE",
    "UNKNOWN",
)
# How NVML (and so nvidia-smi) words the codes, to read a recorded fabric status back.
RETURN_TEXTS = {
    "success": "SUCCESS",
    "not supported": "NOT_SUPPORTED",
    "timeout": "TIMEOUT",
    "not found": "NOT_FOUND",
    "in use by another client": "IN_USE",
    "insufficient memory": "MEMORY",
    "unknown error": "UNKNOWN",
}

# --- the schema ------------------------------------------------------------------------------

Points = list[list[float]]
TimeValue = int | float | dict[Literal["steps", "ramp", "accumulate"], Points]
ReturnName = Literal[RETURN_NAMES]  # type: ignore[valid-type]
Symbol = Literal[OVERRIDABLE]  # type: ignore[valid-type]
FieldKey = NewType("FieldKey", str)  # "82" or "164:3"
ValueType = Literal[
    "double",
    "unsigned_int",
    "unsigned_long",
    "unsigned_long_long",
    "signed_long_long",
    "signed_int",
    "unsigned_short",
]
Threshold = Literal[
    "shutdown",
    "slowdown",
    "mem_max",
    "gpu_max",
    "acoustic_min",
    "acoustic_curr",
    "acoustic_max",
    "gps_curr",
]
FabricState = Literal["not_supported", "not_started", "in_progress", "completed"]


class Pci(TypedDict, total=False):
    bus_id: str
    device_id: int
    subsystem_id: int


class Mode(TypedDict, total=False):
    current: TimeValue
    pending: TimeValue


class EccCounters(TypedDict, total=False):
    volatile: TimeValue
    aggregate: TimeValue


class EccErrors(TypedDict, total=False):
    corrected: EccCounters
    uncorrected: EccCounters


class RemappedRows(TypedDict, total=False):
    correctable: TimeValue
    uncorrectable: TimeValue
    pending: TimeValue
    failure: TimeValue


class Pcie(TypedDict, total=False):
    gen_current: TimeValue
    gen_max: TimeValue
    gpu_gen_max: TimeValue
    width_current: TimeValue
    width_max: TimeValue


class Power(TypedDict, total=False):
    usage_mw: TimeValue
    enforced_limit_mw: TimeValue
    default_limit_mw: TimeValue


class Temperature(TypedDict, total=False):
    gpu: TimeValue
    margin: TimeValue
    thresholds: dict[Threshold, TimeValue]


class Clocks(TypedDict, total=False):
    graphics: TimeValue
    sm: TimeValue
    mem: TimeValue
    video: TimeValue


class Utilization(TypedDict, total=False):
    gpu: TimeValue
    memory: TimeValue


class NvLinkState(TypedDict, total=False):
    active: TimeValue
    version: int


class Fabric(TypedDict, total=False):
    state: FabricState
    status: ReturnName
    clique_id: int
    cluster_uuid: str
    health_mask: int
    health_summary: int


class FieldValue(TypedDict):
    type: ValueType
    value: TimeValue


class GpuState(TypedDict, total=False):
    name: str
    uuid: str
    serial: str
    vbios_version: str
    pci: Pci
    compute_capability: list[int]
    memory: dict[Literal["total", "reserved", "used"], TimeValue]
    persistence_mode: TimeValue
    mig_mode: Mode
    ecc_mode: Mode
    ecc_errors: EccErrors
    remapped_rows: RemappedRows
    pcie: Pcie
    power: Power
    temperature: Temperature
    clocks: Clocks
    max_clocks: Clocks
    clocks_event_reasons: TimeValue
    utilization: Utilization
    nvlinks: list[NvLinkState]
    fabric: Fabric
    fields: dict[FieldKey, FieldValue]
    lost: TimeValue
    missing: bool
    errors: dict[Symbol, ReturnName]


class State(TypedDict, total=False):
    schema: int
    driver_version: str
    cuda_driver_version: int
    branch: str
    field_ids: list[list[int]]
    errors: dict[Symbol, ReturnName]
    gpus: list[GpuState]


_REQUIRED = {State: ("schema", "gpus")}
_FIELD_KEY = re.compile(r"[0-9]+(:[0-9]+)?")


# --- checking a state -----------------------------------------------------------------------


def check_state(state: Any) -> None:
    """Raise NvmlSimError naming the first place where `state` leaves the schema."""
    _check(state, State, "state")
    if state["schema"] != SCHEMA:
        raise NvmlSimError(f"state: schema {state['schema']!r}, this simulator reads {SCHEMA}")
    for index, gpu in enumerate(state["gpus"]):
        system = sorted(set(gpu.get("errors", {})) & set(SYSTEM_ENTRY_POINTS))
        if system:
            raise NvmlSimError(f"state.gpus[{index}].errors: {system[0]} is not per GPU")


def _check(value: Any, hint: Any, where: str) -> None:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is TimeValue:
        _check_time_value(value, where)
    elif hint is FieldKey:
        if not isinstance(value, str) or not _FIELD_KEY.fullmatch(value):
            raise NvmlSimError(f"{where}: field key {value!r} is not 'ID' or 'ID:SCOPE'")
    elif origin is Literal:
        if value not in args:
            raise NvmlSimError(f"{where}: {value!r} is not one of {', '.join(map(str, args))}")
    elif typing.is_typeddict(hint):
        if not isinstance(value, dict):
            raise NvmlSimError(f"{where}: expected an object, got {type(value).__name__}")
        hints = _hints(hint)
        required = _REQUIRED.get(hint, tuple(hint.__required_keys__))
        for key in required:
            if key not in value:
                raise NvmlSimError(f"{where}: missing {key!r}")
        for key, item in value.items():
            if key not in hints:
                raise NvmlSimError(f"{where}: unknown key {key!r}")
            _check(item, hints[key], f"{where}.{key}")
    elif origin is dict:
        if not isinstance(value, dict):
            raise NvmlSimError(f"{where}: expected an object, got {type(value).__name__}")
        for key, item in value.items():
            _check(key, args[0], where)
            _check(item, args[1], f"{where}.{key}")
    elif origin is list:
        if not isinstance(value, list):
            raise NvmlSimError(f"{where}: expected a list, got {type(value).__name__}")
        for index, item in enumerate(value):
            _check(item, args[0], f"{where}[{index}]")
    elif hint is int or hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise NvmlSimError(f"{where}: expected a number, got {value!r}")
    elif not isinstance(value, hint):
        raise NvmlSimError(f"{where}: expected {hint.__name__}, got {type(value).__name__}")


@functools.cache
def _hints(typed: Any) -> dict[str, Any]:
    """A TypedDict's keys and their types, resolved once (typing resolves them anew at each
    call: most of the time of writing a simulated node's state)."""
    return typing.get_type_hints(typed)


def _check_time_value(value: Any, where: str) -> None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return
    kinds = ("steps", "ramp", "accumulate")
    if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in kinds:
        raise NvmlSimError(f"{where}: not a time value (a number, or steps/ramp/accumulate)")
    points = next(iter(value.values()))
    if not isinstance(points, list) or not points:
        raise NvmlSimError(f"{where}: a time value needs a list of [t, value] points")
    last = None
    for point in points:
        numbers = isinstance(point, list) and len(point) == 2
        if not numbers or not all(isinstance(x, (int, float)) for x in point):
            raise NvmlSimError(f"{where}: point {point!r} is not [t, value]")
        if last is not None and point[0] < last:
            raise NvmlSimError(f"{where}: points are not in increasing t")
        last = point[0]


def write_state(state: Mapping[str, Any], path: Path | str) -> Path:
    """Check the state and write it as JSON, for BRINGUP_NVMLSIM_STATE."""
    check_state(state)
    path = Path(path)
    path.write_text(json.dumps(state, indent=1) + "\n", encoding="utf-8")
    return path


# --- time values ------------------------------------------------------------------------------


def value_at(value: TimeValue, t: float) -> float:
    """A time value at t seconds, as nvml_sim.c evaluates it (for tests and faults)."""
    if isinstance(value, (int, float)):
        return float(value)
    kind, points = next(iter(value.items()))
    if kind == "steps":
        result = points[0][1]
        for ti, vi in points:
            if ti > t:
                break
            result = vi
        return float(result)
    if kind == "ramp":
        if t <= points[0][0]:
            return float(points[0][1])
        for (t0, v0), (t1, v1) in itertools.pairwise(points):
            if t < t1:
                return float(v0 + (v1 - v0) * (t - t0) / (t1 - t0) if t1 > t0 else v1)
        return float(points[-1][1])
    total = 0.0
    for i, (ti, rate) in enumerate(points):
        if ti >= t:
            break
        end = min(t, points[i + 1][0]) if i + 1 < len(points) else t
        total += rate * (end - ti)
    return total


def switch_at(value: TimeValue, start_s: float, change: Callable[[float], float]) -> TimeValue:
    """The value, changed by `change` from start_s on (a constant or steps; what faults do)."""
    if isinstance(value, (int, float)):
        return change(value) if start_s <= 0 else {"steps": [[0, value], [start_s, change(value)]]}
    kind, points = next(iter(value.items()))
    if kind != "steps":
        raise NvmlSimError(f"cannot switch a {kind} time value at {start_s} s (steps only)")
    if points[0][0] > 0:  # "before the first point, the first value": make that explicit
        points = [[0, points[0][1]], *points]
    before = [p for p in points if p[0] < start_s]
    after = [[t, change(v)] for t, v in points if t > start_s]
    return {"steps": [*before, [start_s, change(value_at(value, start_s))], *after]}
