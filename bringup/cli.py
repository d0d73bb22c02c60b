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

import gc
import os
import sys
from typing import Any

# Allocations between two collections of the garbage collector's youngest generation
# (CPython's default: 700). A check of ten thousand nodes allocates each node's records
# (tens of thousands of objects a node, 64 nodes at once) and frees them when the node is
# judged; at 700 they lived through two young collections and went to the oldest
# generation, which the collector then walked whole, run after run: 4.5 s of the check's
# CPU at ten thousand nodes, 0.7 s at 20,000 (docs/scale.md). What it costs: a cycle of
# garbage waits longer to be freed (20,000 objects, a few MB at most).
YOUNG_COLLECTION = 20_000


def __getattr__(name: str) -> Any:
    # `bringup.cli.app`: the whole app, assembled on first use (PEP 562)
    if name == "app":
        from bringup.commands.app import whole

        return whole()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def collect_less() -> None:
    """The garbage collector as the `bringup` command runs it (YOUNG_COLLECTION); the
    older generations' thresholds as CPython's. For a process of its own: a test does not
    change its runner's."""
    gc.set_threshold(YOUNG_COLLECTION, *gc.get_threshold()[1:])


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
    collect_less()  # not for the two answers above: a TAB and a job's start end at once
    from bringup.commands import app

    return app.run()


if __name__ == "__main__":
    sys.exit(run())
