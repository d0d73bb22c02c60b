"""Recipes: the burn-in workload as data (burnin/*.yaml). See docs/burnin.md.

The schema is the node side's (bringup/node/burnin/recipe.py: plain dataclasses that check
their own values); here bringup/schema.py's one validator reads a YAML file into them, as
it reads profiles and suites. It refuses unknown keys, so that a typo ("micro_bach") is an
error naming the key, not a default silently used.
"""

from __future__ import annotations

import json
from pathlib import Path

from bringup.data import data_dir
from bringup.files import InputError, read_text
from bringup.node.burnin.recipe import Recipe, to_json
from bringup.schema import locate, read_yaml, shipped, validate


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
    """The recipe from parsed YAML, or RecipeError with one line naming the offending key."""
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
    data = to_json(recipe)
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
        config = json.loads(read_text(path, "DeepSpeed config"))
    except InputError as exc:
        raise RecipeError(f"deepspeed config: {exc}") from None
    except RecursionError:
        raise RecipeError(f"deepspeed config {path}: not JSON (nested too deeply)") from None
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
