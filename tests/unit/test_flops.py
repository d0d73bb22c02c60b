"""FLOP accounting pinned to values computed by hand from the public Llama 3 shapes.

Shapes (meta-llama config.json): 8B hidden 4096, 32 layers, 32 heads, 8 KV heads, head dim
128, intermediate 14336, vocab 128256; 70B hidden 8192, 80 layers, 64 heads, 8 KV heads,
head dim 128, intermediate 28672, vocab 128256. LoRA r=32 on the seven projections.
Sequence length T = 4096 throughout.
"""

from __future__ import annotations

import dataclasses

import pytest

from bringup import recipe
from bringup.node.burnin import flops
from bringup.node.burnin.recipe import LoraSpec, ModelShape

T = 4096
LORA = LoraSpec(r=32, alpha=64)


def llama(hidden: int, layers: int, heads: int, inter: int) -> ModelShape:
    return ModelShape(
        family="llama",
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=8,
        intermediate_size=inter,
        vocab_size=128256,
        rope_theta=500000.0,
    )


LLAMA_8B = llama(4096, 32, 32, 14336)
LLAMA_70B = llama(8192, 80, 64, 28672)

# --- Llama 3 8B, by hand --------------------------------------------------------------
# per layer: q 4096·4096 = 16,777,216; k = v = 4096·1024 = 4,194,304; o 16,777,216
#            -> attention 41,943,040; MLP 3·4096·14336 = 176,160,768; 2 norms 8,192
#            -> 218,112,000; × 32 layers = 6,979,584,000
# N = 6,979,584,000 + final norm 4,096 + output 4096·128256 = 525,336,576 -> 7,504,924,672
# total = N + input embedding 525,336,576 = 8,030,261,248 (the published "8.03B")
N_8B = 7_504_924_672
TOTAL_8B = 8_030_261_248
# attention 12·L·H·Q·T = 12·32·32·128·4096 = 6,442,450,944
ATTN_8B = 6_442_450_944
# adapters per layer: q 32·(4096+4096) = 262,144; k = v = 32·(4096+1024) = 163,840;
# o 262,144; gate = up = down = 32·(4096+14336) = 589,824 -> 2,621,440; × 32 = 83,886,080
ADAPTER_8B = 83_886_080
# full: 6N + attn = 45,029,548,032 + 6,442,450,944 = 51,471,998,976
FULL_8B = 51_471_998_976
# LoRA: 4N + attn + 6A = 30,019,698,688 + 6,442,450,944 + 503,316,480 = 36,965,466,112,
# less the input gradients of layer 0's q/k/v, which read the frozen embedding:
# base 2·(16,777,216 + 2·4,194,304) = 50,331,648, adapters' A 2·32·4096·3 = 786,432
# -> 51,118,080 -> 36,914,348,032
LORA_8B = 36_914_348_032
FIRST_LAYER_8B = 51_118_080
# recompute: 2N + 4·L·H·Q·T + 2A = 15,009,849,344 + 2,147,483,648 + 167,772,160
#          = 17,325,105,152; hardware = 36,914,348,032 + 17,325,105,152 + the first-layer
# gradients that enable_input_require_grads brings back 51,118,080 = 54,290,571,264
LORA_8B_HW_CKPT = 54_290_571_264

# --- Llama 3 70B, by hand -------------------------------------------------------------
# per layer: q 8192·8192 = 67,108,864; k = v = 8192·1024 = 8,388,608; o 67,108,864
#            -> 150,994,944; MLP 3·8192·28672 = 704,643,072; 2 norms 16,384
#            -> 855,654,400; × 80 = 68,452,352,000
# N = 68,452,352,000 + 8,192 + output 8192·128256 = 1,050,673,152 -> 69,503,033,344
# total = N + 1,050,673,152 = 70,553,706,496 (the published "70.6B")
N_70B = 69_503_033_344
TOTAL_70B = 70_553_706_496
# attention 12·80·64·128·4096 = 32,212,254,720
ATTN_70B = 32_212_254_720
# adapters per layer: q 32·16384 = 524,288; k = v = 32·9216 = 294,912; o 524,288;
# gate = up = down = 32·36864 = 1,179,648 -> 5,177,344; × 80 = 414,187,520
ADAPTER_70B = 414_187_520
# full: 6N + attn = 417,018,200,064 + 32,212,254,720 = 449,230,454,784
FULL_70B = 449_230_454_784
# LoRA: 4N + attn + 6A = 278,012,133,376 + 32,212,254,720 + 2,485,125,120 = 312,709,513,216,
# less layer 0's q/k/v input gradients: 2·(67,108,864 + 2·8,388,608) + 2·32·8192·3
# = 169,345,024 -> 312,540,168,192
LORA_70B = 312_540_168_192


def test_llama_8b_parameters() -> None:
    counts = flops.parameter_counts(LLAMA_8B)
    assert counts.non_embedding == N_8B
    assert counts.total == TOTAL_8B
    assert flops.adapter_parameters(LLAMA_8B, LORA) == ADAPTER_8B
    assert flops.attention_flops(LLAMA_8B, T) == ATTN_8B
    assert flops.first_layer_input_gradients(LLAMA_8B, LORA) == FIRST_LAYER_8B


def test_llama_8b_flops_per_token() -> None:
    full = flops.per_token(LLAMA_8B, T, lora=None, gradient_checkpointing=False)
    assert full.model == full.hardware == FULL_8B
    lora = flops.per_token(LLAMA_8B, T, lora=LORA, gradient_checkpointing=False)
    assert lora.model == lora.hardware == LORA_8B


def test_recompute_counts_in_hfu_not_mfu() -> None:
    ckpt = flops.per_token(LLAMA_8B, T, lora=LORA, gradient_checkpointing=True)
    assert ckpt.model == LORA_8B
    assert ckpt.hardware == LORA_8B_HW_CKPT


def test_llama_70b_parameters_and_flops() -> None:
    counts = flops.parameter_counts(LLAMA_70B)
    assert counts.non_embedding == N_70B
    assert counts.total == TOTAL_70B
    assert flops.adapter_parameters(LLAMA_70B, LORA) == ADAPTER_70B
    assert flops.attention_flops(LLAMA_70B, T) == ATTN_70B
    assert flops.per_token(LLAMA_70B, T, None, False).model == FULL_70B
    assert flops.per_token(LLAMA_70B, T, LORA, False).model == LORA_70B


def test_shipped_recipes_match_the_hand_computed_shapes() -> None:
    long_context = {"max_position_embeddings": 131072}
    assert recipe.load("llama-8b-lora").model == dataclasses.replace(LLAMA_8B, **long_context)
    assert recipe.load("llama-70b-lora").model == dataclasses.replace(LLAMA_70B, **long_context)


def test_tied_embeddings_still_count_the_output_matmul() -> None:
    # Llama 3.2 1B ties the output projection to the input embedding: one table held,
    # two uses. Per layer: q 2048² = 4,194,304; k = v = 2048·512 = 1,048,576; o 4,194,304;
    # MLP 3·2048·8192 = 50,331,648; norms 4,096 -> 60,821,504; × 16 = 973,144,064.
    # N = 973,144,064 + 2,048 + 2048·128256 (262,668,288) = 1,235,814,400
    # total = 973,146,112 + one table 262,668,288 = 1,235,814,400 (the published "1.24B")
    shape = recipe.load("llama-1b-lora").model
    counts = flops.parameter_counts(shape)
    assert counts.non_embedding == 1_235_814_400
    assert counts.total == 1_235_814_400


def test_qwen2_bias_parameters() -> None:
    # Qwen2.5 32B: per layer q 5120² = 26,214,400; k = v = 5120·1024 = 5,242,880;
    # o 26,214,400; MLP 3·5120·27648 = 424,673,280; q/k/v biases 5120 + 1024 + 1024 = 7,168;
    # norms 10,240 -> 487,605,248; × 64 = 31,206,735,872; + norm 5,120
    # + output 5120·152064 = 778,567,680 -> N = 31,985,308,672;
    # total = N + embedding 778,567,680 = 32,763,876,352 (the published "32.8B")
    counts = flops.parameter_counts(recipe.load("qwen-32b-lora").model)
    assert counts.non_embedding == 31_985_308_672
    assert counts.total == 32_763_876_352


def test_mfu_is_model_flops_over_peak() -> None:
    # 3000 tokens/s per GPU on the 8B LoRA: 3000 · 36,914,348,032 = 110.743 TFLOP/s;
    # over the H200's 989 TFLOP/s dense BF16 = 0.111974...
    model_flops_per_s = 3000 * LORA_8B
    assert model_flops_per_s == 110_743_044_096_000
    assert flops.utilization(model_flops_per_s, 989e12) == pytest.approx(0.1119747665, rel=1e-9)
    with pytest.raises(ValueError):
        flops.utilization(1.0, 0.0)
