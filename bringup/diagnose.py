"""`bringup diagnose`: load every GPU with matmuls while sampling NVML, and say why a GPU is slow.

    bringup diagnose --local --seconds 60          # matmul load on all GPUs, telemetry at 5 Hz
    bringup diagnose --local --watch --seconds 300 # no load: watch the job that runs now
    bringup diagnose --nodes hosts.ini             # the same on every node, over SSH

The node runs one probe (`gemm` with a sustained phase and the sampler on, or `telemetry`
alone with --watch); the controller records it in a run directory and judges it with the
gemm and diagnosis checks (bringup/checks/gemm.py, bringup/diagnosis.py). With --nodes,
the nodes are also compared with each other (`diagnose.fleet_straggler`).
`register(app)` adds the command to the CLI.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from bringup import profile as profiles
from bringup.checks.catalog import judge_node
from bringup.console import show_findings
from bringup.diagnosis import fleet_stragglers
from bringup.facts import FactsError, NodeFacts, decode
from bringup.findings import Finding, exit_code
from bringup.probes.gemm import GemmFacts
from bringup.rundir import RunDir, RunDirError, default_path, load_facts
from bringup.suite import ProbeStep, Suite
from bringup.transport import TransportError, run_local

# Beyond the sustained seconds: the sweep, FP8 and the copy take ~1 min on 8 GPUs.
SETUP_S = 300.0

out = Console()
err = Console(stderr=True)


def diagnose_suite(seconds: float, interval_s: float, watch: bool) -> Suite:
    """The one-probe suite a diagnose run sends to each node."""
    if watch:
        step = ProbeStep(
            name="telemetry",
            params={"seconds": seconds, "interval_s": interval_s},
            timeout_s=seconds + 60,
        )
    else:
        step = ProbeStep(
            name="gemm",
            params={"sustain_s": seconds, "sample_interval_s": interval_s},
            timeout_s=seconds + SETUP_S,
        )
    return Suite(
        name="diagnose-watch" if watch else "diagnose",
        description="throttling diagnosis" + (" of a running job" if watch else " under load"),
        budget_s=step.timeout_s,
        probes=[step],
    )


def register(app: typer.Typer) -> None:
    """Add `diagnose` to the bringup CLI."""

    @app.command()
    def diagnose(
        local: Annotated[bool, typer.Option("--local", help="Diagnose this machine.")] = False,
        nodes: Annotated[
            Path | None, typer.Option("--nodes", help="Ansible inventory: diagnose every node.")
        ] = None,
        seconds: Annotated[
            float, typer.Option("--seconds", help="Sustained load (or watch) time, s.")
        ] = 60.0,
        interval_s: Annotated[
            float, typer.Option("--interval", help="Telemetry sampling interval, s (0.1-0.2).")
        ] = 0.2,
        watch: Annotated[
            bool, typer.Option("--watch", help="No load of its own: watch a running job.")
        ] = False,
        limit: Annotated[
            str | None, typer.Option("--limit", help="Only the inventory hosts matching this.")
        ] = None,
        forks: Annotated[int, typer.Option("--forks", help="Nodes at once (--nodes).")] = 64,
        profile_name: Annotated[
            str, typer.Option("--profile", "-p", help="Profile name or YAML path.")
        ] = "b300",
        out_dir: Annotated[Path | None, typer.Option("--out", "-o", help="Run directory.")] = None,
        as_json: Annotated[
            bool, typer.Option("--json", help="Print one JSON document, nothing else.")
        ] = False,
    ) -> None:
        """Load all GPUs with matmuls while sampling NVML at 5-10 Hz; say which GPU is slow, why."""
        from bringup.cli import fail  # lazily: cli imports this module to register it

        if local == (nodes is not None):
            fail("say where to diagnose: --local or --nodes hosts.ini")
        if not 0 < seconds <= 86400:
            fail(f"--seconds must be in (0, 86400], not {seconds:g}")
        if not 0.01 <= interval_s <= 10:
            fail(f"--interval must be between 0.01 and 10 s, not {interval_s:g}")
        try:
            prof = profiles.load(profile_name)
        except profiles.ProfileError as exc:
            fail(str(exc))
        chosen = diagnose_suite(seconds, interval_s, watch)
        try:
            run = RunDir.create(
                out_dir or default_path("diagnose"), "diagnose", profile_name, chosen.name
            )
        except RunDirError as exc:
            fail(str(exc))
        if local:
            findings = _run_local(run, chosen, prof)
        else:
            findings = _run_nodes(run, chosen, prof, nodes, limit, forks)  # type: ignore[arg-type]
        code = exit_code(findings)
        run.finish("complete" if run.manifest.status == "running" else run.manifest.status, code)
        _show(findings, run, as_json)
        raise typer.Exit(code)


def _run_local(run: RunDir, chosen: Suite, prof: profiles.Profile) -> list[Finding]:
    node = socket.gethostname()
    run.add_node(node)
    step = chosen.probes[0]
    request = {"probes": [{"name": step.name, "params": step.params, "timeout_s": step.timeout_s}]}
    what = "watching the GPUs" if step.name == "telemetry" else "loading every GPU"
    try:
        with err.status(
            f"{node}: {what} ({step.params.get('seconds') or step.params['sustain_s']:g} s)"
        ):
            for record in run_local(request, step.timeout_s + 60):
                run.add_record(node, record)
    except TransportError as exc:
        run.manifest.status = "interrupted"
        err.print(f"[magenta]node side failed:[/] {exc}")
    except KeyboardInterrupt:
        run.manifest.status = "interrupted"
        err.print("[yellow]interrupted: keeping what was measured[/]")
    findings: list[Finding] = []
    if (run.path / "facts").exists():
        for facts in load_facts(run.path):
            findings += judge_node(facts, prof)
    if not findings:
        findings.append(
            Finding(node=node, check="run", status="ERROR", message=f"{step.name} did not answer")
        )
    run.add_findings(findings)
    return findings


def _run_nodes(
    run: RunDir, chosen: Suite, prof: profiles.Profile, path: Path, limit: str | None, forks: int
) -> list[Finding]:
    """The fan-out of the fleet engineer: the same planning and SSH transport as `check`."""
    from bringup import fleet, inventory, ssh
    from bringup.cli import fail

    try:
        hosts = inventory.load(path, limit)
    except inventory.InventoryError as exc:
        fail(str(exc))
    connector = ssh.Connector(ssh.SshSettings())
    code = ssh.build_node_code()
    plans = []
    for host in hosts:

        def runner(request: dict[str, Any], deadline: float, stop: Any, stage: Any, h: Any = host):
            return ssh.run_ssh(
                h, request, deadline, connector=connector, code=code, stop=stop, on_stage=stage
            )

        try:
            plans.append(fleet.plan_node(host.name, host.vars, runner, chosen, prof))
        except fleet.FleetError as exc:
            fail(str(exc))
    try:
        outcomes = fleet.run(plans, run, forks=forks, console=err)
    finally:
        connector.close()
    findings = [f for outcome in outcomes for f in outcome.findings]
    across = fleet_stragglers(recorded_gemm([run.facts_of(plan.node) for plan in plans]))
    run.add_findings(across)
    return findings + across


def recorded_gemm(nodes: list[NodeFacts]) -> dict[str, GemmFacts]:
    """Each node's gemm facts, where its gemm probe answered and the record decodes."""
    found: dict[str, GemmFacts] = {}
    for node in nodes:
        record = node.probes.get("gemm")
        if record is None or not record.ok:
            continue
        try:
            found[node.node] = decode(record)
        except FactsError:
            continue  # judge_node already made it an ERROR finding of that node
    return found


def _show(findings: list[Finding], run: RunDir, as_json: bool) -> None:
    if as_json:
        doc = {
            "run_dir": str(run.path),
            "exit_code": exit_code(findings),
            "findings": [f.model_dump(mode="json") for f in findings],
        }
        print(json.dumps(doc, indent=2))
        return
    title = f"diagnose, profile {run.manifest.profile}"
    show_findings(out, findings, run.manifest.nodes, title)
    out.print(f"run directory: {run.path}", highlight=False)
