"""Telemetry: sample every GPU through NVML on a thread while something else loads them.

A `Sampler` reads SM and memory clocks, GPU and HBM temperature, power draw against the
enforced limit, utilization and the decoded clocks event reasons of every GPU, every
`interval_s`, into a `Timeline`. It also reads NVML's cumulative throttle-time counters at
start and stop, so the timeline says how long each GPU spent in each throttle state even
between samples.

Memory is bounded: past `max_samples` the buffer is decimated (every other tick dropped,
and from then on only every other new tick kept), so a long run keeps its whole time span
at a coarser step; `Timeline.dropped` counts the samples given up.

Node side: standard library plus `pynvml`, imported lazily. Without a driver, `stop()`
returns a Timeline whose `error` says "no NVIDIA driver found (...)" and that has no samples.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

from bringup.node.gpu_facts import decode_clock_event_reasons, nvml_field_number
from bringup.node.result import ProbeError, ProbeOutput
from bringup.node.simulated import sampled_gpus
from bringup.node.timeline import Sample, Timeline


class Source(Protocol):
    """Where samples come from: NVML on a node; a recording in tests and offline."""

    def open(self) -> int:
        """Start reading; return the number of GPUs. Raise SourceError when it cannot."""
        ...

    def read(self, t_s: float) -> list[Sample]:
        """One sample per GPU, stamped t_s."""
        ...

    def throttle_counters_s(self) -> dict[str, dict[str, float]]:
        """Cumulative seconds per GPU and reason ({} where unsupported)."""
        ...

    def limits(self) -> tuple[dict[str, float], dict[str, float]]:
        """Default power limit (W) and HBM max temperature (C) per GPU, where known."""
        ...

    def names(self) -> dict[str, str]:
        """Each GPU's product name ("NVIDIA H200"), where known."""
        ...

    def close(self) -> None: ...


class SourceError(Exception):
    """The source cannot deliver samples; one line."""


# --- bounded buffer ----------------------------------------------------------------------


class SampleBuffer:
    """Ticks of samples, decimated to stay under `max_samples` (a pure data structure).

    Decimation rather than a ring: a ring would forget the start of a long run, and a
    throttle that began early (a GPU already hot) would vanish from the diagnosis.
    """

    def __init__(self, max_samples: int) -> None:
        self.max_samples = max(1, max_samples)
        self.ticks: list[list[Sample]] = []
        self.stride = 1  # keep every stride-th tick offered
        self.offered = 0
        self.dropped = 0

    def add(self, tick: list[Sample]) -> None:
        """Offer the samples of one tick (all GPUs)."""
        position, self.offered = self.offered, self.offered + 1
        if position % self.stride:
            self.dropped += len(tick)
            return
        self.ticks.append(tick)
        while len(self.ticks) > 1 and self._held() > self.max_samples:
            kept = self.ticks[::2]
            self.dropped += sum(len(t) for t in self.ticks[1::2])
            self.ticks = kept
            self.stride *= 2

    def _held(self) -> int:
        return sum(len(t) for t in self.ticks)

    def samples(self) -> list[Sample]:
        return [s for tick in self.ticks for s in tick]


# --- the sampler -------------------------------------------------------------------------


class Sampler:
    """Samples every GPU every `interval_s` on its own thread, between start() and stop()."""

    def __init__(
        self,
        interval_s: float = 0.2,
        max_samples: int = 100_000,
        source: Source | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.interval_s = interval_s
        self.source: Source = source if source is not None else NvmlSource()
        self._clock = clock
        self._buffer = SampleBuffer(max_samples)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._gpus = 0
        self._error: str | None = None
        self._counters_start: dict[str, dict[str, float]] = {}
        self._opened = False
        self._limits: tuple[dict[str, float], dict[str, float]] = ({}, {})
        self._names: dict[str, str] = {}
        self.timeline: Timeline | None = None  # set by stop() (and on leaving a with block)

    def start(self) -> Sampler:
        """Open the source and start the thread; without a driver, only record why."""
        try:
            self._gpus = self.source.open()
        except SourceError as exc:
            self._error = str(exc)
            return self
        self._opened = True
        self._counters_start = self._counters()
        try:
            self._limits = self.source.limits()
        except SourceError:
            self._limits = ({}, {})
        with contextlib.suppress(SourceError):  # unnamed GPUs: auto then says no model
            self._names = self.source.names()
        self._t0 = self._clock()
        self._thread = threading.Thread(target=self._loop, name="bringup-telemetry", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> Timeline:
        """Stop sampling and return everything seen (what was sampled is kept on errors).

        Calling it again returns the same samples (the with block calls it on exit).
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        throttle: dict[str, dict[str, float]] = {}
        if self._opened:
            throttle = _difference(self._counters(), self._counters_start)
            with contextlib.suppress(SourceError):  # closing failed: the samples are good
                self.source.close()
            self._opened = False
        with self._lock:
            self.timeline = Timeline(
                interval_s=self.interval_s,
                gpus=self._gpus,
                samples=self._buffer.samples(),
                throttle_time_s=throttle,
                error=self._error,
                dropped=self._buffer.dropped,
                power_default_limit_w=self._limits[0],
                memory_max_temperature_c=self._limits[1],
                gpu_names=self._names,
            )
            return self.timeline

    @property
    def error(self) -> str | None:
        """Why sampling could not start or stopped early; None while all is well."""
        with self._lock:
            return self._error

    def wait(self, seconds: float) -> None:
        """Sleep up to `seconds` while sampling goes on (returns at once if it never started)."""
        if self._thread is not None:
            self._stop.wait(seconds)

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _loop(self) -> None:
        # Ticks are scheduled on a fixed grid from t0, so a slow read does not make the
        # interval drift; a tick that is already late is taken at once (never skipped).
        next_t = self._t0
        while not self._stop.is_set():
            t_s = self._clock() - self._t0
            try:
                tick = self.source.read(round(t_s, 4))
            except Exception as exc:
                # A thread that dies silently would leave a timeline with no samples and no
                # error, which a check could read as "no throttling": say why it stopped.
                reason = (
                    str(exc) if isinstance(exc, SourceError) else f"{type(exc).__name__}: {exc}"
                )
                with self._lock:
                    self._error = f"sampling stopped at {t_s:.1f} s: {reason}"
                return
            with self._lock:
                self._buffer.add(tick)
            next_t += self.interval_s
            self._stop.wait(max(0.0, next_t - self._clock()))

    def _counters(self) -> dict[str, dict[str, float]]:
        try:
            return self.source.throttle_counters_s()
        except SourceError:
            return {}


def _difference(
    end: dict[str, dict[str, float]], start: dict[str, dict[str, float]]
) -> dict[str, dict[str, float]]:
    """Seconds per GPU and reason accumulated between two counter readings."""
    result: dict[str, dict[str, float]] = {}
    for gpu, reasons in end.items():
        before = start.get(gpu, {})
        result[gpu] = {
            reason: round(max(0.0, seconds - before.get(reason, 0.0)), 6)
            for reason, seconds in reasons.items()
            if reason in before
        }
    return result


# --- NVML --------------------------------------------------------------------------------

# NVML field ids of the cumulative throttle-time counters (nvml.h
# NVML_FI_DEV_CLOCKS_EVENT_REASON_*, in nanoseconds; DCGM mirrors them as
# DCGM_FI_DEV_CLOCKS_EVENT_REASON_*_NS; docs/reference.md#nvml). The ids are not stable
# across driver branches: the SW thermal, HW thermal and power brake counters are 251-253
# in nvml.h of CUDA 12.9 (R575), where 269 is the power smoothing preset, and 269-271
# from CUDA 13.0 (R580) on; CUDA 12.8 (R570) has neither. Asking R575 for 269 would read
# a power-smoothing setting as a throttle time, so the ids follow the driver's branch.
_POWER_CAP_AND_SYNC = {"sw_power_cap": 74, "sync_boost": 76}
_THERMAL_R575 = {
    "sw_thermal_slowdown": 251,
    "hw_thermal_slowdown": 252,
    "hw_power_brake_slowdown": 253,
}
_THERMAL_R580 = {
    "sw_thermal_slowdown": 269,
    "hw_thermal_slowdown": 270,
    "hw_power_brake_slowdown": 271,
}


def throttle_counter_fields(driver_version: str | None) -> dict[str, int]:
    """reason -> NVML field id of its throttle-time counter, for this driver's branch."""
    major = _major(driver_version)
    if major is None or major < 575:
        return dict(_POWER_CAP_AND_SYNC)
    thermal = _THERMAL_R575 if major < 580 else _THERMAL_R580
    return {**_POWER_CAP_AND_SYNC, **thermal}


def _major(driver_version: str | None) -> int | None:
    head = (driver_version or "").split(".", 1)[0]
    return int(head) if head.isascii() and head.isdigit() else None


NVML_FI_DEV_MEMORY_TEMP = 82
_NS = 1e-9
MHZ = 1_000_000


class NvmlSource:
    """Samples from NVML (pynvml, imported lazily: the module must import without it)."""

    def __init__(self) -> None:
        self._nvml: Any = None
        self._handles: list[Any] = []
        self._counter_fields: dict[str, int] = {}

    def open(self) -> int:
        try:
            import pynvml
        except ImportError:
            raise SourceError("no NVIDIA driver found (pynvml not installed)") from None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise SourceError(f"no NVIDIA driver found ({_nvml_reason(exc)})") from None
        self._nvml = pynvml
        version = self._get("nvmlSystemGetDriverVersion")
        if isinstance(version, bytes):
            version = version.decode(errors="replace")
        self._counter_fields = throttle_counter_fields(version)
        try:
            count = pynvml.nvmlDeviceGetCount()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except pynvml.NVMLError as exc:
            pynvml.nvmlShutdown()
            raise SourceError(f"NVML could not list the GPUs: {exc}") from None
        return count

    def read(self, t_s: float) -> list[Sample]:
        return [self._read_one(t_s, index, h) for index, h in enumerate(self._handles)]

    def _read_one(self, t_s: float, index: int, h: Any) -> Sample:
        nvml = self._nvml
        get = self._get
        reasons = get("nvmlDeviceGetCurrentClocksEventReasons", h)
        if reasons is None:  # drivers before the rename
            reasons = get("nvmlDeviceGetCurrentClocksThrottleReasons", h)
        sm = get("nvmlDeviceGetClockInfo", h, nvml.NVML_CLOCK_SM)
        mem = get("nvmlDeviceGetClockInfo", h, nvml.NVML_CLOCK_MEM)
        temp = get("nvmlDeviceGetTemperatureV", h, nvml.NVML_TEMPERATURE_GPU)
        if temp is None:  # nvidia-ml-py before 12.550 has only the old call
            temp = get("nvmlDeviceGetTemperature", h, nvml.NVML_TEMPERATURE_GPU)
        power = get("nvmlDeviceGetPowerUsage", h)
        limit = get("nvmlDeviceGetEnforcedPowerLimit", h)
        util = get("nvmlDeviceGetUtilizationRates", h)
        hbm = self._fields(h, [NVML_FI_DEV_MEMORY_TEMP]).get(NVML_FI_DEV_MEMORY_TEMP)
        return Sample(
            t_s=t_s,
            gpu=index,
            sm_clock_hz=sm * MHZ if sm is not None else None,
            memory_clock_hz=mem * MHZ if mem is not None else None,
            temperature_c=float(temp) if temp is not None else None,
            memory_temperature_c=hbm if hbm else None,  # 0 = no HBM sensor on some boards
            power_w=power / 1000.0 if power is not None else None,
            power_limit_w=limit / 1000.0 if limit is not None else None,
            utilization_pct=float(util.gpu) if util is not None else None,
            clock_event_reasons=decode_clock_event_reasons(reasons) if reasons else [],
        )

    def throttle_counters_s(self) -> dict[str, dict[str, float]]:
        fields = self._counter_fields
        ids = list(fields.values())
        result: dict[str, dict[str, float]] = {}
        for index, h in enumerate(self._handles):
            values = self._fields(h, ids)
            result[str(index)] = {
                reason: values[fid] * _NS for reason, fid in fields.items() if fid in values
            }
        return result

    def limits(self) -> tuple[dict[str, float], dict[str, float]]:
        nvml, get = self._nvml, self._get
        power: dict[str, float] = {}
        memory: dict[str, float] = {}
        for index, h in enumerate(self._handles):
            default = get("nvmlDeviceGetPowerManagementDefaultLimit", h)
            if default:
                power[str(index)] = default / 1000.0
            mem_max = get(
                "nvmlDeviceGetTemperatureThreshold", h, nvml.NVML_TEMPERATURE_THRESHOLD_MEM_MAX
            )
            if mem_max:  # 0 or absent: the driver reports it relative to T.Limit, or not at all
                memory[str(index)] = float(mem_max)
        return power, memory

    def names(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for index, h in enumerate(self._handles):
            name = self._get("nvmlDeviceGetName", h)
            if isinstance(name, bytes):
                name = name.decode(errors="replace")
            if isinstance(name, str) and name.strip():
                found[str(index)] = name.strip()
        return found

    def close(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError as exc:
                raise SourceError(f"NVML shutdown: {exc}") from None
            self._nvml = None

    def _get(self, name: str, *args: Any) -> Any:
        # One field a driver or GPU does not support must leave only that field unknown.
        # Looked up by name here, inside the guard: an older nvidia-ml-py without the
        # function must take the fallback, not raise before the call is tried.
        fn = getattr(self._nvml, name, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except self._nvml.NVMLError:
            return None

    def _fields(self, h: Any, ids: list[int]) -> dict[int, float]:
        """Field values that NVML answered (per-field return code 0), by field id."""
        values = self._get("nvmlDeviceGetFieldValues", h, ids)
        if values is None:
            return {}
        found: dict[int, float] = {}
        for fid, value in zip(ids, values, strict=False):
            number = nvml_field_number(value) if value.nvmlReturn == 0 else None
            if number is not None:
                found[fid] = number
        return found


def _nvml_reason(exc: Exception) -> str:
    text = str(exc)
    if "Library Not Found" in text:
        return "libnvidia-ml.so not loadable"
    return f"NVML: {text}"


# --- the `telemetry` probe: watch whatever runs, with no load of its own -----------------


@dataclass
class Params:
    seconds: float = 60.0  # how long to watch
    interval_s: float = 0.2  # 5 Hz
    max_samples: int = 100_000


FACTS = Timeline


def sample_for(seconds: float, interval_s: float = 0.2, max_samples: int = 100_000) -> Timeline:
    """Sample for `seconds` (no load of its own): the `diagnose --watch` mode."""
    sampler = Sampler(interval_s, max_samples).start()
    sampler.wait(seconds)
    return sampler.stop()


def collect(params: Params) -> ProbeOutput:
    """Watch the GPUs for `params.seconds`; ProbeError when there is no driver to ask."""
    timeline = sample_for(params.seconds, params.interval_s, params.max_samples)
    if not timeline.samples and timeline.error:
        raise ProbeError(timeline.error)
    return ProbeOutput(timeline, simulated=sampled_gpus())
