"""The burn-in recipe: the one schema of burnin/*.yaml, in plain dataclasses. See docs/burnin.md.

A recipe names a model shape (built with random weights, nothing downloaded), the LoRA
adapters, the batch, and the DeepSpeed config. The controller validates a recipe file into
these dataclasses (bringup/recipe.py, through the one reader of the project's YAML,
bringup/schema.py: msgspec checks the types and the Literals, the reader refuses unknown
keys, so a typo such as "micro_bach" is an error naming the key, not a default silently used)
and sends `to_json(recipe)` in the trainer's plan. A node has python3 and torch, deepspeed,
transformers and peft, none of the controller's packages: the trainer reads the plan back
with `from_json`, standard library only. Each dataclass checks its own values in
`__post_init__`, so both sides refuse the same recipes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

Family = Literal["llama", "qwen2"]  # transformers LlamaForCausalLM / Qwen2ForCausalLM
# The projections of a Llama/Qwen2 decoder layer that LoRA may adapt (transformers names).
Projection = Literal["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
Dtype = Literal["bf16", "fp32"]  # bf16 needs a GPU or a CPU with bf16 kernels
ZeroStage = Literal[2, 3]
DataKind = Literal["synthetic", "jsonl"]

PROJECTIONS: tuple[str, ...] = get_args(Projection)


class NodeRecipeError(ValueError):
    """The plan's recipe is not the JSON the controller sends; one line."""


@dataclass(frozen=True)
class ModelShape:
    """A decoder shape as the public config.json states it (cite it in the recipe)."""

    family: Family
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    vocab_size: int
    rope_theta: float
    max_position_embeddings: int = 8192
    rms_norm_eps: float = 1e-5
    tie_word_embeddings: bool = False
    attention_bias: bool = False  # Qwen2 has biases on q, k and v

    def __post_init__(self) -> None:
        _one_of(self, "family", Family)
        _at_least(self, 1, "hidden_size", "num_layers", "num_heads", "num_kv_heads")
        _at_least(self, 1, "intermediate_size", "max_position_embeddings")
        _at_least(self, 2, "vocab_size")
        _above(self, 0, "rope_theta", "rms_norm_eps")
        if self.hidden_size % self.num_heads:
            raise ValueError("hidden_size must be a multiple of num_heads")
        if self.num_heads % self.num_kv_heads:
            raise ValueError("num_heads must be a multiple of num_kv_heads")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


@dataclass(frozen=True)
class LoraSpec:
    r: int = 32
    alpha: float = 64
    dropout: float = 0.0
    targets: list[Projection] = field(default_factory=lambda: list(PROJECTIONS))

    def __post_init__(self) -> None:
        _at_least(self, 1, "r")
        _above(self, 0, "alpha")
        if not 0 <= self.dropout < 1:
            raise ValueError("dropout must be >= 0 and < 1")
        if not self.targets:
            raise ValueError("targets must name at least one projection")
        unknown = [t for t in self.targets if t not in PROJECTIONS]
        if unknown:
            raise ValueError(f"targets: {unknown[0]!r} is not one of {', '.join(PROJECTIONS)}")


@dataclass(frozen=True)
class TrainSpec:
    seq_len: int
    micro_batch: int  # sequences per GPU per forward
    grad_accum: int = 1
    gradient_checkpointing: bool = False
    dtype: Dtype = "bf16"
    lr: float = 2e-4
    seed: int = 1234
    steps: int | None = None
    minutes: float | None = None
    warmup_steps: int = 2  # excluded from the timing statistics
    checkpoint_interval: int = 50  # steps between checkpoints

    def __post_init__(self) -> None:
        _one_of(self, "dtype", Dtype)
        _at_least(self, 2, "seq_len")
        _at_least(self, 1, "micro_batch", "grad_accum", "checkpoint_interval")
        _at_least(self, 0, "warmup_steps")
        _above(self, 0, "lr")
        if self.steps is not None:
            _at_least(self, 1, "steps")
        if self.minutes is not None:
            _above(self, 0, "minutes")
        if (self.steps is None) == (self.minutes is None):
            raise ValueError("give exactly one of steps or minutes")


@dataclass(frozen=True)
class DeepSpeedSpec:
    config: str = "zero3"  # a file in burnin/deepspeed/ (name without .json) or a path
    zero_stage: ZeroStage = 3  # overrides zero_optimization.stage of the file

    def __post_init__(self) -> None:
        _one_of(self, "zero_stage", ZeroStage)


@dataclass(frozen=True)
class DataSpec:
    kind: DataKind = "synthetic"
    path: str | None = None  # a local JSONL of {"prompt", "response"} lines, for kind jsonl

    def __post_init__(self) -> None:
        _one_of(self, "kind", DataKind)
        if self.kind == "jsonl" and not self.path:
            raise ValueError("kind jsonl needs a path")


@dataclass(frozen=True)
class Recipe:
    name: str
    description: str
    source: str  # where the shape comes from (the public config.json)
    model: ModelShape
    train: TrainSpec
    lora: LoraSpec = field(default_factory=LoraSpec)
    deepspeed: DeepSpeedSpec = field(default_factory=DeepSpeedSpec)
    data: DataSpec = field(default_factory=DataSpec)


# --- checks of one value -----------------------------------------------------------------


def _at_least(spec: object, low: int, *names: str) -> None:
    for name in names:
        if getattr(spec, name) < low:
            raise ValueError(f"{name} must be >= {low}")


def _above(spec: object, low: int, *names: str) -> None:
    for name in names:
        if getattr(spec, name) <= low:
            raise ValueError(f"{name} must be > {low}")


def _one_of(spec: object, name: str, allowed: Any) -> None:
    choices = get_args(allowed)
    if getattr(spec, name) not in choices:
        raise ValueError(f"{name} must be one of {', '.join(repr(c) for c in choices)}")


# --- the recipe in a plan ----------------------------------------------------------------


def to_json(recipe: Recipe) -> dict[str, Any]:
    """The recipe as plain JSON data, as the controller sends it in the trainer's plan."""
    return dataclasses.asdict(recipe)


_PARTS: dict[str, type] = {
    "model": ModelShape,
    "train": TrainSpec,
    "lora": LoraSpec,
    "deepspeed": DeepSpeedSpec,
    "data": DataSpec,
}


def from_json(data: object) -> Recipe:
    """The recipe of a plan (what `to_json` wrote), checked again by the dataclasses."""
    top = _fields(Recipe, data, "recipe")
    for key, part in _PARTS.items():
        if key in top:
            top[key] = _build(part, _fields(part, top[key], f"recipe.{key}"), f"recipe.{key}")
    return _build(Recipe, top, "recipe")


def _build(kind: type, values: dict[str, Any], where: str) -> Any:
    try:
        return kind(**values)
    except (TypeError, ValueError) as exc:  # a required key missing, or a value refused
        raise NodeRecipeError(f"{where}: {exc}") from None


def _fields(kind: type, data: object, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise NodeRecipeError(f"{where}: expected an object, got {type(data).__name__}")
    known = {f.name for f in dataclasses.fields(kind)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise NodeRecipeError(f"{where}: unknown key {unknown[0]!r}")
    return dict(data)
