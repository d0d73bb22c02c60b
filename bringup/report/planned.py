"""The report's plan section: what a run's burn-in means for a real fine-tune.

Shown when the run directory holds a burn-in baseline (baseline.json): for each node, the
plan of the baseline's own recipe on that node's GPUs for one billion tokens, and how
closely the plan gives back what the burn-in measured (bringup/planning computes both).
The report shows these figures; it judges nothing with them.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from bringup import baseline as baselines
from bringup import recipe as recipes
from bringup.node.burnin import flops
from bringup.planning.memory import device_of
from bringup.planning.models import count_text
from bringup.planning.plan import REPORT_TOKENS, for_baseline
from bringup.planning.throughput import Measured
from bringup.profile import Profile


class PlanRatio(BaseModel):
    figure: str  # tokens/s per GPU, step time, memory peak
    ratio: float  # planned / measured
    tolerance: float
    flagged: bool


class PlanLine(BaseModel):
    node: str
    recipe: str
    job: str  # "8.03 B parameters, LoRA r=32, 8 × h200, ZeRO-3"
    tokens: float
    hours: float | None
    gpu_hours: float | None
    mfu: float | None
    tokens_per_s_per_gpu: float | None
    memory_bytes: int  # per GPU at the peak (a CPU's: the process's resident set)
    capacity_bytes: int | None
    fits: bool | None
    ratios: list[PlanRatio] = Field(default_factory=list)


class PlanSection(BaseModel):
    baseline: str  # the baseline file
    tokens: float
    lines: list[PlanLine] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)
    command: str  # how to get the cost, other sizes, other GPUs


def plan_section(run_path: Path, profile: Profile | None) -> PlanSection | None:
    """The section for a run with a baseline.json; None for any other run."""
    file = run_path / "baseline.json"
    if not file.exists():
        return None
    command = f"bringup plan --baseline {run_path} --model RECIPE --method lora --tokens N"
    section = PlanSection(baseline=str(file), tokens=REPORT_TOKENS, command=command)
    try:
        base = baselines.load(file)
    except baselines.BaselineError as exc:
        section.problems.append(str(exc))
        return section
    section.command = command.replace("RECIPE", base.recipe)
    try:
        recipe = recipes.load(base.recipe)
    except recipes.RecipeError as exc:
        section.problems.append(f"no plan: {exc}")
        return section
    device = device_of(profile) if profile is not None else None
    for node in base.nodes:
        one = Measured(str(file), base.model_copy(update={"nodes": [node]}), recipe)
        plan = for_baseline(one, device)
        if plan is None:
            continue
        s = plan.setup
        params = flops.parameter_counts(s.shape).total
        ratios = [
            PlanRatio(figure=r.figure, ratio=r.ratio, tolerance=r.tolerance, flagged=r.flagged)
            for check in plan.checks
            for r in check.ratios
        ]
        section.lines.append(
            PlanLine(
                node=node.node,
                recipe=base.recipe,
                job=f"{count_text(params)} parameters, LoRA r={s.lora.r}, "
                f"{s.gpus} × {plan.device.name}, ZeRO-{s.zero_stage}",
                tokens=REPORT_TOKENS,
                hours=plan.timing.hours,
                gpu_hours=plan.cost.gpu_hours,
                mfu=plan.mfu,
                tokens_per_s_per_gpu=plan.timing.tokens_per_s_per_gpu,
                memory_bytes=plan.memory.peak,
                capacity_bytes=plan.fit.capacity_bytes,
                fits=plan.fit.fits,
                ratios=ratios,
            )
        )
    return section
