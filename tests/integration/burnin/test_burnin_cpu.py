"""The tiny recipe trained for real on CPU: DeepSpeed's CPU accelerator, gloo, ZeRO-3, LoRA.

Each test starts `bringup burnin` (or the probe) in a child process as a user would, then
reads what landed in the run directory: the loss fell, MFU came from the recorded step
times, the checkpoint restored bit for bit, the baseline file validates.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from bringup import baseline as baselines
from bringup.facts import ProbeRecord, decode, read_record
from bringup.node.probes.burnin import BurninFacts
from tests.support.cli import run_cli, valid_envelope
from tests.support.timing import scaled

# DeepSpeed's CPU op, built once a session (tests/conftest.py), not again by the first rank.
pytestmark = [pytest.mark.burnin, pytest.mark.usefixtures("local_deepspeed_cpu_op")]

PEAK_TFLOPS = 0.05  # an arbitrary CPU "peak" so that MFU is computed (and checkable) here


def burnin(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli("burnin", *args, timeout=600)


def burnin_facts(run_dir: Path) -> BurninFacts:
    facts = json.loads(next((run_dir / "facts").glob("*.json")).read_text())
    return decode(read_record(facts["probes"]["burnin"]))


@pytest.fixture(scope="module", params=[1, 2], ids=["1rank", "2ranks"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("burnin") / "run"
    proc = burnin(
        "--local", "--recipe", "tiny", "--nproc", request.param,
        "--peak-tflops", PEAK_TFLOPS, "--out", out, "--json",
    )  # fmt: skip
    # Trained to the end, and NOT ACCEPTED all the same: a CPU accepts no GPU node (the
    # report says the same, for the same reason: burnin.mfu).
    assert proc.returncode == 1, proc.stderr[-3000:]
    doc = valid_envelope(json.loads(proc.stdout))  # the schema of every --json (docs/json.md)
    assert (doc["command"], doc["exit_code"], doc["verdict"]) == ("burnin", 1, "NOT ACCEPTED")
    # --json: the document; progress (step lines, the closing summary) only on a terminal
    progress = [line for line in proc.stderr.splitlines() if "burnin: step" in line]
    assert progress == [] and " nodes in " not in proc.stderr, proc.stderr[-3000:]
    return {"doc": doc, "out": out, "ranks": request.param, "stderr": proc.stderr}


@pytest.fixture(scope="module")
def shown(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A burn-in run for people (no --json): its progress on stderr, a pipe here."""
    out = tmp_path_factory.mktemp("burnin") / "run"
    temp = tmp_path_factory.mktemp("node-tmp")  # the node's /tmp, for what the run leaves there
    # As a node's environment: no inductor cache folder set (tests/conftest.py sets one).
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    proc = run_cli(
        "burnin", "--local", "--recipe", "tiny", "--peak-tflops", PEAK_TFLOPS, "--out", out,
        env={**env, "TMPDIR": str(temp)}, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    return {"out": out, "stderr": proc.stderr, "temp": temp}


def test_each_step_prints_its_progress_line_as_it_ends(shown: dict) -> None:
    """One console line per step (step, loss, tokens/s, step time, ETA), on stderr, before
    the run's summary; the record keeps the heartbeat (when the last step ended)."""
    run = shown
    lines = run["stderr"].splitlines()
    pattern = re.compile(
        r"^\S+  burnin: step (\d+)/12 loss [0-9.e+-]+ [0-9,]+ tok/s [0-9.]+ s/step "
        # A loaded machine trains slower: the ETA passes two minutes ("ETA 2 min 05 s").
        r"ETA (\d+ s|\d+ min \d\d s|\d+ h \d\d min)$"
    )
    steps = [int(m.group(1)) for line in lines if (m := pattern.match(line))]
    assert steps == list(range(1, 13)), run["stderr"][-3000:]
    summary = next(i for i, line in enumerate(lines) if line.startswith("1 node in "))
    assert all(pattern.match(line) is None for line in lines[summary:])
    facts = burnin_facts(run["out"])
    assert facts.last_step_s is not None and 0 < facts.last_step_s <= facts.duration_s
    assert facts.quiet_s is not None and facts.quiet_s >= 0


def test_the_run_leaves_nothing_in_the_nodes_temp(shown: dict) -> None:
    # torch.distributed.run makes a log folder in $TMPDIR unless told where, and never
    # removes it (239 on this machine's /tmp); torch's inductor makes its cache folder there.
    assert sorted(p.name for p in shown["temp"].iterdir()) == []


def test_every_check_passes_or_says_why_not(run: dict) -> None:
    statuses = {f["check"]: f["status"] for f in run["doc"]["findings"]}
    assert statuses == {
        "burnin.run": "PASS",
        "burnin.loss": "PASS",
        "burnin.checkpoint": "PASS",
        "burnin.straggler": "PASS",
        "burnin.throttle": "SKIP",  # no NVIDIA driver here
        # A CPU: no GPU peak to judge MFU by. The one finding of that cause: no
        # report.profile beside it (a CPU has no profile to give).
        "burnin.mfu": "ERROR",
    }
    mfu = next(f for f in run["doc"]["findings"] if f["check"] == "burnin.mfu")
    assert "no GPU peak to judge MFU by" in mfu["message"]
    throttle = next(f for f in run["doc"]["findings"] if f["check"] == "burnin.throttle")
    assert throttle["message"].startswith("no telemetry samples: no NVIDIA driver found")


def test_loss_decreases(run: dict) -> None:
    facts = burnin_facts(run["out"])
    losses = [s.loss for s in facts.steps]
    assert len(losses) == 12 and all(loss is not None for loss in losses)
    assert statistics.fmean(losses[-3:]) < statistics.fmean(losses[:3]) * 0.99
    assert facts.nan_step is None and facts.stopped_by == "steps" and facts.error is None


def test_mfu_comes_from_the_recorded_step_times(run: dict) -> None:
    facts = burnin_facts(run["out"])
    node = baselines.load(run["out"]).nodes[0]
    assert facts.world_size == run["ranks"] == len(facts.ranks)
    # tiny: 128 tokens x 2 sequences x 2 micro-batches per GPU per step
    assert facts.tokens_per_step_per_gpu == 512
    # FLOPs of the shape (flops.py), checked against the model the trainer really built.
    assert facts.params_base == facts.params_expected_base == 139_584
    assert facts.params_adapter == facts.params_expected_adapter == 65_536
    times = [s.time_s for s in facts.steps][facts.warmup_steps :]
    median = statistics.median(times)
    assert node.step_time_median_s == median
    # Rounded once to 0.01 tokens/s, the figure every output shows (docs/json.md).
    assert node.tokens_per_s_per_gpu == round(512 / median, 2)
    model = round(512 / median, 2) * facts.model_flops_per_token
    assert node.model_flops_per_s_per_gpu == pytest.approx(model, rel=1e-12)
    assert node.mfu == pytest.approx(model / (PEAK_TFLOPS * 1e12), rel=1e-12)
    assert node.hfu is not None and node.hfu > node.mfu  # gradient checkpointing recomputes
    assert run["doc"]["data"]["baseline"]["metrics"]["burnin.mfu"] == node.mfu


def test_checkpoint_restores_bit_identically(run: dict) -> None:
    from safetensors.torch import load_file

    facts = burnin_facts(run["out"])
    assert [c.step for c in facts.checkpoints] == [6, 12]
    assert all(c.adapter_empty_tensors == 0 and c.adapter_tensors == 28 for c in facts.checkpoints)
    restore = facts.restore
    assert restore is not None and restore.step == 6
    assert restore.bit_identical is True and restore.max_abs_diff == 0.0
    assert restore.loss_replayed == pytest.approx(restore.loss_recorded, rel=1e-6)
    assert restore.loss_recorded == facts.steps[6].loss  # the loss of step 7
    adapters = load_file(run["out"] / "work/checkpoints/step6/adapter/adapter_model.safetensors")
    q_a = adapters["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"]
    assert tuple(q_a.shape) == (32, 64)  # r x hidden: gathered, not a ZeRO-3 shard
    assert all(t.numel() > 0 for t in adapters.values())


def test_baseline_file_validates(run: dict) -> None:
    base = baselines.load(run["out"] / "baseline.json")
    assert base.schema_version == 1 and base.kind == "bringup.node.burnin.baseline"
    assert base.recipe == "tiny" and len(base.nodes) == 1
    node = base.nodes[0]
    assert node.steps_measured == 10  # 12 steps less 2 warm-up
    assert node.checkpoint_bit_identical is True
    assert len(node.peak_memory_bytes) == run["ranks"]
    assert all(m and m > 0 for m in node.peak_memory_bytes)
    assert base.metrics["burnin.tokens_per_s"] == node.tokens_per_s_per_gpu


def test_resume_continues_the_loss_and_is_judged_against_a_baseline(
    run: dict, tmp_path: Path
) -> None:
    """A new process resumes from step 6: steps 7-12 repeat the first run's losses."""
    if run["ranks"] != 1:
        pytest.skip("once is enough")
    # The baseline claims 100x the throughput measured: this run must FAIL against it.
    base = baselines.load(run["out"])
    inflated = base.model_copy(deep=True)
    claimed = base.nodes[0].tokens_per_s_per_gpu * 100
    inflated.nodes[0].tokens_per_s_per_gpu = claimed
    path = tmp_path / "fast.json"
    baselines.write(path, inflated)
    checkpoint = run["out"] / "work" / "checkpoints" / "step6"
    proc = burnin("--local", "--recipe", "tiny", "--steps", 6, "--resume", checkpoint,
                  "--baseline", path, "--checkpoint-interval", 3,
                  "--out", tmp_path / "run", "--json")  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]
    verdict = next(
        f for f in json.loads(proc.stdout)["findings"] if f["check"] == "burnin.baseline"
    )
    now = baselines.load(tmp_path / "run").nodes[0].tokens_per_s_per_gpu
    assert verdict["status"] == "FAIL" and verdict["value"] == round(now / claimed, 6)
    assert verdict["message"].endswith(f"of its baseline ({claimed:.2f} tokens/s)")
    first, resumed = burnin_facts(run["out"]), burnin_facts(tmp_path / "run")
    assert resumed.resumed_from_step == 6
    assert [s.step for s in resumed.steps] == [7, 8, 9, 10, 11, 12]
    expected = [s.loss for s in first.steps[6:]]
    assert [s.loss for s in resumed.steps] == pytest.approx(expected, rel=1e-5)
    # The frozen base (not in a ZeRO-3 checkpoint) was rebuilt identically from the seed.
    fingerprint = [
        json.loads((d / "work" / "rank0.json").read_text())["base_fingerprint"]
        for d in (run["out"], tmp_path / "run")
    ]
    assert fingerprint[0] == fingerprint[1]


def test_saving_without_gathering_is_caught(tmp_path: Path) -> None:
    """The ZeRO-3 trap: adapters saved from the shards are empty tensors; the check FAILs."""
    code = f"""
import json, dataclasses
from bringup import recipe
from bringup.node.probes import burnin
r = recipe.with_overrides(recipe.load("tiny"), steps=3, checkpoint_interval=2)
out = burnin.collect(burnin.Params(recipe=recipe.to_json(r), nproc=1,
                     deepspeed_config=recipe.deepspeed_config(r),
                     work_dir={str(tmp_path / "work")!r}, gather_adapters=False))
print(json.dumps(dataclasses.asdict(out.facts)))
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=scaled(600)
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = ProbeRecord(probe="burnin", ok=True, facts=json.loads(proc.stdout.splitlines()[-1]))
    facts = decode(record)
    assert facts.checkpoints[0].adapter_empty_tensors == facts.checkpoints[0].adapter_tensors == 28
    from bringup.checks.burnin import judge_checkpoint
    from bringup.profile import load

    [verdict] = judge_checkpoint(facts, load("h200"))
    assert verdict.status == "FAIL"
    assert verdict.message == (
        "checkpoint at step 2: 28 of 28 adapter tensors saved empty "
        "(ZeRO-3 partitions not gathered)"
    )


def test_zero2_builds_the_same_model_and_learns(run: dict, tmp_path: Path) -> None:
    """ZeRO-2 (selectable in the recipe): the same kind of initial weights, the loss falls."""
    if run["ranks"] != 1:
        pytest.skip("once is enough")
    proc = burnin("--local", "--recipe", "tiny", "--zero", 2, "--nproc", 1,
                  "--out", tmp_path / "run", "--json")  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]  # a CPU run: never ACCEPTED (burnin.mfu)
    statuses = {f["check"]: f["status"] for f in json.loads(proc.stdout)["findings"]}
    assert statuses["burnin.loss"] == statuses["burnin.checkpoint"] == "PASS"
    zero2, zero3 = burnin_facts(tmp_path / "run"), burnin_facts(run["out"])
    assert zero2.zero_stage == 2 and zero3.zero_stage == 3
    # The same initialisation, though not bit for bit (the modules draw their random numbers
    # in another order): within 1e-3, where transformers' own init would start 1.4% lower.
    assert zero2.steps[0].loss == pytest.approx(zero3.steps[0].loss, rel=1e-3)
