"""Recipes: the shipped ones load, and a bad one is a one-line error naming the key.

The schema is the node side's dataclasses: the controller (pydantic) and the trainer
(from_json, standard library) refuse the same recipes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bringup import recipe
from bringup.node.burnin.recipe import PROJECTIONS, NodeRecipeError, from_json
from bringup.recipe import RecipeError

SHIPPED = ["llama-1b-lora", "llama-70b-lora", "llama-8b-lora", "qwen-32b-lora", "tiny"]


def tiny_data() -> dict:
    return yaml.safe_load((recipe.recipes_dir() / "tiny.yaml").read_text())


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_shipped_recipes() -> None:
    assert recipe.available() == SHIPPED
    for name in SHIPPED:
        r = recipe.load(name)
        assert r.name == name
        assert (r.lora.r, r.lora.alpha) == (32, 64)
        assert r.lora.targets == list(PROJECTIONS)
        assert r.deepspeed.zero_stage == 3
        config = recipe.deepspeed_config(r)
        assert config["zero_optimization"]["stage"] == 3
        assert config["train_micro_batch_size_per_gpu"] == r.train.micro_batch
        assert config["gradient_accumulation_steps"] == r.train.grad_accum
        assert config["bf16"] == {"enabled": r.train.dtype == "bf16"}


def test_unknown_key_is_named(tmp_path: Path) -> None:
    data = tiny_data()
    data["train"]["micro_bach"] = 4
    with pytest.raises(RecipeError) as exc:
        recipe.load(str(write(tmp_path, data)))
    assert str(exc.value) == f"{tmp_path / 'mine.yaml'}: train.micro_bach: unknown key"


def test_steps_or_minutes_not_both(tmp_path: Path) -> None:
    data = tiny_data()
    data["train"]["minutes"] = 5
    with pytest.raises(RecipeError, match=r"train: give exactly one of steps or minutes$"):
        recipe.load(str(write(tmp_path, data)))


def test_heads_must_divide(tmp_path: Path) -> None:
    data = tiny_data()
    data["model"]["num_kv_heads"] = 3
    with pytest.raises(RecipeError, match=r"model: num_heads must be a multiple"):
        recipe.load(str(write(tmp_path, data)))


def test_unknown_target_and_stage(tmp_path: Path) -> None:
    data = tiny_data()
    data["lora"]["targets"] = ["q_proj", "qkv_proj"]
    with pytest.raises(RecipeError) as exc:
        recipe.load(str(write(tmp_path, data)))
    assert str(exc.value).endswith(
        ": lora.targets[1]: invalid value 'qkv_proj' (one of: 'q_proj', 'k_proj', 'v_proj', "
        "'o_proj', 'gate_proj', 'up_proj', 'down_proj')"
    )
    data = tiny_data()
    data["deepspeed"]["zero_stage"] = 1
    with pytest.raises(
        RecipeError, match=r": deepspeed\.zero_stage: invalid value 1 \(one of: 2, 3\)$"
    ):
        recipe.load(str(write(tmp_path, data)))


@pytest.mark.parametrize(
    ("part", "key", "value", "message"),
    [
        ("model", "hidden_size", 0, "model: hidden_size must be >= 1"),
        ("model", "vocab_size", 1, "model: vocab_size must be >= 2"),
        ("model", "rope_theta", 0, "model: rope_theta must be > 0"),
        ("lora", "dropout", 1.0, "lora: dropout must be >= 0 and < 1"),
        ("lora", "targets", [], "lora: targets must name at least one projection"),
        ("train", "seq_len", 1, "train: seq_len must be >= 2"),
        ("train", "steps", 0, "train: steps must be >= 1"),
        ("train", "warmup_steps", -1, "train: warmup_steps must be >= 0"),
        ("data", "kind", "jsonl", "data: kind jsonl needs a path"),
    ],
)
def test_out_of_range_is_refused_by_both_sides(
    tmp_path: Path, part: str, key: str, value: object, message: str
) -> None:
    data = tiny_data()
    data.setdefault(part, {})[key] = value
    with pytest.raises(RecipeError) as exc:
        recipe.load(str(write(tmp_path, data)))
    assert str(exc.value) == f"{tmp_path / 'mine.yaml'}: {message}"
    # The trainer's reader (no pydantic) refuses the same value with the same words.
    plan = recipe.to_json(recipe.load("tiny"))
    plan.setdefault(part, {})[key] = value
    with pytest.raises(NodeRecipeError) as node_exc:
        from_json(plan)
    assert str(node_exc.value) == f"recipe.{message}"


def test_unknown_recipe_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match=r"^unknown recipe 'llama-9b'; available: llama-1b"):
        recipe.load("llama-9b")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(RecipeError, match=r"bad\.yaml: malformed YAML"):
        recipe.load(str(bad))


def test_overrides() -> None:
    r = recipe.with_overrides(recipe.load("llama-8b-lora"), steps=10, zero_stage=2)
    assert (r.train.steps, r.train.minutes, r.deepspeed.zero_stage) == (10, None, 2)
    with pytest.raises(RecipeError, match=r"^recipe tiny: train: give exactly one"):
        recipe.with_overrides(recipe.load("tiny"), steps=10, minutes=5)
    assert recipe.deepspeed_config(r)["zero_optimization"]["stage"] == 2
    j = recipe.with_overrides(recipe.load("tiny"), data_path="/data/pairs.jsonl")
    assert (j.data.kind, j.data.path) == ("jsonl", "/data/pairs.jsonl")


def test_broken_deepspeed_file(tmp_path: Path) -> None:
    ds = tmp_path / "ds.json"
    ds.write_text('{"zero_optimization": ')
    data = tiny_data()
    data["deepspeed"]["config"] = str(ds)
    r = recipe.parse(data, "x")
    with pytest.raises(RecipeError, match=r"ds\.json: not JSON \(Expecting value, line 1\)"):
        recipe.deepspeed_config(r)
