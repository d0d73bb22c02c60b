"""The plan: model shapes from configs, the rate it rests on, time, cost, and the check
against the recorded CPU burn-in of the tiny recipe (tests/fixtures/burnin/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bringup import profile
from bringup.planning import memory as M
from bringup.planning import models
from bringup.planning import plan as P
from bringup.planning.throughput import ASSUMED_MFU, Measured, bus_bytes
from tests.support.planning import gpu_baseline, tiny_cpu_baseline

B300 = M.device_of(profile.load("b300"))
H200 = M.device_of(profile.load("h200"))
H100 = M.device_of(profile.load("h100"))

# meta-llama/Llama-2-7b-hf config.json, the fields bringup reads (and a few it does not)
LLAMA2_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-05,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
}


# --- model shapes --------------------------------------------------------------------------


def test_a_config_json_gives_the_shape(tmp_path: Path) -> None:
    folder = tmp_path / "Llama-2-7b-hf"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA2_CONFIG))
    chosen = models.load(str(folder))  # a folder holding config.json, as a snapshot
    assert chosen.name == "Llama-2-7b-hf" and chosen.recipe is None
    s = chosen.shape
    assert (s.hidden_size, s.num_layers, s.num_heads, s.num_kv_heads) == (4096, 32, 32, 32)
    assert (s.intermediate_size, s.vocab_size, s.tie_word_embeddings) == (11008, 32000, False)
    assert models.load(str(folder / "config.json")).shape == s


def test_config_defaults_are_stated() -> None:
    data = {k: v for k, v in LLAMA2_CONFIG.items() if k != "num_key_value_heads"}
    shape, notes = models.shape_from_config({**data, "model_type": "gemma"}, "c.json")
    assert shape.num_kv_heads == 32
    assert any("num_key_value_heads" in n for n in notes)
    assert any("'gemma' planned as a Llama-shaped decoder" in n for n in notes)


def test_qwen2_has_qkv_biases_and_a_multimodal_config_its_text_model() -> None:
    qwen = {**LLAMA2_CONFIG, "model_type": "qwen2"}
    assert models.shape_from_config(qwen, "q")[0].attention_bias is True
    wrapped = {"model_type": "llava", "text_config": LLAMA2_CONFIG, "vision_config": {}}
    shape, notes = models.shape_from_config(wrapped, "m")
    assert shape.hidden_size == 4096 and "text_config" in notes[0]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"n_embd": 768, "n_layer": 12}, "c.json: not a decoder config.json: no hidden_size"),
        ({**LLAMA2_CONFIG, "hidden_size": None}, "no hidden_size"),
        ({**LLAMA2_CONFIG, "num_local_experts": 8}, "mixture-of-experts"),
        ({**LLAMA2_CONFIG, "head_dim": 256}, "head_dim 256 is not hidden_size"),
        ({**LLAMA2_CONFIG, "num_key_value_heads": 5}, "multiple of num_kv_heads"),
        ([1, 2], "not a JSON object"),
    ],
)
def test_configs_that_cannot_be_planned(data: object, message: str) -> None:
    with pytest.raises(models.ModelError, match=message):
        models.shape_from_config(data, "c.json")


def test_an_unknown_model_names_the_choices() -> None:
    with pytest.raises(models.ModelError, match=r"unknown model 'llama-9b'.*tiny"):
        models.load("llama-9b")


# --- the rate and the time ---------------------------------------------------------------


def request(model: str = "llama-70b-lora", **kw: object) -> P.Request:
    values: dict = {"model": models.load(model), "method": "lora"}
    values.update(kw)
    return P.Request(**values)


def test_without_a_baseline_the_mfu_is_assumed_and_said() -> None:
    plan = P.make(request(tokens=2e9), B300, [])
    assert plan.efficiency.source == "assumed"
    assert (
        plan.efficiency.label
        == "assumed HFU 35% (MFU 35% without recompute), not measured (no --baseline)"
    )
    # 35% of the peak is the hardware rate: the recipe checkpoints, so the recompute's
    # FLOPs come out of it and the MFU is lower by model / hardware FLOPs per token.
    t = plan.timing
    assert plan.mfu == pytest.approx(
        ASSUMED_MFU * t.model_flops_per_token / t.hardware_flops_per_token
    )
    # time = tokens x hardware FLOPs per token / (GPUs x peak x 35%)
    expected = 2e9 * t.hardware_flops_per_token / (8 * 2250e12 * ASSUMED_MFU)
    assert plan.timing.seconds == pytest.approx(expected)


def test_a_baseline_of_the_same_shape_is_measured() -> None:
    base = gpu_baseline("llama-8b-lora", "NVIDIA H200", mfu=0.42, hfu=0.42)
    plan = P.make(request("llama-8b-lora", tokens=1e9), H200, [base])
    assert plan.efficiency.source == "measured"
    assert plan.efficiency.label == "measured: llama-8b-lora on NVIDIA H200 (runs/llama-8b-lora)"
    assert plan.mfu == pytest.approx(0.42)


def test_what_differs_from_the_measured_run_is_said() -> None:
    base = gpu_baseline("llama-8b-lora", "NVIDIA H200", mfu=0.42, hfu=0.42)
    plan = P.make(request("llama-8b-lora", seq_len=8192, method="full"), B300, [base])
    label = plan.efficiency.label
    assert "method full (the burn-in trains LoRA)" in label
    assert "measured on NVIDIA H200, planned on b300" in label
    assert "sequence length 8192 (measured 4096)" in label
    # Another GPU: the baseline's HFU on the B300's peak.
    assert plan.efficiency.hardware_flops_per_s == pytest.approx(0.42 * 2250e12)


def test_the_nearest_measured_recipe_is_labelled() -> None:
    near = gpu_baseline("llama-8b-lora", "NVIDIA H200", mfu=0.40, hfu=0.40)
    far = gpu_baseline("llama-1b-lora", "NVIDIA H200", mfu=0.20, hfu=0.20)
    plan = P.make(request("qwen-32b-lora"), H200, [far, near])
    assert plan.efficiency.source == "nearest"
    assert plan.efficiency.label.startswith("nearest measured recipe: llama-8b-lora (8.03 B")


def test_checkpointing_carries_the_hardware_rate_over() -> None:
    # The 8B baseline ran without checkpointing; the 70B plan recomputes the forward, so
    # its model FLOP rate is the measured hardware rate x model/hardware FLOPs per token.
    base = gpu_baseline("llama-8b-lora", "NVIDIA H200", mfu=0.40, hfu=0.40)
    plan = P.make(request("llama-70b-lora"), H200, [base])
    t = plan.timing
    assert plan.mfu == pytest.approx(0.40 * t.model_flops_per_token / t.hardware_flops_per_token)
    assert plan.mfu < 0.32


def test_samples_times_epochs_and_the_cost() -> None:
    plan = P.make(request(tokens=50_000 * 900 * 3, price_per_gpu_hour=2.5), B300, [])
    hours = plan.timing.seconds / 3600
    assert plan.cost.gpu_hours == pytest.approx(8 * hours)
    assert plan.cost.amount == pytest.approx(8 * hours * 2.5)


def test_the_acceptance_run_is_costed_too() -> None:
    accept = P.Acceptance("acceptance", 1200, 1800, "recipe llama-70b-lora: 30 min")
    plan = P.make(request(tokens=1e9, price_per_gpu_hour=3.0), B300, [], accept)
    # (1200 s suite budget + 1800 s burn-in) x 8 GPUs = 6.67 GPU-hours, x 3.0 = 20.0
    assert plan.cost.acceptance_gpu_hours == pytest.approx(3000 * 8 / 3600)
    assert plan.cost.acceptance_amount == pytest.approx(20.0)


def test_one_node_relies_on_the_nvlink_floor_and_several_on_the_network_floor() -> None:
    one = P.make(request(gpus=8), H100, []).communication
    assert one is not None and one.busbw_gb_s == 450
    assert one.source == "profile h100: nccl.allreduce_busbw_min_gb_s (floor, one node)"
    two = P.make(request(gpus=16), H100, [])
    assert two.nodes == 2 and two.communication is not None
    assert two.communication.busbw_gb_s == 430
    assert "allreduce_busbw_multinode_min_gb_s" in two.communication.source
    b300 = P.make(request(gpus=16), B300, []).communication
    assert b300 is not None and b300.busbw_gb_s is None
    assert b300.source.startswith("none: profile b300 states no multi-node NCCL floor")


def test_zero3_traffic_by_hand() -> None:
    # 70B LoRA, ZeRO-3 on 8: gathers (forward, backward, recompute) of the bf16 base and
    # fp32 adapters, 3 x (70,553,706,496 x 2 + 414,187,520 x 4), and the adapters'
    # gradients reduce-scattered, 414,187,520 x 4; all x (8 - 1)/8.
    s = P.setup_for(request(gpus=8), B300)
    weights = 70_553_706_496 * 2 + 414_187_520 * 4
    assert bus_bytes(s) == round(7 / 8 * (3 * weights + 414_187_520 * 4))


def test_bad_requests() -> None:
    with pytest.raises(P.PlanError, match="tokens must be positive"):
        P.make(request(tokens=-1), B300, [])
    with pytest.raises(P.PlanError, match="micro_batch must be positive"):
        P.make(request(micro_batch=0), B300, [])


# --- the check against reality -------------------------------------------------------------


def test_the_tiny_cpu_burnin_is_reproduced() -> None:
    measured = tiny_cpu_baseline()
    check = P.reproduce(measured)
    ratios = {r.figure: r for r in check.ratios}
    # tokens/s: 512 tokens per step per rank over the median step time, measured; the
    # plan's from the measured FLOP rate over flops.py's FLOPs per token of the shape.
    # The measured figure is rounded to 0.01 tokens/s (tokens_per_s_per_gpu): ~3e-7 of it.
    assert ratios["tokens/s per GPU"].ratio == pytest.approx(1.0, abs=1e-6)
    assert ratios["step time"].ratio == pytest.approx(1.0, abs=1e-6)
    # memory: the process (461,623,296 B, the nano run) + the tiny model's 3,917,440 B
    # = 465,540,736 B against the larger rank's max RSS, 489,246,720 B: 0.952
    memory = ratios["memory peak"]
    assert memory.predicted == 465_540_736 and memory.measured == 489_246_720
    assert memory.ratio == pytest.approx(0.9516, abs=1e-4)
    assert not check.flagged


def test_a_mismatch_is_flagged_and_noted() -> None:
    measured = tiny_cpu_baseline()
    node = measured.baseline.nodes[0]
    slower = node.model_copy(update={"tokens_per_s_per_gpu": node.tokens_per_s_per_gpu * 0.8})
    base = measured.baseline.model_copy(update={"nodes": [slower]})
    check = P.reproduce(Measured("x", base, measured.recipe))
    assert [r.figure for r in check.flagged] == ["tokens/s per GPU"]
    plan = P.make(request("tiny"), M.cpu_device(2), [Measured("x", base, measured.recipe)])
    missed = "the model misses tiny's measured tokens/s per GPU by +25%"
    assert any(n.startswith(missed) for n in plan.notes)


def test_a_baseline_without_its_recipe_is_not_checked() -> None:
    measured = tiny_cpu_baseline()
    check = P.reproduce(Measured("x", measured.baseline, None))
    assert check.problem == "its recipe does not load" and not check.ratios


def test_the_plan_document_has_every_figure() -> None:
    plan = P.make(request(tokens=2e9, price_per_gpu_hour=3.0), B300, [tiny_cpu_baseline()])
    doc = json.loads(json.dumps(P.to_json(plan)))  # plain JSON all the way down
    assert doc["kind"] == "bringup.plan" and doc["schema_version"] == 1
    assert set(doc["memory"]) >= {"weights", "gradients", "optimizer_state", "activations"}
    assert [row["gpus"] for row in doc["by_gpus"]] == [1, 2, 4, 8]
    assert all(row["fits"] for row in doc["by_gpus"])
    assert doc["time"]["mfu_source"] == "assumed"  # a CPU baseline says nothing of a B300
    assert doc["checks"][0]["ratios"][0]["figure"] == "tokens/s per GPU"
    assert doc["cost"]["amount"] == pytest.approx(doc["cost"]["gpu_hours"] * 3.0)
