"""Power, temperature and clocks: power limit, thermal headroom, clocks event reasons.

Every judge is pure: `GpuFacts + Profile -> list[Finding]`.
"""

from __future__ import annotations

from bringup.checks import finding
from bringup.checks.gpu.per_gpu import expected_reports, gpu_label, gpu_list, judge_each_gpu
from bringup.findings import Finding, Status
from bringup.node.gpu_facts import Gpu, GpuFacts, gpu_selector
from bringup.profile import Profile

# nvidia-smi prints watts with two decimals and NVML reports milliwatts: half a watt
# absorbs that rounding, and nobody lowers a power limit by less than a watt.
POWER_TOLERANCE_W = 0.5


# ---------------------------------------------------------------------------------------
# gpu.power


def _power_one(gpu: Gpu, profile: Profile) -> list[Finding] | None:
    """The enforced power limit is the board default and the profile's, not lowered."""
    limit, default = gpu.power_limit_w, gpu.power_default_limit_w
    if limit is None:
        return None
    check, name = "gpu.power", gpu_label(gpu)
    if default is not None and limit < default - POWER_TOLERANCE_W:
        return [
            finding(
                check,
                Status.WARN,
                f"{name}: power limit {limit:.0f} W of {default:.0f} W default: someone lowered it",
                value=limit,
                expected=f">= {default:.0f}",
                unit="W",
                action=f"`nvidia-smi -i {gpu_selector(gpu)} -pl {default:.0f}`",
            )
        ]
    wanted = profile.gpu.power_limit_w
    if limit < wanted - POWER_TOLERANCE_W:
        return [
            finding(
                check,
                Status.WARN,
                f"{name}: power limit {limit:.0f} W, profile expects {wanted:.0f} W",
                value=limit,
                expected=f">= {wanted:.0f}",
                unit="W",
                action=f"check the board SKU of {name}; if the limit can go higher: "
                f"`nvidia-smi -i {gpu_selector(gpu)} -pl {wanted:.0f}`",
            )
        ]
    return []


def judge_power(facts: GpuFacts, profile: Profile) -> list[Finding]:
    return judge_each_gpu(
        "gpu.power",
        facts,
        lambda gpu: _power_one(gpu, profile),
        ok=f"power limit >= {profile.gpu.power_limit_w:.0f} W, not lowered",
        unreported="power limit not reported",
        expects=expected_reports(profile),
    )


# ---------------------------------------------------------------------------------------
# gpu.thermal


def _absolute(threshold_c: float | None) -> float | None:
    """A temperature threshold, or None when it cannot be one.

    Recent nvidia-smi prints thresholds as offsets from T.Limit ("GPU Slowdown T.Limit
    Temp : -2 C", "Memory Max Operating T.Limit Temp : 0 C"): no real slowdown or HBM
    limit is at or below 0 C, so such a value is not judged against a temperature.
    """
    return threshold_c if threshold_c is not None and threshold_c > 0 else None


def _headroom(
    name: str, what: str, temperature_c: float | None, margin_c: float, warn_c: float
) -> Finding | None:
    """FAIL at/over a limit, WARN within `warn_c` of it, None when cool enough."""
    now = f"{temperature_c:.0f} C, " if temperature_c is not None else ""
    if margin_c <= 0:
        status, text = Status.FAIL, f"at/over its {what}"
    elif margin_c < warn_c:
        status, text = Status.WARN, f"{margin_c:.0f} C below its {what}"
    else:
        return None
    return finding(
        "gpu.thermal",
        status,
        f"{name}: {now}{text}",
        value=margin_c,
        expected=f">= {warn_c:.0f} C of headroom",
        unit="C",
        action=f"check airflow / cold plate / coolant of {name}",
    )


def _slowdown_headroom(gpu: Gpu) -> tuple[float, str] | None:
    """Degrees left before thermal slowdown, and how the limit was known.

    From the absolute threshold where the driver gives one, else from T.Limit (550+
    drivers): headroom = T.Limit margin - the slowdown T.Limit (0 when not reported,
    which is the max operating limit: slightly stricter than slowdown).
    """
    slowdown = _absolute(gpu.slowdown_temperature_c)
    if slowdown is not None and gpu.temperature_c is not None:
        return slowdown - gpu.temperature_c, f"{slowdown:.0f} C slowdown temperature"
    if gpu.tlimit_margin_c is not None:
        offset = gpu.slowdown_tlimit_c or 0.0
        return gpu.tlimit_margin_c - offset, "slowdown limit (T.Limit)"
    return None


def _hbm_headroom(gpu: Gpu, profile: Profile) -> tuple[float, str] | None:
    limit = _absolute(gpu.memory_max_temperature_c) or profile.thermal.memory_max_c
    if limit is None or gpu.memory_temperature_c is None:
        return None
    return limit - gpu.memory_temperature_c, f"{limit:.0f} C HBM maximum"


def _thermal_one(gpu: Gpu, profile: Profile) -> list[Finding] | None:
    """Headroom to thermal slowdown, and HBM temperature vs its maximum."""
    name, warn = gpu_label(gpu), profile.thermal.slowdown_margin_warn_c
    slowdown = _slowdown_headroom(gpu)
    hbm = _hbm_headroom(gpu, profile)
    if slowdown is None and hbm is None:
        return None
    found = []
    if slowdown is not None:
        found.append(_headroom(name, slowdown[1], gpu.temperature_c, slowdown[0], warn))
    if hbm is not None:
        found.append(_headroom(f"{name} HBM", hbm[1], gpu.memory_temperature_c, hbm[0], warn))
    return [f for f in found if f is not None]


def _hottest(facts: GpuFacts) -> Gpu | None:
    reported = [gpu for gpu in facts.gpus if gpu.temperature_c is not None]
    return max(reported, key=lambda gpu: gpu.temperature_c or 0.0, default=None)


def _hbm_unjudged(facts: GpuFacts) -> str:
    """Why the HBM limit was not judged: not reported, or reported on the T.Limit scale
    only ("Memory Max Operating T.Limit Temp : 0 C"), which no HBM reading is on: the
    T.Limit margin nvidia-smi prints is the GPU's, the HBM temperature is absolute."""
    relative = {g.memory_max_tlimit_c for g in facts.gpus if g.memory_max_tlimit_c is not None}
    if not relative:
        return "HBM limit not reported"
    shown = "/".join(f"{c:g} C" for c in sorted(relative))
    return (
        f"HBM limit given on the T.Limit scale only ({shown}): "
        "not comparable with an HBM temperature"
    )


def _limits_judged(facts: GpuFacts, profile: Profile) -> str:
    """'slowdown / HBM limits', 'HBM limit (slowdown not reported)': what the PASS verified."""
    slowdown = any(_slowdown_headroom(gpu) is not None for gpu in facts.gpus)
    hbm = any(_hbm_headroom(gpu, profile) is not None for gpu in facts.gpus)
    if slowdown and hbm:
        return "slowdown / HBM limits"
    if slowdown:
        return f"slowdown limit ({_hbm_unjudged(facts)})"
    return "HBM limit (slowdown threshold not reported)"


def judge_thermal(facts: GpuFacts, profile: Profile) -> list[Finding]:
    """Headroom to the slowdown and HBM limits; the PASS names the hottest GPU."""
    hottest = _hottest(facts)
    warm = f"hottest {gpu_label(hottest)} at {hottest.temperature_c:.0f} C, " if hottest else ""
    margin = profile.thermal.slowdown_margin_warn_c
    return judge_each_gpu(
        "gpu.thermal",
        facts,
        lambda gpu: _thermal_one(gpu, profile),
        ok=f"{warm}>= {margin:.0f} C below the {_limits_judged(facts, profile)}",
        unreported="temperature or its limit not reported",
        ok_value=hottest.temperature_c if hottest else None,
        ok_unit="C",
    )


# ---------------------------------------------------------------------------------------
# gpu.clock_events

# What each clocks event reason means (nvml.h nvmlClocksEventReason*), and what to do.
REASON_WORDS: dict[str, str] = {
    "applications_clocks_setting": "applications clocks setting (clocks were pinned)",
    "sw_power_cap": "SW power cap (normal under full load)",
    "hw_slowdown": "HW slowdown",
    "sync_boost": "sync boost",
    "sw_thermal_slowdown": "SW thermal slowdown",
    "hw_thermal_slowdown": "HW thermal slowdown",
    "hw_power_brake_slowdown": "HW power brake slowdown",
}

REASON_ACTIONS: dict[str, str] = {
    "applications_clocks_setting": "clocks were pinned: reset them (`nvidia-smi -rac`, "
    "`nvidia-smi -rgc`) unless that was intended",
    "sw_power_cap": "GPU is at its power limit (fine under load; check the limit was not lowered)",
    "hw_slowdown": "HW slowdown: check power supply / temperature; see "
    "`nvidia-smi -q -d PERFORMANCE`",
    "sw_thermal_slowdown": "check airflow / cold plate",
    "hw_thermal_slowdown": "check airflow / cold plate",
    "hw_power_brake_slowdown": "external power brake asserted: check PSU / power delivery",
}

# Reasons that say nothing about the node's health: idle is idle, display clocks do not
# apply to datacenter GPUs, and sync boost only holds a group of GPUs to the same clock.
BENIGN_REASONS = frozenset({"gpu_idle", "display_clock_setting", "sync_boost"})


def _reason_finding(gpu: Gpu, reason: str) -> Finding:
    words = REASON_WORDS.get(reason, f"clocks event reason {reason}")
    return finding(
        "gpu.clock_events",
        Status.WARN,
        f"{gpu_label(gpu)}: {words} active",
        value=reason,
        expected="none",
        action=REASON_ACTIONS.get(reason, "see `nvidia-smi -q -d PERFORMANCE`"),
    )


def _clock_events_one(gpu: Gpu) -> list[Finding] | None:
    if gpu.clock_event_reasons is None:
        return None
    return [
        _reason_finding(gpu, reason)
        for reason in gpu.clock_event_reasons
        if reason not in BENIGN_REASONS
    ]


def judge_clock_events(facts: GpuFacts, profile: Profile) -> list[Finding]:
    """Nothing slows the clocks down: no thermal, power-brake or HW slowdown, no pinning."""
    syncing = [gpu for gpu in facts.gpus if "sync_boost" in (gpu.clock_event_reasons or [])]
    note = f"; sync boost active on {gpu_list(syncing)} (informational)" if syncing else ""
    return judge_each_gpu(
        "gpu.clock_events",
        facts,
        _clock_events_one,
        ok=f"no clocks event reason active (idle and sync boost aside){note}",
        unreported="clocks event reasons not reported",
    )
