"""The real pynvml against the simulated NVML: values, errors, faults and time."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bringup.node.parsers.smi_text import parse_q_text
from bringup.node.parsers.smi_xml import parse_q_xml
from bringup.sim.nvml import (
    ENV_STATE,
    apply_fault,
    find_header,
    library_env,
    state_from_capture,
    state_from_profile,
)
from tests.support.timing import scaled

SMI = Path(__file__).resolve().parents[2] / "fixtures" / "smi"
RunPynvml = Callable[[dict[str, Any], str], Any]  # the conftest fixture run_pynvml

CAPTURES = [
    "ugpuexp-h200-q-load.txt",
    "ugpuexp-h100-q-load.txt",
    "ugpuexp-h100-q-idle.txt",
    "telegraf-a100-sxm4-x4-mig-535-q-x.xml",
    "netdata-a100-sxm4-40gb-mig-510-q-x.xml",
    "mleng-a100-sxm4-80gb-q-excerpt-remapped-rows-pending.txt",
]

# In the child: a call's value, or None where NVML answers NOT_SUPPORTED.
GET = """
def get(fn, *args):
    try:
        return fn(*args)
    except pynvml.NVMLError_NotSupported:
        return None
"""


def _facts(name: str):
    text = (SMI / name).read_text()
    return parse_q_xml(text) if name.endswith(".xml") else parse_q_text(text)


@pytest.mark.parametrize("capture", CAPTURES)
def test_values_equal_what_the_capture_parser_gives(run_pynvml: RunPynvml, capture: str) -> None:
    facts = _facts(capture)
    out = run_pynvml(
        state_from_capture(SMI / capture),
        GET
        + """
pynvml.nvmlInit()
out["driver"] = pynvml.nvmlSystemGetDriverVersion()
out["gpus"] = []
for i in range(pynvml.nvmlDeviceGetCount()):
    h = pynvml.nvmlDeviceGetHandleByIndex(i)
    mem = get(pynvml.nvmlDeviceGetMemoryInfo, h)
    ecc = get(pynvml.nvmlDeviceGetEccMode, h)
    limit = get(pynvml.nvmlDeviceGetEnforcedPowerLimit, h)
    out["gpus"].append({
        "name": pynvml.nvmlDeviceGetName(h),
        "memory_total_bytes": mem.total if mem else None,
        "power_limit_w": limit / 1000 if limit is not None else None,
        "temperature_c": get(pynvml.nvmlDeviceGetTemperatureV, h, pynvml.NVML_TEMPERATURE_GPU),
        "ecc_mode": bool(ecc[0]) if ecc else None,
    })
pynvml.nvmlShutdown()
""",
    )
    assert out["driver"] == facts.driver_version
    expected = [
        {
            "name": gpu.name,
            "memory_total_bytes": gpu.memory_total_bytes,
            "power_limit_w": gpu.power_limit_w,
            "temperature_c": gpu.temperature_c,
            "ecc_mode": gpu.ecc_mode,
        }
        for gpu in facts.gpus
    ]
    assert out["gpus"] == expected


def test_every_h200_value_through_pynvml(run_pynvml: RunPynvml, nvml_library: Path) -> None:
    out = run_pynvml(
        state_from_capture(SMI / "ugpuexp-h200-q-load.txt"),
        GET
        + """
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
pci = pynvml.nvmlDeviceGetPciInfo(h)
rows = pynvml.nvmlDeviceGetRemappedRows(h)
field = pynvml.nvmlDeviceGetFieldValues(h, [82, 194])
out.update(
    cuda=pynvml.nvmlSystemGetCudaDriverVersion(),
    cuda_v2=pynvml.nvmlSystemGetCudaDriverVersion_v2(),
    uuid=pynvml.nvmlDeviceGetUUID(h),
    serial=pynvml.nvmlDeviceGetSerial(h),
    vbios=pynvml.nvmlDeviceGetVbiosVersion(h),
    bus_id=pci.busId,
    bus_id_legacy=pci.busIdLegacy,
    bus=pci.bus,
    pci_device_id=pci.pciDeviceId,
    persistence=pynvml.nvmlDeviceGetPersistenceMode(h),
    mig=list(pynvml.nvmlDeviceGetMigMode(h)),
    ecc_unc=[pynvml.nvmlDeviceGetTotalEccErrors(h, 1, c) for c in (0, 1)],
    rows=list(rows),
    pcie=[pynvml.nvmlDeviceGetCurrPcieLinkGeneration(h),
          pynvml.nvmlDeviceGetMaxPcieLinkGeneration(h),
          pynvml.nvmlDeviceGetGpuMaxPcieLinkGeneration(h),
          pynvml.nvmlDeviceGetCurrPcieLinkWidth(h),
          pynvml.nvmlDeviceGetMaxPcieLinkWidth(h)],
    power=[pynvml.nvmlDeviceGetPowerUsage(h), pynvml.nvmlDeviceGetPowerManagementDefaultLimit(h)],
    temp_old=pynvml.nvmlDeviceGetTemperature(h, 0),
    margin=pynvml.nvmlDeviceGetMarginTemperature(h),
    threshold=get(pynvml.nvmlDeviceGetTemperatureThreshold, h, 1),
    clocks=[pynvml.nvmlDeviceGetClockInfo(h, 1), pynvml.nvmlDeviceGetClockInfo(h, 2),
            pynvml.nvmlDeviceGetMaxClockInfo(h, 1), get(pynvml.nvmlDeviceGetClockInfo, h, 0)],
    reasons=[pynvml.nvmlDeviceGetCurrentClocksEventReasons(h),
             pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)],
    fields=[(f.nvmlReturn, f.valueType, f.value.uiVal, f.value.siVal) for f in field],
    nvlink=get(pynvml.nvmlDeviceGetNvLinkState, h, 0),
    util=get(pynvml.nvmlDeviceGetUtilizationRates, h),
    mem_v2=pynvml.nvmlDeviceGetMemoryInfo(h, pynvml.nvmlMemory_v2).total,
    maps=open("/proc/self/maps").read(),
)
""",
    )
    # The library pynvml loaded is the simulator, not a driver's.
    assert str(nvml_library) in out.pop("maps")
    assert out == {
        "cuda": 13010,
        "cuda_v2": 13010,
        "uuid": "GPU-00000000-0000-0000-0000-000000000000",
        "serial": "0000000000000",
        "vbios": "96.00.A5.00.03",
        "bus_id": "00000000:83:00.0",
        "bus_id_legacy": "0000:83:00.0",
        "bus": 0x83,
        "pci_device_id": 0x233510DE,
        "persistence": 1,
        "mig": [0, 0],
        "ecc_unc": [0, 0],
        "rows": [0, 0, 0, 0],
        "pcie": [5, 5, 5, 16, 16],
        "power": [627320, 700000],
        "temp_old": 52,
        "margin": 35,
        "threshold": None,  # driver 590 reports thresholds relative to T.Limit
        "clocks": [1980, 3201, 1980, None],
        "reasons": [0, 0],
        "fields": [[0, 1, 41, 41], [0, 5, 4294967294, -2]],
        "nvlink": None,
        "util": None,
        "mem_v2": 143771 * 1048576,
    }


def test_a_lost_gpu_raises_for_its_index_only(run_pynvml: RunPynvml) -> None:
    out = run_pynvml(
        apply_fault(apply_fault(state_from_profile("b300"), "lost:2"), "lost:6=0.3"),
        """
import time
pynvml.nvmlInit()
out["by_index"] = []
for i in range(pynvml.nvmlDeviceGetCount()):
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        out["by_index"].append(pynvml.nvmlDeviceGetUUID(h)[-2:])
    except pynvml.NVMLError_GpuIsLost:
        out["by_index"].append("lost")
h6 = pynvml.nvmlDeviceGetHandleByIndex(6)
time.sleep(0.4)
try:
    pynvml.nvmlDeviceGetPowerUsage(h6)
    out["later"] = "answered"
except pynvml.NVMLError_GpuIsLost as exc:
    out["later"] = str(exc)
out["other"] = pynvml.nvmlDeviceGetPowerUsage(pynvml.nvmlDeviceGetHandleByIndex(5))
""",
    )
    # GPU 6 is lost from 0.3 s: its handle was taken before, its next call fails.
    assert out == {
        "by_index": ["00", "01", "lost", "03", "04", "05", "06", "07"],
        "later": "GPU is lost",
        "other": 190000,
    }


def test_a_missing_gpu_is_not_counted(run_pynvml: RunPynvml) -> None:
    out = run_pynvml(
        apply_fault(state_from_profile("b300"), "missing:5"),
        """
pynvml.nvmlInit()
n = pynvml.nvmlDeviceGetCount()
handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
out["uuids"] = [pynvml.nvmlDeviceGetUUID(h)[-2:] for h in handles]
try:
    pynvml.nvmlDeviceGetHandleByIndex(n)
except pynvml.NVMLError_InvalidArgument:
    out["past_the_end"] = "invalid argument"
""",
    )
    assert out == {
        "uuids": ["00", "01", "02", "03", "04", "06", "07"],
        "past_the_end": "invalid argument",
    }


def test_absent_and_injected_functions(run_pynvml: RunPynvml) -> None:
    state = apply_fault(state_from_profile("b300"), "not-supported:1=nvmlDeviceGetPowerUsage")
    state = apply_fault(state, "unknown=nvmlSystemGetDriverVersion")
    out = run_pynvml(
        state,
        """
pynvml.nvmlInit()
def outcome(fn, *args):
    try:
        return fn(*args)
    except pynvml.NVMLError as exc:
        return type(exc).__name__
h0, h1 = (pynvml.nvmlDeviceGetHandleByIndex(i) for i in (0, 1))
out["bar1"] = outcome(pynvml.nvmlDeviceGetBAR1MemoryInfo, h0)
out["power"] = [outcome(pynvml.nvmlDeviceGetPowerUsage, h) for h in (h0, h1)]
out["driver"] = outcome(pynvml.nvmlSystemGetDriverVersion)
out["cuda"] = outcome(pynvml.nvmlSystemGetCudaDriverVersion)
""",
    )
    assert out == {
        "bar1": "NVMLError_FunctionNotFound",  # not implemented: absent, as on an old driver
        "power": [190000, "NVMLError_NotSupported"],
        "driver": "NVMLError_Unknown",
        "cuda": 13000,
    }


def test_init_failures(run_pynvml: RunPynvml, nvml_library: Path, tmp_path: Path) -> None:
    code = """
try:
    pynvml.nvmlInit()
    out["init"] = "ok"
except pynvml.NVMLError as exc:
    out["init"] = type(exc).__name__
"""
    out = run_pynvml(apply_fault(state_from_profile("b300"), "unknown=nvmlInitWithFlags"), code)
    assert out == {"init": "NVMLError_Unknown"}
    # Without a state the simulated driver is "not loaded".
    env = library_env(nvml_library, tmp_path / "unused.json")
    del env[ENV_STATE]
    script = "import json, pynvml\nout = {}\n" + code + "print(json.dumps(out))\n"
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=scaled(60)
    )
    assert result.stdout.strip() == '{"init": "NVMLError_DriverNotLoaded"}'
    assert f"{ENV_STATE} is not set" in result.stderr


TIMELINE = """
import time
FIELDS = [252, 270, 300]
before = time.monotonic()
pynvml.nvmlInit()
after = time.monotonic()
h = pynvml.nvmlDeviceGetHandleByIndex(0)

def read():
    values = pynvml.nvmlDeviceGetFieldValues(h, FIELDS)
    return {
        "mask": pynvml.nvmlDeviceGetCurrentClocksEventReasons(h),
        "sm": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
        "fields": {f: (v.nvmlReturn, v.value.ullVal) for f, v in zip(FIELDS, values)},
    }

# The library's clock starts inside nvmlInit: between `before` and `after`.
first = read()
out["first_at_most_s"] = time.monotonic() - before
time.sleep(max(0.0, 0.6 - (time.monotonic() - after)))
out["first"], out["second"] = first, read()
time.sleep(0.3)
out["third"] = read()
"""


@pytest.mark.parametrize(
    ("driver", "counter", "other"), [(None, "270", "252"), ("575.57.08", "252", "270")]
)
def test_hw_thermal_switches_on_at_its_second_and_its_counter_grows(
    run_pynvml: RunPynvml, driver: str | None, counter: str, other: str
) -> None:
    state = state_from_capture(SMI / "ugpuexp-h200-q-load.txt", driver=driver)
    # A value at an id outside the branch's ids is never served.
    state["gpus"][0]["fields"]["300"] = {"type": "unsigned_long_long", "value": 7}
    # The first read must come before the switch (0.5 s after init) to see "before": on a
    # loaded machine the child can stall past it, so a stalled run is run again (not judged).
    for _ in range(3):
        out = run_pynvml(apply_fault(state, "hw-thermal=0.5"), TIMELINE)
        if out["first_at_most_s"] < 0.5:
            break
    assert out["first_at_most_s"] < 0.5  # else the machine stalled and "before" was not seen
    first, second, third = out["first"], out["second"], out["third"]
    assert first["mask"] & 0x40 == 0 and first["sm"] == 1980
    assert second["mask"] & 0x40 and third["mask"] & 0x40
    assert second["sm"] == third["sm"] == 990
    not_supported = [3, 0]
    for reading in (first, second, third):
        assert reading["fields"][other] == not_supported  # the other branch's number
        assert reading["fields"]["300"] == not_supported
    assert first["fields"][counter] == [0, 0]
    grew = third["fields"][counter][1] - second["fields"][counter][1]
    assert second["fields"][counter][1] >= 0.1e9
    assert 0.25e9 <= grew <= 1.5e9  # ~0.3 s of throttling, in ns


def test_fabric_in_progress_through_every_fabric_call(run_pynvml: RunPynvml) -> None:
    out = run_pynvml(
        apply_fault(state_from_profile("b300"), "fabric:1=in_progress"),
        """
import ctypes
pynvml.nvmlInit()
out["v1"], out["v2"], out["v3"] = [], [], []
for i in (0, 1):
    h = pynvml.nvmlDeviceGetHandleByIndex(i)
    info = pynvml.c_nvmlGpuFabricInfo_t()
    pynvml.nvmlDeviceGetGpuFabricInfo(h, ctypes.byref(info))
    out["v1"].append([info.state, info.status])
    info = pynvml.c_nvmlGpuFabricInfo_v2_t()  # sets .version = nvmlGpuFabricInfo_v2
    pynvml.nvmlDeviceGetGpuFabricInfoV(h, ctypes.byref(info))
    out["v2"].append([info.state, info.status, info.healthMask])
    info = pynvml.c_nvmlGpuFabricInfo_v3_t()
    try:
        pynvml.nvmlDeviceGetGpuFabricInfoV(h, ctypes.byref(info))
        out["v3"].append([info.state, info.healthSummary])
    except pynvml.NVMLError_ArgumentVersionMismatch:
        out["v3"].append("version mismatch")
""",
    )
    completed, in_progress = 3, 2
    assert out["v1"] == [[completed, 0], [in_progress, 0]]
    assert out["v2"] == [[completed, 0, 0], [in_progress, 0, 0]]
    if "nvmlGpuFabricInfo_v3" in find_header().read_text():  # CUDA 13 headers
        assert out["v3"] == [[completed, 0], [in_progress, 0]]
    else:
        assert out["v3"] == ["version mismatch"] * 2


def test_nvlinks_and_their_speed_field(run_pynvml: RunPynvml) -> None:
    out = run_pynvml(
        apply_fault(state_from_profile("b300"), "nvlink-down:0=3"),
        """
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
out["states"] = [pynvml.nvmlDeviceGetNvLinkState(h, link) for link in range(18)]
out["version"] = pynvml.nvmlDeviceGetNvLinkVersion(h, 0)
try:
    pynvml.nvmlDeviceGetNvLinkState(h, 18)
except pynvml.NVMLError_InvalidArgument:
    out["link18"] = "invalid argument"
speeds = pynvml.nvmlDeviceGetFieldValues(h, [(164, 0), (164, 17)])
out["speeds"] = [(v.nvmlReturn, v.scopeId, v.value.uiVal) for v in speeds]
""",
    )
    assert out == {
        "states": [1, 1, 1, 0] + [1] * 14,
        "version": 7,  # NVML_NVLINK_VERSION_5_0
        "link18": "invalid argument",
        "speeds": [[0, 0, 53125], [0, 17, 53125]],
    }
