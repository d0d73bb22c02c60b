"""Recipes: the burn-in workload as data (burnin/*.yaml). See docs/burnin.md.

A recipe names a model shape (built with random weights, nothing downloaded), the LoRA
adapters, the batch, and the DeepSpeed config. The schema forbids unknown keys so that a
typo ("micro_bach") is an error naming the key, not a default silently used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from bringup.data import data_dir
from bringup.schema import Strict, locate, read_yaml, shipped, validate

# The projections of a Llama/Qwen2 decoder layer that LoRA may adapt (transformers names).
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class ModelShape(Strict):
    """A decoder shape as the public config.json states it (cite it in the recipe)."""

    family: Literal["llama", "qwen2"]  # transformers LlamaForCausalLM / Qwen2ForCausalLM
    hidden_size: int = Field(ge=1)
    num_layers: int = Field(ge=1)
    num_heads: int = Field(ge=1)
    num_kv_heads: int = Field(ge=1)
    intermediate_size: int = Field(ge=1)
    vocab_size: int = Field(ge=2)
    rope_theta: float = Field(gt=0)
    max_position_embeddings: int = Field(default=8192, ge=1)
    rms_norm_eps: float = Field(default=1e-5, gt=0)
    tie_word_embeddings: bool = False
    attention_bias: bool = False  # Qwen2 has biases on q, k and v

    @model_validator(mode="after")
    def _heads_divide(self) -> ModelShape:
        if self.hidden_size % self.num_heads:
            raise ValueError("hidden_size must be a multiple of num_heads")
        if self.num_heads % self.num_kv_heads:
            raise ValueError("num_heads must be a multiple of num_kv_heads")
        return self

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


class LoraSpec(Strict):
    r: int = Field(default=32, ge=1)
    alpha: float = Field(default=64, gt=0)
    dropout: float = Field(default=0.0, ge=0, lt=1)
    targets: list[Literal[PROJECTIONS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(PROJECTIONS), min_length=1
    )


class TrainSpec(Strict):
    seq_len: int = Field(ge=2)
    micro_batch: int = Field(ge=1)  # sequences per GPU per forward
    grad_accum: int = Field(default=1, ge=1)
    gradient_checkpointing: bool = False
    dtype: Literal["bf16", "fp32"] = "bf16"  # bf16 needs a GPU or a CPU with bf16 kernels
    lr: float = Field(default=2e-4, gt=0)
    seed: int = 1234
    steps: int | None = Field(default=None, ge=1)
    minutes: float | None = Field(default=None, gt=0)
    warmup_steps: int = Field(default=2, ge=0)  # excluded from the timing statistics
    checkpoint_interval: int = Field(default=50, ge=1)  # steps between checkpoints

    @model_validator(mode="after")
    def _one_stop(self) -> TrainSpec:
        if (self.steps is None) == (self.minutes is None):
            raise ValueError("give exactly one of steps or minutes")
        return self


class DeepSpeedSpec(Strict):
    config: str = "zero3"  # a file in burnin/deepspeed/ (name without .json) or a path
    zero_stage: Literal[2, 3] = 3  # overrides zero_optimization.stage of the file


class DataSpec(Strict):
    kind: Literal["synthetic", "jsonl"] = "synthetic"
    path: str | None = None  # a local JSONL of {"prompt", "response"} lines, for kind jsonl

    @model_validator(mode="after")
    def _path_for_jsonl(self) -> DataSpec:
        if self.kind == "jsonl" and not self.path:
            raise ValueError("kind jsonl needs a path")
        return self


class Recipe(Strict):
    name: str
    description: str
    source: str  # where the shape comes from (the public config.json)
    model: ModelShape
    lora: LoraSpec = LoraSpec()
    train: TrainSpec
    deepspeed: DeepSpeedSpec = DeepSpeedSpec()
    data: DataSpec = DataSpec()


class RecipeError(Exception):
    """A recipe could not be found or is invalid; the message is one line."""


def recipes_dir() -> Path:
    return data_dir("burnin")


def available() -> list[str]:
    """Names of the recipes shipped with bringup."""
    return shipped(recipes_dir())


def load(name_or_path: str) -> Recipe:
    """A shipped recipe by name (`tiny`) or a user's recipe file by path."""
    path = locate(name_or_path, recipes_dir(), "recipe", RecipeError)
    return parse(read_yaml(path, RecipeError), str(path))


def parse(data: object, origin: str) -> Recipe:
    return validate(Recipe, data, origin, RecipeError)


def with_overrides(
    recipe: Recipe,
    *,
    steps: int | None = None,
    minutes: float | None = None,
    zero_stage: int | None = None,
    data_path: str | None = None,
    checkpoint_interval: int | None = None,
) -> Recipe:
    """The recipe with command-line overrides applied (and validated again)."""
    data = recipe.model_dump()
    if steps is not None or minutes is not None:
        data["train"]["steps"], data["train"]["minutes"] = steps, minutes
    if zero_stage is not None:
        data["deepspeed"]["zero_stage"] = zero_stage
    if data_path is not None:
        data["data"] = {"kind": "jsonl", "path": data_path}
    if checkpoint_interval is not None:
        data["train"]["checkpoint_interval"] = checkpoint_interval
    return parse(data, f"recipe {recipe.name}")


def deepspeed_config(recipe: Recipe) -> dict[str, object]:
    """The DeepSpeed config: the recipe's file, with the batch, dtype and stage filled in."""
    path = Path(recipe.deepspeed.config)
    if not path.suffix:
        path = recipes_dir() / "deepspeed" / f"{recipe.deepspeed.config}.json"
    try:
        config = json.loads(path.read_text())
    except OSError as exc:
        raise RecipeError(f"deepspeed config {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise RecipeError(
            f"deepspeed config {path}: not JSON ({exc.msg}, line {exc.lineno})"
        ) from None
    if not isinstance(config, dict):
        raise RecipeError(f"deepspeed config {path}: not a JSON object")
    train = recipe.train
    config["train_micro_batch_size_per_gpu"] = train.micro_batch
    config["gradient_accumulation_steps"] = train.grad_accum
    config.pop("train_batch_size", None)  # DeepSpeed derives it from the two and the world
    config["bf16"] = {"enabled": train.dtype == "bf16"}
    zero = config.setdefault("zero_optimization", {})
    if not isinstance(zero, dict):
        raise RecipeError(f"deepspeed config {path}: zero_optimization is not an object")
    zero["stage"] = recipe.deepspeed.zero_stage
    return config
