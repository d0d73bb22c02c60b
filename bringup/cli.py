"""The `bringup` command line: the Typer app, assembled from bringup/commands/.

Nothing imports this module; each command lives in its own module under commands/ and
loads what it needs (the fleet, the report, torch, Ansible) only when it runs.

`bringup X ...` assembles the app with command X alone: Typer builds every registered
command's options before it runs one, and importing all the command modules, and building
all their options, cost more CPU than `bringup slurm healthcheck` at a job start does
(benchmarks/node_side.py). Help, `--version`, completion and an unknown command get the
whole app, as does `bringup.cli.app` (docs/cli.md, the tests).
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
def _whole() -> typer.Typer:
    return build()


def __getattr__(name: str) -> Any:
    # `bringup.cli.app`: the whole app, assembled on first use (PEP 562)
    if name == "app":
        return _whole()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run() -> Any:
    """The `bringup` command: the app with the command named on the command line."""
    # pydantic looks for plugins (entry points of every installed distribution's metadata)
    # the first time a model validates: a tenth of `slurm healthcheck`'s CPU on a controller
    # with torch and Ansible installed. bringup's own schemas need none; a user who wants
    # theirs sets PYDANTIC_DISABLE_PLUGINS="" (none disabled), which this leaves as it is.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    named = sys.argv[1] if len(sys.argv) > 1 else None
    return build(named if named in COMMANDS else None)()


if __name__ == "__main__":
    sys.exit(run())
