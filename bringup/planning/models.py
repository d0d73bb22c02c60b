"""The model a plan is for: a shipped recipe's shape, or any transformers config.json.

Nothing is downloaded: a config.json is read from the path given (a file, or a directory
that holds one, as a Hugging Face snapshot does). The shape goes into the burn-in's own
ModelShape, so that memory and FLOPs are counted by the same code the trainer uses.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from bringup import recipe as recipes
from bringup.files import InputError, read_text
from bringup.node.burnin.recipe import LoraSpec, ModelShape, Recipe

# The fields a decoder's config.json must state (transformers' names).
REQUIRED = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "vocab_size",
)
# Keys that mark a mixture-of-experts model (Mixtral, Qwen2-MoE, DeepSeek): its parameters
# are not all on every token's path, which the dense accounting here does not model.
MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
# model_type values whose decoder layer is the one counted here (gated MLP, RMSNorm, GQA).
LLAMA_LIKE = ("llama", "mistral", "qwen2")


class ModelError(Exception):
    """The model cannot be planned: unknown name, unreadable or incomplete config; one line."""


@dataclass(frozen=True)
class PlannedModel:
    name: str  # the recipe's name, or the config's folder or file name
    origin: str  # where the shape comes from, for the output
    shape: ModelShape
    lora: LoraSpec  # the recipe's adapters, or LoRA's usual r=32 on every projection
    recipe: Recipe | None  # defaults for sequence length, micro-batch, checkpointing
    notes: tuple[str, ...] = field(default=())


def load(name_or_path: str) -> PlannedModel:
    """A recipe by name or YAML path, or a config.json (or a folder holding one)."""
    path = Path(name_or_path)
    if path.is_dir():
        path = path / "config.json"
    if path.suffix.lower() == ".json":
        return from_config_file(path)
    if not path.suffix and name_or_path not in recipes.available():
        choices = ", ".join(recipes.available())
        raise ModelError(
            f"unknown model {name_or_path!r}: give a recipe ({choices}) "
            "or the path of a transformers config.json"
        )
    try:
        return from_recipe(recipes.load(name_or_path))
    except recipes.RecipeError as exc:
        raise ModelError(str(exc)) from None


def from_recipe(recipe: Recipe) -> PlannedModel:
    return PlannedModel(
        name=recipe.name,
        origin=f"recipe {recipe.name} ({recipe.source})",
        shape=recipe.model,
        lora=recipe.lora,
        recipe=recipe,
    )


def from_config_file(path: Path) -> PlannedModel:
    try:
        data = json.loads(read_text(path, "config.json"))
    except InputError as exc:
        raise ModelError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise ModelError(f"{path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    except RecursionError:
        raise ModelError(f"{path}: nested too deeply, not a config.json") from None
    shape, notes = shape_from_config(data, str(path))
    name = path.parent.name if path.name == "config.json" and path.parent.name else path.name
    return PlannedModel(
        name=name,
        origin=f"config.json {path}",
        shape=shape,
        lora=LoraSpec(),
        recipe=None,
        notes=(*notes, "LoRA adapters as the recipes use them: r=32 on every projection"),
    )


def shape_from_config(data: object, origin: str) -> tuple[ModelShape, list[str]]:
    """The decoder shape a transformers config states, and what was assumed to get it."""
    if not isinstance(data, dict):
        raise ModelError(f"{origin}: not a JSON object")
    notes: list[str] = []
    text = data.get("text_config")
    if _missing(data) and isinstance(text, dict) and not _missing(text):
        data = {"model_type": text.get("model_type", data.get("model_type")), **text}
        notes.append("the text model of a multimodal config (text_config)")
    missing = _missing(data)
    if missing:
        raise ModelError(f"{origin}: not a decoder config.json: no {', '.join(missing)}")
    for key in (*REQUIRED, "num_key_value_heads", "head_dim"):
        _finite(data, key, 1, origin, whole=True)
    for key in MOE_KEYS:
        if data.get(key):
            raise ModelError(
                f"{origin}: a mixture-of-experts model ({key} {data[key]}): "
                "bringup plans dense decoders only"
            )
    hidden, heads = data["hidden_size"], data["num_attention_heads"]
    kv_heads = data.get("num_key_value_heads")
    if kv_heads is None:
        kv_heads = heads
        notes.append("no num_key_value_heads: one KV head per query head (transformers' default)")
    head_dim = data.get("head_dim")
    if head_dim is not None and heads and head_dim != hidden // heads:
        raise ModelError(
            f"{origin}: head_dim {head_dim} is not hidden_size / num_attention_heads "
            f"({hidden} / {heads}): not modelled"
        )
    model_type = str(data.get("model_type") or "")
    if model_type not in LLAMA_LIKE:
        notes.append(
            f"model_type {model_type or '(none)'!r} planned as a Llama-shaped decoder "
            "(gated MLP, RMSNorm, grouped-query attention)"
        )
    if "tie_word_embeddings" not in data:
        notes.append("no tie_word_embeddings: an untied output projection (Llama's default)")
    try:
        shape = ModelShape(
            family="qwen2" if model_type == "qwen2" else "llama",
            hidden_size=hidden,
            num_layers=data["num_hidden_layers"],
            num_heads=heads,
            num_kv_heads=kv_heads,
            intermediate_size=data["intermediate_size"],
            vocab_size=data["vocab_size"],
            rope_theta=_finite(data, "rope_theta", 10000.0, origin),
            max_position_embeddings=int(
                _finite(data, "max_position_embeddings", 8192, origin, whole=True)
            ),
            tie_word_embeddings=bool(data.get("tie_word_embeddings", False)),
            attention_bias=bool(data.get("attention_bias", model_type == "qwen2")),
        )
    except (TypeError, ValueError) as exc:
        raise ModelError(f"{origin}: {exc}") from None
    return shape, notes


# No decoder has a dimension, a vocabulary or a context near this; a config that says so
# is broken (or hostile), and its sizes would overflow the arithmetic of the plan.
LARGEST = 2**40


def _finite(data: dict, key: str, default: float, origin: str, whole: bool = False) -> float:
    """`data[key]` (`default` when absent or null) as a finite number of at most LARGEST,
    a whole one when `whole`; else ModelError naming the field."""
    value = data.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ModelError(f"{origin}: {key} {value!r:.40}: not a number")
    if not math.isfinite(value) or abs(value) > LARGEST:
        raise ModelError(f"{origin}: {key} {value!r:.40}: not a finite number up to 2**40")
    if whole and value != int(value):
        raise ModelError(f"{origin}: {key} {value!r}: not a whole number")
    return float(value)


def _missing(data: dict) -> list[str]:
    """Required fields absent or not a positive integer (a bool is no integer here)."""
    return [
        key
        for key in REQUIRED
        if not isinstance(data.get(key), int) or isinstance(data.get(key), bool)
    ]


def count_text(n: float) -> str:
    """A count as people read it: 70.6 B, 414 M, 140 k."""
    for size, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.3g}"
