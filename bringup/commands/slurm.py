"""`bringup slurm healthcheck` and `bringup slurm render`: bringup where Slurm runs the jobs.

    bringup slurm healthcheck --drain                 HealthCheckProgram, Prolog, Epilog
    bringup slurm render --suite acceptance --nodes 4 --partition gpu > acceptance.sbatch

docs/slurm.md gives the slurm.conf lines, the exit codes and the drain reason.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from bringup.commands import complete
from bringup.commands.common import (
    JsonOpt,
    ProfileOpt,
    QuietOpt,
    create_run,
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
    from rich.console import Console

    from bringup.fleet import healthcheck as hc
    from bringup.fleet.inventory import Host
    from bringup.fleet.local import local_runner
    from bringup.fleet.plan import FleetError, plan_node
    from bringup.fleet.run import run as run_fleet

    started = time.monotonic()
    name = hc.slurm_node_name(node)
    chosen = load_suite(suite_name)
    # auto (the default): this node judged by its own GPU's profile, never drained for
    # being another model than a profile named for the whole cluster.
    prof = profile_or_auto(profile_name)
    runs = out_dir or hc.default_runs_dir()
    try:
        path = hc.new_run_path(runs)
    except OSError as exc:
        fail(f"cannot create a run under {runs}: {exc.strerror or exc}")
    run = create_run(path, "healthcheck", profile_name, chosen.name)
    runner = hc.within_budget(local_runner(), budget_s)
    try:
        plan = plan_node(Host(name=name, address="127.0.0.1"), runner, chosen, prof, remote=False)
    except FleetError as exc:
        fail(str(exc))
    seconds = hc.probe_seconds(budget_s - (time.monotonic() - started), drain)
    plan.request = hc.fit_to_budget(plan.request, seconds)
    plan.deadline_s = seconds
    # Quiet: slurmd logs what a health check prints; the verdict is the one line below.
    outcome = run_fleet([plan], run, forks=1, console=Console(stderr=True, quiet=True))[0]
    findings = outcome.findings
    code = hc.exit_code(findings)
    reason = hc.reason_text(findings)
    verdict: dict[str, Any] = {"node": name, "fit": code == hc.EXIT_FIT, "reason": reason}
    if drain:
        verdict.update(_drain_or_resume(name, reason, budget_s - (time.monotonic() - started)))
    verdict["seconds"] = round(time.monotonic() - started, 3)
    verdict["budget_s"] = budget_s
    _write_verdict(run.path, verdict)
    run.finish("complete", code)
    hc.prune_runs(runs, keep, current=run.path)
    if as_json:
        # Fitness for the next job (exit 0 fit, 1 unfit: what Slurm's Prolog reads), not an
        # acceptance: no verdict word, `data.healthcheck.fit` says it.
        data = {"healthcheck": verdict}
        print_envelope(findings, exit_code=code, judged=False, run=run, data=data)
    else:
        _say(verdict, run.path)
    raise typer.Exit(code)


def _drain_or_resume(node: str, reason: str | None, left_s: float) -> dict[str, Any]:
    """--drain: what Slurm says of the node, what was done, and any error talking to it.
    The two calls share what is left of the budget: the first half of it, the second the
    rest (half a second at least, for a budget already spent)."""
    from bringup.fleet import healthcheck as hc
    from bringup.fleet import slurmctl

    end = time.monotonic() + left_s
    try:
        state = slurmctl.node_state(node, max(left_s / 2, 0.5))
        action = hc.decide(reason, state)
        rest = max(end - time.monotonic(), 0.5)
        if action is hc.Action.DRAIN:
            assert reason is not None
            slurmctl.drain(node, reason, rest)
        elif action is hc.Action.RESUME:
            slurmctl.resume(node, rest)
    except slurmctl.SlurmError as exc:
        return {"action": "failed", "slurm_error": str(exc)}
    return {"action": action.value, "slurm_state": state.state, "slurm_reason": state.reason}


def _write_verdict(path: Path, verdict: dict[str, Any]) -> None:
    import json

    from bringup.files import write_atomic

    write_atomic(path / "healthcheck.json", json.dumps(verdict, indent=2) + "\n")


# What --drain did, as the verdict line says it.
_DONE = {
    "drain": "drained",
    "resume": "resumed",
    "keep": "left drained: drained by someone else",
    "failed": "Slurm not updated",
}


def _say(verdict: dict[str, Any], path: Path) -> None:
    """One line on stdout (slurmd's log keeps it): the verdict, the reason, what was done."""
    what = "fit" if verdict["fit"] else f"unfit: {verdict['reason']}"
    done = _DONE.get(verdict.get("action", ""), "")
    if verdict.get("slurm_error"):
        done += f" ({verdict['slurm_error']})"
    tail = f" [{done}]" if done else ""
    print(f"{verdict['node']}: {what}{tail}; run {path}", flush=True)
    if verdict.get("slurm_error"):
        print(f"warning: {verdict['slurm_error']}", file=sys.stderr)


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
