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

import os
import sys
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


if __name__ == "__main__":
    sys.exit(run())
