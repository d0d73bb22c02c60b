"""The activation count of bringup/planning/memory.py against what PyTorch really keeps.

A small Llama (transformers, SDPA) with and without peft LoRA runs one forward under
torch.autograd.graph.saved_tensors_hooks; the storages it keeps for the backward (each
once, parameters left out) are what the memory model counts per layer, plus the final
norm's fp32 input and the log-softmax output of the loss.
"""

from __future__ import annotations

import pytest

from bringup.node.burnin.recipe import LoraSpec, ModelShape
from bringup.planning import memory as M

pytestmark = pytest.mark.burnin

H, HEADS, KV, INTER, VOCAB, T, B, R = 256, 4, 2, 512, 1000, 64, 2, 8
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def measured(method: str, precision: str, layers: int, ckpt: bool) -> float:
    """Bytes per token the forward leaves for the backward."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=H,
        intermediate_size=INTER,
        num_hidden_layers=layers,
        num_attention_heads=HEADS,
        num_key_value_heads=KV,
        attn_implementation="sdpa",
        use_cache=False,
    )
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(default)
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
        model.enable_input_require_grads()
    if method == "lora":
        lora = LoraConfig(r=R, lora_alpha=2 * R, target_modules=TARGETS, task_type="CAUSAL_LM")
        model = get_peft_model(model, lora)
    model.train()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params and storage.nbytes():
            kept[storage.data_ptr()] = storage.nbytes()
        return t

    ids = torch.randint(0, VOCAB, (B, T), generator=torch.Generator().manual_seed(0))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, labels=ids)
    return sum(kept.values()) / (B * T)


def modelled(method: str, precision: str, layers: int, ckpt: bool) -> int:
    shape = ModelShape(
        family="llama",
        hidden_size=H,
        num_layers=layers,
        num_heads=HEADS,
        num_kv_heads=KV,
        intermediate_size=INTER,
        vocab_size=VOCAB,
        rope_theta=10000.0,
    )
    s = M.Setup(shape, method, LoraSpec(r=R), T, B, ckpt, 0, 1, precision)  # type: ignore[arg-type]
    per_layer, _ = M.layer_activation_bytes(s)
    e = s.element_bytes
    kept = layers * (e * H if ckpt else per_layer)
    return kept + 4 * VOCAB + 4 * H + (e * H if method == "full" else 0)


@pytest.mark.parametrize(
    "case",
    [
        ("full", "bf16", 2, False),
        ("lora", "bf16", 2, False),
        ("lora", "bf16", 4, False),
        ("lora", "fp32", 2, False),
        ("lora", "bf16", 4, True),
    ],
    ids=lambda c: "-".join(map(str, c)),
)
def test_the_count_is_what_pytorch_keeps(case: tuple) -> None:
    got, expected = measured(*case), modelled(*case)
    print(case, got, expected, round(expected / got, 4))
    assert expected == pytest.approx(got, rel=0.05)
