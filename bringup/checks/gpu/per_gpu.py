"""Judging GPU by GPU: how every GPU check names GPUs and turns per-GPU verdicts into findings.

A problem is one finding that names the GPU ("GPU 3: ..."); when all is well a check
returns one PASS finding saying what was verified. A field a source did not report (None)
is never read as healthy: those GPUs are listed in a SKIP finding instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from bringup.checks import finding
from bringup.findings import Finding, Status
from bringup.node.gpu_facts import Gpu, GpuFacts, gpu_selector
from bringup.profile import Profile

# Statuses that mean "something is wrong here": any of them replaces the PASS finding.
PROBLEMS = (Status.WARN, Status.FAIL, Status.ERROR)

# The `nvidia-smi -q` sections each check reads: a field there the GPU answered with
# "Unknown Error" (Gpu.unreadable) is that check's FAIL, not a "not reported" SKIP.
_SECTIONS: dict[str, tuple[str, ...]] = {
    "gpu.ecc": ("ECC Mode", "ECC Errors"),
    "gpu.remapped_rows": ("Remapped Rows",),
    "gpu.persistence": ("Persistence Mode",),
    "gpu.pcie": ("PCI GPU Link Info",),
    "gpu.power": ("GPU Power Readings", "Power Readings"),
    "gpu.thermal": ("Temperature",),
    "gpu.clock_events": ("Clocks Event Reasons", "Clocks Throttle Reasons"),
    "gpu.fabric": ("Fabric",),
}

# The fields a profile can expect its GPU to report (GpuSpec.reports): the check that reads
# each, the `-q` fields that carry it, and how grave an "N/A" there is. ECC and row remaps
# are memory safety: not knowing them is a FAIL, as for "Unknown Error". A power limit
# nobody can read only leaves gpu.power unjudged: WARN.
# The fields are named as `-q` text and `-q -x` (same names) or `--query-gpu` name them.
_EXPECTED: dict[str, tuple[str, tuple[str, ...], Status]] = {
    "gpu.ecc": ("ecc", ("ECC Mode Current", "ecc.mode.current"), Status.FAIL),
    "gpu.remapped_rows": ("remapped_rows", ("Remapped Rows", "remapped_rows."), Status.FAIL),
    "gpu.power": (
        "power_limit",
        (
            "GPU Power Readings Current Power Limit",
            "Power Readings Current Power Limit",
            "enforced.power.limit",
            "power.limit",
        ),
        Status.WARN,
    ),
}


# ---------------------------------------------------------------------------------------
# Small shared helpers


def gpu_label(gpu: Gpu) -> str:
    """'GPU 3': how every message names a GPU (the index nvidia-smi and NVML use); 'GPU
    00000000:52:00.0' when the output showed it by bus id only."""
    return f"GPU {gpu_selector(gpu)}"


def gpu_list(gpus: Iterable[Gpu]) -> str:
    """'GPU 0, 1, 5': several GPUs named in one message."""
    return "GPU " + ", ".join(gpu_selector(gpu) for gpu in gpus)


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


def judge_each_gpu(
    check: str,
    facts: GpuFacts,
    judge_one: Callable[[Gpu], list[Finding] | None],
    *,
    ok: str,
    unreported: str,
    ok_value: float | int | str | None = None,
    ok_unit: str | None = None,
    expects: Sequence[str] = (),
) -> list[Finding]:
    """Judge every GPU with `judge_one` (None = the field was not reported on that GPU).

    `expects` is what the profile expects the GPU to report (expected_reports): a GPU that
    printed "N/A" for the check's field then has a finding naming it, not the SKIP.

    Returns the findings of all GPUs, one SKIP naming the GPUs that did not report, and
    one PASS "n/N GPUs: <ok>" counting the GPUs without a finding, when none showed a
    problem (a GPU whose fault another check owns has a SKIP of its own, not a problem).
    """
    if not facts.gpus:
        return [no_gpus(check)]
    findings: list[Finding] = []
    missing: list[Gpu] = []
    clean = 0
    for gpu in facts.gpus:
        found = judge_one(gpu)
        if found is None:
            if unknown := unreadable(gpu, check):
                findings.append(unreadable_finding(check, gpu, unknown))
            elif not_reported := not_available_finding(check, gpu, expects):
                findings.append(not_reported)
            else:
                missing.append(gpu)
            continue
        clean += not found
        findings.extend(found)
    judged = len(facts.gpus) - len(missing)
    if clean and not any(f.status in PROBLEMS for f in findings):
        message = f"{clean}/{len(facts.gpus)} GPUs: {ok}"
        findings.insert(0, finding(check, Status.PASS, message, value=ok_value, unit=ok_unit))
    if missing:
        where = "" if not judged else f" on {gpu_list(missing)}"
        findings.append(finding(check, Status.SKIP, f"{unreported}{where}"))
    return findings


def unreadable(gpu: Gpu, check: str) -> list[str]:
    """The fields of the check's sections the GPU answered with "Unknown Error"."""
    sections = _SECTIONS.get(check, ())
    return [name for name in gpu.unreadable if sections and name.startswith(sections)]


def unreadable_finding(check: str, gpu: Gpu, fields: list[str]) -> Finding:
    """A GPU that answers a query with an error (NVML's "Unknown Error", seen on a GPU in a
    bad state, e.g. after an uncorrectable error): FAIL, naming the fields."""
    name = gpu_label(gpu)
    return finding(
        check,
        Status.FAIL,
        f"{name}: the GPU cannot report {', '.join(fields)} (Unknown Error)",
        value="Unknown Error",
        action=f"reset {name} (`nvidia-smi -r -i {gpu_selector(gpu)}`) and query it again; "
        "RMA if it still cannot",
    )


def expected_reports(profile: Profile) -> list[str]:
    """What the profile expects its GPU to report; nothing for a GPU no profile fits (the
    profile-free checks are given no Profile then), where an "N/A" proves nothing."""
    return list(profile.gpu.reports) if isinstance(profile, Profile) else []


def not_available_finding(check: str, gpu: Gpu, expects: Sequence[str]) -> Finding | None:
    """The check's field printed "N/A" on a GPU its profile expects to report it: the GPU
    or driver could not say (a GPU in a bad state, a driver too old for the board). None
    where the field legitimately does not exist: not expected by the profile, or row
    remapping under MIG (nvidia-smi reports it per GPU only with MIG off)."""
    if check not in _EXPECTED:
        return None
    wanted, fields, status = _EXPECTED[check]
    named = [name for name in gpu.not_available if name.startswith(fields)]
    if wanted not in expects or not named or (check == "gpu.remapped_rows" and gpu.mig_mode):
        return None
    name = gpu_label(gpu)
    return finding(
        check,
        status,
        f"{name}: {', '.join(named)} is N/A: the GPU or driver could not report it, "
        "and this GPU has it",
        value="N/A",
        action=f"read `nvidia-smi -q -i {gpu_selector(gpu)}` again; if still N/A, check the "
        f"driver supports this GPU (`nvidia-smi` driver version), then reset {name} "
        f"(`nvidia-smi -r -i {gpu_selector(gpu)}`); RMA if it still cannot",
    )
