"""The burn-in checks and baseline, on recorded real outputs (no training here: fast).

Facts: tests/fixtures/burnin/cpu-tiny-2ranks.json, the `burnin` probe record of a real
`bringup burnin --local --recipe tiny --nproc 2` run on the project's CPU machine.
Telemetry: the H200 under load of tests/fixtures/smi/ugpuexp-h200-q-load.txt (utkuozdemir/
nvidia_gpu_exporter), replicated to 8 GPUs; each failing case edits one field and says which.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from bringup import baseline as baselines
from bringup.checks import burnin as checks
from bringup.facts import decode, read_record
from bringup.findings import Status
from bringup.node.parsers.dmon import parse_q_series
from bringup.node.probes.burnin import BurninFacts
from bringup.node.timeline import Timeline
from bringup.profile import load

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H200 = load("h200")


def recorded() -> BurninFacts:
    record = json.loads((FIXTURES / "burnin" / "cpu-tiny-2ranks.json").read_text())
    return decode(read_record(record))


def h200_timeline(gpus: int = 8) -> Timeline:
    one = parse_q_series((FIXTURES / "smi" / "ugpuexp-h200-q-load.txt").read_text())
    sample = one.samples[0]
    samples = [dataclasses.replace(sample, gpu=g) for g in range(gpus)]
    return Timeline(interval_s=1.0, gpus=gpus, samples=samples)


def as_gpu(facts: BurninFacts, timeline: Timeline) -> BurninFacts:
    """The recorded run as if it had run on the H200 the timeline was sampled on."""
    return dataclasses.replace(
        facts, device_kind="cuda", device_name="NVIDIA H200", telemetry=timeline
    )


def test_the_recorded_cpu_run_passes_all_but_mfu_which_accepts_no_cpu() -> None:
    facts = recorded()
    statuses = {c.name: [f.status for f in c.judge(facts, H200)] for c in checks.CHECKS}
    assert statuses == {
        "burnin.run": [Status.PASS],
        "burnin.loss": [Status.PASS],
        "burnin.checkpoint": [Status.PASS],
        "burnin.mfu": [Status.ERROR],  # a CPU: no GPU peak to judge by, never accepted
        "burnin.straggler": [Status.PASS],
        "burnin.throttle": [Status.SKIP],
    }
    [loss] = checks.judge_loss(facts, H200)
    assert loss.message == "loss 6.3169 -> 5.8247 (mean of first and last 3 steps)"
    [mfu] = checks.judge_mfu(facts, H200)
    assert mfu.message.endswith(
        "on cpu: a CPU burn-in: no GPU peak to judge MFU by, so no node is accepted by it"
    ), mfu.message
    assert mfu.unit == "FLOP/s" and isinstance(mfu.value, float)  # the figure is kept
    # Against a --peak-tflops given for the CPU: the MFU is said, the verdict the same.
    with_peak = checks.judge_mfu_against(facts, (0.05e12, "TFLOP/s given"), None)
    assert with_peak.status is Status.ERROR
    assert "(MFU " in with_peak.message and "of the --peak-tflops given)" in with_peak.message


def test_a_burnin_with_no_steps_is_an_error_in_every_check_naming_the_cause() -> None:
    """The trainer died at once (no torch): nothing is judged as passing, and each check
    says why there is no data."""
    cause = "trainer exited 1: ModuleNotFoundError: No module named 'torch'"
    dead = dataclasses.replace(recorded(), steps=[], ranks=[], checkpoints=[], restore=None)
    dead = dataclasses.replace(dead, error=cause, stopped_by=None)
    for check in checks.CHECKS:
        [found] = check.judge(dead, H200)
        assert found.status is Status.ERROR, check.name
        if check.name != "burnin.run":
            assert found.message == f"no data: the burn-in produced no steps ({cause})"
    [run] = checks.judge_run(dead, H200)
    assert cause in run.message
    # No error said, no steps all the same: still no pass.
    silent = dataclasses.replace(dead, error=None)
    [straggler] = checks.judge_stragglers(silent, H200)
    assert (straggler.status, straggler.message) == (
        Status.ERROR,
        "no data: the burn-in produced no steps (the trainer reported no step and no error)",
    )


def test_nan_and_flat_loss_fail() -> None:
    facts = recorded()
    [nan] = checks.judge_loss(dataclasses.replace(facts, nan_step=9), H200)
    assert (nan.status, nan.message) == (Status.FAIL, "loss became NaN/inf at step 9")
    flat = copy.deepcopy(facts)
    for s in flat.steps:  # edit: every loss set to the first one
        s.loss = facts.steps[0].loss
    [verdict] = checks.judge_loss(flat, H200)
    assert verdict.status is Status.FAIL
    assert verdict.message.endswith(": did not decrease by 1%")


def test_checkpoint_that_did_not_restore_fails() -> None:
    facts = copy.deepcopy(recorded())
    assert facts.restore is not None
    facts.restore.bit_identical, facts.restore.max_abs_diff = False, 0.5  # edit
    [verdict] = checks.judge_checkpoint(facts, H200)
    assert verdict.status is Status.FAIL
    assert verdict.message == (
        "checkpoint of step 6 did not restore bit-identically (largest difference 0.5)"
    )
    facts = copy.deepcopy(recorded())
    facts.restore.loss_continues = False  # edit
    [verdict] = checks.judge_checkpoint(facts, H200)
    assert verdict.status is Status.FAIL and "the loss of step 7 is" in verdict.message


def test_trainer_error_keeps_the_steps() -> None:
    facts = dataclasses.replace(recorded(), error="rank 1: RuntimeError: CUDA error")
    [verdict] = checks.judge_run(facts, H200)
    assert verdict.status is Status.ERROR
    assert verdict.message == (
        "burn-in did not finish: rank 1: RuntimeError: CUDA error (12 steps recorded and kept)"
    )


def test_mfu_against_the_profile_peak_and_ceiling() -> None:
    facts = as_gpu(recorded(), h200_timeline())
    [verdict] = checks.judge_mfu(facts, H200)
    node = baselines.summarize("n", facts, checks.profile_peak(H200), None)
    assert node.model_flops_per_s_per_gpu is not None
    mfu = node.model_flops_per_s_per_gpu / 989e12
    assert verdict.status is Status.PASS and verdict.value == round(mfu, 6)
    assert "of 989 TFLOP/s dense BF16 (h200 profile)" in verdict.message
    assert "of the 794.5 TFLOP/s matmul ceiling (h200 profile)" in verdict.message


def test_healthy_telemetry_passes_and_a_slow_gpu_is_named() -> None:
    facts = as_gpu(recorded(), h200_timeline())
    assert [f.status for f in checks.judge_throttle(facts, H200)] == [Status.PASS]
    assert [f.status for f in checks.judge_stragglers(facts, H200)] == [Status.PASS]
    timeline = h200_timeline()
    timeline.samples[5].sm_clock_hz = 1_500_000_000  # edit: GPU5 at 1500 of 1980 MHz
    [verdict] = checks.judge_stragglers(as_gpu(recorded(), timeline), H200)
    assert verdict.status is Status.WARN
    assert verdict.message == "GPU5: SM clock under load 1500 MHz, others 1980 MHz"


@pytest.mark.parametrize(
    ("reason", "status"),
    [("hw_thermal_slowdown", Status.FAIL), ("sw_power_cap", Status.WARN)],
)
def test_throttle_reasons_under_load(reason: str, status: Status) -> None:
    timeline = h200_timeline()
    timeline.samples[2].clock_event_reasons = [reason]  # edit: one reason on GPU2
    [verdict] = checks.judge_throttle(as_gpu(recorded(), timeline), H200)
    assert verdict.status is status
    assert verdict.message == f"GPU2 throttled under load: {reason} (100% of loaded samples)"


def test_baseline_roundtrip_and_bad_file(tmp_path: Path) -> None:
    facts = recorded()
    node = baselines.summarize("vm", facts, None, None)
    base = baselines.build([node], "tiny", None, "2026-01-01T00:00:00+00:00")
    path = tmp_path / "baseline.json"
    baselines.write(path, base)
    assert baselines.load(path) == base
    # 12 steps less 2 warm-up; the p99 of 10 values is the largest (nearest rank).
    times = [s.time_s for s in facts.steps][2:]
    assert node.steps_measured == 10 and node.step_time_p99_s == max(times)
    broken = json.loads(path.read_text())
    broken["schema_version"] = 2
    path.write_text(json.dumps(broken))
    with pytest.raises(baselines.BaselineError, match=r"not a burn-in baseline \(schema_version"):
        baselines.load(path)


def test_percentile_is_nearest_rank() -> None:
    assert baselines.percentile([3.0, 1.0, 2.0, 4.0], 50) == 2.0
    assert baselines.percentile([3.0, 1.0, 2.0, 4.0], 99) == 4.0
    assert baselines.percentile([5.0], 99) == 5.0
