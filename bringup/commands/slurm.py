"""`bringup slurm healthcheck` and `bringup slurm render`: bringup where Slurm runs the jobs.

    bringup slurm healthcheck --drain                 HealthCheckProgram, Prolog, Epilog
    bringup slurm render --suite acceptance --nodes 4 --partition gpu > acceptance.sbatch

docs/slurm.md gives the slurm.conf lines, the exit codes and the drain reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from bringup.commands import complete
from bringup.commands.common import (
    JsonOpt,
    ProfileOpt,
    QuietOpt,
    fail,
    finite,
    load_suite,
    print_envelope,
    profile_or_auto,
)

slurm_app = typer.Typer(
    help="Run under Slurm: a node health check that drains, and sbatch scripts.",
    no_args_is_help=True,
)


# --- healthcheck --------------------------------------------------------------------------


@slurm_app.command("healthcheck")
def healthcheck(
    suite_name: Annotated[
        str, typer.Option("--suite", "-s", help="Suite name or YAML path (fast: no load).")
    ] = "prolog",
    profile_name: ProfileOpt = "auto",
    drain: Annotated[
        bool,
        typer.Option("--drain", help="Drain this node when unfit; resume it when it passes again."),
    ] = False,
    budget_s: Annotated[
        float,
        typer.Option(
            "--budget-s", min=1.0, callback=finite, help="Seconds the whole check may take."
        ),
    ] = 10.0,
    out_dir: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Where runs are kept, one DIR/<time>-healthcheck each "
            "(default /var/lib/bringup/healthcheck as root).",
        ),
    ] = None,
    keep: Annotated[
        int, typer.Option("--keep", min=1, help="Keep the newest N runs in that directory.")
    ] = 50,
    node: Annotated[
        str | None,
        typer.Option("--node", help="This node's Slurm name (default: $SLURMD_NODENAME)."),
    ] = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,  # its one verdict line is all it prints
) -> None:
    """Is this node fit for the next job? Exit 0 fit, 1 unfit (a FAIL or an ERROR)."""
    # The one body, which the entry point runs without this app at a job start.
    from bringup.commands.healthcheck import Options, check
    from bringup.commands.invocation import Refused

    options = Options(
        suite_name, profile_name, drain, budget_s, out_dir, keep, node, as_json, quiet
    )
    try:
        code = check(options)
    except Refused as exc:
        fail(str(exc))
    raise typer.Exit(code)


# --- render -------------------------------------------------------------------------------

# The jobs `render` writes besides a suite's check: the command each runs.
_JOBS = ("nccl", "burnin")


@slurm_app.command("render")
def render(
    suite_name: Annotated[
        str,
        typer.Option(
            "--suite",
            "-s",
            help="acceptance (or any suite: a check), nccl or burnin.",
            autocompletion=complete.job_suites,
        ),
    ] = "acceptance",
    profile_name: ProfileOpt = "auto",
    recipe_name: Annotated[
        str,
        typer.Option(
            "--recipe",
            "-r",
            help="burnin: the recipe (tiny, llama-8b-lora, ...).",
            autocompletion=complete.recipes,
        ),
    ] = "tiny",
    nodes_count: Annotated[
        int | None,
        typer.Option("--nodes-count", min=1, help="Nodes to allocate (nccl: 2, else 1)."),
    ] = None,
    nodelist: Annotated[
        str | None, typer.Option("--nodelist", help="These Slurm nodes (node[01-04]).")
    ] = None,
    partition: Annotated[str | None, typer.Option("--partition", help="The partition.")] = None,
    account: Annotated[str | None, typer.Option("--account", help="The account to charge.")] = None,
    time_limit: Annotated[
        str | None,
        typer.Option("--time", help="The job's time limit (default: from the plan's deadlines)."),
    ] = None,
    job_name: Annotated[
        str | None, typer.Option("--job-name", help="Default bringup-<suite>.")
    ] = None,
    runs: Annotated[
        str, typer.Option("--runs", help="Where the job writes its run directory.")
    ] = "runs",
    bringup: Annotated[
        str, typer.Option("--bringup", help="The bringup executable on the nodes.")
    ] = "bringup",
    command_args: Annotated[
        list[str] | None,
        typer.Argument(help="More options for the bringup command, after --.", show_default=False),
    ] = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,  # the script is all it prints
) -> None:
    """Print an sbatch script for a check, NCCL across nodes, or the burn-in."""
    from bringup.fleet import sbatch
    from bringup.fleet.inventory import Host
    from bringup.fleet.plan import FleetError, plan_node

    profile_or_auto(profile_name)  # a bad name is said now, not when the job runs
    if suite_name in _JOBS:
        command, suite, args = suite_name, _job_suite(suite_name, recipe_name), []
        if suite_name == "burnin":
            args = ["--recipe", recipe_name]
    else:
        command, suite, args = "check", load_suite(suite_name), ["--suite", suite_name]
    nodes = nodes_count or (2 if command == "nccl" else 1)
    if nodelist is None and command == "nccl" and nodes < 2:
        fail("--suite nccl measures across nodes: --nodes-count 2 or more")

    def no_runner(*_: Any) -> Any:  # the plan is rendered, not run
        raise AssertionError("a rendered plan does not run")

    try:
        plan = plan_node(Host(name="slurm", address=""), no_runner, suite, None)
    except FleetError as exc:
        fail(str(exc))
    seconds = sbatch.job_seconds(plan.deadline_s)
    argv = [bringup, command, "--slurm", *args, "--profile", profile_name, *(command_args or [])]
    job = sbatch.JobScript(
        title=f"bringup {command}" + (f" --suite {suite.name}" if command == "check" else ""),
        command=command,
        name=suite.name,
        argv=argv,
        steps=plan.request["probes"],
        source=_source(command, suite.name, recipe_name),
        nodes=nodes,
        time=time_limit or sbatch.time_limit(seconds),
        time_note="as given"
        if time_limit
        else f"the node deadline ({plan.deadline_s:g} s) and {sbatch.JOB_SLACK_S:g} s to start "
        "and report, in whole minutes",
        runs=runs,
        job_name=job_name or f"bringup-{suite.name}",
        partition=partition,
        account=account,
        nodelist=nodelist,
    )
    try:
        script = sbatch.render(job)
    except sbatch.SbatchError as exc:
        fail(str(exc))
    if as_json:
        data = {"script": script, "command": argv, "nodes": nodes, "time": job.time}
        print_envelope([], exit_code=0, judged=False, data=data)
    else:
        print(script, end="")


def _source(command: str, suite: str, recipe: str) -> str:
    if command == "check":
        return f"suite {suite}"
    return f"recipe {recipe}" if command == "burnin" else "its default sizes and timeout"


def _job_suite(kind: str, recipe_name: str) -> Any:
    """The one-probe suite `bringup nccl` or `bringup burnin` gives every node, as those
    commands build it with their defaults."""
    if kind == "nccl":
        from bringup.commands.nccl import nccl_suite

        return nccl_suite({})
    from bringup import recipe as recipes
    from bringup.commands.burnin import Job, burnin_suite

    try:
        return burnin_suite(Job(recipes.load(recipe_name)))
    except recipes.RecipeError as exc:
        fail(str(exc))
