"""`bringup plan` as a user calls it (in-process): bad input is one line and exit 2; the
table and the JSON carry the figures, the baseline's ratios among them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bringup import baseline as baselines
from bringup.suite import load as load_suite
from tests.support.cli import invoke
from tests.support.planning import gpu_baseline, tiny_cpu_baseline


@pytest.fixture
def tiny_baseline(tmp_path: Path) -> Path:
    """The recorded CPU burn-in of the tiny recipe, written as a run's baseline.json."""
    run = tmp_path / "burnin-run"
    run.mkdir()
    baselines.write(run / "baseline.json", tiny_cpu_baseline().baseline)
    return run


def one_line(args: list[str | Path]) -> str:
    result = invoke("plan", *args)
    assert result.exit_code == 2, result.output
    lines = [line for line in (result.stderr or result.output).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "llama-9b", "--method", "lora", "--gpu", "b300"], "unknown model 'llama-9b'"),
        (["--model", "tiny", "--method", "dpo", "--gpu", "b300"], "--method 'dpo': choose full"),
        (
            ["--model", "tiny", "--method", "lora", "--gpu", "b300", "--tokens", "-5"],
            "--tokens -5: must be positive",
        ),
        (
            ["--model", "tiny", "--method", "lora", "--gpu", "b300", "--tokens", "lots"],
            "--tokens 'lots': not a number",
        ),
        (
            ["--model", "tiny", "--method", "lora", "--gpu", "b300", "--samples", "10"],
            "--samples and --avg-tokens go together",
        ),
        (
            [
                "--model",
                "tiny",
                "--method",
                "lora",
                "--gpu",
                "b300",
                "--tokens",
                "1B",
                "--epochs",
                "2",
            ],
            "give --tokens or --samples/--avg-tokens/--epochs, not both",
        ),
        (
            ["--model", "tiny", "--method", "lora", "--gpu", "b300", "--zero", "4"],
            "--zero 4: ZeRO stage must be 0, 1, 2 or 3",
        ),
        (
            ["--model", "tiny", "--method", "lora", "--gpu", "b300", "--gpus", "0"],
            "--gpus 0: must be positive",
        ),
        (["--model", "tiny", "--method", "lora", "--gpu", "b900"], "unknown profile 'b900'"),
        (["--model", "tiny", "--method", "lora"], "say which GPU: --gpu NAME"),
        (
            ["--model", "tiny", "--method", "lora", "--gpu", "b300", "--price-per-gpu-hour", "-1"],
            "must not be negative",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], message: str) -> None:
    assert message in one_line(args)


def test_a_config_without_the_fields(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "gpt2", "n_embd": 768, "n_layer": 12}))
    line = one_line(["--model", config, "--method", "full", "--gpu", "h100"])
    assert f"{config}: not a decoder config.json: no hidden_size, num_hidden_layers" in line


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("max_position_embeddings", "1e400", "max_position_embeddings inf: not a finite number"),
        ("rope_theta", "NaN", "rope_theta nan: not a finite number"),
        ("rope_theta", "-Infinity", "rope_theta -inf: not a finite number"),
        ("hidden_size", "4" + "0" * 40, "hidden_size 4" + "0" * 39),
        ("max_position_embeddings", "8192.5", "max_position_embeddings 8192.5: not a whole number"),
    ],
)
def test_a_non_finite_or_huge_number_is_one_line_naming_the_field(
    tmp_path: Path, field: str, value: str, says: str
) -> None:
    """`"max_position_embeddings": 1e400` raised OverflowError (issue 23, found 11)."""
    shape = {
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "intermediate_size": 11008,
        "vocab_size": 32000,
    }
    text = json.dumps(shape)[:-1] + f', "{field}": {value}}}'
    config = tmp_path / "config.json"
    config.write_text(text)
    line = one_line(["--model", config, "--method", "lora", "--gpu", "h200"])
    assert line.startswith(f"error: {config}: {says}"), line


def test_a_baseline_of_another_schema_version(tmp_path: Path, tiny_baseline: Path) -> None:
    data = json.loads((tiny_baseline / "baseline.json").read_text())
    data["schema_version"] = 2
    other = tmp_path / "baseline.json"
    other.write_text(json.dumps(data))
    line = one_line(["--model", "tiny", "--method", "lora", "--baseline", other])
    assert line.endswith("baseline.json: baseline schema_version 2; this bringup reads version 1")


def test_a_file_that_is_no_baseline(tmp_path: Path) -> None:
    bad = tmp_path / "b.json"
    bad.write_text('{"schema_version": 1}')
    line = one_line(["--model", "tiny", "--method", "lora", "--baseline", bad])
    assert "not a burn-in baseline" in line


def test_70b_lora_on_b300_table(tmp_path: Path) -> None:
    args = ["--model", "llama-70b-lora", "--method", "lora", "--gpu", "b300", "--tokens", "2B"]
    result = invoke("plan", *args, "--price-per-gpu-hour", "3")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "plan — llama-70b-lora: LoRA r=32 on 8 × b300 (NVIDIA B300 SXM6 AC), ZeRO-3" in text
    assert "verdict: fits, headroom 242.49 GB (85%)" in text
    for row in ("1 162.59 104.52 fits", "2 92.56 181.55 fits", "4 55.62 222.18 fits"):
        assert row in text
    assert "assumed HFU 35% (MFU 35% without recompute), not measured (no --baseline)" in text
    budget_min = round(load_suite("acceptance").budget_s / 60)
    assert (
        f"the acceptance run: suite acceptance {budget_min} min (its budget) + burn-in 30 min"
        in text
    )


def test_json_is_one_document_with_the_ratios(tiny_baseline: Path) -> None:
    result = invoke(
        "plan",
        "--model",
        "tiny",
        "--method",
        "lora",
        "--baseline",
        tiny_baseline,
        "--tokens",
        "1M",
        "--json",
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)["data"]
    assert doc["device"]["name"] == "cpu" and doc["setup"]["gpus"] == 2
    assert doc["time"]["mfu_source"] == "measured"
    ratios = {r["figure"]: r["ratio"] for r in doc["checks"][0]["ratios"]}
    assert ratios["tokens/s per GPU"] == pytest.approx(1.0)
    assert ratios["memory peak"] == pytest.approx(0.9516, abs=1e-4)
    # 1e6 tokens at the measured 1,559 tokens/s per rank (512 tokens per 0.328 s step), 2 ranks
    tps = doc["time"]["tokens_per_s_per_gpu"]
    assert tps == pytest.approx(512 / 0.328361)
    assert doc["time"]["seconds"] == pytest.approx(1e6 / (2 * tps))


def test_what_would_make_it_fit_is_shown() -> None:
    result = invoke(
        "plan",
        "--model",
        "llama-70b-lora",
        "--method",
        "full",
        "--gpu",
        "h100",
        "--gpus",
        "1",
        "--micro-batch",
        "4",
        "--no-gradient-checkpointing",
    )
    assert result.exit_code == 1, result.output  # does not fit: no success
    text = " ".join(result.output.split())
    assert "verdict: does not fit" in text
    assert "What would make it fit, cheapest first" in text
    assert "QLoRA" in text  # a method that changes what is trained, last


def test_the_acceptance_cost_takes_the_baseline_runs_own_duration(tmp_path: Path) -> None:
    measured = gpu_baseline("llama-8b-lora", "NVIDIA B300 SXM6 AC", mfu=0.4, hfu=0.4)
    run = tmp_path / "burnin"
    run.mkdir()
    base = measured.baseline.model_copy(update={"profile": "b300"})
    baselines.write(run / "baseline.json", base)
    manifest = {
        "command": "burnin",
        "started_at": "2026-11-30T10:00:00+00:00",
        "ended_at": "2026-11-30T10:25:00+00:00",
        "status": "complete",
    }
    (run / "manifest.json").write_text(json.dumps(manifest))
    result = invoke(
        "plan",
        "--model",
        "llama-8b-lora",
        "--method",
        "lora",
        "--baseline",
        run,
        "--tokens",
        "1B",
        "--json",
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)["data"]
    assert doc["device"]["name"] == "b300"  # the baseline's profile
    assert doc["time"]["mfu_source"] == "measured"
    # The acceptance suite's budget + the run's 25 min, on 8 GPUs.
    budget = load_suite("acceptance").budget_s
    assert doc["acceptance"]["burnin_s"] == 1500
    assert doc["acceptance"]["burnin_source"] == f"the burn-in of {run} took 25 min"
    assert doc["cost"]["acceptance_gpu_hours"] == pytest.approx((budget + 1500) * 8 / 3600)


def test_a_run_directory_without_a_baseline(tmp_path: Path) -> None:
    line = one_line(["--model", "tiny", "--method", "lora", "--baseline", tmp_path])
    assert line.endswith(f"cannot read {tmp_path}/baseline.json: No such file or directory")
