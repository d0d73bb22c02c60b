"""The gemm checks on recorded figures, and `bringup diagnose` bad input (in-process CLI).

tests/integration/node/test_gemm.py runs the probe for real with torch on the CPU.
"""

from __future__ import annotations

import dataclasses

import pytest

from bringup.checks.gemm import judge_hbm, judge_tflops
from bringup.findings import Status
from bringup.node.probes.gemm import GemmFacts, GemmGpu
from bringup.profile import load
from tests.support.cli import invoke

H200 = load("h200")
# Best BF16 torch.mm on H100/H200 (docs/reference.md#achievable-matmul-ceilings).
ACHIEVABLE = 794.5e12


def gpu_facts(scale: dict[int, float]) -> GemmFacts:
    gpus = [
        GemmGpu(index=g, name="NVIDIA H200", bf16_flops_per_s=ACHIEVABLE * scale.get(g, 1.0))
        for g in range(8)
    ]
    return GemmFacts(device="cuda", timing="cuda-events", torch_version="2.13.0", gpus=gpus)


def test_tflops_pass_names_the_ceiling_and_peak() -> None:
    (f,) = judge_tflops(gpu_facts({}), H200)
    assert f.status is Status.PASS
    assert f.message == (
        "8 GPUs: BF16 median 794 TFLOP/s, 100% of 794.5 achievable, 80% of 989 peak"
    )


def test_tflops_warns_below_90_percent_of_the_ceiling() -> None:
    findings = judge_tflops(gpu_facts({2: 0.7}), H200)
    assert [(f.status, f.message) for f in findings] == [
        (Status.WARN, "GPU 2: 556 TFLOP/s BF16, 70% of the 794.5 achievable (56% of 989 peak)")
    ]


def test_cpu_figures_are_not_judged_against_the_profile() -> None:
    facts = GemmFacts("cpu", "wall-clock", "2.13.0", [GemmGpu(0, "cpu", bf16_flops_per_s=3.3e11)])
    (f,) = judge_tflops(facts, H200)
    assert f.status is Status.SKIP
    assert f.message == "measured on the CPU (no CUDA GPU): 0.33 TFLOP/s BF16, not comparable"


def test_fp8_must_run_on_a_gpu_that_has_it() -> None:
    facts = gpu_facts({})
    for gpu in facts.gpus:
        gpu.capability, gpu.fp8_flops_per_s = "9.0", 1300e12
    facts.gpus[4].fp8_flops_per_s = None  # silently not measured: an ERROR, never a pass
    findings = judge_tflops(facts, H200)
    assert [(f.status, f.message) for f in findings] == [
        (
            Status.ERROR,
            "GPU 4: FP8 did not run, though the GPU has it (compute capability 9.0)",
        )
    ]
    # An Ampere GPU has no FP8; a run that did not ask for FP8 is not held to it.
    facts.gpus[4].capability = "8.0"
    assert judge_tflops(facts, H200)[0].status is Status.PASS
    facts.gpus[4].capability, facts.fp8 = "9.0", False
    assert judge_tflops(facts, H200)[0].status is Status.PASS


def test_hbm_straggler_fails_and_the_rest_pass() -> None:
    facts = gpu_facts({})
    for gpu in facts.gpus:
        gpu.hbm_bytes_per_s = 3.0e12
    assert [(f.status, f.message) for f in judge_hbm(facts, H200)] == [
        (
            Status.PASS,
            "8 GPUs: HBM copy median 3.00 TB/s (read + write), none more than 10% below it",
        )
    ]
    facts.gpus[6].hbm_bytes_per_s = 2.5e12
    assert [(f.status, f.message) for f in judge_hbm(facts, H200)] == [
        (Status.FAIL, "GPU 6: HBM copy 2.50 TB/s, 17% below the node median 3.00 TB/s")
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["diagnose"], "say where to run: --local (this machine) or --nodes hosts.ini"),
        (["diagnose", "--local", "--seconds", "0"], "--seconds must be in (0, 86400], not 0"),
        (["diagnose", "--local", "--interval", "99"], "--interval must be between 0.01 and 10 s"),
        (["diagnose", "--local", "--profile", "nope"], "unknown profile 'nope'"),
    ],
)
def test_bad_input_exits_2_with_one_line(args: list[str], message: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_facts_round_trip() -> None:
    facts = gpu_facts({})
    from pydantic import TypeAdapter

    assert TypeAdapter(GemmFacts).validate_python(dataclasses.asdict(facts)) == facts


def test_the_sweep_starts_after_a_timed_warm_up_at_load() -> None:
    """Five warm-up products of the first shape last milliseconds on a GPU, while its
    clocks rise from idle over far longer: the probe first keeps the device busy for
    warmup_s, and records that it did, before the first shape is timed."""
    import threading

    pytest.importorskip("torch")
    import torch

    from bringup.node.probes.gemm import Params, measure

    params = Params(m_sizes=[64], nk=64, warmup_s=0.3, iterations=2, device="cpu")
    gpu = measure(torch, "cpu", 0, params, threading.Barrier(1))
    assert gpu.warmup_s is not None and gpu.warmup_s >= 0.3
    assert [(r.dtype, r.m) for r in gpu.sweep] == [("bf16", 64)]
