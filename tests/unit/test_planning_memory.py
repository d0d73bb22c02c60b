"""The memory model pinned to arithmetic done by hand (bringup/planning/memory.py).

Shapes: Llama 2 7B (meta-llama/Llama-2-7b-hf config.json: hidden 4096, 32 layers, 32 heads,
32 KV heads, intermediate 11008, vocab 32000, untied) and the recipes' Llama 3.1 70B.

Llama 2 7B parameters, by hand:
  per layer: q, k, v, o 4 x 4096·4096 = 67,108,864; MLP 3 x 4096·11008 = 135,266,304;
             two norms 8,192 -> 202,383,360; x 32 layers = 6,476,267,520
  + final norm 4,096 + embedding 32000·4096 = 131,072,000 + output 131,072,000
  = 6,738,415,616 (the published "6.7B")
"""

from __future__ import annotations

import json

import pytest

from bringup import profile
from bringup.node.burnin import flops
from bringup.node.burnin.recipe import LoraSpec, ModelShape
from bringup.planning import memory as M
from bringup.planning import models
from tests.support import FIXTURES

LLAMA2_7B = ModelShape(
    family="llama",
    hidden_size=4096,
    num_layers=32,
    num_heads=32,
    num_kv_heads=32,
    intermediate_size=11008,
    vocab_size=32000,
    rope_theta=10000.0,
    max_position_embeddings=4096,
)
P_7B = 6_738_415_616
# LoRA r=32 on the seven projections, per layer: q, k, v, o 32·(4096+4096) = 262,144 each
# -> 1,048,576; gate, up, down 32·(4096+11008) = 483,328 each -> 1,449,984;
# 2,498,560 per layer x 32 = 79,953,920
A_7B = 79_953_920
B300 = M.device_of(profile.load("b300"))
H100 = M.device_of(profile.load("h100"))


def setup(method: str = "full", **kw: object) -> M.Setup:
    values: dict = {
        "shape": LLAMA2_7B,
        "method": method,
        "lora": LoraSpec(),
        "seq_len": 4096,
        "micro_batch": 1,
        "gradient_checkpointing": False,
        "zero_stage": 0,
        "gpus": 1,
    }
    values.update(kw)
    return M.Setup(**values)


def test_the_7b_shape_has_its_published_parameter_count() -> None:
    assert flops.parameter_counts(LLAMA2_7B).total == P_7B
    assert flops.adapter_parameters(LLAMA2_7B, LoraSpec()) == A_7B


def test_full_fine_tune_7b_needs_16_bytes_per_parameter_before_activations() -> None:
    # Mixed precision with Adam (ZeRO paper, section 3.1): bf16 weights 2 + bf16 gradients
    # 2 + fp32 master weights, momentum and variance 12 = 16 B/param, on one GPU (no ZeRO).
    mem = M.memory(setup("full"), B300)
    assert mem.weights.bytes == 2 * P_7B == 13_476_831_232
    assert mem.gradients.bytes == 2 * P_7B
    assert mem.optimizer.bytes == 12 * P_7B == 80_860_987_392
    # 16 x 6,738,415,616 = 107,814,649,856 B: about 16 B/param x 7e9 = 112 GB, far over 70 GB
    assert mem.model_states == 16 * P_7B == 107_814_649_856
    assert mem.model_states > 70e9


def test_lora_7b_fixed_cost_is_under_15_gb() -> None:
    # Frozen bf16 base 2 x 6,738,415,616 = 13,476,831,232; adapters in fp32 (peft's
    # default on a 16-bit base): weights 4 + gradients 4 + Adam moments 8 = 16 B/param,
    # 16 x 79,953,920 = 1,279,262,720. Together 14,756,093,952 B < 15 GB.
    mem = M.memory(setup("lora"), B300)
    assert mem.weights.bytes == 2 * P_7B + 4 * A_7B
    assert mem.gradients.bytes == 4 * A_7B
    assert mem.optimizer.bytes == 8 * A_7B
    assert mem.model_states == 14_756_093_952 < 15e9


@pytest.mark.parametrize(
    ("stage", "expected"),
    [
        # ZeRO paper figure 1 with Ψ = P_7B, N_d = 64, K = 12 (per GPU):
        (0, 16 * P_7B),  # baseline: (2 + 2 + K)Ψ
        (1, 4 * P_7B + 12 * P_7B / 64),  # P_os: 2Ψ + 2Ψ + KΨ/N_d
        (2, 2 * P_7B + 14 * P_7B / 64),  # P_os+g: 2Ψ + (2 + K)Ψ/N_d
        (3, 16 * P_7B / 64),  # P_os+g+p: (2 + 2 + K)Ψ/N_d
    ],
)
def test_zero_stages_shard_as_the_zero_paper_says(stage: int, expected: float) -> None:
    mem = M.memory(setup("full", zero_stage=stage, gpus=64), B300)
    buckets = [p for c in mem.consumers for p in c.parts if "bucket" in p.what]
    gathered = [p for c in mem.consumers for p in c.parts if "gathered" in p.what]
    extra = sum(p.bytes for p in buckets + gathered)  # DeepSpeed's buffers, not the paper's
    assert mem.model_states - extra == pytest.approx(expected, abs=3)


def test_deepspeed_buffers_are_counted_apart() -> None:
    # ZeRO-3: one reduction bucket of 5e8 elements in the gradients' dtype (bf16: 1 GB);
    # stages 1-2 keep two (overlap_comm). Gathered: the largest module (the embedding,
    # 32000·4096 = 131,072,000 params) + the next layer (202,383,360), in bf16.
    three = M.memory(setup("full", zero_stage=3, gpus=8), B300)
    parts = {p.what: p.bytes for c in three.consumers for p in c.parts}
    assert parts["DeepSpeed reduction bucket ×1"] == 500_000_000 * 2
    gathered = next(b for w, b in parts.items() if w.startswith("gathered"))
    assert gathered == (202_383_360 + 202_383_360) * 2  # a layer outweighs the embedding
    two = M.memory(setup("full", zero_stage=2, gpus=8), B300)
    assert sum(p.bytes for p in two.gradients.parts if "bucket" in p.what) == 2 * 10**9
    # stage 1 stages its reduction in an fp32 accumulator: 2 x 5e8 x 4 bytes
    one = M.memory(setup("full", zero_stage=1, gpus=8), B300)
    assert sum(p.bytes for p in one.gradients.parts if "bucket" in p.what) == 4 * 10**9


def test_qlora_stores_the_projections_in_4_bits() -> None:
    # Projections 32 x (4 x 4096² + 3 x 4096·11008) = 6,476,005,376 weights at 4.127 bits
    # (QLoRA: NF4 + double-quantized constants); the other 262,410,240 stay bf16.
    quantized = M.quantized_parameters(LLAMA2_7B)
    assert quantized == 6_476_005_376
    frozen, adapters = M.weight_bytes(setup("qlora"))
    assert frozen == pytest.approx(quantized * 4.127 / 8 + (P_7B - quantized) * 2)
    assert adapters == 4 * A_7B
    assert 3.8e9 < frozen < 3.9e9  # vs 13.5 GB in bf16


# --- activations ---------------------------------------------------------------------------

# Bytes per token PyTorch kept for the backward (torch.autograd.graph.saved_tensors_hooks,
# storages counted once, parameters left out) after the forward of transformers 5.24.0
# LlamaForCausalLM with SDPA, peft 0.21.2 LoRA r=8 on the seven projections, torch
# 2.13.0+cpu; hidden 256, 4 heads, 2 KV heads, intermediate 512, vocab 1000, batch 2 x 64.
# tests/integration/burnin/test_plan_activations.py measures them again.
SMALL = ModelShape(
    family="llama",
    hidden_size=256,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    intermediate_size=512,
    vocab_size=1000,
    rope_theta=10000.0,
)
MEASURED = {  # (method, precision, layers, checkpointing) -> bytes per token
    ("full", "bf16", 2, False): 25700,
    ("lora", "bf16", 2, False): 34328,
    ("lora", "bf16", 4, False): 64520,
    ("lora", "fp32", 2, False): 35480,
    ("lora", "bf16", 2, True): 6060,
    ("lora", "bf16", 4, True): 7084,
}


def saved_after_forward(method: str, precision: str, layers: int, ckpt: bool) -> int:
    """What the model says is kept when the forward ends: the layers (or their inputs),
    the final norm's fp32 input, the log-softmax output (full: the output projection's
    input too). The loss's backward transients come later and are not in MEASURED."""
    shape = ModelShape(**{**SMALL.__dict__, "num_layers": layers})
    s = M.Setup(shape, method, LoraSpec(r=8), 64, 2, ckpt, 0, 1, precision)  # type: ignore[arg-type]
    e = s.element_bytes
    per_layer, _ = M.layer_activation_bytes(s)
    kept = layers * (e * shape.hidden_size if ckpt else per_layer)
    return (
        kept + 4 * shape.vocab_size + 4 * shape.hidden_size + (e * 256 if method == "full" else 0)
    )


@pytest.mark.parametrize("key", list(MEASURED))
def test_activation_count_matches_what_pytorch_keeps(key: tuple) -> None:
    assert saved_after_forward(*key) == pytest.approx(MEASURED[key], rel=0.05)


def test_layer_activations_by_hand() -> None:
    # bf16 LoRA, Llama 2 7B layer, per token: norms 2·4·4096 = 32,768; SDPA q, k, v, out
    # 2·(2·4096 + 2·4096) = 32,768; MLP 3·2·11008 = 66,048; fp32 adapter input copies
    # 4·(6·4096 + 11008) = 142,336; A outputs 4·32·7 = 896 -> 274,816
    per_layer, copies = M.layer_activation_bytes(setup("lora", precision="bf16"))
    assert (per_layer, copies) == (274_816, 142_336)
    # full: no adapters, but the trained weights' inputs e(2h + i) = 38,400 and the norms'
    # 2eh = 16,384: 32,768 + 32,768 + 66,048 + 38,400 + 16,384 = 186,368
    assert M.layer_activation_bytes(setup("full")) == (186_368, 0)


def test_checkpointing_keeps_only_layer_inputs() -> None:
    on = M.memory(setup("lora", gradient_checkpointing=True), B300).activations
    off = M.memory(setup("lora"), B300).activations
    # 4096 tokens x 32 layers x 2 x 4096 = 1,073,741,824 bytes of layer inputs
    assert on.parts[0].bytes == 1_073_741_824
    assert off.parts[0].bytes == 4096 * 32 * 274_816
    assert on.bytes < off.bytes / 5


# --- verdicts ------------------------------------------------------------------------------


def test_70b_lora_on_b300_under_zero3_fits_on_1_2_4_and_8_gpus() -> None:
    r = models.load("llama-70b-lora")
    s = M.Setup(r.shape, "lora", r.lora, 4096, 1, True, 3, 8)
    rows = {o.setup.gpus: o for o in M.by_gpu_count(s, B300, [1, 2, 4, 8])}
    # frozen base 70,553,706,496 params x 2 B = 141.1 GB, shared by G under ZeRO-3
    assert rows[1].memory.weights.parts[0].bytes == 141_107_412_992
    assert rows[8].memory.weights.parts[0].bytes == 141_107_412_992 // 8
    expected_gb = {1: 162.59, 2: 92.56, 4: 55.62, 8: 37.16}
    for g, gb in expected_gb.items():
        assert rows[g].fit.allocated_bytes / 1e9 == pytest.approx(gb, abs=0.01)
        assert rows[g].fit.fits is True  # B300: 285.5 GB per GPU (profile floor)
    # On 80 GB H100s the same job needs 4 GPUs.
    h100 = {o.setup.gpus: o.fit.fits for o in M.by_gpu_count(s, H100, [1, 2, 4, 8])}
    assert h100 == {1: False, 2: False, 4: True, 8: True}


def test_the_reserve_is_kept_free() -> None:
    mem = M.memory(setup("full"), H100)
    verdict = M.fit(mem, H100)
    assert verdict.reserve_bytes == 2 * 1024**3 + round(0.10 * mem.allocated)
    assert verdict.headroom_bytes == H100.memory_bytes - mem.allocated - verdict.reserve_bytes
    assert verdict.fits is False  # 134 GB on an 80 GB GPU


def test_a_cpu_is_not_judged() -> None:
    cpu = M.cpu_device(2)
    mem = M.memory(setup("lora"), cpu)
    assert mem.runtime_bytes == M.CPU_RUNTIME_BYTES and M.fit(mem, cpu).fits is None


def test_the_cpu_runtime_is_the_recorded_nano_run() -> None:
    base = json.loads((FIXTURES / "plan" / "cpu-nano-2ranks-baseline.json").read_text())
    peaks = [p for node in base["nodes"] for p in node["peak_memory_bytes"]]
    assert M.CPU_RUNTIME_BYTES == max(peaks) == 461_623_296
