"""What every command shares: the consoles, `fail`, the options that mean the same in every
command, loading what the user named (profile, suite, run directory), the nodes a command
runs on, and a run's JSON document. How findings look on a terminal is commands/show.py.

A command module defines its Typer function with these options and imports anything
heavy (pydantic models, the fleet, the report, torch, Ansible) inside it, so that
`bringup --help` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console

if TYPE_CHECKING:
    from bringup import profile, suite
    from bringup.facts import NodeFacts
    from bringup.findings import Finding
    from bringup.fleet.target import Nodes, Target
    from bringup.rundir import RunDir

out = Console()
err = Console(stderr=True)


def fail(message: str) -> NoReturn:
    """Bad input: one line on stderr, exit 2."""
    # soft_wrap: one line however narrow the terminal, so scripts can grep it.
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


# --- options: each long option means one thing in every command ----------------------------

ProfileOpt = Annotated[
    str, typer.Option("--profile", "-p", help="Profile name (b300, h100, ...) or YAML path.")
]
SuiteOpt = Annotated[str, typer.Option("--suite", "-s", help="Suite name or YAML path.")]
DataDirOpt = Annotated[
    list[Path] | None,
    typer.Option("--data-dir", help="Directory for the NVMe and free-space checks (repeatable)."),
]
OutOpt = Annotated[
    Path | None, typer.Option("--out", "-o", help="Run directory (default runs/<time>-<cmd>).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document, nothing else.")]
LocalOpt = Annotated[bool, typer.Option("--local", help="Run on this machine.")]
NodesOpt = Annotated[
    Path | None,
    typer.Option("--nodes", "-n", help="Ansible inventory (hosts.ini, YAML): run over SSH."),
]
LimitOpt = Annotated[
    str | None, typer.Option("--limit", "-l", help="Select hosts as ansible --limit does.")
]
ForksOpt = Annotated[int, typer.Option("--forks", "-f", min=1, help="Nodes run at once.")]
AcceptOpt = Annotated[
    bool,
    typer.Option("--accept-new-hostkeys", help="Trust (and record) host keys seen the first time."),
]
ConnectTimeoutOpt = Annotated[
    float, typer.Option("--connect-timeout", min=0.1, help="Seconds for TCP, banner and auth.")
]


# --- loading what the user named: one line and exit 2 when it cannot be --------------------


def load_profile(name: str) -> profile.Profile:
    from bringup import profile

    try:
        return profile.load(name)
    except profile.ProfileError as exc:
        fail(str(exc))


def load_suite(name: str) -> suite.Suite:
    from bringup import suite

    try:
        return suite.load(name)
    except suite.SuiteError as exc:
        fail(str(exc))


def load_facts(path: Path) -> list[NodeFacts]:
    from bringup.rundir import RunDirError, load_facts

    try:
        return load_facts(path)
    except RunDirError as exc:
        fail(str(exc))


def create_run(
    out_dir: Path | None, command: str, profile_name: str | None, suite_name: str | None
) -> RunDir:
    from bringup.rundir import RunDir, RunDirError, default_path

    try:
        return RunDir.create(out_dir or default_path(command), command, profile_name, suite_name)
    except RunDirError as exc:
        fail(str(exc))


def target(
    local: bool,
    nodes_file: Path | None,
    limit: str | None = None,
    forks: int = 64,
    accept_new_hostkeys: bool = False,
    connect_timeout: float = 10.0,
) -> Target:
    """The nodes the options name: exactly one of --local and --nodes."""
    from bringup.fleet.target import Target

    if local == (nodes_file is not None):
        fail("say where to run: --local (this machine) or --nodes hosts.ini")
    if limit and nodes_file is None:
        fail("--limit selects hosts of an inventory: give --nodes FILE")
    return Target(nodes_file, limit, forks, accept_new_hostkeys, connect_timeout)


def open_nodes(chosen: Target) -> Nodes:
    from bringup.fleet.target import TargetError, open_nodes

    try:
        return open_nodes(chosen)
    except TargetError as exc:
        fail(str(exc))


def finish_run(run: RunDir, findings: list[Finding]) -> int:
    """Close the run directory with the exit code its findings give; that code."""
    from bringup.findings import exit_code

    code = exit_code(findings)
    run.finish("complete" if run.manifest.status == "running" else run.manifest.status, code)
    return code


def print_json(doc: dict[str, Any] | list[Any]) -> None:
    """The one JSON document a command prints with --json (nothing else on stdout)."""
    print(json.dumps(doc, indent=2))


def run_json(run: RunDir, findings: list[Finding], **extra: Any) -> dict[str, Any]:
    """A run's JSON document: its directory, exit code and findings, plus what is given."""
    from bringup.findings import exit_code

    return {
        "run_dir": str(run.path),
        "exit_code": exit_code(findings),
        "findings": [f.model_dump(mode="json") for f in findings],
        **extra,
    }


def show_run(
    run: RunDir,
    findings: list[Finding],
    title: str,
    durations: dict[str, dict[str, float]] | None = None,
) -> None:
    """A run's verdict for people: its findings, what each probe cost (when given), then
    where the run directory is."""
    from bringup.commands.show import duration_lines, show_findings

    show_findings(out, findings, run.manifest.nodes, title)
    for line in duration_lines(durations or {}):
        out.print(line, highlight=False, soft_wrap=True)
    out.print(f"run directory: {run.path}", highlight=False)
