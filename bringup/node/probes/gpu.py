"""The `gpu` probe: what NVML says about every GPU of the node.

Facts only (gpu_facts.py): counts, identities, error counters, links, clocks,
temperatures and the decoded clocks event reasons. Where pynvml is absent it reads
`nvidia-smi -q -x` with the parser that also reads logs someone sent (parsers/smi_xml.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bringup.node.gpu_facts import Gpu, GpuFacts, NvLink, RemappedRows, decode_clock_event_reasons
from bringup.node.parsers.smi_xml import parse_q_xml
from bringup.node.result import ParseError, ProbeError, ProbeOutput
from bringup.node.tool import run, which

# --- collection -------------------------------------------------------------------------

# NVML's nvmlNvlinkVersion enum -> NVLink generation (nvml.h: 6 = 4.0, 7 = 5.0).
_NVLINK_ENUM_TO_VERSION = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5, 8: 6}
_FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}
_NVLINK_MAX_LINKS = 18  # HGX GPUs expose at most 18 (docs/reference.md#nvlink)


@dataclass
class Params:
    timeout_s: float = 60.0  # for the nvidia-smi fallback and the raw capture


FACTS = GpuFacts


def collect(params: Params) -> ProbeOutput:
    """Read every GPU through NVML; fall back to `nvidia-smi -q -x` where pynvml is absent."""
    raw: dict[str, str] = {}
    smi = which("nvidia-smi")
    if smi:
        # Kept beside the facts so a human (or `bringup inspect`) can read what the driver said.
        result = run([smi, "-q"], params.timeout_s)
        if result.stdout:
            raw["nvidia-smi-q.txt"] = result.stdout
    try:
        import pynvml  # lazily: the other probes must run on nodes without it
    except ImportError:
        pynvml = None
    if pynvml is not None:
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            if not smi:
                raise ProbeError(f"no NVIDIA driver found ({_nvml_reason(exc)})", raw) from None
        else:
            try:
                return ProbeOutput(_read_nvml(pynvml), raw)
            finally:
                pynvml.nvmlShutdown()
    if not smi:
        raise ProbeError("no NVIDIA driver found (no pynvml, nvidia-smi not on PATH)", raw)
    return ProbeOutput(_read_smi_xml(smi, params.timeout_s, raw), raw)


def _nvml_reason(exc: Exception) -> str:
    text = str(exc)
    if "Library Not Found" in text or "NVML Shared Library Not Found" in text:
        return "libnvidia-ml.so not loadable"
    return f"NVML: {text}"


def _read_smi_xml(smi: str, timeout_s: float, raw: dict[str, str]) -> GpuFacts:
    result = run([smi, "-q", "-x"], timeout_s)
    raw["nvidia-smi-q-x.xml"] = result.stdout
    if result.returncode != 0:
        first = (result.stdout or result.stderr).strip().splitlines()[:1]
        raise ProbeError(f"nvidia-smi failed: {first[0] if first else result.returncode}", raw)
    try:
        return parse_q_xml(result.stdout)
    except ParseError as exc:
        raise ProbeError(f"nvidia-smi -q -x: {exc}", raw) from None


def _read_nvml(nvml: Any) -> GpuFacts:
    def get(fn: Callable[..., Any], *args: Any) -> Any:
        # Each field is optional: an old driver or a GPU without the feature answers
        # NotSupported, which must leave that one field unknown, not fail the probe.
        try:
            return fn(*args)
        except nvml.NVMLError:
            return None
        except AttributeError:  # function absent from an older nvidia-ml-py
            return None

    cuda = get(nvml.nvmlSystemGetCudaDriverVersion)
    count = nvml.nvmlDeviceGetCount()
    facts = GpuFacts(
        source="nvml",
        driver_version=_text(get(nvml.nvmlSystemGetDriverVersion)),
        cuda_driver_version=f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
        attached_gpus=count,
    )
    for index in range(count):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        facts.gpus.append(_read_device(nvml, get, index, handle))
    return facts


def _read_device(nvml: Any, get: Callable[..., Any], index: int, h: Any) -> Gpu:
    pci = get(nvml.nvmlDeviceGetPciInfo, h)
    cc = get(nvml.nvmlDeviceGetCudaComputeCapability, h)
    mem = get(nvml.nvmlDeviceGetMemoryInfo, h)
    mig = get(nvml.nvmlDeviceGetMigMode, h)
    ecc = get(nvml.nvmlDeviceGetEccMode, h)
    rows = get(nvml.nvmlDeviceGetRemappedRows, h)
    unc = nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    reasons = get(nvml.nvmlDeviceGetCurrentClocksEventReasons, h)
    if reasons is None:  # drivers before the rename only have the throttle-reasons call
        reasons = get(nvml.nvmlDeviceGetCurrentClocksThrottleReasons, h)
    temp = get(nvml.nvmlDeviceGetTemperatureV, h, nvml.NVML_TEMPERATURE_GPU)
    if temp is None:
        temp = get(nvml.nvmlDeviceGetTemperature, h, nvml.NVML_TEMPERATURE_GPU)

    def threshold(kind: int) -> float | None:
        value = get(nvml.nvmlDeviceGetTemperatureThreshold, h, kind)
        return float(value) if value else None

    def watts(milliwatts: int | None) -> float | None:
        return milliwatts / 1000.0 if milliwatts is not None else None

    def hz(mhz: int | None) -> int | None:
        return mhz * 1_000_000 if mhz is not None else None

    links, version = _read_nvlinks(nvml, get, h)
    fabric_state, fabric_status = _read_fabric(nvml, get, h)
    return Gpu(
        index=index,
        name=_text(get(nvml.nvmlDeviceGetName, h)) or "unknown",
        uuid=_text(get(nvml.nvmlDeviceGetUUID, h)),
        serial=_text(get(nvml.nvmlDeviceGetSerial, h)),
        pci_bus_id=_text(pci.busId) if pci else None,
        pci_device_id=f"0x{pci.pciDeviceId >> 16:04x}" if pci else None,
        vbios_version=_text(get(nvml.nvmlDeviceGetVbiosVersion, h)),
        compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
        memory_total_bytes=int(mem.total) if mem else None,
        persistence_mode=_flag(get(nvml.nvmlDeviceGetPersistenceMode, h)),
        mig_mode=_flag(mig[0]) if mig else None,
        ecc_mode=_flag(ecc[0]) if ecc else None,
        ecc_uncorrected_volatile=get(nvml.nvmlDeviceGetTotalEccErrors, h, unc, 0),
        ecc_uncorrected_aggregate=get(nvml.nvmlDeviceGetTotalEccErrors, h, unc, 1),
        ecc_corrected_volatile=get(
            nvml.nvmlDeviceGetTotalEccErrors, h, nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, 0
        ),
        remapped_rows=RemappedRows(rows[0], rows[1], bool(rows[2]), bool(rows[3]))
        if rows
        else None,
        pcie_gen_current=get(nvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
        # The GPU's own maximum; nvmlDeviceGetMaxPcieLinkGeneration is capped by the slot.
        pcie_gen_max=get(nvml.nvmlDeviceGetGpuMaxPcieLinkGeneration, h)
        or get(nvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
        pcie_width_current=get(nvml.nvmlDeviceGetCurrPcieLinkWidth, h),
        pcie_width_max=get(nvml.nvmlDeviceGetMaxPcieLinkWidth, h),
        power_draw_w=watts(get(nvml.nvmlDeviceGetPowerUsage, h)),
        power_limit_w=watts(get(nvml.nvmlDeviceGetEnforcedPowerLimit, h)),
        power_default_limit_w=watts(get(nvml.nvmlDeviceGetPowerManagementDefaultLimit, h)),
        temperature_c=float(temp) if temp is not None else None,
        memory_temperature_c=_field(nvml, get, h, nvml.NVML_FI_DEV_MEMORY_TEMP),
        slowdown_temperature_c=threshold(nvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
        shutdown_temperature_c=threshold(nvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN),
        memory_max_temperature_c=threshold(nvml.NVML_TEMPERATURE_THRESHOLD_MEM_MAX),
        gpu_max_operating_temperature_c=threshold(nvml.NVML_TEMPERATURE_THRESHOLD_GPU_MAX),
        tlimit_margin_c=_number(get(nvml.nvmlDeviceGetMarginTemperature, h)),
        sm_clock_hz=hz(get(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_SM)),
        sm_clock_max_hz=hz(get(nvml.nvmlDeviceGetMaxClockInfo, h, nvml.NVML_CLOCK_SM)),
        memory_clock_hz=hz(get(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_MEM)),
        memory_clock_max_hz=hz(get(nvml.nvmlDeviceGetMaxClockInfo, h, nvml.NVML_CLOCK_MEM)),
        clock_event_reasons=decode_clock_event_reasons(reasons) if reasons is not None else None,
        nvlink_version=version,
        nvlinks=links,
        fabric_state=fabric_state,
        fabric_status=fabric_status,
    )


def _read_nvlinks(nvml: Any, get: Callable[..., Any], h: Any) -> tuple[list[NvLink], int | None]:
    links: list[NvLink] = []
    version: int | None = None
    for link in range(_NVLINK_MAX_LINKS):
        state = get(nvml.nvmlDeviceGetNvLinkState, h, link)
        if state is None:  # link absent (or no NVLink at all): stop at the first gap
            break
        links.append(NvLink(link=link, active=bool(state)))
        if state and version is None:
            version = _NVLINK_ENUM_TO_VERSION.get(get(nvml.nvmlDeviceGetNvLinkVersion, h, link))
    return links, version


def _read_fabric(nvml: Any, get: Callable[..., Any], h: Any) -> tuple[str | None, str | None]:
    struct = getattr(nvml, "c_nvmlGpuFabricInfo_t", None)
    if struct is None:
        return None, None
    info = struct()
    if get(nvml.nvmlDeviceGetGpuFabricInfo, h, info) is None:
        return None, None
    state = _FABRIC_STATES.get(info.state, f"unknown_{info.state}")
    if state == "not_supported":
        return state, None
    status = "success" if info.status == 0 else _text(nvml.nvmlErrorString(info.status))
    return state, status


def _field(nvml: Any, get: Callable[..., Any], h: Any, field_id: int) -> float | None:
    values = get(nvml.nvmlDeviceGetFieldValues, h, [field_id])
    if not values or values[0].nvmlReturn != 0:
        return None
    value = values[0]
    kinds = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
    return float(getattr(value.value, kinds.get(value.valueType, "uiVal")))


def _number(value: int | None) -> float | None:
    return float(value) if value is not None else None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _flag(value: int | None) -> bool | None:
    return None if value is None else bool(value)
