"""What every command shares: the consoles, `fail`, the options that mean the same in every
command, loading what the user named (profile, suite, run directory), the nodes a command
runs on, and a run's JSON document. How findings look on a terminal is commands/show.py.

A command module defines its Typer function with these options and imports anything
heavy (pydantic models, the fleet, the report, torch, Ansible) inside it, so that
`bringup --help` stays fast.

Bad input ends the same way in every command, whether bringup or the option parser finds
it: `fail` prints one line on stderr (and with --json one JSON document on stdout,
`{"error": ..., "exit_code": 2}`), marks a run directory already created "refused", and
exits 2. What `fail` needs to know of the invocation (--json given, the run directory) is
set by the command group for each invocation, so nothing carries over to the next.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperGroup

if TYPE_CHECKING:
    from bringup import profile, suite
    from bringup.facts import NodeFacts
    from bringup.findings import Finding
    from bringup.fleet.target import Nodes, Target
    from bringup.rundir import RunDir

out = Console()
err = Console(stderr=True)


@dataclass
class _Invocation:
    """What `fail` needs to know of the command line being run."""

    json: bool  # --json given: stdout carries one JSON document, an error too
    run: RunDir | None = None  # the run directory created or reopened, if any


_INVOCATION: ContextVar[_Invocation | None] = ContextVar("bringup_invocation", default=None)


def fail(message: str) -> NoReturn:
    """Bad input: one line on stderr (and the JSON document with --json), exit 2."""
    line = one_line(message)
    now = _INVOCATION.get()
    if now is not None and now.run is not None and now.run.manifest.status == "running":
        # The refusal is what matters: the directory may be what is broken.
        with contextlib.suppress(OSError):
            now.run.finish("refused", 2)
    if now is not None and now.json:
        print_json({"error": line, "exit_code": 2})
    # Text, not markup: a path or a node's name with `[/]` in it is printed as it is.
    # soft_wrap: one line however narrow the terminal, so scripts can grep it.
    err.print(Text.assemble(("error:", "bold red"), " ", line), highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def one_line(text: str) -> str:
    """The text with its control characters (newlines, ESC, ...) written as escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def remember_run(run: RunDir) -> RunDir:
    """The run directory of this invocation: `fail` marks it refused."""
    now = _INVOCATION.get()
    if now is not None:
        now.run = run
    return run


def not_for(ctx: typer.Context, mode: str, *names: str) -> None:
    """Refuse the options among `names` (parameter names) given on the command line: they
    do nothing in the chosen mode, and a user who gave one expects it to."""
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name) if param.name in names else None
        if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT"):
            fail(f"{param.opts[0]} does not apply to {mode}")


# The click that typer runs on (its own copy since typer 0.29): typer re-exports
# BadParameter only, whose module holds the other parser errors.
_parser_errors = sys.modules[typer.BadParameter.__module__]


class Cli(TyperGroup):
    """The command group: an option the parser refuses (`--forks 0`, a missing argument, an
    unknown option) ends like any other bad input, through `fail`. Its help shows a flag as
    a flag (typer's rich help writes `--demo <bool>`, as if it took a value)."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
    ) -> Any:
        if parent is None:  # the whole app is built by now, --install-completion included
            _flags_as_flags(self)
        try:
            ctx = super().make_context(info_name, args, parent, **extra)
        except _parser_errors.UsageError as exc:  # `bringup --nosuch`: before any command
            if type(exc).__name__ == "NoArgsIsHelpError":
                raise  # `bringup` alone: the help
            token = _INVOCATION.set(_Invocation(json="--json" in args))
            try:
                fail(exc.format_message())
            finally:
                _INVOCATION.reset(token)
        ctx.meta["bringup.args"] = list(args)
        return ctx

    def invoke(self, ctx: Any) -> Any:
        args = ctx.meta.get("bringup.args", [])
        token = _INVOCATION.set(_Invocation(json="--json" in args))
        try:
            return super().invoke(ctx)
        except _parser_errors.UsageError as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":
                raise  # `bringup profiles` alone: the help, as asked
            fail(exc.format_message())
        finally:
            _INVOCATION.reset(token)


def _flags_as_flags(command: Any) -> None:
    """No value column for the flags of a command and all its subcommands (--help too: the
    command makes that option once and keeps it, so it is made here)."""
    help_option = command.get_help_option(typer.Context(command))
    for param in [*command.params, *([help_option] if help_option else [])]:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        _flags_as_flags(sub)


# --- options: each long option means one thing in every command ----------------------------


def finite(value: float | None) -> float | None:
    """Callback of every float option: typer reads `nan` and `inf` as numbers, and a nan
    passes any min/max (every comparison with it is false)."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number")
    return value


ProfileOpt = Annotated[
    str,
    typer.Option(
        "--profile",
        "-p",
        help="Profile name (b300, h100, ...), YAML path, or auto: each node's own GPU's.",
    ),
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
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Print only the verdict line.")]
LocalOpt = Annotated[bool, typer.Option("--local", help="Run on this machine.")]
NodesOpt = Annotated[
    Path | None,
    typer.Option("--nodes", "-n", help="Ansible inventory (hosts.ini, YAML): run over SSH."),
]
LimitOpt = Annotated[
    str | None,
    typer.Option("--limit", "-l", help="Only the nodes this Ansible host pattern selects."),
]
ForksOpt = Annotated[int, typer.Option("--forks", "-f", min=1, help="Nodes run at once.")]
AcceptOpt = Annotated[
    bool,
    typer.Option("--accept-new-hostkeys", help="Trust (and record) host keys seen the first time."),
]
ConnectTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--connect-timeout", min=0.1, callback=finite, help="Seconds for TCP, banner and auth."
    ),
]


# --- loading what the user named: one line and exit 2 when it cannot be --------------------


def load_profile(name: str) -> profile.Profile:
    from bringup import profile

    if name == profile.AUTO:
        fail("auto is not a profile, it picks one per GPU: name one (bringup profiles list)")
    try:
        return profile.load(name)
    except profile.ProfileError as exc:
        fail(str(exc))


def profile_or_auto(name: str) -> profile.Profile | str:
    """--profile: the profile named, or profile.AUTO (each node judged by its GPU's)."""
    from bringup import profile

    return profile.AUTO if name == profile.AUTO else load_profile(name)


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
        run = RunDir.create(out_dir or default_path(command), command, profile_name, suite_name)
    except RunDirError as exc:
        fail(str(exc))
    return remember_run(run)


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


def select_nodes(names: list[str], limit: str, where: str = "the recorded nodes") -> list[str]:
    """The recorded nodes an Ansible --limit pattern selects, as it selects an inventory's."""
    from bringup.fleet.inventory import InventoryError, select

    try:
        return select(names, limit, where)
    except InventoryError as exc:
        fail(str(exc))


def open_nodes(chosen: Target) -> Nodes:
    from bringup.fleet.target import TargetError, open_nodes

    try:
        return open_nodes(chosen)
    except TargetError as exc:
        fail(str(exc))


def finish_run(run: RunDir, findings: list[Finding]) -> int:
    """Close the run directory with the exit code its findings give; that code. A run
    judged with --profile auto records the profile its nodes were judged by, when they
    all were by one (a mixed fleet stays "auto": each node's is in its findings)."""
    from bringup.checks.auto import CHECK
    from bringup.findings import Status, exit_code
    from bringup.profile import AUTO

    if run.manifest.profile == AUTO:
        said = [f for f in findings if f.check == CHECK]
        named = {f.value for f in said}
        if len(named) == 1 and all(f.status is Status.PASS for f in said):
            run.manifest.profile = str(named.pop())
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
    quiet: bool = False,
) -> None:
    """A run's verdict for people: its findings, what each probe cost (when given), where
    the run directory is, and last the verdict line (with --quiet that line alone)."""
    from bringup.commands.show import duration_lines, show_findings, verdict_line

    if not quiet:
        show_findings(out, findings, run.manifest.nodes, title)
        for line in duration_lines(durations or {}):
            out.print(line, highlight=False, soft_wrap=True)
        out.print(f"run directory: {run.path}", highlight=False)
    out.print(verdict_line(findings), highlight=False, soft_wrap=True)
