"""The Typer app, assembled from the command modules of bringup/commands/.

Only bringup/cli.py (the entry point) and tools that read the app (options.py,
tab_table.py, by name) load this module; each command lives in its own module and loads
what it needs (the fleet, the report, torch, Ansible) only when it runs.

`bringup X ...` assembles the app with command X alone: Typer builds every registered
command's options before it runs one, and importing all the command modules, and building
all their options, cost more CPU than `bringup slurm healthcheck` at a job start does
(benchmarks/node_side.py). A TAB that bringup/commands/tab.py leaves to the app does the
same with the command on the line being completed. Help, `--version`, completing a command's name
and an unknown command get the whole app, as does `bringup.cli.app` (docs/cli.md, the
tests).
"""

from __future__ import annotations

import os
import sys
from functools import cache
from importlib import import_module
from typing import Annotated, Any

import typer

from bringup import __version__
from bringup.commands.common import Cli

# name -> (module of bringup.commands, its attribute); a Typer attribute is a group
COMMANDS: dict[str, tuple[str, str]] = {
    "check": ("check", "check"),
    "snapshot": ("check", "snapshot"),
    "inspect": ("check", "inspect"),
    "profiles": ("check", "profiles_app"),
    "learn": ("learn", "learn"),
    "nccl": ("nccl", "nccl"),
    "burnin": ("burnin", "burnin"),
    "plan": ("plan", "plan"),
    "diagnose": ("diagnose", "diagnose"),
    "report": ("report", "report"),
    "verify": ("verify", "verify"),
    "handover": ("handover", "handover"),
    "exporter": ("exporter", "exporter"),
    "provision": ("provision", "provision"),
    "sim": ("sim", "sim_app"),
    "slurm": ("slurm", "slurm_app"),
}


def _version(value: bool) -> None:
    if value:
        print(f"bringup {__version__}")
        raise typer.Exit()


def main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """GPU cluster bring-up and acceptance."""


def build(only: str | None = None) -> typer.Typer:
    """The app with every command, or with command `only` alone."""
    app = typer.Typer(
        cls=Cli,
        help="GPU cluster bring-up and acceptance: probe nodes, judge them against a profile.",
        no_args_is_help=True,
        add_completion=True,
        pretty_exceptions_enable=False,
    )
    app.callback()(main)
    for name, (module, attribute) in COMMANDS.items():
        if only is not None and name != only:
            continue
        command = getattr(import_module(f"bringup.commands.{module}"), attribute)
        if isinstance(command, typer.Typer):
            app.add_typer(command, name=name)
        else:
            app.command(name=name)(command)
    return app


@cache
def whole() -> typer.Typer:
    """The app with every command (`bringup.cli.app`), assembled once."""
    return build()


def run() -> Any:
    """The app with the command named on the command line, or on the line the shell is
    completing (every TAB runs `bringup` again: docs/cli.md), run on sys.argv."""
    named = sys.argv[1] if len(sys.argv) > 1 else _completing()
    return build(named if named in COMMANDS else None)()


def _completing() -> str | None:
    """The second word of the line a shell asks completions for (bash's COMP_WORDS,
    Typer's _TYPER_COMPLETE_ARGS for zsh, fish and PowerShell), when it is asking.
    A word that is a whole command's name completes to that name alone: no command's name
    begins another's, so the app with that command answers as the whole one would."""
    if "_BRINGUP_COMPLETE" not in os.environ:
        return None
    words = (os.environ.get("COMP_WORDS") or os.environ.get("_TYPER_COMPLETE_ARGS", "")).split()
    return words[1] if len(words) > 1 else None
