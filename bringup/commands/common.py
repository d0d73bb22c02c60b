"""What every command shares: the consoles, `fail`, the options that mean the same in every
command, loading what the user named (profile, suite, run directory), the nodes a command
runs on, and a run's JSON document. How findings look on a terminal is commands/show.py.

A command module defines its Typer function with these options and imports anything
heavy (pydantic models, the fleet, the report, torch, Ansible) inside it, so that
`bringup --help` stays fast.

With --json every command prints one document, the envelope of commands/envelope.py
(docs/json.md), through `print_envelope`.

Bad input ends the same way in every command, whether bringup or the option parser finds
it: `fail` prints one line on stderr (and with --json the envelope on stdout, with
`"error"` and `"exit_code": 2`), marks a run directory already created "refused", and
exits 2. What `fail` needs to know of the invocation (--json given, the run directory) is
set by the command group for each invocation, so nothing carries over to the next.
"""

from __future__ import annotations

import contextlib
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperGroup

from bringup.commands import complete

# An invocation's state, loaders, run and envelope, without typer or rich (the health
# check's lean path uses them: commands/healthcheck.py); re-exported for every command.
from bringup.commands.invocation import INVOCATION as _INVOCATION
from bringup.commands.invocation import Invocation as _Invocation
from bringup.commands.invocation import Refused, named_profile, named_suite, new_run, no_space_line
from bringup.commands.invocation import one_line as one_line
from bringup.commands.invocation import origin_json as origin_json
from bringup.commands.invocation import print_envelope as print_envelope
from bringup.commands.invocation import print_json as print_json
from bringup.commands.invocation import provenance as provenance
from bringup.commands.invocation import remember_run as remember_run
from bringup.commands.invocation import run_origin as run_origin
from bringup.commands.invocation import sigterm_as_ctrl_c as _sigterm_as_ctrl_c

if TYPE_CHECKING:
    from bringup import profile, suite
    from bringup.facts import NodeFacts
    from bringup.findings import Finding
    from bringup.fleet.run import NodeOutcome
    from bringup.fleet.slurm import SlurmChoice
    from bringup.fleet.tally import Tally
    from bringup.fleet.target import Nodes, Target
    from bringup.provenance import Provenance, Resumed
    from bringup.rundir import RunDir

out = Console()
err = Console(stderr=True)


def fail(message: str) -> NoReturn:
    """Bad input: one line on stderr (and the JSON document with --json), exit 2."""
    line = one_line(message)
    now = _INVOCATION.get()
    if now is not None and now.run is not None and now.run.manifest.status == "running":
        # The refusal is what matters: the directory may be what is broken.
        with contextlib.suppress(OSError):
            now.run.finish("refused", 2)
    if now is not None and now.json:
        run_dir = str(now.run.path) if now.run is not None else None
        print_envelope([], exit_code=2, judged=False, run_dir=run_dir, error=line)
    # Text, not markup: a path or a node's name with `[/]` in it is printed as it is.
    # soft_wrap: one line however narrow the terminal, so scripts can grep it.
    err.print(Text.assemble(("error:", "bold red"), " ", line), highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def progress_console() -> Console:
    """Where a fleet run shows its progress: stderr. With --json, only on a terminal: a
    script reading the one document gets nothing else, not even the plain status lines
    (and the closing "N nodes in S s") written where stderr is a pipe or a log."""
    now = _INVOCATION.get()
    return Console(stderr=True, quiet=now is not None and now.json and not err.is_terminal)


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
            token = _INVOCATION.set(_Invocation("--json" in args, self.command_of(args)))
            try:
                fail(exc.format_message())
            finally:
                _INVOCATION.reset(token)
        ctx.meta["bringup.args"] = list(args)
        return ctx

    def invoke(self, ctx: Any) -> Any:
        args = ctx.meta.get("bringup.args", [])
        token = _INVOCATION.set(
            _Invocation(json="--json" in args, command=self.command_of(args), argv=list(args))
        )
        try:
            with _sigterm_as_ctrl_c():
                return super().invoke(ctx)
        except _parser_errors.UsageError as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":
                raise  # `bringup profiles` alone: the help, as asked
            fail(exc.format_message())
        except OSError as exc:
            # A full disk anywhere a command writes (the run directory's facts, findings or
            # manifest; a report's files): one line, exit 2, not a traceback. What was
            # written before stays (docs/fleet.md, "A full disk").
            line = no_space_line(exc, _INVOCATION.get())
            if line is None:
                raise
            fail(line)
        finally:
            _INVOCATION.reset(token)

    def command_of(self, args: list[str]) -> str:
        """The command the arguments name, subcommands joined: 'profiles list'."""
        names: list[str] = []
        group: Any = self
        for arg in args:
            found = getattr(group, "commands", {}).get(arg)
            if found is None:
                if arg.startswith("-"):
                    continue  # an option of a group (`bringup --version`) comes first
                break
            names.append(arg)
            group = found
        return " ".join(names)


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
        autocompletion=complete.profiles,
    ),
]
SuiteOpt = Annotated[
    str,
    typer.Option("--suite", "-s", help="Suite name or YAML path.", autocompletion=complete.suites),
]
DataDirOpt = Annotated[
    list[Path] | None,
    typer.Option("--data-dir", help="Directory for the NVMe and free-space checks (repeatable)."),
]
OutOpt = Annotated[
    Path | None, typer.Option("--out", "-o", help="Run directory (default runs/<time>-<cmd>).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document, nothing else.")]
QuietOpt = Annotated[
    bool,
    typer.Option(
        "--quiet", "-q", help="Print only the outcome line: the verdict, or what was made."
    ),
]
LocalOpt = Annotated[bool, typer.Option("--local", help="Run on this machine.")]
NodesOpt = Annotated[
    Path | None,
    typer.Option("--nodes", "-n", help="Ansible inventory (hosts.ini, YAML): run over SSH."),
]
LimitOpt = Annotated[
    str | None,
    typer.Option(
        "--limit",
        "-l",
        help="Only the nodes this Ansible host pattern selects.",
        autocompletion=complete.limit,
    ),
]
ForksOpt = Annotated[int, typer.Option("--forks", "-f", min=1, help="Nodes run at once.")]
# What one node may store (bringup/fleet/target.py NodeCaps; docs/reference.md): a node past
# either is an ERROR and nothing more of it is written.
MaxRawMibOpt = Annotated[
    int,
    typer.Option("--max-raw-mib", min=1, help="Raw tool output one node may store, in MiB."),
]
MaxRawFilesOpt = Annotated[
    int,
    typer.Option("--max-raw-files", min=1, help="Raw tool output files one node may store."),
]
AcceptOpt = Annotated[
    bool,
    typer.Option("--accept-new-hostkeys", help="Trust (and record) host keys seen the first time."),
]
SlurmOpt = Annotated[
    bool,
    typer.Option(
        "--slurm", help="Run through Slurm: srun on the nodes of an allocation (docs/slurm.md)."
    ),
]
PartitionOpt = Annotated[
    str | None, typer.Option("--partition", help="--slurm: the partition to allocate from.")
]
NodelistOpt = Annotated[
    str | None,
    typer.Option("--nodelist", help="--slurm: these Slurm nodes (node[01-04],gpu7)."),
]
NodesCountOpt = Annotated[
    int | None, typer.Option("--nodes-count", min=1, help="--slurm: allocate this many nodes.")
]
AccountOpt = Annotated[
    str | None, typer.Option("--account", help="--slurm: the account to charge.")
]
TimeOpt = Annotated[
    str | None, typer.Option("--time", help="--slurm: the allocation's time limit (1:00:00).")
]
ConnectTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--connect-timeout", min=0.1, callback=finite, help="Seconds for TCP, banner and auth."
    ),
]


# --- loading what the user named: one line and exit 2 when it cannot be --------------------


def load_profile(name: str) -> profile.Profile:
    try:
        return named_profile(name)
    except Refused as exc:
        fail(str(exc))


def profile_or_auto(name: str) -> profile.Profile | str:
    """--profile: the profile named, or profile.AUTO (each node judged by its GPU's)."""
    from bringup import profile

    return profile.AUTO if name == profile.AUTO else load_profile(name)


def load_suite(name: str) -> suite.Suite:
    try:
        return named_suite(name)
    except Refused as exc:
        fail(str(exc))


def load_facts(path: Path) -> list[NodeFacts]:
    from bringup.rundir import RunDirError, load_facts

    try:
        return load_facts(path)
    except RunDirError as exc:
        fail(str(exc))


def resumed() -> Resumed:
    """This invocation as one `--resume` of a run."""
    from bringup.provenance import Resumed
    from bringup.rundir import now

    made = provenance("resume")
    return Resumed(at=now(), argv=made.argv, controller=made.controller)


def create_run(
    out_dir: Path | None,
    command: str,
    profile_name: str | None,
    suite_name: str | None,
    made: Provenance | None = None,
    probes: list[str] | None = None,
) -> RunDir:
    """A new run directory, its manifest saying how it is made (`made`: a live run of this
    command line by default) and which probes each node is asked for (`probes`)."""
    try:
        return new_run(out_dir, command, profile_name, suite_name, made, probes)
    except Refused as exc:
        fail(str(exc))


def target(
    local: bool,
    nodes_file: Path | None,
    limit: str | None = None,
    forks: int = 64,
    accept_new_hostkeys: bool = False,
    connect_timeout: float = 10.0,
    slurm: SlurmChoice | None = None,
    command: str = "run",
    max_raw_mib: int = 256,
    max_raw_files: int = 2000,
) -> Target:
    """The nodes the options name: exactly one of --local, --nodes and --slurm (which
    takes an inventory too: its hosts, by name, and their variables), and what each node
    may store (--max-raw-mib, --max-raw-files)."""
    from bringup.fleet.target import NodeCaps, Target

    if slurm is not None and local:
        fail("--slurm runs on the nodes of a Slurm allocation: not with --local")
    if slurm is None and local == (nodes_file is not None):
        fail("say where to run: --local (this machine) or --nodes hosts.ini (or --slurm)")
    if limit and nodes_file is None:
        fail("--limit selects hosts of an inventory: give --nodes FILE")
    job_name = f"bringup-{command}"  # an allocation it asks for, as squeue shows it
    caps = NodeCaps(raw_bytes=max_raw_mib * 2**20, raw_files=max_raw_files)
    return Target(
        nodes_file, limit, forks, accept_new_hostkeys, connect_timeout, slurm, job_name, caps
    )


def slurm_choice(
    slurm: bool,
    partition: str | None = None,
    nodelist: str | None = None,
    nodes_count: int | None = None,
    account: str | None = None,
    time: str | None = None,
) -> SlurmChoice | None:
    """The --slurm options as one choice; None without --slurm (its options then refused)."""
    from bringup.fleet.slurm import SlurmChoice

    given = {
        "--partition": partition,
        "--nodelist": nodelist,
        "--nodes-count": nodes_count,
        "--account": account,
        "--time": time,
    }
    if not slurm:
        for option, value in given.items():
            if value is not None:
                fail(f"{option} is an option of --slurm: give --slurm too")
        return None
    return SlurmChoice(partition, nodelist, nodes_count, account, time)


def record_slurm(run: RunDir, nodes: Nodes) -> None:
    """The manifest names the Slurm job and its nodes of a --slurm run."""
    if nodes.allocation is not None:
        run.manifest.slurm_job_id = nodes.allocation.job_id
        run.manifest.slurm_nodes = list(nodes.allocation.nodes)
        run.save_manifest()


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


def finish_run(run: RunDir, findings: list[Finding] | Tally) -> int:
    """Close the run directory with the exit code its verdict gives; that code: 0 only
    for ACCEPTED (findings all good, every record measured live). A run judged with
    --profile auto records the profile its nodes were judged by, when they all were by
    one (a mixed fleet stays "auto": each node's is in its findings)."""
    from bringup.fleet.tally import tallied
    from bringup.profile import AUTO
    from bringup.provenance import accepted_counted

    tally = tallied(findings)
    if run.manifest.profile == AUTO and len(tally.profiles) == 1 and tally.profiles_pass:
        run.manifest.profile = str(next(iter(tally.profiles)))
    code = 0 if accepted_counted(tally.total, tally.bad, run_origin(run)) else 1
    run.manifest.findings_bad = tally.bad
    run.finish("complete" if run.manifest.status == "running" else run.manifest.status, code)
    return code


def node_entries(outcomes: list[NodeOutcome]) -> list[dict[str, Any]]:
    """The envelope's `nodes` of a run: each node's state, why, how long."""
    return [
        {"node": o.node, "state": o.state, "reason": o.reason, "seconds": o.seconds}
        for o in outcomes
    ]


def recorded_entries(nodes: list[NodeFacts]) -> list[dict[str, Any]]:
    """The envelope's `nodes` of recorded facts judged again (--replay, --demo, inspect)."""
    return [{"node": n.node, "state": "recorded", "probes": probe_states(n)} for n in nodes]


def probe_states(node: NodeFacts) -> dict[str, dict[str, Any]]:
    """Each probe of a node: whether it recorded facts, else why not."""
    return {name: {"ok": r.ok, "error": r.error} for name, r in node.probes.items()}


def show_run(
    run: RunDir,
    findings: list[Finding] | Tally,
    title: str,
    durations: dict[str, dict[str, float]] | None = None,
    quiet: bool = False,
) -> None:
    """A run's verdict for people: its findings, what each probe cost (when given), where
    the run directory is, and last the verdict line (with --quiet that line alone), which
    says when the facts were not measured by this run (demo data, a replay)."""
    from bringup.commands.show import duration_lines, plain, show_findings, verdict_line
    from bringup.fleet.tally import tallied

    findings = tallied(findings)  # a list tallied once for the tables and the verdict
    if not quiet:
        show_findings(out, findings, run.manifest.nodes, title)
        for line in duration_lines(durations or {}):
            out.print(line, highlight=False, soft_wrap=True)
        out.print(f"run directory: {run.path}", highlight=False)
    for node, changes in run.manifest.overrides.items():
        told = ", ".join(change.line() for change in changes)
        out.print(plain(f"{node} judged with overrides: {told}"), soft_wrap=True)
    # Facts this run did not measure live (demo data, a replay, files, simulated GPUs):
    # said where the verdict is, and never ACCEPTED.
    line = verdict_line(findings, origin=run_origin(run), overrides=bool(run.manifest.overrides))
    out.print(line, highlight=False, soft_wrap=True)
