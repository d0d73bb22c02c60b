"""The `gpu` probe: what NVML says about every GPU of the node.

Facts only (gpu_facts.py): counts, identities, error counters, links, clocks,
temperatures and the decoded clocks event reasons. Where pynvml is absent it reads
`nvidia-smi -q -x` with the parser that also reads logs someone sent (parsers/smi_xml.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bringup.node.gpu_facts import (
    Gpu,
    GpuFacts,
    NvLink,
    RemappedRows,
    decode_clock_event_reasons,
    nvml_field_number,
)
from bringup.node.result import ParseError, ProbeError, ProbeOutput
from bringup.node.simulated import GPUS, nvml_is_simulated
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
                said = [GPUS] if nvml_is_simulated(pynvml) else []
                return ProbeOutput(_read_nvml(pynvml), raw, simulated=said)
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
    # Only where NVML cannot be read: the XML parser (xml.etree) is not loaded at every run.
    from bringup.node.parsers.smi_xml import parse_q_xml

    result = run([smi, "-q", "-x"], timeout_s)
    raw["nvidia-smi-q-x.xml"] = result.stdout
    if result.returncode != 0:
        first = (result.stdout or result.stderr).strip().splitlines()[:1]
        raise ProbeError(f"nvidia-smi failed: {first[0] if first else result.returncode}", raw)
    try:
        return parse_q_xml(result.stdout)
    except ParseError as exc:
        raise ProbeError(f"nvidia-smi -q -x: {exc}", raw) from None


# NVML return codes the probe reacts to (nvml.h; the same numbers in every driver branch).
NVML_ERROR_GPU_IS_LOST = 15
# Field ids (nvml.h, unchanged from CUDA 12.8 to 13.x; docs/reference.md#nvml).
NVML_FI_DEV_NVLINK_GET_SPEED = 164  # per link (scope = link), Mbps
NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT = 194  # slowdown threshold relative to T.Limit, C
NVML_FI_DEV_TEMPERATURE_MEM_MAX_TLIMIT = 195  # the HBM's limit on the same scale, C
NVML_FI_DEV_MEMORY_TEMP = 82


class _GpuLost(Exception):
    """NVML answered GPU_IS_LOST: the GPU fell off the bus; nothing more can be read."""


class _Nvml:
    """pynvml with each call optional: a function this nvidia-ml-py lacks, or NotSupported
    from this driver or GPU, leaves that one field unknown (None) instead of failing the
    probe. Functions are looked up by name at the call, so an older nvidia-ml-py without
    them takes the fallback path rather than raising before the call is even tried."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml

    def __call__(self, name: str, *args: Any) -> Any:
        fn = getattr(self.nvml, name, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except self.nvml.NVMLError as exc:
            if getattr(exc, "value", None) == NVML_ERROR_GPU_IS_LOST:
                raise _GpuLost(str(exc)) from None
            return None

    def first(self, *calls: tuple[Any, ...]) -> Any:
        """The first of several (name, *args) calls that answers: new name, then old."""
        for name, *args in calls:
            value = self(name, *args)
            if value is not None:
                return value
        return None

    def field(self, h: Any, field_id: int, scope: int | None = None) -> float | None:
        """One NVML field value as a number, None when the driver has no such field."""
        request = [(field_id, scope)] if scope is not None else [field_id]
        values = self("nvmlDeviceGetFieldValues", h, request)
        if not values or values[0].nvmlReturn != 0:
            return None
        return nvml_field_number(values[0])


def _read_nvml(nvml: Any) -> GpuFacts:
    call = _Nvml(nvml)
    cuda = call.first(("nvmlSystemGetCudaDriverVersion_v2",), ("nvmlSystemGetCudaDriverVersion",))
    count = nvml.nvmlDeviceGetCount()
    facts = GpuFacts(
        source="nvml",
        driver_version=_text(call("nvmlSystemGetDriverVersion")),
        cuda_driver_version=f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
        attached_gpus=count,
    )
    for index in range(count):
        # A GPU that fell off the bus is one GPU lost, not a node that cannot be read: it is
        # named, and the other GPUs are read and judged.
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            facts.gpus.append(_read_device(call, index, handle))
        except _GpuLost as exc:
            facts.gpus.append(_lost(index, str(exc)))
        except nvml.NVMLError as exc:
            if getattr(exc, "value", None) != NVML_ERROR_GPU_IS_LOST:
                raise
            facts.gpus.append(_lost(index, str(exc)))
    return facts


def _lost(index: int, reason: str) -> Gpu:
    return Gpu(index=index, name="unknown", error=f"NVML: {reason}")


def _read_device(call: _Nvml, index: int, h: Any) -> Gpu:
    nvml = call.nvml
    pci = call("nvmlDeviceGetPciInfo", h)
    cc = call("nvmlDeviceGetCudaComputeCapability", h)
    mem = call("nvmlDeviceGetMemoryInfo", h)
    mig = call("nvmlDeviceGetMigMode", h)
    ecc = call("nvmlDeviceGetEccMode", h)
    rows = call("nvmlDeviceGetRemappedRows", h)
    unc = nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    # Drivers before the rename only have the throttle-reasons call.
    reasons = call.first(
        ("nvmlDeviceGetCurrentClocksEventReasons", h),
        ("nvmlDeviceGetCurrentClocksThrottleReasons", h),
    )
    temp = call.first(
        ("nvmlDeviceGetTemperatureV", h, nvml.NVML_TEMPERATURE_GPU),
        ("nvmlDeviceGetTemperature", h, nvml.NVML_TEMPERATURE_GPU),
    )

    def threshold(kind: int) -> float | None:
        value = call("nvmlDeviceGetTemperatureThreshold", h, kind)
        return float(value) if value else None

    def watts(milliwatts: int | None) -> float | None:
        return milliwatts / 1000.0 if milliwatts is not None else None

    def hz(mhz: int | None) -> int | None:
        return mhz * 1_000_000 if mhz is not None else None

    links, version = _read_nvlinks(call, h)
    fabric_state, fabric_status, health, clique = _read_fabric(call, h)
    return Gpu(
        index=index,
        name=_text(call("nvmlDeviceGetName", h)) or "unknown",
        uuid=_text(call("nvmlDeviceGetUUID", h)),
        serial=_text(call("nvmlDeviceGetSerial", h)),
        pci_bus_id=_text(pci.busId) or None if pci else None,
        # 0 is no PCI device id (NVIDIA's are 0x10de in the low half): unknown, not "0x0000".
        pci_device_id=f"0x{pci.pciDeviceId >> 16:04x}" if pci and pci.pciDeviceId else None,
        vbios_version=_text(call("nvmlDeviceGetVbiosVersion", h)),
        compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
        memory_total_bytes=int(mem.total) if mem else None,
        persistence_mode=_flag(call("nvmlDeviceGetPersistenceMode", h)),
        mig_mode=_flag(mig[0]) if mig else None,
        ecc_mode=_flag(ecc[0]) if ecc else None,
        ecc_uncorrected_volatile=call("nvmlDeviceGetTotalEccErrors", h, unc, 0),
        ecc_uncorrected_aggregate=call("nvmlDeviceGetTotalEccErrors", h, unc, 1),
        ecc_corrected_volatile=call(
            "nvmlDeviceGetTotalEccErrors", h, nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, 0
        ),
        remapped_rows=RemappedRows(rows[0], rows[1], bool(rows[2]), bool(rows[3]))
        if rows
        else None,
        pcie_gen_current=call("nvmlDeviceGetCurrPcieLinkGeneration", h),
        # The GPU's own maximum; nvmlDeviceGetMaxPcieLinkGeneration is capped by the slot.
        pcie_gen_max=call.first(
            ("nvmlDeviceGetGpuMaxPcieLinkGeneration", h), ("nvmlDeviceGetMaxPcieLinkGeneration", h)
        ),
        # The link's maximum, the slot (host) included: Gen5 on a Grace host.
        pcie_link_gen_max=call("nvmlDeviceGetMaxPcieLinkGeneration", h),
        pcie_width_current=call("nvmlDeviceGetCurrPcieLinkWidth", h),
        pcie_width_max=call("nvmlDeviceGetMaxPcieLinkWidth", h),
        power_draw_w=watts(call("nvmlDeviceGetPowerUsage", h)),
        power_limit_w=watts(call("nvmlDeviceGetEnforcedPowerLimit", h)),
        power_default_limit_w=watts(call("nvmlDeviceGetPowerManagementDefaultLimit", h)),
        temperature_c=float(temp) if temp is not None else None,
        memory_temperature_c=call.field(h, NVML_FI_DEV_MEMORY_TEMP),
        slowdown_temperature_c=threshold(nvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
        shutdown_temperature_c=threshold(nvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN),
        memory_max_temperature_c=threshold(nvml.NVML_TEMPERATURE_THRESHOLD_MEM_MAX),
        gpu_max_operating_temperature_c=threshold(nvml.NVML_TEMPERATURE_THRESHOLD_GPU_MAX),
        tlimit_margin_c=_number(call("nvmlDeviceGetMarginTemperature", h)),
        slowdown_tlimit_c=call.field(h, NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT),
        memory_max_tlimit_c=call.field(h, NVML_FI_DEV_TEMPERATURE_MEM_MAX_TLIMIT),
        sm_clock_hz=hz(call("nvmlDeviceGetClockInfo", h, nvml.NVML_CLOCK_SM)),
        sm_clock_max_hz=hz(call("nvmlDeviceGetMaxClockInfo", h, nvml.NVML_CLOCK_SM)),
        memory_clock_hz=hz(call("nvmlDeviceGetClockInfo", h, nvml.NVML_CLOCK_MEM)),
        memory_clock_max_hz=hz(call("nvmlDeviceGetMaxClockInfo", h, nvml.NVML_CLOCK_MEM)),
        clock_event_reasons=decode_clock_event_reasons(reasons) if reasons is not None else None,
        nvlink_version=version,
        nvlinks=links,
        fabric_state=fabric_state,
        fabric_status=fabric_status,
        fabric_health_mask=health,
        fabric_clique_id=clique,
    )


def _read_nvlinks(call: _Nvml, h: Any) -> tuple[list[NvLink], int | None]:
    links: list[NvLink] = []
    version: int | None = None
    for link in range(_NVLINK_MAX_LINKS):
        state = call("nvmlDeviceGetNvLinkState", h, link)
        if state is None:  # link absent (or no NVLink at all): stop at the first gap
            break
        # The link's speed per direction, MB/s in nvml.h (26562 for NVLink 4's 26.562 GB/s).
        mbps = call.field(h, NVML_FI_DEV_NVLINK_GET_SPEED, link) if state else None
        speed = mbps * 1e6 if mbps else None
        links.append(NvLink(link=link, active=bool(state), speed_bytes_per_s=speed))
        if state and version is None:
            version = _NVLINK_ENUM_TO_VERSION.get(call("nvmlDeviceGetNvLinkVersion", h, link))
    return links, version


def _read_fabric(call: _Nvml, h: Any) -> tuple[str | None, str | None, int | None, int | None]:
    """Fabric Manager's registration of the GPU (state, status, health mask, clique id):
    the v2 call (with the health mask) where this nvidia-ml-py has it, else v1. pynvml
    calls NVML without argtypes, so the struct must go by reference: passed by value NVML
    would write through a garbage pointer."""
    import ctypes

    nvml = call.nvml
    health: int | None = None
    v2 = getattr(nvml, "c_nvmlGpuFabricInfo_v2_t", None)
    info: Any = None
    if v2 is not None and hasattr(nvml, "nvmlDeviceGetGpuFabricInfoV"):
        info = v2()
        if call("nvmlDeviceGetGpuFabricInfoV", h, ctypes.byref(info)) is None:
            info = None
        else:
            health = int(info.healthMask)
    v1 = getattr(nvml, "c_nvmlGpuFabricInfo_t", None)
    if info is None and v1 is not None:
        info = v1()
        if call("nvmlDeviceGetGpuFabricInfo", h, ctypes.byref(info)) is None:
            info = None
    if info is None:
        return None, None, None, None
    state = _FABRIC_STATES.get(info.state, f"unknown_{info.state}")
    if state == "not_supported":
        return state, None, None, None
    status = "success" if info.status == 0 else _text(call("nvmlErrorString", info.status))
    return state, status, health, int(info.cliqueId)


def _number(value: int | None) -> float | None:
    return float(value) if value is not None else None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _flag(value: int | None) -> bool | None:
    return None if value is None else bool(value)
