"""GPU memory health: ECC mode and errors, row remapping. Pure: `GpuFacts + Profile -> findings`."""

from __future__ import annotations

from bringup.checks import finding
from bringup.checks.gpu.per_gpu import (
    expected_reports,
    gpu_label,
    judge_each_gpu,
    not_available_finding,
    plural,
    unreadable_finding,
)
from bringup.findings import Finding, Status
from bringup.node.gpu_facts import Gpu, GpuFacts, gpu_selector
from bringup.profile import Profile

# ---------------------------------------------------------------------------------------
# gpu.ecc


def _ecc_one(gpu: Gpu, expects: list[str]) -> list[Finding] | None:
    """ECC on, and no uncorrected error since the last reset (volatile) or ever (aggregate)."""
    check, name = "gpu.ecc", gpu_label(gpu)
    volatile, aggregate = gpu.ecc_uncorrected_volatile, gpu.ecc_uncorrected_aggregate
    found = []
    unknown = [field for field in gpu.unreadable if field.startswith("ECC Mode")]
    if gpu.ecc_mode is None and unknown:
        # The driver asked and the GPU answered with an error (seen after an uncorrectable
        # error, before the reset): not "not reported", a GPU that cannot tell.
        found.append(unreadable_finding("gpu.ecc", gpu, unknown))
    elif gpu.ecc_mode is None and (not_reported := not_available_finding(check, gpu, expects)):
        # ECC Mode N/A beside readable counters: the counters say nothing of whether ECC
        # is on, so this is no PASS.
        found.append(not_reported)
    elif gpu.ecc_mode is None and volatile is None and aggregate is None:
        return None
    if gpu.ecc_mode is False:
        found.append(
            finding(
                check,
                Status.FAIL,
                f"{name}: ECC disabled",
                value="disabled",
                expected="enabled",
                action=f"enable ECC: `nvidia-smi -i {gpu_selector(gpu)} -e 1`, then reset the GPU",
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
                action=f"reset {name} (`nvidia-smi -r -i {gpu_selector(gpu)}`); if it recurs, RMA",
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
    return judge_each_gpu(
        "gpu.ecc",
        facts,
        lambda gpu: _ecc_one(gpu, expected_reports(profile)),
        ok="ECC enabled, no uncorrected errors",
        unreported="ECC not reported",
        expects=expected_reports(profile),
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
                action=f"reset {name} (`nvidia-smi -r -i {gpu_selector(gpu)}`) "
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
    return judge_each_gpu(
        "gpu.remapped_rows",
        facts,
        _remapped_rows_one,
        ok="no pending or failed row remap",
        unreported="remapped rows not reported (GPU older than A100, or MIG active)",
        expects=expected_reports(profile),
    )
