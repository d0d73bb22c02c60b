"""The `bringup` command line: check, inspect, snapshot, profiles."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from bringup import __version__, profile, suite
from bringup.checks.catalog import judge_node
from bringup.console import node_table, show_findings, summary_line
from bringup.demo import fleet
from bringup.facts import NodeFacts
from bringup.findings import Finding, exit_code
from bringup.inspect import InspectError, inspect_text, is_facts_json, read_text
from bringup.options import (
    AcceptOpt,
    ConnectTimeoutOpt,
    DataDirOpt,
    ForksOpt,
    JsonOpt,
    LimitOpt,
    NodesOpt,
    OutOpt,
    ProfileOpt,
    SuiteOpt,
)
from bringup.rundir import RunDir, RunDirError, default_path, load_facts
from bringup.transport import TransportError

app = typer.Typer(
    help="GPU cluster bring-up and acceptance: probe nodes, judge them against a profile.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
profiles_app = typer.Typer(help="List and show the shipped profiles.", no_args_is_help=True)
app.add_typer(profiles_app, name="profiles")

out = Console()
err = Console(stderr=True)


def fail(message: str) -> NoReturn:
    """Bad input: one line on stderr, exit 2 (DESIGN.md contracts)."""
    # soft_wrap: one line however narrow the terminal, so scripts can grep it.
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def version_callback(value: bool) -> None:
    if value:
        out.print(f"bringup {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=version_callback, is_eager=True)
    ] = False,
) -> None:
    """GPU cluster bring-up and acceptance."""


# --- check ----------------------------------------------------------------------------


@app.command()
def check(
    local: Annotated[bool, typer.Option("--local", help="Probe this machine.")] = False,
    nodes_file: NodesOpt = None,
    replay: Annotated[
        Path | None, typer.Option("--replay", help="Re-judge the facts of a run or snapshot.")
    ] = None,
    demo: Annotated[
        bool, typer.Option("--demo", help="Replay the embedded demo fleet (B300 nodes).")
    ] = False,
    resume: Annotated[
        Path | None,
        typer.Option("--resume", help="Continue a run directory: only what did not finish."),
    ] = None,
    limit: LimitOpt = None,
    forks: ForksOpt = 64,
    accept_new_hostkeys: AcceptOpt = False,
    connect_timeout: ConnectTimeoutOpt = 10.0,
    profile_name: ProfileOpt = "b300",
    suite_name: SuiteOpt = "acceptance",
    data_dirs: DataDirOpt = None,
    out_dir: OutOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the suite on nodes (--nodes, --local) or re-judge recorded facts (--replay, --demo)."""
    sources = [local, nodes_file is not None or resume is not None, replay is not None, demo]
    if sum(sources) != 1:
        fail("say where the facts come from: --nodes FILE, --local, --replay DIR or --demo")
    if limit and nodes_file is None and resume is None:
        fail("--limit selects hosts of an inventory: give --nodes FILE")
    if local or nodes_file is not None or resume is not None:
        target = _Target(nodes_file, limit, forks, accept_new_hostkeys, connect_timeout)
        findings, run, outcomes = _probe_fleet(
            "check", target, suite_name, profile_name, data_dirs, out_dir, resume
        )
    else:
        prof = _load_profile(profile_name)
        nodes = fleet() if demo else _load_facts(replay)  # type: ignore[arg-type]
        run = _create_run(out_dir, "check", profile_name, None)
        for node in nodes:
            for record in node.probes.values():
                run.add_record(node.node, record.model_dump())
        findings = []
        for node in nodes:
            node_findings = judge_node(node, prof)
            run.add_findings(node_findings)
            findings.extend(node_findings)
        outcomes = []
    code = exit_code(findings)
    run.finish("complete" if run.manifest.status == "running" else run.manifest.status, code)
    _show(findings, run, as_json, outcomes)
    raise typer.Exit(code)


def _show(
    findings: list[Finding], run: RunDir, as_json: bool, outcomes: list[Any] | None = None
) -> None:
    code = exit_code(findings)
    if as_json:
        doc: dict[str, Any] = {
            "run_dir": str(run.path),
            "exit_code": code,
            "findings": [f.model_dump(mode="json") for f in findings],
        }
        if outcomes:
            doc["nodes"] = {
                o.node: {"state": o.state, "reason": o.reason, "seconds": o.seconds}
                for o in outcomes
            }
        print(json.dumps(doc, indent=2))
        return
    show_findings(out, findings, run.manifest.nodes, f"profile {run.manifest.profile}")
    out.print(f"run directory: {run.path}", highlight=False)


# --- snapshot -------------------------------------------------------------------------


@app.command()
def snapshot(
    nodes_file: NodesOpt = None,
    limit: LimitOpt = None,
    forks: ForksOpt = 64,
    accept_new_hostkeys: AcceptOpt = False,
    connect_timeout: ConnectTimeoutOpt = 10.0,
    suite_name: SuiteOpt = "quick",
    data_dirs: DataDirOpt = None,
    out_dir: OutOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Record facts and raw tool outputs of this node (or --nodes), to judge later."""
    if limit and nodes_file is None:
        fail("--limit selects hosts of an inventory: give --nodes FILE")
    target = _Target(nodes_file, limit, forks, accept_new_hostkeys, connect_timeout)
    _, run, outcomes = _probe_fleet("snapshot", target, suite_name, None, data_dirs, out_dir)
    run.finish("complete" if run.manifest.status == "running" else run.manifest.status, 0)
    recorded = {f.node: f for f in load_facts(run.path)} if (run.path / "facts").exists() else {}
    if nodes_file is None:
        node_facts = next(iter(recorded.values()), None)
        probes = {name: r.ok for name, r in node_facts.probes.items()} if node_facts else {}
        if as_json:
            print(json.dumps({"run_dir": str(run.path), "probes": probes}, indent=2))
            return
        for name, ok in probes.items():
            out.print(f"{name:10} {'recorded' if ok else 'recorded (error)'}")
        out.print(f"snapshot: {run.path}", highlight=False)
        return
    doc = {
        o.node: {
            "state": o.state,
            "reason": o.reason,
            "probes": {n: r.ok for n, r in recorded[o.node].probes.items()}
            if o.node in recorded
            else {},
        }
        for o in outcomes
    }
    if as_json:
        print(json.dumps({"run_dir": str(run.path), "nodes": doc}, indent=2))
    else:
        for node, entry in doc.items():
            probes = " ".join(f"{n}{'' if ok else '(error)'}" for n, ok in entry["probes"].items())
            out.print(f"{node:16} {entry['state']:12} {entry['reason'] or probes}", highlight=False)
        out.print(f"snapshot: {run.path}", highlight=False)
    bad = any(o.state != "complete" for o in outcomes)
    raise typer.Exit(1 if bad else 0)


class _Target:
    """Where a run goes: an inventory over SSH, or this machine (nodes_file None)."""

    def __init__(
        self,
        nodes_file: Path | None,
        limit: str | None,
        forks: int,
        accept_new_hostkeys: bool,
        connect_timeout: float,
    ) -> None:
        self.nodes_file = nodes_file
        self.limit = limit
        self.forks = forks
        self.accept_new_hostkeys = accept_new_hostkeys
        self.connect_timeout = connect_timeout


def _probe_fleet(
    command: str,
    target: _Target,
    suite_name: str,
    profile_name: str | None,
    data_dirs: list[Path] | None,
    out_dir: Path | None,
    resume: Path | None = None,
) -> tuple[list[Finding], RunDir, list[Any]]:
    """Run the suite on every node (or this one), recording each result as it arrives."""
    from bringup import fleet as fleet_run
    from bringup.rundir import load_manifest

    dirs = [str(p) for p in data_dirs or []]
    if resume is not None:
        manifest = load_manifest(resume)
        if manifest is None:
            fail(f"--resume {resume}: no readable manifest.json (not a run directory)")
        if manifest.inventory is None and target.nodes_file is None:
            fail(f"--resume {resume}: a --local run cannot be resumed; run it again")
        target.nodes_file = target.nodes_file or Path(manifest.inventory or "")
        target.limit = target.limit or manifest.limit
        # The run is judged as it started: its profile, suite and data directories.
        profile_name = manifest.profile
        suite_name = manifest.suite_source or manifest.suite or suite_name
        dirs = dirs or manifest.data_dirs
    try:
        chosen = suite.load(suite_name)
    except suite.SuiteError as exc:
        fail(str(exc))
    prof = _load_profile(profile_name) if profile_name else None
    if target.nodes_file is None:
        for path in data_dirs or []:
            if not path.is_dir():
                fail(f"--data-dir {path}: not a directory")
        dirs = [str(p.resolve()) for p in data_dirs or []]
    else:
        for path_text in dirs:
            if not path_text.startswith("/"):
                fail(f"--data-dir {path_text}: give an absolute path (it is a path on the nodes)")
    try:
        plans, connector = _plans(target, chosen, prof, dirs, resume)
    except fleet_run.FleetError as exc:
        fail(str(exc))
    if resume is not None:
        try:
            run = RunDir.reopen(resume)
        except RunDirError as exc:
            fail(str(exc))
        run.reset_findings()
    else:
        run = _create_run(out_dir, command, profile_name, chosen.name)
        if target.nodes_file is not None:
            run.manifest.inventory = str(target.nodes_file.resolve())
            run.manifest.limit = target.limit
            run.manifest.data_dirs = dirs
            given = Path(suite_name)
            run.manifest.suite_source = str(given.resolve()) if given.suffix else suite_name
            run.save_manifest()
    try:
        outcomes = fleet_run.run(plans, run, forks=target.forks, console=err)
    finally:
        if connector is not None:
            connector.close()
    findings = [f for o in outcomes for f in o.findings]
    return findings, run, outcomes


def _plans(
    target: _Target,
    chosen: suite.Suite,
    prof: profile.Profile | None,
    dirs: list[str],
    resume: Path | None,
) -> tuple[list[Any], Any]:
    """One plan per node: the local machine, or every host of the inventory."""
    from bringup import fleet as fleet_run

    if target.nodes_file is None:
        runner = fleet_run.local_runner()
        node = socket.gethostname()
        plan = fleet_run.plan_node(node, {}, runner, chosen, prof, dirs, remote=False)
        return [plan], None
    from bringup import inventory, ssh

    try:
        hosts = inventory.load(target.nodes_file, target.limit)
    except inventory.InventoryError as exc:
        fail(str(exc))
    done = {f.node: f for f in _load_facts(resume)} if resume is not None else {}
    settings = ssh.SshSettings(
        connect_timeout_s=target.connect_timeout, accept_new_hostkeys=target.accept_new_hostkeys
    )
    try:
        connector = ssh.Connector(settings)
    except TransportError as exc:
        fail(str(exc))
    code = ssh.build_node_code()
    plans = []
    for host in hosts:
        runner = fleet_run.ssh_runner(host, connector, code)
        plan = fleet_run.plan_node(
            host.name, host.vars, runner, chosen, prof, dirs, done.get(host.name)
        )
        plans.append(plan)
    return plans, connector


# --- inspect --------------------------------------------------------------------------


@app.command()
def inspect(
    file: Annotated[Path, typer.Argument(help="Tool output, facts JSON, or snapshot directory.")],
    profile_name: ProfileOpt = "b300",
    kind: Annotated[
        str | None, typer.Option("--kind", help="Skip detection: smi-q, topo, fio, ...")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Recognise a tool output someone sent, print its facts and the findings."""
    prof = _load_profile(profile_name)
    if file.is_dir() or (file.suffix == ".json" and is_facts_json(read_or_fail(file))):
        _inspect_facts(file, prof, profile_name, as_json)
        return
    try:
        result = inspect_text(read_text(file), prof, kind)
    except InspectError as exc:
        fail(str(exc))
    if as_json:
        doc = {
            "kind": result.kind,
            "facts": result.facts_json(),
            "findings": [f.model_dump(mode="json") for f in result.findings],
        }
        print(json.dumps(doc, indent=2))
    else:
        out.print(f"[bold]{file}[/]: {result.kind}", highlight=False)
        out.print_json(data=result.facts_json())
        out.print(node_table(result.findings, f"findings — profile {profile_name}"))
        out.print(summary_line(result.findings))
    raise typer.Exit(exit_code(result.findings))


def read_or_fail(file: Path) -> str:
    try:
        return read_text(file)
    except InspectError as exc:
        fail(str(exc))


def _inspect_facts(path: Path, prof: profile.Profile, name: str, as_json: bool) -> None:
    nodes = _load_facts(path)
    findings = [f for node in nodes for f in judge_node(node, prof)]
    if as_json:
        doc = {
            "kind": "facts",
            "facts": {n.node: n.model_dump(mode="json") for n in nodes},
            "findings": [f.model_dump(mode="json") for f in findings],
        }
        print(json.dumps(doc, indent=2))
    else:
        for node in nodes:
            mine = [f for f in findings if f.node == node.node]
            out.print(node_table(mine, f"{node.node} — profile {name}"))
        out.print(summary_line(findings))
    raise typer.Exit(exit_code(findings))


# --- profiles -------------------------------------------------------------------------


@profiles_app.command("list")
def profiles_list(as_json: JsonOpt = False) -> None:
    """The shipped profiles."""
    loaded = {name: _load_profile(name) for name in profile.available()}
    if as_json:
        doc = [
            {"name": n, "gpu": p.gpu.model, "description": p.description} for n, p in loaded.items()
        ]
        print(json.dumps(doc, indent=2))
        return
    for name, prof in loaded.items():
        out.print(f"[bold]{name:6}[/] {prof.gpu.count}× {prof.gpu.model} — {prof.description}")


@profiles_app.command("show")
def profiles_show(name: str, as_json: JsonOpt = False) -> None:
    """Every threshold of one profile (a name or a YAML path)."""
    prof = _load_profile(name)
    if as_json:
        print(prof.model_dump_json(indent=2))
    else:
        out.print_json(prof.model_dump_json())


# --- shared ---------------------------------------------------------------------------


def _load_profile(name: str) -> profile.Profile:
    try:
        return profile.load(name)
    except profile.ProfileError as exc:
        fail(str(exc))


def _load_facts(path: Path) -> list[NodeFacts]:
    try:
        return load_facts(path)
    except RunDirError as exc:
        fail(str(exc))


def _create_run(
    out_dir: Path | None, command: str, profile_name: str | None, suite_name: str | None
) -> RunDir:
    try:
        return RunDir.create(out_dir or default_path(command), command, profile_name, suite_name)
    except RunDirError as exc:
        fail(str(exc))


# --- commands of other subjects, each registered by its own module ---------------------


def _register_commands() -> None:
    # Imported here, not at the top: these modules import `fail` and friends from this one.
    from bringup import diagnose, exporter, nccl_run, provision
    from bringup.burnin import command as burnin
    from bringup.report import command as report

    for module in (nccl_run, burnin, diagnose, report, exporter, provision):
        module.register(app)


_register_commands()


if __name__ == "__main__":
    sys.exit(app())
