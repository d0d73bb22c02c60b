"""Baselines for the plan tests: the recorded CPU burn-in of the tiny recipe
(tests/fixtures/burnin/), and a GPU baseline made to order."""

from __future__ import annotations

import json

from bringup import baseline as baselines
from bringup import recipe as recipes
from bringup.facts import decode, read_record
from bringup.planning.throughput import Measured
from tests.support import REPO

TINY_CPU_RECORD = REPO / "tests" / "fixtures" / "burnin" / "cpu-tiny-2ranks.json"


def tiny_cpu_baseline() -> Measured:
    """The 2-rank CPU burn-in of `tiny`, summarised as its baseline.json would be."""
    record = json.loads(TINY_CPU_RECORD.read_text())
    facts = decode(read_record(record))
    node = baselines.summarize("vm", facts, None, None)
    base = baselines.build([node], "tiny", None, "2026-01-01T00:00:00+00:00")
    return Measured(TINY_CPU_RECORD.name, base, recipes.load("tiny"))


def gpu_baseline(recipe: str, device: str, mfu: float, hfu: float, ranks: int = 8) -> Measured:
    """A GPU burn-in's baseline at the given MFU and HFU of an H200's peak (989 TFLOP/s),
    its profile h200: what `bringup burnin` would write (the figures are made up)."""
    r = recipes.load(recipe)
    peak = 989e12
    node = baselines.NodeBaseline(
        node="gpu01",
        recipe=recipe,
        device_kind="cuda",
        device_name=device,
        world_size=ranks,
        steps_measured=100,
        step_time_median_s=1.0,
        step_time_p99_s=1.1,
        step_time_rank_spread=0.01,
        tokens_per_s_per_gpu=None,
        model_flops_per_token=None,
        hardware_flops_per_token=None,
        model_flops_per_s_per_gpu=mfu * peak,
        hardware_flops_per_s_per_gpu=hfu * peak,
        peak_flops_per_s=peak,
        peak_source="profile",
        mfu=mfu,
        hfu=hfu,
        ceiling_flops_per_s=None,
        ceiling_source=None,
        mfu_vs_ceiling=None,
        loss_curve=[],
        loss_first=None,
        loss_last=None,
        peak_memory_bytes=[None] * ranks,
        memory_kind="cuda_max_allocated",
        checkpoint_save_s=None,
        checkpoint_restore_s=None,
        checkpoint_bit_identical=None,
    )
    base = baselines.build([node], recipe, "h200", "2026-01-01T00:00:00+00:00")
    return Measured(f"runs/{recipe}", base, r)
