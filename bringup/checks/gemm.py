"""GEMM and diagnosis checks: matmul throughput against the profile, and why a GPU is slow.

`gemm.tflops` compares each GPU's BF16 throughput with the profile's achievable ceiling
and peak. `gemm.diagnosis` and `telemetry.diagnosis` run the throttling diagnosis
(bringup/checks/throttle.py) on the timeline recorded under load, or while watching a job.
"""

from __future__ import annotations

import statistics

from bringup.checks import Check, finding
from bringup.checks.throttle import STRAGGLER_BELOW, below_median, gemm_flops, judge_throttling
from bringup.findings import Finding, Status
from bringup.node.probes.gemm import FP8_CAPABILITY, GemmFacts, GemmGpu
from bringup.node.timeline import Timeline
from bringup.profile import Profile

# bringup policy: WARN below 90% of the achievable ceiling (ml-engineering's best torch.mm
# shape; run-to-run spread on one H200 was 769-798 TFLOP/s; docs/reference.md#check-thresholds).
CEILING_SHARE = 0.9


def judge_tflops(facts: GemmFacts, profile: Profile) -> list[Finding]:
    """Every GPU reaches 90% of the profile's achievable BF16 ceiling."""
    check = "gemm.tflops"
    findings = [
        finding(check, Status.ERROR, f"GPU {g.index}: {g.error}") for g in facts.gpus if g.error
    ]
    # The FP8 path failed on a GPU that has it: its own ERROR, beside the BF16 figures.
    findings += [
        finding(
            check,
            Status.ERROR,
            f"GPU {g.index}: FP8 not measured: {g.fp8_error}",
            action="check that this torch build has the FP8 kernels (torch._scaled_mm)",
        )
        for g in facts.gpus
        if g.fp8_error
    ]
    findings += [
        finding(
            check,
            Status.ERROR,
            f"GPU {g.index}: FP8 did not run, though the GPU has it (compute capability "
            f"{g.capability})",
            action="run the gemm probe with fp8: true; check torch.cuda and torch._scaled_mm",
        )
        for g in facts.gpus
        if facts.fp8 and has_fp8(g) and g.fp8_flops_per_s is None and not (g.fp8_error or g.error)
    ]
    flops = gemm_flops(facts)
    if facts.device != "cuda":
        best = max(flops.values(), default=0.0) / 1e12
        message = f"measured on the CPU (no CUDA GPU): {best:.2f} TFLOP/s BF16, not comparable"
        findings.append(finding(check, Status.SKIP, message, value=round(best, 3), unit="TFLOP/s"))
        return findings
    if not flops:
        return findings or [finding(check, Status.ERROR, "no GPU measured")]
    spec = profile.gpu
    ceiling = spec.bf16_achievable_tflops
    if ceiling is None:
        # No measured ceiling to hold a GPU to. The dense peak is no stand-in: the best
        # torch.mm reaches 78-87% of it (docs/reference.md#achievable-matmul-ceilings), so
        # every healthy GPU would WARN. The GPUs are still compared with each other.
        median = statistics.median(flops.values()) / 1e12
        message = (
            f"{len(flops)} GPUs: BF16 median {median:.0f} TFLOP/s "
            f"({median / spec.bf16_dense_tflops:.0%} of {spec.bf16_dense_tflops:g} dense peak); "
            f"not judged: profile {profile.name} has no achievable BF16 ceiling "
            "(gpu.bf16_achievable_tflops)"
        )
        findings.append(
            finding(check, Status.SKIP, message, value=round(median, 1), unit="TFLOP/s")
        )
        return findings
    floor = CEILING_SHARE * ceiling
    for index, value in sorted(flops.items()):
        tflops = value / 1e12
        if tflops < floor:
            action = "see the diagnosis findings (throttling, straggler) for the cause"
            findings.append(
                finding(
                    check,
                    Status.WARN,
                    f"GPU {index}: {tflops:.0f} TFLOP/s BF16, {tflops / ceiling:.0%} of the "
                    f"{ceiling:g} achievable ({tflops / spec.bf16_dense_tflops:.0%} of "
                    f"{spec.bf16_dense_tflops:g} peak)",
                    value=round(tflops, 1),
                    expected=f">= {floor:.0f}",
                    unit="TFLOP/s",
                    action=action,
                )
            )
    if not any(f.status in (Status.WARN, Status.ERROR) for f in findings):
        median = statistics.median(flops.values()) / 1e12
        extra = _fp8_and_hbm(facts)
        findings.insert(
            0,
            finding(
                check,
                Status.PASS,
                f"{len(flops)} GPUs: BF16 median {median:.0f} TFLOP/s, {median / ceiling:.0%} "
                f"of {ceiling:g} achievable, {median / spec.bf16_dense_tflops:.0%} of "
                f"{spec.bf16_dense_tflops:g} peak{extra}",
                value=round(median, 1),
                expected=f">= {floor:.0f}",
                unit="TFLOP/s",
            ),
        )
    return findings


def has_fp8(gpu: GemmGpu) -> bool:
    """The GPU has FP8 tensor cores (compute capability 8.9 on); unknown on old records."""
    if not gpu.capability:
        return False
    major, _, minor = gpu.capability.partition(".")
    return (int(major), int(minor or 0)) >= FP8_CAPABILITY


def _fp8_and_hbm(facts: GemmFacts) -> str:
    fp8 = [g.fp8_flops_per_s for g in facts.gpus if g.fp8_flops_per_s]
    hbm = [g.hbm_bytes_per_s for g in facts.gpus if g.hbm_bytes_per_s]
    text = ""
    if fp8:
        text += f"; FP8 median {statistics.median(fp8) / 1e12:.0f} TFLOP/s"
    if hbm:
        text += f"; HBM copy median {statistics.median(hbm) / 1e12:.2f} TB/s"
    return text


def judge_hbm(facts: GemmFacts, profile: Profile) -> list[Finding]:
    """Every GPU's HBM copy bandwidth within STRAGGLER_BELOW of the node's median."""
    check = "gemm.hbm"
    copies = {g.index: g.hbm_bytes_per_s for g in facts.gpus if g.hbm_bytes_per_s}
    if facts.device != "cuda":
        return [finding(check, Status.SKIP, "measured on the CPU (no CUDA GPU): not comparable")]
    if not copies:
        return [finding(check, Status.ERROR, "no GPU measured its HBM copy")]
    median = statistics.median(copies.values())
    findings = []
    for index, share in sorted(below_median(copies).items()):
        if share < STRAGGLER_BELOW:
            continue
        findings.append(
            finding(
                check,
                Status.FAIL,
                f"GPU {index}: HBM copy {copies[index] / 1e12:.2f} TB/s, {share:.0%} below the "
                f"node median {median / 1e12:.2f} TB/s",
                value=round(copies[index] / 1e12, 3),
                expected=f">= {(1 - STRAGGLER_BELOW) * median / 1e12:.2f}",
                unit="TB/s",
                action="look for HBM errors and throttling (`bringup diagnose`, "
                "`nvidia-smi -q -d ECC,ROW_REMAPPER`); reset the GPU, RMA if it stays slow",
            )
        )
    if findings:
        return findings
    return [
        finding(
            check,
            Status.PASS,
            f"{len(copies)} GPUs: HBM copy median {median / 1e12:.2f} TB/s (read + write), none "
            f"more than {STRAGGLER_BELOW:.0%} below it",
            value=round(median / 1e12, 3),
            unit="TB/s",
        )
    ]


def judge_gemm_diagnosis(facts: GemmFacts, profile: Profile) -> list[Finding]:
    """Why a GPU is slow under the matmul load (telemetry recorded while it ran)."""
    if facts.timeline is None:  # the gemm step of a suite, without sampling: stragglers only
        found = judge_throttling(None, facts, profile)
        found = [f for f in found if f.check == "diagnose.straggler"]
        return found or [finding("diagnose.straggler", Status.PASS, "no GPU far below the median")]
    return judge_throttling(facts.timeline, facts, profile)


def judge_telemetry(facts: Timeline, profile: Profile) -> list[Finding]:
    """Why the GPUs are slow while a job runs (no load of bringup's own)."""
    return judge_throttling(facts, None, profile)


CHECKS = [
    Check("gemm.tflops", "gemm", judge_tflops, "BF16 matmul TFLOP/s vs the achievable ceiling"),
    Check("gemm.hbm", "gemm", judge_hbm, "HBM copy bandwidth of every GPU vs the node median"),
    Check("gemm.diagnosis", "gemm", judge_gemm_diagnosis, "throttling diagnosis under matmul load"),
    Check("telemetry.diagnosis", "telemetry", judge_telemetry, "throttling diagnosis of a job"),
]
