"""The burn-in's node side imports from the shipped zip without the controller's packages.

A node has python3 and torch, deepspeed, transformers and peft; DeepSpeed brings pydantic
along, but bringup's node side must not rely on it (nor on typer, rich, yaml, paramiko):
the controller validates the recipe and sends plain JSON. The child process imports the
trainer from the zip that SSH ships, with a meta-path hook refusing those packages to any
bringup module, and reads the tiny recipe's JSON the way the trainer does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bringup import recipe as recipes
from bringup.fleet.node_code import build_node_code
from bringup.node.burnin import flops
from bringup.node.burnin.recipe import NodeRecipeError, from_json
from tests.support.timing import scaled

CHILD = """
import json, sys
ZIP, RECIPE = sys.argv[1], json.loads(sys.argv[2])
CONTROLLER_ONLY = ("pydantic", "typer", "rich", "yaml", "paramiko")

class ControllerOnly:
    # Refuse the controller's packages to bringup's modules; DeepSpeed may import pydantic.
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] not in CONTROLLER_ONLY:
            return None
        frame = sys._getframe(1)
        while frame is not None:
            module = frame.f_globals.get("__name__", "")
            if not module.startswith(("importlib", "_frozen_importlib")) and module != __name__:
                if module.startswith("bringup"):
                    raise ImportError(f"{module} imports {name}: not on a node")
                return None
            frame = frame.f_back
        return None

sys.meta_path.insert(0, ControllerOnly())
sys.path.insert(0, ZIP)
import bringup.node.probes.burnin, bringup.node.burnin.trainer as trainer
from bringup.node.burnin import flops
assert bringup.node.burnin.trainer.__file__.startswith(ZIP), bringup.node.burnin.trainer.__file__
recipe = trainer.from_json(RECIPE)
per_token = flops.per_token(recipe.model, recipe.train.seq_len, recipe.lora, True)
print(json.dumps({
    "model": per_token.model,
    "hardware": per_token.hardware,
    "leaked": sorted(m for m in sys.modules if m.startswith("bringup.")
                     and m.split(".")[1] in ("recipe", "schema", "baseline", "cli")),
}))
"""


def test_trainer_imports_from_the_zip_without_controller_packages(tmp_path: Path) -> None:
    code = build_node_code()
    zip_path = tmp_path / code.file_name
    zip_path.write_bytes(code.data)
    recipe = recipes.load("tiny")
    dumped = json.dumps(recipes.to_json(recipe))
    proc = subprocess.run(
        [sys.executable, "-I", "-c", CHILD, str(zip_path), dumped],
        capture_output=True,
        text=True,
        timeout=scaled(300),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    expected = flops.per_token(recipe.model, recipe.train.seq_len, recipe.lora, True)
    assert (got["model"], got["hardware"]) == (expected.model, expected.hardware)
    assert got["leaked"] == []


def test_the_blocker_does_refuse_a_controller_import(tmp_path: Path) -> None:
    """The hook above can fail: importing bringup.recipe (through bringup.schema, PyYAML and
    msgspec) from the checkout fails."""
    script = CHILD.split("sys.meta_path.insert(0, ControllerOnly())")[0]
    script += "sys.meta_path.insert(0, ControllerOnly())\nimport bringup.recipe\n"
    proc = subprocess.run(
        [sys.executable, "-c", script, "unused.zip", "{}"],
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert proc.returncode == 1
    assert "ImportError: bringup.schema imports yaml: not on a node" in proc.stderr


def test_the_trainer_reads_back_every_shipped_recipe_the_controller_sends() -> None:
    for name in recipes.available():
        recipe = recipes.load(name)
        sent = json.loads(json.dumps(recipes.to_json(recipe)))
        assert from_json(sent) == recipe


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["train"].update(micro_bach=2), "recipe.train: unknown key 'micro_bach'"),
        (lambda d: d.pop("model"), "recipe: Recipe.__init__() missing 1 required"),
        (lambda d: d.update(model=[1]), "recipe.model: expected an object, got list"),
    ],
)
def test_node_recipe_refuses_json_the_controller_would_not_send(change, message: str) -> None:
    data = recipes.to_json(recipes.load("tiny"))
    change(data)
    with pytest.raises(NodeRecipeError) as caught:
        from_json(data)
    assert message in str(caught.value)
