"""`bringup X` assembles the app with command X alone (issue 31: `bringup slurm healthcheck`
runs at every job start); help and unknown commands get the whole app."""

from __future__ import annotations

import ast
import subprocess
import sys

import typer

from bringup import cli
from bringup.commands.app import COMMANDS

# Runs `bringup ARGS` as the console script does, then prints the command modules loaded.
SCRIPT = """
import sys
from bringup import cli
sys.argv = ["bringup", *sys.argv[1:]]
try:
    cli.run()
except SystemExit:
    pass
print(sorted(m for m in sys.modules if m.startswith("bringup.commands.")))
"""


def _loaded(*argv: str) -> tuple[str, str]:
    done = subprocess.run(
        [sys.executable, "-I", "-c", SCRIPT, *argv], capture_output=True, text=True, check=False
    )
    return done.stdout.strip().splitlines()[-1], done.stdout + done.stderr


def test_a_command_loads_its_own_module_alone() -> None:
    loaded, out = _loaded("slurm", "--help")
    assert "healthcheck" in out
    # app: the assembly; complete: the value completers the shared options name; tab: the
    # quick TAB answer the entry point asks first; invocation: what common shares with the
    # health check's lean path (all four standard library only). Not commands.healthcheck:
    # the entry point loads it for `slurm healthcheck` alone.
    assert loaded == (
        "['bringup.commands.app', 'bringup.commands.common', 'bringup.commands.complete', "
        "'bringup.commands.invocation', 'bringup.commands.slurm', 'bringup.commands.tab']"
    )


def test_help_and_an_unknown_command_get_every_command() -> None:
    loaded, out = _loaded("--help")
    assert all(f"bringup.commands.{module}'" in loaded for module, _ in COMMANDS.values())
    assert "healthcheck" not in out and "provision" in out
    _, out = _loaded("chek")
    assert "No such command 'chek'. Did you mean 'check'?" in out


def test_the_whole_app_has_every_command_under_its_name() -> None:
    group = typer.main.get_command(cli.app)
    assert set(group.commands) == set(COMMANDS)  # type: ignore[attr-defined]
    assert cli.app is cli.app  # assembled once


# Runs `bringup ARGS` as the console script does, then prints the collector's thresholds
# before and after.
THRESHOLDS = """
import gc, sys
from bringup import cli
sys.argv = ["bringup", *sys.argv[1:]]
print(gc.get_threshold())
try:
    cli.run()
except SystemExit:
    pass
print(gc.get_threshold())
"""


def test_the_command_collects_its_young_objects_less_often() -> None:
    # A run of thousands of nodes: each node's records were promoted to the oldest
    # generation at CPython's 700 (docs/scale.md); the older generations as CPython's.
    done = subprocess.run(
        [sys.executable, "-I", "-c", THRESHOLDS, "check", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    default, now = ast.literal_eval(lines[0]), ast.literal_eval(lines[-1])
    assert now == (cli.YOUNG_COLLECTION, *default[1:]), done.stdout + done.stderr
    assert default[0] < cli.YOUNG_COLLECTION
