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
from bringup.console import fleet_matrix, node_table, problems_by_action, summary_line
from bringup.demo import fleet
from bringup.facts import NodeFacts
from bringup.findings import Finding, exit_code
from bringup.inspect import InspectError, inspect_text, is_facts_json, read_text
from bringup.rundir import RunDir, RunDirError, default_path, load_facts
from bringup.transport import TransportError, run_local

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

# Probes whose `paths` parameter --data-dir replaces (where data and checkpoints live).
PATH_PROBES = ("host", "nvme")

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
    replay: Annotated[
        Path | None, typer.Option("--replay", help="Re-judge the facts of a run or snapshot.")
    ] = None,
    demo: Annotated[
        bool, typer.Option("--demo", help="Replay the embedded demo fleet (B300 nodes).")
    ] = False,
    profile_name: ProfileOpt = "b300",
    suite_name: SuiteOpt = "acceptance",
    data_dirs: DataDirOpt = None,
    out_dir: OutOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the suite on this node (--local) or re-judge recorded facts (--replay, --demo)."""
    if sum([local, replay is not None, demo]) != 1:
        fail("say where the facts come from: --local, --replay DIR or --demo")
    prof = _load_profile(profile_name)
    if local:
        node_facts, run = _probe_local("check", suite_name, profile_name, data_dirs, out_dir)
        nodes = [node_facts] if node_facts else []
    else:
        nodes = fleet() if demo else _load_facts(replay)  # type: ignore[arg-type]
        run = _create_run(out_dir, "check", profile_name, None)
        for node in nodes:
            for record in node.probes.values():
                run.add_record(node.node, record.model_dump())
    findings: list[Finding] = []
    for node in nodes:
        node_findings = judge_node(node, prof)
        run.add_findings(node_findings)
        findings.extend(node_findings)
    findings.extend(_unfinished(run))
    code = exit_code(findings)
    run.finish("complete" if run.manifest.status == "running" else run.manifest.status, code)
    _show(findings, run, as_json)
    raise typer.Exit(code)


def _unfinished(run: RunDir) -> list[Finding]:
    """An ERROR finding for a run that stopped early, so it can never read as a pass."""
    if run.manifest.status != "interrupted":
        return []
    f = Finding(
        node=", ".join(run.manifest.nodes) or "local",
        check="run",
        status="ERROR",
        message="run interrupted: probes after the last recorded one did not run",
    )
    run.add_findings([f])
    return [f]


def _show(findings: list[Finding], run: RunDir, as_json: bool) -> None:
    code = exit_code(findings)
    if as_json:
        doc = {
            "run_dir": str(run.path),
            "exit_code": code,
            "findings": [f.model_dump(mode="json") for f in findings],
        }
        print(json.dumps(doc, indent=2))
        return
    nodes = run.manifest.nodes
    if len(nodes) == 1:
        out.print(node_table(findings, f"{nodes[0]} — profile {run.manifest.profile}"))
    else:
        out.print(fleet_matrix(findings, nodes))
        out.print(problems_by_action(findings))
    out.print(summary_line(findings))
    out.print(f"run directory: {run.path}", highlight=False)


# --- snapshot -------------------------------------------------------------------------


@app.command()
def snapshot(
    suite_name: SuiteOpt = "quick",
    data_dirs: DataDirOpt = None,
    out_dir: OutOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Record this node's facts and raw tool outputs, to judge later (--replay, inspect)."""
    node_facts, run = _probe_local("snapshot", suite_name, None, data_dirs, out_dir)
    run.finish("complete" if run.manifest.status == "running" else run.manifest.status, 0)
    probes = {name: r.ok for name, r in node_facts.probes.items()} if node_facts else {}
    if as_json:
        print(json.dumps({"run_dir": str(run.path), "probes": probes}, indent=2))
        return
    for name, ok in probes.items():
        out.print(f"{name:10} {'recorded' if ok else 'recorded (error)'}")
    out.print(f"snapshot: {run.path}", highlight=False)


def _probe_local(
    command: str,
    suite_name: str,
    profile_name: str | None,
    data_dirs: list[Path] | None,
    out_dir: Path | None,
) -> tuple[NodeFacts | None, RunDir]:
    """Run the suite's probes on this machine, recording each result as it arrives."""
    try:
        chosen = suite.load(suite_name)
    except suite.SuiteError as exc:
        fail(str(exc))
    for path in data_dirs or []:
        if not path.is_dir():
            fail(f"--data-dir {path}: not a directory")
    request = _request(chosen, data_dirs)
    run = _create_run(out_dir, command, profile_name, chosen.name)
    node = socket.gethostname()
    run.add_node(node)
    deadline = sum(step["timeout_s"] for step in request["probes"]) + 60
    try:
        with err.status(f"{node}: running suite {chosen.name}") as status:
            for record in run_local(request, deadline):
                recorded = run.add_record(node, record)
                state = "ok" if recorded.ok else f"error: {recorded.error}"
                status.update(f"{node}: {recorded.probe} {state}")
    except TransportError as exc:
        run.manifest.status = "interrupted"
        err.print(f"[magenta]node side failed:[/] {exc}")
    except KeyboardInterrupt:
        run.manifest.status = "interrupted"
        err.print("[yellow]interrupted: keeping what was measured[/]")
    facts = load_facts(run.path)[0] if (run.path / "facts").exists() else None
    return facts, run


def _request(chosen: suite.Suite, data_dirs: list[Path] | None) -> dict[str, Any]:
    steps = []
    for step in chosen.probes:
        params = dict(step.params)
        if data_dirs and step.name in PATH_PROBES:
            params["paths"] = [str(p.resolve()) for p in data_dirs]
        steps.append({"name": step.name, "params": params, "timeout_s": step.timeout_s})
    return {"probes": steps}


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


if __name__ == "__main__":
    sys.exit(app())
