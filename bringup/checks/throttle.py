"""Throttling diagnosis: why a GPU is slow, from a telemetry timeline and the gemm figures.

A pure function, `judge_throttling(timeline, gemm, profile) -> findings`, one rule per cause:
SW power cap (limit lowered, or draw pinned at the limit while slow), HW slowdown, HW
thermal slowdown, HW power brake, SW thermal slowdown, sync boost, applications clocks,
a straggler (far below the node median with no throttle reason), and HBM temperature near
its maximum. Each finding names its evidence: share of the time, temperatures, watts, and
how far the GPU is below the node median.

The timeline comes from the NVML sampler (bringup/node/probes/telemetry.py), or from a capture
someone sent (`nvidia-smi dmon`, a series of `nvidia-smi -q`: bringup/node/parsers/dmon.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from bringup.checks import finding
from bringup.findings import Finding, Status
from bringup.node.probes.gemm import GemmFacts
from bringup.node.timeline import Sample, Timeline
from bringup.profile import Profile
from bringup.words import plural

# bringup policy, not vendor figures (the profile schema has no place for them yet):
MIN_SHARE = 0.01  # a throttle reason active under 1% of the time is noise
FAIL_SHARE = 0.10  # a hardware slowdown 10% of the time or more fails acceptance
PINNED_SHARE = 0.5  # "pinned at the limit": drawing >= 97% of it half the time or more
PINNED_RATIO = 0.97
STRAGGLER_BELOW = 0.10  # 10% below the node median TFLOP/s is a straggler
HBM_MARGIN_C = 5.0  # WARN this close to the HBM maximum temperature
POWER_TOLERANCE_W = 0.5  # NVML milliwatts vs nvidia-smi's two decimals


@dataclass
class GpuStats:
    """What the timeline says about one GPU."""

    index: int
    samples: int
    share: dict[str, float] = field(default_factory=dict)  # reason -> share of the time
    max_temperature_c: float | None = None
    max_memory_temperature_c: float | None = None
    mean_power_w: float | None = None
    min_power_limit_w: float | None = None
    pinned_share: float = 0.0  # share of samples drawing >= PINNED_RATIO of the limit
    median_sm_clock_hz: float | None = None
    below_median: float | None = None  # 0.12 = 12% below the node median TFLOP/s


def gpu_stats(timeline: Timeline) -> dict[int, GpuStats]:
    """Per-GPU summary of a timeline; a throttle counter can raise a share, never lower it."""
    by_gpu: dict[int, list[Sample]] = {}
    for sample in timeline.samples:
        by_gpu.setdefault(sample.gpu, []).append(sample)
    duration = timeline.duration_s()
    stats: dict[int, GpuStats] = {}
    for index, samples in sorted(by_gpu.items()):
        s = GpuStats(index=index, samples=len(samples))
        for sample in samples:
            for reason in sample.clock_event_reasons:
                s.share[reason] = s.share.get(reason, 0.0) + 1
        s.share = {reason: n / len(samples) for reason, n in s.share.items()}
        # Counters integrate between samples, so they can show throttling the samples missed;
        # but a counter read at the wrong field id (another driver branch) or that did not
        # move must not erase what the samples saw: the larger of the two stands.
        for reason, seconds in timeline.throttle_time_s.get(str(index), {}).items():
            if duration > 0:
                counted = min(1.0, seconds / duration)
                s.share[reason] = max(s.share.get(reason, 0.0), counted)
        s.max_temperature_c = _max(x.temperature_c for x in samples)
        s.max_memory_temperature_c = _max(x.memory_temperature_c for x in samples)
        powers = [x.power_w for x in samples if x.power_w is not None]
        s.mean_power_w = statistics.fmean(powers) if powers else None
        s.min_power_limit_w = _min(x.power_limit_w for x in samples)
        pinned = [
            x
            for x in samples
            if x.power_w is not None
            and x.power_limit_w
            and x.power_w >= PINNED_RATIO * x.power_limit_w
        ]
        s.pinned_share = len(pinned) / len(samples)
        clocks = [x.sm_clock_hz for x in samples if x.sm_clock_hz is not None]
        s.median_sm_clock_hz = statistics.median(clocks) if clocks else None
        stats[index] = s
    _hw_slowdown_only(stats)
    return stats


def gemm_flops(gemm: GemmFacts | None) -> dict[int, float]:
    """Per-GPU BF16 FLOP/s: sustained where measured, else the best of the sweep."""
    if gemm is None:
        return {}
    found: dict[int, float] = {}
    for gpu in gemm.gpus:
        value = gpu.sustained_bf16_flops_per_s or gpu.bf16_flops_per_s
        if value:
            found[gpu.index] = value
    return found


def below_median(flops: dict[int, float]) -> dict[int, float]:
    """How far below the node median each GPU is (0.12 = 12%); {} with fewer than 2 GPUs."""
    if len(flops) < 2:
        return {}
    median = statistics.median(flops.values())
    return {i: (median - v) / median for i, v in flops.items() if median > 0 and v < median}


# --- the rules ---------------------------------------------------------------------------


def judge_throttling(
    timeline: Timeline | None, gemm: GemmFacts | None, profile: Profile
) -> list[Finding]:
    """Findings for every cause of slowness the timeline and the gemm figures show."""
    if timeline is None or not timeline.samples:
        reason = timeline.error if timeline is not None and timeline.error else "no samples"
        found = [
            finding(
                "diagnose.telemetry",
                Status.ERROR,
                f"no telemetry: {reason}",
                action="NVML must answer on the node (`nvidia-smi -q -d PERFORMANCE`); "
                "rerun `bringup diagnose`",
            )
        ]
        return found + _straggler(gemm, {}, set())
    stats = gpu_stats(timeline)
    flops = gemm_flops(gemm)
    for index, share in below_median(flops).items():
        if index in stats:
            stats[index].below_median = share
    findings: list[Finding] = []
    if timeline.error:
        findings.append(
            finding(
                "diagnose.telemetry",
                Status.WARN,
                f"telemetry incomplete: {timeline.error} (judged on what was sampled)",
                action="rerun `bringup diagnose` with a longer `--seconds` for a full timeline",
            )
        )
    findings += _limit_lowered(timeline, stats, profile)
    explained: set[int] = set()  # GPUs whose slowness a throttle reason explains
    for rule in REASON_RULES:
        found, gpus = rule.judge(stats)
        findings += found
        explained |= gpus
    findings += _pinned(stats, flops, profile, explained)
    findings += _hbm_temperature(timeline, stats, profile)
    findings += _straggler(gemm, stats, explained)
    if not findings:
        findings.append(_healthy(timeline, stats))
    return findings


@dataclass(frozen=True)
class ReasonRule:
    """A rule that fires on a clocks event reason active long enough."""

    check: str
    reasons: tuple[str, ...]  # any of these
    words: str
    action: str
    hardware: bool  # FAIL past FAIL_SHARE; software reasons only WARN
    evidence: Callable[[GpuStats], str] = lambda s: ""

    def judge(self, stats: dict[int, GpuStats]) -> tuple[list[Finding], set[int]]:
        hits = {
            i: max(s.share.get(r, 0.0) for r in self.reasons)
            for i, s in stats.items()
            if max(s.share.get(r, 0.0) for r in self.reasons) >= MIN_SHARE
        }
        findings = []
        for index, share in hits.items():
            s = stats[index]
            status = Status.FAIL if self.hardware and share >= FAIL_SHARE else Status.WARN
            parts = [f"GPU {index}: {self.words} {share:.0%} of the time"]
            parts += [p for p in (self.evidence(s), _median_note(s)) if p]
            findings.append(
                finding(
                    self.check,
                    status,
                    ", ".join(parts),
                    value=round(share, 4),
                    expected=f"< {MIN_SHARE:g}",  # a fraction, as the value
                    unit="fraction",
                    action=self.action,
                )
            )
        return findings, set(hits)


def _temperatures(s: GpuStats) -> str:
    parts = []
    if s.max_temperature_c is not None:
        parts.append(f"GPU at {s.max_temperature_c:.0f} °C")
    if s.max_memory_temperature_c is not None:
        parts.append(f"HBM at {s.max_memory_temperature_c:.0f} °C")
    return ", ".join(parts)


def _power(s: GpuStats) -> str:
    if s.mean_power_w is None:
        return ""
    limit = f" of {s.min_power_limit_w:.0f} W limit" if s.min_power_limit_w else ""
    return f"drawing {s.mean_power_w:.0f} W{limit}"


def _clock(s: GpuStats) -> str:
    return f"SM at {s.median_sm_clock_hz / 1e6:.0f} MHz" if s.median_sm_clock_hz else ""


AIRFLOW = "check airflow / cold plate"
REASON_RULES: list[ReasonRule] = [
    ReasonRule(
        "diagnose.hw_thermal_slowdown",
        ("hw_thermal_slowdown",),
        "HW thermal slowdown",
        AIRFLOW,
        hardware=True,
        evidence=_temperatures,
    ),
    ReasonRule(
        "diagnose.hw_power_brake",
        ("hw_power_brake_slowdown",),
        "HW power brake",
        "the board's power-brake input was asserted: check the PSUs / power delivery",
        hardware=True,
        evidence=_power,
    ),
    # HW slowdown on its own: the driver names neither thermal nor power brake.
    ReasonRule(
        "diagnose.hw_slowdown",
        ("hw_slowdown",),
        "HW slowdown",
        "check power supply and temperature; `nvidia-smi -q -d PERFORMANCE`",
        hardware=True,
        evidence=lambda s: ", ".join(p for p in (_temperatures(s), _power(s)) if p),
    ),
    ReasonRule(
        "diagnose.sw_thermal_slowdown",
        ("sw_thermal_slowdown", "thermal_violation"),
        "SW thermal slowdown",
        AIRFLOW,
        hardware=False,
        evidence=_temperatures,
    ),
    ReasonRule(
        "diagnose.sync_boost",
        ("sync_boost",),
        "sync boost",
        "held to the slowest GPU of its sync-boost group: look at that GPU",
        hardware=False,
        evidence=_clock,
    ),
    ReasonRule(
        "diagnose.applications_clocks",
        ("applications_clocks_setting",),
        "applications clocks set",
        "clocks were pinned: reset them (`nvidia-smi -rac`, `nvidia-smi -rgc`) unless intended",
        hardware=False,
        evidence=_clock,
    ),
]


def _hw_slowdown_only(stats: dict[int, GpuStats]) -> None:
    """HW slowdown is also set while its children (thermal, power brake) are: keep the child."""
    for s in stats.values():
        child = max(
            s.share.get("hw_thermal_slowdown", 0.0), s.share.get("hw_power_brake_slowdown", 0.0)
        )
        if child >= MIN_SHARE and "hw_slowdown" in s.share:
            s.share["hw_slowdown"] = max(0.0, s.share["hw_slowdown"] - child)


def _median_note(s: GpuStats) -> str:
    if s.below_median is None or s.below_median < STRAGGLER_BELOW:
        return ""
    return f"{s.below_median:.0%} below the node median"


def _limit_lowered(
    timeline: Timeline, stats: dict[int, GpuStats], profile: Profile
) -> list[Finding]:
    """SW power cap: the enforced limit is below the default (someone ran `nvidia-smi -pl`)."""
    lowered: dict[int, tuple[float, float]] = {}
    for index, s in stats.items():
        default = timeline.power_default_limit_w.get(str(index), profile.gpu.power_limit_w)
        if s.min_power_limit_w is not None and s.min_power_limit_w < default - POWER_TOLERANCE_W:
            lowered[index] = (s.min_power_limit_w, default)
    if not lowered:
        return []
    action = "the power limit was lowered: restore it (`nvidia-smi -pl`) and find what set it"
    values = set(lowered.values())
    if len(lowered) == len(stats) and len(values) == 1 and len(stats) > 1:
        limit, default = values.pop()
        where = [("all GPUs", limit, default)]
    else:
        where = [(f"GPU {i}", lim, d) for i, (lim, d) in lowered.items()]
    return [
        finding(
            "diagnose.power_cap",
            Status.FAIL,
            f"{who}: SW power cap at {limit:.0f} W of {default:.0f} W default",
            value=limit,
            expected=f">= {default:.0f}",
            unit="W",
            action=action,
        )
        for who, limit, default in where
    ]


def _pinned(
    stats: dict[int, GpuStats], flops: dict[int, float], profile: Profile, explained: set[int]
) -> list[Finding]:
    """SW power cap under load: normal at the limit, a finding only when the GPU is also slow."""
    ceiling = profile.gpu.bf16_achievable_tflops
    findings = []
    for index, s in stats.items():
        share = max(s.pinned_share, s.share.get("sw_power_cap", 0.0))
        if share < PINNED_SHARE:
            continue
        tflops = flops.get(index, 0.0) / 1e12
        slow_vs_ceiling = ceiling is not None and 0 < tflops < 0.9 * ceiling
        slow = (s.below_median or 0.0) >= STRAGGLER_BELOW or slow_vs_ceiling
        parts = [f"GPU {index}: SW power cap {share:.0%} of the time", _power(s)]
        if slow_vs_ceiling:
            parts.append(f"{tflops:.0f} TFLOP/s of {ceiling:g} achievable")
        parts.append(_median_note(s))
        text = ", ".join(p for p in parts if p)
        if slow:
            explained.add(index)
            action = "power-limited and slow: check the limit, PSU capacity and cooling"
            findings.append(
                finding(
                    "diagnose.power_cap",
                    Status.WARN,
                    text,
                    value=round(share, 4),
                    unit="fraction",
                    action=action,
                )
            )
        else:
            findings.append(
                finding(
                    "diagnose.power_cap",
                    Status.PASS,
                    f"{text}: at its power limit under full load, as expected",
                    value=round(share, 4),
                    unit="fraction",
                )
            )
    return findings


def _hbm_temperature(
    timeline: Timeline, stats: dict[int, GpuStats], profile: Profile
) -> list[Finding]:
    """HBM near (WARN) or at (FAIL) its maximum operating temperature."""
    findings = []
    for index, s in stats.items():
        hbm = s.max_memory_temperature_c
        limit = timeline.memory_max_temperature_c.get(str(index), profile.thermal.memory_max_c)
        if hbm is None or limit is None or hbm < limit - HBM_MARGIN_C:
            continue
        status = Status.FAIL if hbm >= limit else Status.WARN
        parts = [f"GPU {index}: HBM at {hbm:.0f} °C, max {limit:.0f} °C", _median_note(s)]
        findings.append(
            finding(
                "diagnose.hbm_temperature",
                status,
                ", ".join(p for p in parts if p),
                value=hbm,
                expected=f"< {limit - HBM_MARGIN_C:.0f}",
                unit="C",
                action=AIRFLOW,
            )
        )
    return findings


def _straggler(
    gemm: GemmFacts | None, stats: dict[int, GpuStats], explained: set[int]
) -> list[Finding]:
    """A GPU far below the node median with no throttle reason: the GPU or its links."""
    flops = gemm_flops(gemm)
    if not flops:
        return []
    median = statistics.median(flops.values())
    findings = []
    for index, share in below_median(flops).items():
        if share < STRAGGLER_BELOW or index in explained:
            continue
        action = "suspect a degraded GPU or its PCIe/NVLink; rerun, then RMA"
        findings.append(
            finding(
                "diagnose.straggler",
                Status.FAIL,
                f"GPU {index}: {flops[index] / 1e12:.0f} TFLOP/s, {share:.0%} below the node "
                f"median {median / 1e12:.0f} TFLOP/s, no throttle reason",
                value=round(flops[index] / 1e12, 1),
                expected=f">= {(1 - STRAGGLER_BELOW) * median / 1e12:.0f}",
                unit="TFLOP/s",
                action=action,
            )
        )
    return findings


# --- across nodes --------------------------------------------------------------------------

FLEET_MIN_NODES = 3  # with two nodes a median cannot tell the slow one from the spread


def judge_gemm_stragglers(gemm_by_node: dict[str, GemmFacts]) -> list[Finding]:
    """Nodes whose median GPU is far below the fleet's median node (GPU figures only).

    The per-node rules compare GPUs within a node, so a node whose GPUs are all equally
    slow (a lowered power limit on every GPU, a chassis running hot, clocks pinned by a
    BIOS setting) passes them; compared with the other nodes it stands out. CPU figures
    (no CUDA) are left out: nodes sharing one machine's cores say nothing about a node.
    """
    medians: dict[str, float] = {}
    for node, facts in gemm_by_node.items():
        flops = gemm_flops(facts)
        if facts.device == "cuda" and flops:
            medians[node] = statistics.median(flops.values())
    if len(medians) < FLEET_MIN_NODES:
        return []
    fleet = statistics.median(medians.values())
    floor = (1 - STRAGGLER_BELOW) * fleet
    findings = []
    for node, value in sorted(medians.items()):
        below = (fleet - value) / fleet if fleet > 0 else 0.0
        where = (
            f"median GPU {value / 1e12:.0f} TFLOP/s, fleet median {fleet / 1e12:.0f} TFLOP/s "
            f"over {len(medians)} nodes"
        )
        if below < STRAGGLER_BELOW:
            status, message, action = Status.PASS, where, None
        else:
            action = (
                "read this node's diagnose.* findings for the cause (power cap, thermal); "
                "with none, check its power limits, BIOS and cooling against a good node"
            )
            status, message = Status.FAIL, f"{below:.0%} below the fleet: {where}"
        findings.append(
            Finding(
                node=node,
                check="diagnose.fleet_straggler",
                status=status,
                message=message,
                value=round(value / 1e12, 1),
                expected=f">= {floor / 1e12:.0f}",
                unit="TFLOP/s",
                action=action,
            )
        )
    return findings


def _healthy(timeline: Timeline, stats: dict[int, GpuStats]) -> Finding:
    samples = sum(s.samples for s in stats.values())
    return finding(
        "diagnose.throttle",
        Status.PASS,
        f"{plural(len(stats), 'GPU')}, {plural(samples, 'sample')} "
        f"over {timeline.duration_s():.0f} s: "
        "no throttle reason, no straggler, HBM below its limit",
    )


def _max(values: Iterable[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return max(found) if found else None


def _min(values: Iterable[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return min(found) if found else None
