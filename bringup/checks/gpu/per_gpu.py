"""Judging GPU by GPU: how every GPU check names GPUs and turns per-GPU verdicts into findings.

A problem is one finding that names the GPU ("GPU 3: ..."); when all is well a check
returns one PASS finding saying what was verified. A field a source did not report (None)
is never read as healthy: those GPUs are listed in a SKIP finding instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from bringup.checks import finding
from bringup.findings import Finding, Status
from bringup.node.gpu_facts import Gpu, GpuFacts, gpu_selector

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
) -> list[Finding]:
    """Judge every GPU with `judge_one` (None = the field was not reported on that GPU).

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
