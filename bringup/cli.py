"""The `bringup` command line: the entry point.

A TAB is answered first, without building the Typer app (bringup/commands/tab.py: the
shell runs `bringup` again on every TAB, and typer, click, rich and pydantic together
cost more than a TAB may). So is `bringup slurm healthcheck` with options it reads as the
app does (bringup/commands/healthcheck.py: Slurm runs it at every job start, and typer,
click and rich cost more than the check). Anything else, and anything those modules
leave to the app, goes to the app, assembled in bringup/commands/app.py with the command
on the line alone. `bringup.cli.app` is the whole app (docs/cli.md, the tests).
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from typing import Any


def __getattr__(name: str) -> Any:
    # `bringup.cli.app`: the whole app, assembled on first use (PEP 562)
    if name == "app":
        from bringup.commands.app import whole

        return whole()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run() -> Any:
    """The `bringup` command."""
    # pydantic looks for plugins (entry points of every installed distribution's metadata)
    # the first time a model validates: a tenth of `slurm healthcheck`'s CPU on a controller
    # with torch and Ansible installed. bringup's own schemas need none; a user who wants
    # theirs sets PYDANTIC_DISABLE_PLUGINS="" (none disabled), which this leaves as it is.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    no_plugin_search()
    from bringup.commands import tab

    answered = tab.answer()
    if answered is not None:
        return answered
    if sys.argv[1:3] == ["slurm", "healthcheck"]:  # the module loads for this line alone
        from bringup.commands import healthcheck

        answered = healthcheck.answer(sys.argv[1:])
        if answered is not None:
            return answered
    from bringup.commands import app

    return app.run()


# pydantic's module that finds plugins, and the values of its variable that disable them all
# (pydantic/plugin/_loader.py reads the same three).
PLUGIN_LOADER = "pydantic.plugin._loader"
PLUGINS_OFF = ("__all__", "1", "true")


def no_plugin_search() -> None:
    """Stand in for pydantic's plugin loader while every plugin is disabled.

    Disabled, the loader finds no plugin, but importing it imports importlib.metadata, and
    with it email, zipfile and csv, at the first model build: 4 % of the instructions of
    `slurm healthcheck` at every job start, for nothing (benchmarks/node_side.py
    --instructions). The stand-in answers what pydantic's own answers with plugins
    disabled, no plugin; should they be enabled later in this process, it hands over to
    pydantic's own, which then finds them. Left alone where plugins are not all disabled,
    or where pydantic's loader is loaded already.
    """
    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") not in PLUGINS_OFF:
        return
    if PLUGIN_LOADER in sys.modules:
        return
    stand_in = types.ModuleType(PLUGIN_LOADER, no_plugin_search.__doc__)
    stand_in.get_plugins = _no_plugins  # type: ignore[attr-defined]
    sys.modules[PLUGIN_LOADER] = stand_in


def _no_plugins() -> Any:
    """pydantic's get_plugins, as its loader answers it with plugins disabled."""
    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") in PLUGINS_OFF:
        return ()
    # Enabled since: pydantic's own loader finds them (once, whichever thread asks first).
    if getattr(sys.modules.get(PLUGIN_LOADER), "get_plugins", None) is _no_plugins:
        sys.modules.pop(PLUGIN_LOADER, None)
    return importlib.import_module(PLUGIN_LOADER).get_plugins()


if __name__ == "__main__":
    sys.exit(run())
