"""The FLOPs of the burn-in's LoRA model as PyTorch's own FLOP counter counts them.

bringup/node/burnin/flops.py computes model FLOPs per token from the shape; here the model
the trainer builds (trainer.build_model: transformers' Llama, peft's LoRA) runs one forward
and backward on the CPU under torch.utils.flop_counter.FlopCounterMode, which counts every
matrix product autograd executes. Without gradient checkpointing that is exactly the model
work, so the two must agree; with it, the counter sees the hardware work (recompute, and
the input gradients that enable_input_require_grads forces).
"""

from __future__ import annotations

import dataclasses

import pytest

from bringup import recipe as recipes
from bringup.node.burnin import flops
from bringup.node.burnin.recipe import ModelShape

pytestmark = pytest.mark.burnin
TINY = recipes.load("tiny").model


def counted_per_token(checkpointing: bool) -> tuple[float, flops.FlopsPerToken]:
    """(FLOPs the counter saw per token, what flops.per_token says) for the tiny recipe."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from bringup.node.burnin import trainer

    recipe = recipes.load("tiny")
    # ZeRO-2 builds the model whole on this device (ZeRO-3 needs a process group); the
    # shape, LoRA and precision are the recipe's.
    recipe = dataclasses.replace(
        recipe,
        deepspeed=dataclasses.replace(recipe.deepspeed, zero_stage=2),
        train=dataclasses.replace(recipe.train, gradient_checkpointing=checkpointing),
    )
    model = trainer.build_model(recipe, {}, torch.device("cpu"))
    model.train()
    seq_len = recipe.train.seq_len
    tokens = torch.randint(0, recipe.model.vocab_size, (1, seq_len))
    # The math attention: its products are matrix products the counter sees (the CPU's
    # fused kernel is not among the operators it counts). The same FLOPs, PaLM's 12·L·H·Q·T.
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(input_ids=tokens, labels=tokens).loss.backward()
    computed = flops.per_token(recipe.model, seq_len, recipe.lora, checkpointing)
    return counter.get_total_flops() / seq_len, computed


def norm_weights(shape: ModelShape) -> int:
    """N counts the RMSNorm weights (two a layer, one final), as PaLM's N counts every
    parameter; no matrix product touches them, so the counter does not."""
    return (2 * shape.num_layers + 1) * shape.hidden_size


def test_lora_model_flops_are_what_autograd_executes() -> None:
    """The first layer's q/k/v read the frozen embedding through a frozen norm: autograd
    computes no input gradient for them (nor for their adapters' A), and MFU must not
    count one."""
    seen, computed = counted_per_token(checkpointing=False)
    assert computed.model == computed.hardware
    # forward 2·N and the input gradients 2·N: the norm weights counted 4 times
    assert computed.model - 4 * norm_weights(TINY) == seen


def test_with_checkpointing_the_counter_sees_the_hardware_flops() -> None:
    seen, computed = counted_per_token(checkpointing=True)
    # and the recomputed forward, 2·N: the norms 6 times in all, and the output projection
    # twice more than executed (transformers does not checkpoint it; flops._recompute)
    output = TINY.hidden_size * TINY.vocab_size
    assert computed.hardware - 6 * norm_weights(TINY) - 2 * output == seen
    assert computed.model < computed.hardware
