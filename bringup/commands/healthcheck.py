"""`bringup slurm healthcheck`: the command, and its lean path at every job start.

Slurm runs the health check at every job start (Prolog) and every few minutes
(HealthCheckProgram), so its CPU is paid again and again on every node. Building the
Typer app to run it imports typer, click and rich, and typer's option parsing builds
pydantic adapters: more CPU than the check itself (benchmarks/node_side.py). So the entry
point (bringup/cli.py) asks `answer` first, as it asks commands/tab.py for a TAB: a
command line this module reads exactly as the app would (`parse`) runs `check` here;
any other (help, an option it does not know, a value the app might read otherwise or
refuse, a completion) returns None and the app answers, slower, never differently.

`check` is the one body of the command: the Typer command in commands/slurm.py calls it
too. The checks that judge the node, the run directory, the budget and the drain are the
same code either way (fleet.plan, fleet.run, fleet.healthcheck, fleet.slurmctl); only the
reading of the command line differs. Bad input raises `Refused`, said through
common.fail (rich and typer load for that one line): byte for byte the app's words.
tests/unit/test_healthcheck_lean.py runs both on the same inputs and compares.
"""

from __future__ import annotations

import errno
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bringup.commands.invocation import (
    INVOCATION,
    Invocation,
    Refused,
    named_profile_or_auto,
    named_suite,
    new_run,
    print_envelope,
    sigterm_as_ctrl_c,
)

COMMAND = ("slurm", "healthcheck")


@dataclass(frozen=True)
class Options:
    """The command's options, as the Typer command declares them (commands/slurm.py)."""

    suite_name: str = "prolog"
    profile_name: str = "auto"
    drain: bool = False
    budget_s: float = 10.0
    out_dir: Path | None = None
    keep: int = 50
    node: str | None = None
    as_json: bool = False
    quiet: bool = False


# --- the lean path: the command line read as the app reads it, or not at all ---------------

# option -> field of Options; a flag's field is set True
_VALUED = {
    "--suite": "suite_name",
    "-s": "suite_name",
    "--profile": "profile_name",
    "-p": "profile_name",
    "--budget-s": "budget_s",
    "--out": "out_dir",
    "-o": "out_dir",
    "--keep": "keep",
    "--node": "node",
}
_FLAGS = {"--drain": "drain", "--json": "as_json", "--quiet": "quiet", "-q": "quiet"}
# The numbers read here exactly as typer's parser reads them, and within its bounds
# (--budget-s at least 1, --keep at least 1): plain decimals. Anything else (1e1, 0x10,
# 1_000, nan, a sign, spaces) goes to the app, which accepts it or says why not.
_DECIMAL = re.compile(r"(0|[1-9][0-9]{0,8})(\.[0-9]{1,9})?")
_COUNT = re.compile(r"[1-9][0-9]{0,8}")


def parse(args: list[str]) -> Options | None:
    """The options of `bringup slurm healthcheck ARGS`, or None where the app must read
    the line: anything but the command's own options with plain values."""
    given: dict[str, Any] = {}
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg in _FLAGS:
            given[_FLAGS[arg]] = True
            continue
        name, eq, value = arg.partition("=")
        if eq and not name.startswith("--"):
            return None  # `-o=x`: click reads "=x" as the value
        if not eq:
            if arg not in _VALUED or not rest:
                return None  # help, an unknown option, an argument, a missing value
            name, value = arg, rest.pop(0)
        if name not in _VALUED or not value or value.startswith("-"):
            return None
        field = _VALUED[name]
        if field == "budget_s":
            if not _DECIMAL.fullmatch(value) or float(value) < 1.0:
                return None
            given[field] = float(value)
        elif field == "keep":
            if not _COUNT.fullmatch(value):
                return None
            given[field] = int(value)
        elif field == "out_dir":
            given[field] = Path(value)
        else:
            given[field] = value
    return Options(**given)


def answer(argv: list[str]) -> int | None:
    """Run `bringup ARGV` here when it is a health check this module reads (its exit
    status), else None: the app answers."""
    if argv[:2] != list(COMMAND) or _completing():
        return None
    options = parse(argv[2:])
    if options is None:
        return None
    # What the app's command group (common.Cli.invoke) sets for every command.
    token = INVOCATION.set(Invocation(json="--json" in argv, command=" ".join(COMMAND), argv=argv))
    try:
        with sigterm_as_ctrl_c():
            return check(options)
    except Refused as exc:
        return _refused(str(exc))
    except KeyboardInterrupt:
        return 130  # typer's exit for Ctrl-C (and SIGTERM, made one above), silent
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        # stdout closed by its reader: typer exits 1, quietly, as this does (what is left
        # to flush at exit goes nowhere)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    finally:
        INVOCATION.reset(token)


def _completing() -> bool:
    """A shell asking for completions: the app's, and commands/tab.py's, to answer."""
    from bringup.commands import tab

    return bool(os.environ.get(tab.complete_var(tab.program_name())))


def _refused(message: str) -> int:
    """Bad input said as the app says it (common.fail: the error line, the --json
    document, the run marked refused), and its exit status."""
    import typer

    from bringup.commands.common import fail

    try:
        fail(message)
    except typer.Exit as exc:
        return exc.exit_code


# --- the command ----------------------------------------------------------------------------


def check(options: Options) -> int:
    """Run the health check on this node: its exit status (0 fit, 1 unfit). Bad input
    raises Refused."""
    from bringup.fleet import healthcheck as hc
    from bringup.fleet.inventory import Host
    from bringup.fleet.local import local_runner
    from bringup.fleet.plan import FleetError, plan_node
    from bringup.fleet.progress import Silent
    from bringup.fleet.run import run as run_fleet

    o = options
    started = time.monotonic()
    name = hc.slurm_node_name(o.node)
    chosen = named_suite(o.suite_name)
    # auto (the default): this node judged by its own GPU's profile, never drained for
    # being another model than a profile named for the whole cluster.
    prof = named_profile_or_auto(o.profile_name)
    runs = o.out_dir or hc.default_runs_dir()
    try:
        path = hc.new_run_path(runs)
    except OSError as exc:
        raise Refused(f"cannot create a run under {runs}: {exc.strerror or exc}") from None
    run = new_run(path, "healthcheck", o.profile_name, chosen.name)
    runner = hc.within_budget(local_runner(), o.budget_s)
    try:
        plan = plan_node(Host(name=name, address="127.0.0.1"), runner, chosen, prof, remote=False)
    except FleetError as exc:
        raise Refused(str(exc)) from None
    seconds = hc.probe_seconds(o.budget_s - (time.monotonic() - started), o.drain)
    plan.request = hc.fit_to_budget(plan.request, seconds)
    plan.deadline_s = seconds
    # Silent: slurmd logs what a health check prints; the verdict is the one line below.
    outcome = run_fleet([plan], run, forks=1, console=Silent())[0]
    findings = outcome.findings
    code = hc.exit_code(findings)
    reason = hc.reason_text(findings)
    verdict: dict[str, Any] = {"node": name, "fit": code == hc.EXIT_FIT, "reason": reason}
    if o.drain:
        left = o.budget_s - (time.monotonic() - started)
        verdict.update(_drain_or_resume(name, reason, left))
    verdict["seconds"] = round(time.monotonic() - started, 3)
    verdict["budget_s"] = o.budget_s
    _write_verdict(run.path, verdict)
    run.finish("complete", code)
    hc.prune_runs(runs, o.keep, current=run.path)
    if o.as_json:
        # Fitness for the next job (exit 0 fit, 1 unfit: what Slurm's Prolog reads), not an
        # acceptance: no verdict word, `data.healthcheck.fit` says it.
        data = {"healthcheck": verdict}
        print_envelope(findings, exit_code=code, judged=False, run=run, data=data)
    else:
        _say(verdict, run.path)
    return code


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
