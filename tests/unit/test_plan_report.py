"""The report's plan section: present for a burn-in run (baseline.json), absent otherwise;
its figures are bringup/planning's, a flagged ratio shows as FLAGGED."""

from __future__ import annotations

from pathlib import Path

import pytest

from bringup import baseline as baselines
from bringup.commands.report import make_report
from bringup.planning import plan as P
from bringup.planning.memory import device_of
from bringup.planning.models import from_recipe
from bringup.profile import load as load_profile
from bringup.report import render
from bringup.rundir import RunDir
from tests.support.planning import gpu_baseline, tiny_cpu_baseline


def burnin_run(tmp_path: Path, base: baselines.Baseline | None, profile: str | None) -> Path:
    run = RunDir.create(tmp_path / "run", "burnin", profile, None)
    run.add_findings([])
    run.finish("complete", 0)
    if base is not None:
        baselines.write(run.path / "baseline.json", base)
    return run.path


def test_a_run_without_a_baseline_has_no_plan_section(tmp_path: Path) -> None:
    report, _ = make_report(burnin_run(tmp_path, None, None), None, None)
    assert report.plan is None
    assert "What this burn-in means" not in render.markdown(report)


def test_the_tiny_cpu_burnin_planned_for_a_billion_tokens(tmp_path: Path) -> None:
    measured = tiny_cpu_baseline()
    report, _ = make_report(burnin_run(tmp_path, measured.baseline, None), None, None)
    assert report.plan is not None
    (line,) = report.plan.lines
    assert line.job == "140 k parameters, LoRA r=32, 2 × cpu, ZeRO-3"
    # 1e9 tokens over 2 ranks at the measured 512 / 0.328361 tokens/s each
    assert line.hours == pytest.approx(1e9 / (2 * 512 / 0.328361) / 3600)
    assert {r.figure: round(r.ratio, 3) for r in line.ratios} == {
        "tokens/s per GPU": 1.0,
        "step time": 1.0,
        "memory peak": 0.952,
    }
    md = render.markdown(report)
    assert "## What this burn-in means for a fine-tune" in md
    assert "tokens/s per GPU 1.000; step time 1.000; memory peak 0.952 |" in md


def test_a_gpu_burnin_is_judged_against_its_profile_and_a_miss_flagged(tmp_path: Path) -> None:
    measured = gpu_baseline("llama-8b-lora", "NVIDIA B300 SXM6 AC", mfu=0.40, hfu=0.40)
    node = measured.baseline.nodes[0]
    # tokens/s as the measured rate gives them; a memory peak 1.5 x what the model says
    plan = P.make(
        P.Request(from_recipe(measured.recipe), "lora", gpus=8),
        device_of(load_profile("b300")),
        [],
    )
    tps = 0.40 * 989e12 / plan.timing.hardware_flops_per_token
    node = node.model_copy(
        update={
            "tokens_per_s_per_gpu": tps,
            "step_time_median_s": 8192 / tps,
            "peak_memory_bytes": [round(plan.memory.allocated * 1.5)] * 8,
        }
    )
    base = measured.baseline.model_copy(update={"nodes": [node], "profile": "b300"})
    report, _ = make_report(burnin_run(tmp_path, base, "b300"), None, None)
    assert report.plan is not None
    (line,) = report.plan.lines
    assert line.capacity_bytes == 285_515_710_464 and line.fits is True
    # measured on this GPU: its own FLOP rate (0.40 x 989e12 in the helper) over the B300 peak
    assert line.mfu == pytest.approx(0.40 * 989 / 2250)
    ratios = {r.figure: r for r in line.ratios}
    assert ratios["tokens/s per GPU"].ratio == pytest.approx(1.0)
    assert ratios["memory peak"].ratio == pytest.approx(1 / 1.5, abs=1e-6)
    assert ratios["memory peak"].flagged and not ratios["tokens/s per GPU"].flagged
    assert "memory peak 0.667 **FLAGGED**" in render.markdown(report)
    assert "FLAGGED" in render.html(report, render.Plots())
