"""The `bringup` command line: the Typer app, assembled from bringup/commands/.

Nothing imports this module; each command lives in its own module under commands/ and
loads what it needs (the fleet, the report, torch, Ansible) only when it runs.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from bringup import __version__
from bringup.commands import (
    burnin,
    check,
    diagnose,
    exporter,
    handover,
    learn,
    nccl,
    plan,
    provision,
    report,
    sim,
    slurm,
    verify,
)
from bringup.commands.common import Cli

app = typer.Typer(
    cls=Cli,
    help="GPU cluster bring-up and acceptance: probe nodes, judge them against a profile.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        print(f"bringup {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """GPU cluster bring-up and acceptance."""


app.command()(check.check)
app.command()(check.snapshot)
app.command()(check.inspect)
app.add_typer(check.profiles_app, name="profiles")
app.command()(learn.learn)
app.command()(nccl.nccl)
app.command()(burnin.burnin)
app.command()(plan.plan)
app.command()(diagnose.diagnose)
app.command()(report.report)
app.command()(verify.verify)
app.command()(handover.handover)
app.command()(exporter.exporter)
app.command()(provision.provision)
app.add_typer(sim.sim_app, name="sim")
app.add_typer(slurm.slurm_app, name="slurm")


if __name__ == "__main__":
    sys.exit(app())
