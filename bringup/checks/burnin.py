"""Checks of a burn-in run: it finished, it learned, it checkpoints, it runs at full speed.

In one data-parallel job every rank waits for the slowest at each collective, so a slow GPU
does not show in its own step time: it shows in its clocks (telemetry), and in the node's
step time against other nodes (each node on its own) or against a baseline.
"""

from __future__ import annotations

import statistics
from dataclasses import replace

from bringup.baseline import Baseline, GpuTelemetry, gpu_telemetry, measured, summarize
from bringup.checks import Check, finding
from bringup.findings import Finding, Status
from bringup.measurements import shown
from bringup.node.probes.burnin import BurninFacts
from bringup.profile import Profile

MIN_STEPS_FOR_LOSS = 4  # fewer steps say nothing about a trend
LOSS_DROP_MIN = 0.01  # the last quarter's mean must be >= 1% below the first quarter's
STRAGGLER_STEP = 0.05  # a rank whose median step time is 5% above the others' median
STRAGGLER_CLOCK = 0.05  # a GPU whose median SM clock under load is 5% below the others'
BASELINE_TOLERANCE = 0.05  # tokens/s or MFU more than 5% below the baseline fails
# Clocks event reasons (telemetry names) that mean the hardware protected itself: FAIL.
HARDWARE_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
# Reasons that lower clocks under load by policy: WARN (power cap, software thermal).
SOFTWARE_REASONS = ("sw_power_cap", "sw_thermal_slowdown")
# Why a burn-in on the CPU is never ACCEPTED, said alike on the console and in the report.
NO_GPU_PEAK = "a CPU burn-in: no GPU peak to judge MFU by, so no node is accepted by it"


NO_DATA_ACTION = (
    "read raw/<node>/burnin/trainer.log for the cause (a missing torch, a crash), "
    "fix it and rerun the burn-in"
)


def judge_no_steps(check: str, facts: BurninFacts) -> Finding | None:
    """The ERROR of a check that has nothing to judge: the burn-in produced no step.

    No data is no pass: "0 ranks' step times within 5%" or "no throttling" over a trainer
    that never trained would accept a node that was never measured. The cause is the
    trainer's own (its exit status and telling log line, facts.error)."""
    if facts.steps:
        return None
    cause = facts.error or "the trainer reported no step and no error"
    return finding(
        check,
        Status.ERROR,
        f"no data: the burn-in produced no steps ({cause})",
        action=NO_DATA_ACTION,
    )


def judge_run(facts: BurninFacts, profile: Profile) -> list[Finding]:
    """burnin.run: the trainer ran to its end (steps or minutes)."""
    steps = len(facts.steps)
    if not facts.error and (empty := judge_no_steps("burnin.run", facts)) is not None:
        return [empty]
    if facts.error:
        return [
            finding(
                "burnin.run",
                Status.ERROR,
                f"burn-in did not finish: {facts.error} ({steps} steps recorded and kept)",
                value=steps,
                unit="steps",
                action="read raw/<node>/burnin/trainer.log for the cause, fix it, rerun",
            )
        ]
    built, expected = facts.params_base, facts.params_expected_base
    if built is not None and expected is not None and built != expected:
        return [
            finding(
                "burnin.run",
                Status.ERROR,
                f"the model built has {built} base parameters, the FLOP accounting "
                f"expects {expected}: MFU would be wrong",
                action="report a bringup bug (recipe shape and model builder disagree)",
            )
        ]
    return [
        finding(
            "burnin.run",
            Status.PASS,
            f"{steps} steps of {facts.recipe} on {facts.world_size} ranks "
            f"({facts.device_name or facts.device_kind}, ZeRO-{facts.zero_stage}, {facts.dtype})",
            value=steps,
            unit="steps",
        )
    ]


def judge_loss(facts: BurninFacts, profile: Profile) -> list[Finding]:
    """burnin.loss: no NaN, and the loss went down."""
    if (empty := judge_no_steps("burnin.loss", facts)) is not None:
        return [empty]
    if facts.nan_step is not None:
        return [
            finding(
                "burnin.loss",
                Status.FAIL,
                f"loss became NaN/inf at step {facts.nan_step}",
                value=facts.nan_step,
                action="a GPU computed garbage: run `bringup check` (XID, ECC, remapped rows) "
                "and the gemm probe on this node; swap the GPU if it repeats",
            )
        ]
    losses = [s.loss for s in facts.steps if s.loss is not None]
    if len(losses) < MIN_STEPS_FOR_LOSS:
        return [
            finding(
                "burnin.loss",
                Status.ERROR,
                f"only {len(losses)} steps with a loss: too few to see a trend",
                action=f"run at least {MIN_STEPS_FOR_LOSS} steps (--steps or --minutes)",
            )
        ]
    window = max(1, len(losses) // 4)
    first = statistics.fmean(losses[:window])
    last = statistics.fmean(losses[-window:])
    drop = (first - last) / abs(first) if first else 0.0
    message = f"loss {first:.4f} -> {last:.4f} (mean of first and last {window} steps)"
    if drop < LOSS_DROP_MIN:
        return [
            finding(
                "burnin.loss",
                Status.FAIL,
                f"{message}: did not decrease by {LOSS_DROP_MIN:.0%}",
                value=round(drop, 6),
                expected=f">= {LOSS_DROP_MIN}",
                action="the node trains but does not learn: check GPU arithmetic (gemm probe, "
                "dcgmi diag) and the recipe's lr",
            )
        ]
    return [finding("burnin.loss", Status.PASS, message, value=round(drop, 6))]


def judge_checkpoint(facts: BurninFacts, profile: Profile) -> list[Finding]:
    """burnin.checkpoint: adapters saved whole, restored bit-identically, loss continues."""
    name = "burnin.checkpoint"
    if (empty := judge_no_steps(name, facts)) is not None:
        return [empty]
    if not facts.checkpoints:
        return [
            finding(
                name,
                Status.WARN,
                "no checkpoint was saved during the run (shorter than checkpoint_interval)",
                action="run longer or lower train.checkpoint_interval to test checkpoints",
            )
        ]
    empty = [c for c in facts.checkpoints if c.adapter_empty_tensors]
    if empty:
        c = empty[0]
        return [
            finding(
                name,
                Status.FAIL,
                f"checkpoint at step {c.step}: {c.adapter_empty_tensors} of {c.adapter_tensors} "
                "adapter tensors saved empty (ZeRO-3 partitions not gathered)",
                value=c.adapter_empty_tensors,
                action="gather with deepspeed.zero.GatheredParameters before saving "
                "(DeepSpeed #4295, peft #1710)",
            )
        ]
    r = facts.restore
    if r is None:
        return [
            finding(
                name,
                Status.WARN,
                f"{len(facts.checkpoints)} checkpoints saved, restore not verified (no step "
                "recorded after a checkpoint)",
                action="run at least one step past a checkpoint interval",
            )
        ]
    if not r.bit_identical:
        return [
            finding(
                name,
                Status.FAIL,
                f"checkpoint of step {r.step} did not restore bit-identically "
                f"(largest difference {r.max_abs_diff})",
                action="check the checkpoint disk (bringup check nvme) and host memory (ECC)",
            )
        ]
    if not r.loss_continues:
        return [
            finding(
                name,
                Status.FAIL,
                f"after restoring step {r.step} the loss of step {r.step + 1} is "
                f"{r.loss_replayed}, training saw {r.loss_recorded}",
                action="the restore lost state: report with raw/<node>/burnin/",
            )
        ]
    save = facts.checkpoints[-1].save_s
    return [
        finding(
            name,
            Status.PASS,
            f"step {r.step} restored bit-identically ({r.compared_tensors} adapter tensors), "
            f"loss continues; save {save:.2f} s, restore {r.restore_s:.2f} s",
            value=r.restore_s,
            unit="s",
        )
    ]


def judge_mfu(facts: BurninFacts, profile: Profile) -> list[Finding]:
    """burnin.mfu: model FLOP/s per GPU against the profile's dense BF16 peak (informative)."""
    peak = profile_peak(profile) if facts.device_kind == "cuda" else None
    return [judge_mfu_against(facts, peak, profile_ceiling(profile))]


def judge_mfu_against(
    facts: BurninFacts, peak: tuple[float, str] | None, ceiling: tuple[float, str] | None
) -> Finding:
    """The MFU figure against `peak`, and against a measured matmul `ceiling` when known.

    Both are (FLOP/s, what it is). Informative: the profile has no MFU floor; a drop is
    judged against a baseline (`judge_baseline`).
    """
    if (empty := judge_no_steps("burnin.mfu", facts)) is not None:
        return empty
    node = summarize("", facts, peak, ceiling)
    model = node.model_flops_per_s_per_gpu
    if model is None:
        return finding("burnin.mfu", Status.ERROR, "no timed step: model FLOP/s unknown")
    text = f"{_flops(model)} of model FLOPs per GPU"
    on = facts.device_name or facts.device_kind
    if facts.device_kind != "cuda":
        # A CPU run checks the machinery, it accepts no GPU: the same reason everywhere
        # (console, report), whatever --peak-tflops computed the figure against.
        mfu = f" (MFU {node.mfu:.1%} of the --peak-tflops given)" if node.mfu is not None else ""
        return finding(
            "burnin.mfu",
            Status.ERROR,
            f"{text} on {on}{mfu}: {NO_GPU_PEAK}",
            value=model,
            unit="FLOP/s",
            action="run the burn-in on the GPUs to accept them",
        )
    if node.mfu is None or peak is None:
        return finding(
            "burnin.mfu",
            Status.ERROR,
            f"{text} on {on}: no peak to compute MFU against (a GPU profile, or --peak-tflops)",
            value=model,
            unit="FLOP/s",
            action="give --profile NAME (the GPU's profile) or --peak-tflops",
        )
    text = f"MFU {node.mfu:.1%} ({text} of {peak[0] / 1e12:g} {peak[1]})"
    if node.mfu_vs_ceiling is not None and ceiling is not None:
        text += f"; {node.mfu_vs_ceiling:.1%} of the {ceiling[0] / 1e12:.4g} TFLOP/s {ceiling[1]}"
    return finding("burnin.mfu", Status.PASS, text, value=round(node.mfu, 6), unit="ratio")


def _flops(per_s: float) -> str:
    """FLOP/s as people read them: TFLOP/s on a GPU, GFLOP/s on a CPU."""
    return f"{per_s / 1e12:.3g} TFLOP/s" if per_s >= 1e12 else f"{per_s / 1e9:.3g} GFLOP/s"


def profile_peak(profile: Profile) -> tuple[float, str]:
    return profile.gpu.bf16_dense_tflops * 1e12, f"TFLOP/s dense BF16 ({profile.name} profile)"


def profile_ceiling(profile: Profile) -> tuple[float, str] | None:
    achievable = profile.gpu.bf16_achievable_tflops
    if achievable is None:
        return None
    return achievable * 1e12, f"matmul ceiling ({profile.name} profile)"


def judge_stragglers(facts: BurninFacts, profile: Profile) -> list[Finding]:
    """burnin.straggler: a rank's step time or a GPU's clock trails the others."""
    if (empty := judge_no_steps("burnin.straggler", facts)) is not None:
        return [empty]
    found: list[Finding] = []
    medians = {
        r.rank: statistics.median(measured(r.step_times_s, facts.warmup_steps))
        for r in facts.ranks
        if r.step_times_s
    }
    for rank, median in medians.items():
        others = [m for r, m in medians.items() if r != rank]
        if others and median > statistics.median(others) * (1 + STRAGGLER_STEP):
            found.append(
                finding(
                    "burnin.straggler",
                    Status.WARN,
                    f"rank {rank}: median step {median:.4g} s, "
                    f"others {statistics.median(others):.4g} s",
                    value=median,
                    unit="s",
                    action="run `bringup diagnose` on this node to see why this GPU is slow",
                )
            )
    telemetry = gpu_telemetry(facts.telemetry) if facts.telemetry else []
    found.extend(_slow_clocks(telemetry))
    if not found:
        what = f"{len(medians)} ranks' step times"
        if telemetry:
            what += f" and {len(telemetry)} GPUs' clocks"
        found.append(finding("burnin.straggler", Status.PASS, f"{what} within 5% of each other"))
    return found


def _slow_clocks(telemetry: list[GpuTelemetry]) -> list[Finding]:
    clocks = {g.gpu: g.sm_clock_median_hz for g in telemetry if g.sm_clock_median_hz}
    found = []
    for gpu, clock in clocks.items():
        others = [c for g, c in clocks.items() if g != gpu]
        if others and clock < statistics.median(others) * (1 - STRAGGLER_CLOCK):
            found.append(
                finding(
                    "burnin.straggler",
                    Status.WARN,
                    f"GPU{gpu}: SM clock under load {clock / 1e6:.0f} MHz, others "
                    f"{statistics.median(others) / 1e6:.0f} MHz",
                    value=clock,
                    unit="Hz",
                    action="see burnin.throttle; check cooling and power of this GPU",
                )
            )
    return found


def judge_throttle(facts: BurninFacts, profile: Profile) -> list[Finding]:
    """burnin.throttle: clocks event reasons seen while the GPUs were loaded."""
    if (empty := judge_no_steps("burnin.throttle", facts)) is not None:
        return [empty]
    timeline = facts.telemetry
    if timeline is None or not timeline.samples:
        reason = (timeline.error if timeline else None) or "no telemetry recorded"
        # On GPUs no samples means throttling was not measured, which must not pass as
        # "no throttling"; on the CPU there is nothing to sample.
        status = Status.ERROR if facts.device_kind == "cuda" else Status.SKIP
        return [finding("burnin.throttle", status, f"no telemetry samples: {reason}")]
    found = []
    for gpu in gpu_telemetry(timeline):
        seen = {r: s for r, s in gpu.reasons_share.items() if s > 0}
        for reason, seconds in gpu.throttle_time_s.items():
            if seconds > 0:
                seen.setdefault(reason, 0.0)
        hardware = [r for r in HARDWARE_REASONS if r in seen]
        software = [r for r in SOFTWARE_REASONS if r in seen]
        if not hardware and not software:
            continue
        status = Status.FAIL if hardware else Status.WARN
        names = hardware + software
        detail = ", ".join(f"{r} {_when(gpu, r)}" for r in names)
        found.append(
            finding(
                "burnin.throttle",
                status,
                f"GPU{gpu.gpu} throttled under load: {detail}",
                value=", ".join(names),
                action="hardware slowdown: check cooling, power supply and `nvidia-smi -q -d "
                "PERFORMANCE`; run `bringup diagnose`"
                if hardware
                else "clocks capped by power/thermal policy: check the power limit and cooling",
            )
        )
    if not found:
        gpus = len({s.gpu for s in timeline.samples})
        found.append(finding("burnin.throttle", Status.PASS, f"{gpus} GPUs: no throttling"))
    return found


def _when(gpu: GpuTelemetry, reason: str) -> str:
    seconds = gpu.throttle_time_s.get(reason)
    share = gpu.reasons_share.get(reason)
    parts = []
    if share:
        parts.append(f"{share:.0%} of loaded samples")
    if seconds:
        parts.append(f"{seconds:.1f} s")
    return f"({', '.join(parts)})" if parts else ""


TPS = "burnin.tokens_per_s"  # shown as everywhere else: the report's figure, to the digit


def judge_baseline(current: Baseline, previous: Baseline) -> list[Finding]:
    """burnin.baseline: each node's tokens/s and MFU against a previous baseline."""
    found: list[Finding] = []
    before = {n.node: n for n in previous.nodes}
    fleet_tps = previous.metrics.get("burnin.tokens_per_s")
    if current.recipe != previous.recipe:
        return [
            finding(
                "burnin.baseline",
                Status.ERROR,
                f"baseline is of recipe {previous.recipe}, this run {current.recipe}",
                action="compare runs of the same recipe",
            )
        ]
    for node in current.nodes:
        then = before.get(node.node)
        expected = then.tokens_per_s_per_gpu if then else fleet_tps
        now = node.tokens_per_s_per_gpu
        if expected is None or now is None:
            missing = finding(
                "burnin.baseline",
                Status.ERROR,
                "tokens/s missing",
                action="rerun `bringup burnin` on this node to record its tokens/s, then "
                "compare with `--baseline`",
            )
            found.append(replace(missing, node=node.node))
            continue
        ratio = now / expected
        where = "its baseline" if then else "the baseline fleet median"
        status = Status.FAIL if ratio < 1 - BASELINE_TOLERANCE else Status.PASS
        verdict = finding(
            "burnin.baseline",
            status,
            f"{shown(TPS, now)} per GPU, {ratio:.1%} of {where} ({shown(TPS, expected)})",
            value=round(ratio, 6),
            expected=f">= {1 - BASELINE_TOLERANCE:g}",
            unit="ratio",
            action="slower than its baseline: run `bringup diagnose` and `bringup check`"
            if status is Status.FAIL
            else None,
        )
        found.append(replace(verdict, node=node.node))
    return found


CHECKS = [
    Check("burnin.run", "burnin", judge_run, "the burn-in ran to its end"),
    Check("burnin.loss", "burnin", judge_loss, "no NaN, and the loss decreased"),
    Check("burnin.checkpoint", "burnin", judge_checkpoint, "adapters restore bit-identically"),
    Check("burnin.mfu", "burnin", judge_mfu, "model FLOP/s per GPU against the peak"),
    Check("burnin.straggler", "burnin", judge_stragglers, "no rank or GPU trails the others"),
    Check("burnin.throttle", "burnin", judge_throttle, "no throttling while loaded"),
]
