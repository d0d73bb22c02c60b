"""FLOP accounting of a decoder fine-tune: FLOPs per token, MFU and HFU. Pure arithmetic.

Per token (PaLM, Chowdhery et al. 2022, appendix B; docs/reference.md#flops-and-mfu):

    full fine-tune           6·N + 12·L·H·Q·T
    LoRA, frozen base        4·N + 12·L·H·Q·T + 6·A

N: the matmul parameters a token passes through: every parameter of the decoder layers and
the final norm, plus the output projection (hidden × vocab), whether or not it is tied to
the input embedding; the input embedding itself is a lookup (no FLOPs) and is left out,
as torchtitan does. L layers, H query heads, Q head dim, T sequence length; 12·L·H·Q·T is
the attention score and value products, forward and backward (the PaLM convention: the
causal half is not subtracted). With a frozen base the forward costs 2N and the backward
only the input gradients, another 2N (no weight gradients); A adapter parameters cost the
usual 6 each (forward, input and weight gradients). One exception: the first layer's
q/k/v projections read the frozen input embedding through a frozen norm, so nothing needs
their input gradients, of the base weights (2·in·out each) or of the adapters' A (2·r·in):
autograd computes none, and MFU counts none (`first_layer_input_gradients`).

Model FLOPs are what MFU counts. Gradient checkpointing recomputes the forward, about
2·N + 4·L·H·Q·T (+ 2·A) more, and with LoRA it needs the embedding output to require a
gradient (transformers' enable_input_require_grads), which brings those first-layer input
gradients back: that is hardware FLOPs (HFU), never MFU, or a run could raise its MFU by
doing more work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bringup.node.burnin.recipe import LoraSpec, ModelShape


@dataclass(frozen=True)
class ParameterCounts:
    embedding: int  # the input embedding table (vocab × hidden)
    non_embedding: int  # N: layers, final norm and the output projection (see above)
    total: int  # parameters the model holds (a tied output projection counted once)


@dataclass(frozen=True)
class FlopsPerToken:
    model: int  # what MFU counts
    hardware: int  # what the GPU executes, recompute included (HFU)


def projection_shapes(shape: ModelShape) -> dict[str, tuple[int, int]]:
    """(in_features, out_features) of every projection in one decoder layer."""
    h, q_out = shape.hidden_size, shape.num_heads * shape.head_dim
    kv_out, inter = shape.num_kv_heads * shape.head_dim, shape.intermediate_size
    return {
        "q_proj": (h, q_out),
        "k_proj": (h, kv_out),
        "v_proj": (h, kv_out),
        "o_proj": (q_out, h),
        "gate_proj": (h, inter),
        "up_proj": (h, inter),
        "down_proj": (inter, h),
    }


def layer_parameters(shape: ModelShape) -> int:
    """Parameters of one decoder layer: projections, q/k/v biases (Qwen2), two RMSNorms."""
    weights = sum(i * o for i, o in projection_shapes(shape).values())
    biases = 0
    if shape.attention_bias:
        biases = (shape.num_heads + 2 * shape.num_kv_heads) * shape.head_dim
    return weights + biases + 2 * shape.hidden_size


def parameter_counts(shape: ModelShape) -> ParameterCounts:
    embedding = shape.vocab_size * shape.hidden_size
    output = shape.hidden_size * shape.vocab_size
    decoder = shape.num_layers * layer_parameters(shape) + shape.hidden_size  # + final norm
    total = embedding + decoder + (0 if shape.tie_word_embeddings else output)
    return ParameterCounts(embedding=embedding, non_embedding=decoder + output, total=total)


def adapter_parameters(shape: ModelShape, lora: LoraSpec) -> int:
    """LoRA parameters: r·(in + out) for every adapted projection of every layer."""
    shapes = projection_shapes(shape)
    per_layer = sum(lora.r * (shapes[t][0] + shapes[t][1]) for t in lora.targets)
    return shape.num_layers * per_layer


# The projections of a decoder layer that read its input (through the input norm).
FIRST_READERS = ("q_proj", "k_proj", "v_proj")


def first_layer_input_gradients(shape: ModelShape, lora: LoraSpec) -> int:
    """FLOPs per token of the input gradients of the first layer's q/k/v (and their
    adapters' A): their input, the frozen embedding through a frozen norm, needs none."""
    shapes = projection_shapes(shape)
    base = sum(2 * shapes[p][0] * shapes[p][1] for p in FIRST_READERS)
    adapters = sum(2 * lora.r * shapes[p][0] for p in FIRST_READERS if p in lora.targets)
    return base + adapters


def attention_flops(shape: ModelShape, seq_len: int) -> int:
    """12·L·H·Q·T: attention products per token, forward and backward."""
    return 12 * shape.num_layers * shape.num_heads * shape.head_dim * seq_len


def per_token(
    shape: ModelShape, seq_len: int, lora: LoraSpec | None, gradient_checkpointing: bool
) -> FlopsPerToken:
    """Model and hardware FLOPs per trained token; lora=None is a full fine-tune."""
    n = parameter_counts(shape).non_embedding
    attention = attention_flops(shape, seq_len)
    if lora is None:  # forward 2N, backward 4N
        model = 6 * n + attention
        recompute = _recompute(shape, seq_len, 0) if gradient_checkpointing else 0
        return FlopsPerToken(model=model, hardware=model + recompute)
    # LoRA: the frozen base needs only input gradients, and the first layer's q/k/v none.
    adapters = adapter_parameters(shape, lora)
    unneeded = first_layer_input_gradients(shape, lora)
    model = 4 * n + attention + 6 * adapters - unneeded
    if not gradient_checkpointing:
        return FlopsPerToken(model=model, hardware=model)
    # The recomputed forward, and the input gradients the embedding's
    # enable_input_require_grads brings back.
    recompute = _recompute(shape, seq_len, adapters)
    return FlopsPerToken(model=model, hardware=model + recompute + unneeded)


def _recompute(shape: ModelShape, seq_len: int, adapters: int) -> int:
    """Gradient checkpointing's second forward: 2N + 4·L·H·Q·T + 2A. It counts the output
    projection too, which transformers does not checkpoint (2·hidden·vocab per token more
    than a GPU executes, pinned in tests/integration/burnin/test_flops_counted.py); the
    recorded baselines that plans are checked against were counted this way."""
    n = parameter_counts(shape).non_embedding
    return 2 * n + attention_flops(shape, seq_len) // 3 + 2 * adapters


def utilization(flops_per_s: float, peak_flops_per_s: float) -> float:
    """MFU (model FLOP/s) or HFU (hardware FLOP/s) per GPU over the GPU's peak, 0..1."""
    if peak_flops_per_s <= 0:
        raise ValueError("peak FLOP/s must be positive")
    return flops_per_s / peak_flops_per_s
