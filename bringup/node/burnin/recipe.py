"""The recipe as a node reads it: plain dataclasses over the controller's validated JSON.

The controller validates a recipe with the project's schema (bringup/recipe.py, pydantic)
and sends `Recipe.model_dump(mode="json")` in the trainer's plan. The node side has only
python3 and torch/deepspeed/transformers/peft, so the trainer reads that JSON into these
dataclasses (standard library) instead: same field names, no second validation. A key the
dataclasses do not know is an error here too, so the two cannot drift apart silently.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


class NodeRecipeError(ValueError):
    """The plan's recipe is not the JSON the controller sends; one line."""


@dataclass(frozen=True)
class Shape:
    family: str
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
    attention_bias: bool = False

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


@dataclass(frozen=True)
class Lora:
    r: int = 32
    alpha: float = 64
    dropout: float = 0.0
    targets: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Train:
    seq_len: int
    micro_batch: int
    grad_accum: int = 1
    gradient_checkpointing: bool = False
    dtype: str = "bf16"
    lr: float = 2e-4
    seed: int = 1234
    steps: int | None = None
    minutes: float | None = None
    warmup_steps: int = 2
    checkpoint_interval: int = 50


@dataclass(frozen=True)
class DeepSpeed:
    config: str = "zero3"
    zero_stage: int = 3


@dataclass(frozen=True)
class Data:
    kind: str = "synthetic"
    path: str | None = None


@dataclass(frozen=True)
class NodeRecipe:
    name: str
    description: str
    source: str
    model: Shape
    train: Train
    lora: Lora = field(default_factory=Lora)
    deepspeed: DeepSpeed = field(default_factory=DeepSpeed)
    data: Data = field(default_factory=Data)


_PARTS: dict[str, type] = {
    "model": Shape,
    "train": Train,
    "lora": Lora,
    "deepspeed": DeepSpeed,
    "data": Data,
}


def from_json(data: object) -> NodeRecipe:
    """The recipe of a plan (what `Recipe.model_dump(mode="json")` wrote)."""
    top = _fields(NodeRecipe, data, "recipe")
    for key, part in _PARTS.items():
        if key in top:
            top[key] = _build(part, _fields(part, top[key], f"recipe.{key}"), f"recipe.{key}")
    return _build(NodeRecipe, top, "recipe")


def _build(kind: type, values: dict[str, Any], where: str) -> Any:
    try:
        return kind(**values)
    except TypeError as exc:  # a required key missing
        raise NodeRecipeError(f"{where}: {exc}") from None


def _fields(kind: type, data: object, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise NodeRecipeError(f"{where}: expected an object, got {type(data).__name__}")
    known = {f.name for f in dataclasses.fields(kind)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise NodeRecipeError(f"{where}: unknown key {unknown[0]!r}")
    return dict(data)
