"""GPU checks: judge what the gpu probe (NVML) or an nvidia-smi log reported, per GPU.

Every judge is pure: `GpuFacts + Profile -> list[Finding]`. A problem is one finding that
names the GPU ("GPU 3: ..."); when all is well a judge returns one PASS finding saying what
was verified. A field a source did not report (None) is never read as healthy: those GPUs
are listed in a SKIP finding instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from bringup.checks import Check, finding
from bringup.findings import Finding, Status
from bringup.node.gpu_facts import Gpu, GpuFacts
from bringup.profile import Profile

PROBE = "gpu"
MIB = 2**20

# nvidia-smi prints watts with two decimals and NVML reports milliwatts: half a watt
# absorbs that rounding, and nobody lowers a power limit by less than a watt.
POWER_TOLERANCE_W = 0.5

# `nvidia-smi nvlink -s` prints link speeds with three decimals ("26.562 GB/s") or none
# ("25 GB/s"): a hundredth of a GB/s absorbs that rounding.
NVLINK_SPEED_TOLERANCE_GB_S = 0.01

# Statuses that mean "something is wrong here": any of them replaces the PASS finding.
PROBLEMS = (Status.WARN, Status.FAIL, Status.ERROR)


# ---------------------------------------------------------------------------------------
# Small shared helpers


def gpu_label(gpu: Gpu) -> str:
    """'GPU 3': how every message names a GPU (the index nvidia-smi and NVML use)."""
    return f"GPU {gpu.index}"


def gpu_list(gpus: Iterable[Gpu]) -> str:
    """'GPU 0, 1, 5': several GPUs named in one message."""
    return "GPU " + ", ".join(str(gpu.index) for gpu in gpus)


def parse_version(text: str) -> tuple[int, ...] | None:
    """'580.65.06' -> (580, 65, 6); None when a part is not a number."""
    parts = text.strip().split(".")
    # ASCII digits only: str.isdigit() also accepts '²', which int() refuses.
    if not all(part.isascii() and part.isdigit() for part in parts):
        return None
    return tuple(int(part) for part in parts)


def version_at_least(have: str, need: str) -> bool | None:
    """Compare dotted versions numerically ('590.48.01' >= '580.65.06'); None if unparsable."""
    have_v, need_v = parse_version(have), parse_version(need)
    if have_v is None or need_v is None:
        return None
    width = max(len(have_v), len(need_v))
    # Pad with zeros so that "13" compares equal to "13.0".
    return have_v + (0,) * (width - len(have_v)) >= need_v + (0,) * (width - len(need_v))


def plural(count: int, word: str) -> str:
    """'1 error', '2 errors'."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def no_gpus(check: str) -> Finding:
    """The ERROR every check returns when the source listed no GPU at all."""
    return finding(
        check,
        Status.ERROR,
        "no GPUs reported",
        value=0,
        action="check the driver is loaded: `nvidia-smi` must list the GPUs",
    )


def per_gpu(
    check: str,
    facts: GpuFacts,
    judge_one: Callable[[Gpu], list[Finding] | None],
    *,
    ok: str,
    unreported: str,
    ok_value: float | int | str | None = None,
    ok_unit: str | None = None,
) -> list[Finding]:
    """Judge every GPU with `judge_one` (None = the field was not reported on that GPU).

    Returns the findings of all GPUs, one SKIP naming the GPUs that did not report, and
    one PASS "n/N GPUs: <ok>" when no judged GPU showed a problem.
    """
    if not facts.gpus:
        return [no_gpus(check)]
    findings: list[Finding] = []
    missing: list[Gpu] = []
    for gpu in facts.gpus:
        found = judge_one(gpu)
        if found is None:
            missing.append(gpu)
        else:
            findings.extend(found)
    judged = len(facts.gpus) - len(missing)
    if judged and not any(f.status in PROBLEMS for f in findings):
        message = f"{judged}/{len(facts.gpus)} GPUs: {ok}"
        findings.insert(0, finding(check, Status.PASS, message, value=ok_value, unit=ok_unit))
    if missing:
        where = "" if not judged else f" on {gpu_list(missing)}"
        findings.append(finding(check, Status.SKIP, f"{unreported}{where}"))
    return findings


# ---------------------------------------------------------------------------------------
# gpu.count


def judge_count(facts: GpuFacts, profile: Profile) -> list[Finding]:
    """As many GPUs as the profile says; a trimmed log (attached > listed) is called out."""
    check, expected = "gpu.count", profile.gpu.count
    if not facts.gpus:
        return [no_gpus(check)]
    listed = len(facts.gpus)
    attached = facts.attached_gpus if facts.attached_gpus is not None else listed
    # A log can be trimmed (telegraf's A100 sample says 4 attached, lists 1): the tool's
    # own count is the better number of GPUs present, but only the listed ones are judged.
    seen = max(listed, attached)
    note = ""
    if attached > listed:
        note = f" ({attached} attached, only {listed} listed: the others were not judged)"
    if seen < expected:
        status, message = Status.FAIL, f"{seen} GPUs, expected {expected}{note}"
        action = "a GPU is missing: check `nvidia-smi -L`, XID 79 in the kernel log, reseat / RMA"
    elif seen > expected:
        status, message = Status.WARN, f"{seen} GPUs, expected {expected}{note}"
        action = "more GPUs than the profile says: is this the right profile?"
    elif note:
        status, message = Status.WARN, f"{seen} GPUs as expected{note}"
        action = "judge a complete log (`nvidia-smi -q` untrimmed) or the live node"
    else:
        status, message, action = Status.PASS, f"{seen} GPUs, as expected", None
    return [
        finding(
            check,
            status,
            message,
            value=seen,
            expected=str(expected),
            unit="GPUs",
            action=action,
        )
    ]


# ---------------------------------------------------------------------------------------
# gpu.model


def _model_one(gpu: Gpu, profile: Profile) -> list[Finding] | None:
    """The GPU is the model the profile names, with at least the memory it promises."""
    check, spec = "gpu.model", profile.gpu
    memory = gpu.memory_total_bytes
    # An excerpt of a log may lack the name (the parsers give "") and the memory size.
    if not gpu.name and memory is None:
        return None
    found = []
    if gpu.name and gpu.name != spec.model:
        found.append(
            finding(
                check,
                Status.FAIL,
                f"{gpu_label(gpu)}: {gpu.name!r}, expected {spec.model!r}",
                value=gpu.name,
                expected=spec.model,
                action="wrong GPU model for this profile: check the order / the profile chosen",
            )
        )
    if memory is not None and memory < spec.memory_min_bytes:
        found.append(
            finding(
                check,
                Status.FAIL,
                f"{gpu_label(gpu)}: {memory // MIB} MiB memory, "
                f"expected >= {spec.memory_min_bytes // MIB} MiB",
                value=memory,
                expected=f">= {spec.memory_min_bytes}",
                unit="B",
                action=f"{gpu_label(gpu)} shows less memory than its model has: "
                "check for a wrong SKU or a MIG/vGPU slice, else RMA",
            )
        )
    return found


def judge_model(facts: GpuFacts, profile: Profile) -> list[Finding]:
    spec = profile.gpu
    unsized = [gpu for gpu in facts.gpus if gpu.memory_total_bytes is None]
    memory = f">= {spec.memory_min_bytes // MIB} MiB"
    if unsized:
        memory = f"memory size not reported on {gpu_list(unsized)}"
    return per_gpu(
        "gpu.model",
        facts,
        lambda gpu: _model_one(gpu, profile),
        ok=f"{spec.model}, {memory}",
        unreported="model and memory size not reported",
    )


# ---------------------------------------------------------------------------------------
# gpu.driver


def _version_finding(
    check: str, what: str, have: str | None, need: str, action: str
) -> Finding | None:
    """A finding when `have` is missing, unparsable or older than `need`; None when fine."""
    if have is None:
        return finding(check, Status.ERROR, f"{what} version not reported", expected=f">= {need}")
    at_least = version_at_least(have, need)
    if at_least is None:
        return finding(
            check,
            Status.ERROR,
            f"cannot compare {what} version {have!r} with {need!r}",
            value=have,
            expected=f">= {need}",
        )
    if not at_least:
        return finding(
            check,
            Status.FAIL,
            f"{what} {have}, expected >= {need}",
            value=have,
            expected=f">= {need}",
            action=action,
        )
    return None


def judge_driver(facts: GpuFacts, profile: Profile) -> list[Finding]:
    """The driver and the CUDA version it supports are at least the profile's minimum."""
    check, sw = "gpu.driver", profile.software
    if not facts.gpus:
        return [no_gpus(check)]
    branch = f" ({sw.driver_branch} branch)" if sw.driver_branch else ""
    action = f"install driver >= {sw.min_driver}{branch}"
    found = [
        f
        for f in (
            _version_finding(check, "driver", facts.driver_version, sw.min_driver, action),
            _version_finding(check, "CUDA", facts.cuda_driver_version, sw.min_cuda, action),
        )
        if f is not None
    ]
    if found:
        return found
    return [
        finding(
            check,
            Status.PASS,
            f"driver {facts.driver_version} (CUDA {facts.cuda_driver_version}): "
            f">= {sw.min_driver} (CUDA {sw.min_cuda})",
            value=facts.driver_version,
            expected=f">= {sw.min_driver}",
        )
    ]


# ---------------------------------------------------------------------------------------
# gpu.persistence


def _persistence_one(gpu: Gpu) -> list[Finding] | None:
    if gpu.persistence_mode is None:
        return None
    if gpu.persistence_mode:
        return []
    return [
        finding(
            "gpu.persistence",
            Status.WARN,
            f"{gpu_label(gpu)}: persistence mode off",
            value="off",
            expected="on",
            action="enable persistence: `nvidia-smi -pm 1` or nvidia-persistenced",
        )
    ]


def judge_persistence(facts: GpuFacts, profile: Profile) -> list[Finding]:
    """Persistence mode keeps the driver loaded (no re-initialisation at each job start)."""
    return per_gpu(
        "gpu.persistence",
        facts,
        _persistence_one,
        ok="persistence mode on",
        unreported="persistence mode not reported",
    )


# ---------------------------------------------------------------------------------------
# gpu.ecc


def _ecc_one(gpu: Gpu) -> list[Finding] | None:
    """ECC on, and no uncorrected error since the last reset (volatile) or ever (aggregate)."""
    check, name = "gpu.ecc", gpu_label(gpu)
    volatile, aggregate = gpu.ecc_uncorrected_volatile, gpu.ecc_uncorrected_aggregate
    if gpu.ecc_mode is None and volatile is None and aggregate is None:
        return None
    found = []
    if gpu.ecc_mode is False:
        found.append(
            finding(
                check,
                Status.FAIL,
                f"{name}: ECC disabled",
                value="disabled",
                expected="enabled",
                action=f"enable ECC: `nvidia-smi -i {gpu.index} -e 1`, then reset the GPU",
            )
        )
    if volatile:
        found.append(
            finding(
                check,
                Status.FAIL,
                f"{name}: {plural(volatile, 'uncorrected ECC error')} since the last reset",
                value=volatile,
                expected="0",
                unit="errors",
                action=f"reset {name} (`nvidia-smi -r -i {gpu.index}`); if it recurs, RMA",
            )
        )
    elif aggregate:
        # Only the lifetime counter: the errors happened before the last reset. History
        # worth watching, not a present fault.
        found.append(
            finding(
                check,
                Status.WARN,
                f"{name}: {plural(aggregate, 'uncorrected ECC error')} in its lifetime, "
                "none since the last reset",
                value=aggregate,
                expected="0",
                unit="errors",
                action=f"watch {name}: if errors recur, run `dcgmi diag -r 3` and RMA",
            )
        )
    return found


def judge_ecc(facts: GpuFacts, profile: Profile) -> list[Finding]:
    return per_gpu(
        "gpu.ecc",
        facts,
        _ecc_one,
        ok="ECC enabled, no uncorrected errors",
        unreported="ECC not reported",
    )


# ---------------------------------------------------------------------------------------
# gpu.remapped_rows


def _remapped_rows_one(gpu: Gpu) -> list[Finding] | None:
    """Row remapping (A100 and newer): failure needs RMA, pending needs a reset.

    NVIDIA "GPU Memory Error Management", RMA policy
    (docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/rma-policy-thresholds-for-row-remapping.html):
    the failure flag is set by a remap attempt on a bank that already has 8 uncorrectable
    remaps, a second remap of the same row, or after 512 uncorrectable remaps in total.
    """
    rows = gpu.remapped_rows
    if rows is None:
        return None
    check, name = "gpu.remapped_rows", gpu_label(gpu)
    found = []
    if rows.failure:
        found.append(
            finding(
                check,
                Status.FAIL,
                f"{name}: row remap failure",
                value="failure",
                expected="no failure",
                action=f"reseat / RMA {name}: row remap failure",
            )
        )
    if rows.pending:
        # The remap only takes effect at the next GPU reset; until then the memory is not
        # to be trusted for an acceptance run.
        found.append(
            finding(
                check,
                Status.FAIL,
                f"{name}: row remap pending",
                value="pending",
                expected="none pending",
                action=f"reset {name} (`nvidia-smi -r -i {gpu.index}`) "
                "to apply the pending row remap",
            )
        )
    if rows.uncorrectable > 0 and not rows.failure:
        found.append(
            finding(
                check,
                Status.WARN,
                f"{name}: {plural(rows.uncorrectable, 'row')} remapped for uncorrectable errors",
                value=rows.uncorrectable,
                expected="0",
                unit="rows",
                action=f"history: these count toward NVIDIA's RMA thresholds "
                f"(8 per bank, 512 in total); watch {name}",
            )
        )
    return found


def judge_remapped_rows(facts: GpuFacts, profile: Profile) -> list[Finding]:
    return per_gpu(
        "gpu.remapped_rows",
        facts,
        _remapped_rows_one,
        ok="no pending or failed row remap",
        unreported="remapped rows not reported (GPU older than A100, or MIG active)",
    )


# ---------------------------------------------------------------------------------------
# gpu.pcie


def _is_idle(gpu: Gpu) -> bool | None:
    """Whether the GPU said it is idle; None when the clocks event reasons are unknown."""
    if gpu.clock_event_reasons is None:
        return None
    return "gpu_idle" in gpu.clock_event_reasons


def _pcie_width(gpu: Gpu, profile: Profile) -> Finding | None:
    """The link trained at its full width: the GPU's own max and the profile's."""
    current = gpu.pcie_width_current
    if current is None:
        return None
    expected = max(profile.gpu.pcie_width, gpu.pcie_width_max or 0)
    if current >= expected:
        return None
    return finding(
        "gpu.pcie",
        Status.FAIL,
        f"{gpu_label(gpu)}: PCIe x{current}, expected x{expected}",
        value=current,
        expected=f"x{expected}",
        unit="lanes",
        action=f"reseat {gpu_label(gpu)} / check the riser",
    )


def _pcie_gen_max(gpu: Gpu, profile: Profile) -> Finding | None:
    """The GPU's own maximum generation is what the profile expects (a Gen4 part?)."""
    gen_max = gpu.pcie_gen_max
    if gen_max is None or gen_max >= profile.gpu.pcie_gen:
        return None
    return finding(
        "gpu.pcie",
        Status.WARN,
        f"{gpu_label(gpu)}: PCIe Gen{gen_max} max, expected Gen{profile.gpu.pcie_gen}",
        value=gen_max,
        expected=f"Gen{profile.gpu.pcie_gen}",
        unit="PCIe gen",
        action="the GPU reports a lower PCIe generation than its model should: "
        "check the VBIOS and the platform's PCIe settings",
    )


def _expected_gen(gpu: Gpu, profile: Profile) -> int:
    """The generation the link should run at under load: the GPU's own max, else the profile's."""
    return gpu.pcie_gen_max if gpu.pcie_gen_max is not None else profile.gpu.pcie_gen


def _gen_not_judged(gpu: Gpu, profile: Profile) -> bool:
    """True when the link runs below its generation but the GPU is (or may be) idle.

    GPUs drop the PCIe generation at idle to save power (Gen1 at idle is normal), so a
    low generation only means something while the GPU is working.
    """
    current = gpu.pcie_gen_current
    low = current is not None and current < _expected_gen(gpu, profile)
    return low and _is_idle(gpu) is not False


def _pcie_gen_current(gpu: Gpu, profile: Profile) -> Finding | None:
    """Under load, the link runs at the generation the GPU can do."""
    current, expected = gpu.pcie_gen_current, _expected_gen(gpu, profile)
    if current is None or current >= expected or _gen_not_judged(gpu, profile):
        return None
    return finding(
        "gpu.pcie",
        Status.FAIL,
        f"{gpu_label(gpu)}: PCIe Gen{current} while busy, expected Gen{expected}",
        value=current,
        expected=f"Gen{expected}",
        unit="PCIe gen",
        action=f"reseat {gpu_label(gpu)} / check the riser and the BIOS PCIe speed setting",
    )


def _pcie_one(gpu: Gpu, profile: Profile) -> list[Finding] | None:
    if gpu.pcie_width_current is None and gpu.pcie_gen_current is None:
        return None
    found = (
        _pcie_width(gpu, profile),
        _pcie_gen_max(gpu, profile),
        _pcie_gen_current(gpu, profile),
    )
    return [f for f in found if f is not None]


def _idle_gen_skip(gpus: list[Gpu], profile: Profile) -> list[Finding]:
    """One SKIP per (now, max) generation pair naming the GPUs not judged because idle."""
    groups: dict[tuple[int | None, int, bool], list[Gpu]] = {}
    for gpu in gpus:
        if _gen_not_judged(gpu, profile):
            key = (gpu.pcie_gen_current, _expected_gen(gpu, profile), _is_idle(gpu) is True)
            groups.setdefault(key, []).append(gpu)
    return [
        finding(
            "gpu.pcie",
            Status.SKIP,
            f"{gpu_list(idle)}: gen not judged {'at idle' if known else '(idle state unknown)'} "
            f"(Gen{now} now, max Gen{expected})",
            value=now,
            expected=f"Gen{expected}",
            unit="PCIe gen",
            action="judge the PCIe generation under load (e.g. during the burn-in)",
        )
        for (now, expected, known), idle in groups.items()
    ]


def judge_pcie(facts: GpuFacts, profile: Profile) -> list[Finding]:
    """Link width always; link generation only while the GPU is busy."""
    spec = profile.gpu
    findings = per_gpu(
        "gpu.pcie",
        facts,
        lambda gpu: _pcie_one(gpu, profile),
        ok=f"PCIe x{spec.pcie_width}, Gen{spec.pcie_gen} capable",
        unreported="PCIe link not reported",
    )
    return findings + _idle_gen_skip(facts.gpus, profile)


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
                action=f"`nvidia-smi -i {gpu.index} -pl {default:.0f}`",
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
                f"`nvidia-smi -i {gpu.index} -pl {wanted:.0f}`",
            )
        ]
    return []


def judge_power(facts: GpuFacts, profile: Profile) -> list[Finding]:
    return per_gpu(
        "gpu.power",
        facts,
        lambda gpu: _power_one(gpu, profile),
        ok=f"power limit >= {profile.gpu.power_limit_w:.0f} W, not lowered",
        unreported="power limit not reported",
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


def _limits_judged(facts: GpuFacts, profile: Profile) -> str:
    """'slowdown / HBM limits', 'HBM limit (slowdown not reported)': what the PASS verified."""
    slowdown = any(_slowdown_headroom(gpu) is not None for gpu in facts.gpus)
    hbm = any(_hbm_headroom(gpu, profile) is not None for gpu in facts.gpus)
    if slowdown and hbm:
        return "slowdown / HBM limits"
    if slowdown:
        return "slowdown limit (HBM limit not reported)"
    return "HBM limit (slowdown threshold not reported)"


def judge_thermal(facts: GpuFacts, profile: Profile) -> list[Finding]:
    """Headroom to the slowdown and HBM limits; the PASS names the hottest GPU."""
    hottest = _hottest(facts)
    warm = f"hottest {gpu_label(hottest)} at {hottest.temperature_c:.0f} C, " if hottest else ""
    margin = profile.thermal.slowdown_margin_warn_c
    return per_gpu(
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
    return per_gpu(
        "gpu.clock_events",
        facts,
        _clock_events_one,
        ok=f"no clocks event reason active (idle and sync boost aside){note}",
        unreported="clocks event reasons not reported",
    )


# ---------------------------------------------------------------------------------------
# gpu.nvlink


def _links(numbers: list[int]) -> str:
    return ("link " if len(numbers) == 1 else "links ") + ", ".join(map(str, numbers))


def _nvlink_one(gpu: Gpu, profile: Profile) -> list[Finding] | None:
    """All the profile's links up, at the profile's version and speed."""
    spec = profile.nvlink
    if spec is None or not gpu.nvlinks:
        return None
    check, name = "gpu.nvlink", gpu_label(gpu)
    action = "check fabric manager / reseat the GPU baseboard, RMA if persistent"
    found = []
    active = [link for link in gpu.nvlinks if link.active]
    if len(active) < spec.links_per_gpu:
        down = [link.link for link in gpu.nvlinks if not link.active]
        if not active:
            what = f"all {len(down)} links down"
        elif down:
            what = f"{_links(down)} down"
        else:
            what = f"{len(gpu.nvlinks)} links reported"
        found.append(
            finding(
                check,
                Status.FAIL,
                f"{name}: {what} ({len(active)}/{spec.links_per_gpu} active)",
                value=len(active),
                expected=str(spec.links_per_gpu),
                unit="links",
                action=action,
            )
        )
    if gpu.nvlink_version is not None and gpu.nvlink_version != spec.version:
        found.append(
            finding(
                check,
                Status.FAIL,
                f"{name}: NVLink {gpu.nvlink_version}, expected NVLink {spec.version}",
                value=gpu.nvlink_version,
                expected=str(spec.version),
                action="wrong GPU generation for this profile: check the profile chosen",
            )
        )
    slow = [
        link.link
        for link in active
        if link.speed_bytes_per_s is not None
        and link.speed_bytes_per_s / 1e9 < spec.link_speed_gb_s - NVLINK_SPEED_TOLERANCE_GB_S
    ]
    if slow:
        speed = min(link.speed_bytes_per_s or 0.0 for link in active) / 1e9
        found.append(
            finding(
                check,
                Status.WARN,
                f"{name}: {'all links' if len(slow) == len(active) else _links(slow)} "
                f"at {speed:.3f} GB/s, "
                f"expected {spec.link_speed_gb_s:.3f} GB/s",
                value=speed,
                expected=f">= {spec.link_speed_gb_s}",
                unit="GB/s",
                action=action,
            )
        )
    return found


def judge_nvlink(facts: GpuFacts, profile: Profile) -> list[Finding]:
    check, spec = "gpu.nvlink", profile.nvlink
    if not facts.gpus:
        return [no_gpus(check)]
    if spec is None:
        return [finding(check, Status.SKIP, "the profile expects no NVLink (PCIe system)")]
    return per_gpu(
        check,
        facts,
        lambda gpu: _nvlink_one(gpu, profile),
        ok=f"{spec.links_per_gpu}/{spec.links_per_gpu} NVLink {spec.version} links active",
        unreported="NVLink state not reported",
    )


# ---------------------------------------------------------------------------------------
# gpu.fabric


def _normal(text: str) -> str:
    """'In Progress' -> 'in_progress': NVML names and nvidia-smi words compare equal."""
    return "_".join(text.lower().split())


def _fabric_one(gpu: Gpu) -> list[Finding] | None:
    """NVSwitch systems: Fabric Manager registered the GPU in the NVLink fabric."""
    if gpu.fabric_state is None or _normal(gpu.fabric_state) == "not_supported":
        return None
    state, status = _normal(gpu.fabric_state), gpu.fabric_status
    if state == "completed" and (status is None or _normal(status) == "success"):
        return []
    # The status is shown as reported: it is the error the operator will search for.
    detail = f"fabric state {state}" + (f", status {status}" if status else "")
    return [
        finding(
            "gpu.fabric",
            Status.FAIL,
            f"{gpu_label(gpu)}: {detail}",
            value=state,
            expected="completed / success",
            action="fabric manager has not finished: `systemctl status nvidia-fabricmanager` "
            "(its version must match the driver)",
        )
    ]


def judge_fabric(facts: GpuFacts, profile: Profile) -> list[Finding]:
    return per_gpu(
        "gpu.fabric",
        facts,
        _fabric_one,
        ok="fabric registration completed",
        unreported="fabric state not reported (pre-Hopper driver or not an NVSwitch system)",
    )


# ---------------------------------------------------------------------------------------

CHECKS: list[Check] = [
    Check("gpu.count", PROBE, judge_count, "as many GPUs as the profile says"),
    Check("gpu.model", PROBE, judge_model, "every GPU is the profile's model, with its memory"),
    Check("gpu.driver", PROBE, judge_driver, "driver and CUDA version at least the minimum"),
    Check("gpu.persistence", PROBE, judge_persistence, "persistence mode on"),
    Check("gpu.ecc", PROBE, judge_ecc, "ECC on, no uncorrected ECC errors"),
    Check("gpu.remapped_rows", PROBE, judge_remapped_rows, "no pending or failed row remap"),
    Check("gpu.pcie", PROBE, judge_pcie, "PCIe link at full width (and gen under load)"),
    Check("gpu.power", PROBE, judge_power, "power limit not lowered"),
    Check("gpu.thermal", PROBE, judge_thermal, "headroom to slowdown and HBM temperature"),
    Check("gpu.clock_events", PROBE, judge_clock_events, "no throttling reason active"),
    Check("gpu.nvlink", PROBE, judge_nvlink, "all NVLinks up at the profile's version"),
    Check("gpu.fabric", PROBE, judge_fabric, "NVLink fabric registration completed"),
]
