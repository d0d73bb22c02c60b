"""A telemetry timeline: what NVML said about each GPU, tick by tick, over a run.

Filled by the sampler (bringup/node/probes/telemetry.py) on a live node and by the parsers
of captures someone sent (bringup/node/parsers/dmon.py); judged by bringup/checks/throttle.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Sample:
    """One reading of one GPU; None means NVML did not report the field."""

    t_s: float  # seconds since the sampler started
    gpu: int
    sm_clock_hz: int | None = None
    memory_clock_hz: int | None = None
    temperature_c: float | None = None
    memory_temperature_c: float | None = None  # HBM
    power_w: float | None = None
    power_limit_w: float | None = None  # enforced
    utilization_pct: float | None = None
    clock_event_reasons: list[str] = field(default_factory=list)


@dataclass
class Timeline:
    """What a sampler saw, in time order (samples of one tick share their t_s)."""

    interval_s: float
    gpus: int
    samples: list[Sample] = field(default_factory=list)
    # GPU index (as a string, JSON keys) -> reason -> seconds spent in it during the run,
    # from NVML's cumulative counters (stop minus start); {} where the driver has none.
    throttle_time_s: dict[str, dict[str, float]] = field(default_factory=dict)
    error: str | None = None  # why sampling could not start, or why it stopped early
    dropped: int = 0  # samples given up to keep memory bounded
    # Per GPU (index as a string), read once at start where the source knows them: the
    # default board power limit (to tell a lowered limit) and the HBM maximum temperature.
    power_default_limit_w: dict[str, float] = field(default_factory=dict)
    memory_max_temperature_c: dict[str, float] = field(default_factory=dict)
    # Per GPU (index as a string): its product name as NVML gives it, read once at start;
    # what `--profile auto` judges a watch (diagnose --watch) by.
    gpu_names: dict[str, str] = field(default_factory=dict)

    def duration_s(self) -> float:
        """Seconds from the first to the last sample plus one interval (0 without samples)."""
        if not self.samples:
            return 0.0
        return self.samples[-1].t_s - self.samples[0].t_s + self.interval_s
