"""`bringup provision`: run the Ansible roles (playbooks/site.yml) on the inventory's nodes.

The playbook runs through ansible-runner (bringup/fleet/provision.py), with live per-host
progress; each node's outcome is recorded in a run directory like every other command's.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from bringup.commands.common import (
    ConnectTimeoutOpt,
    ForksOpt,
    JsonOpt,
    QuietOpt,
    create_run,
    fail,
    print_envelope,
    progress_console,
)


def provision(
    nodes: Annotated[
        Path,
        typer.Option("--nodes", "-n", help="Ansible inventory (hosts.ini, YAML): run over SSH."),
    ],
    limit: Annotated[
        str | None,
        typer.Option("--limit", "-l", help="Only the nodes this Ansible host pattern selects."),
    ] = None,
    tags: Annotated[
        str | None,
        typer.Option(
            "--tags", "-t", help="Only these roles, comma-separated (docs/provisioning.md)."
        ),
    ] = None,
    skip_tags: Annotated[
        str | None, typer.Option("--skip-tags", help="Leave these parts out.")
    ] = None,
    check_mode: Annotated[
        bool, typer.Option("--check", help="Change nothing: show what would change.")
    ] = False,
    forks: ForksOpt = 16,
    extra_vars: Annotated[
        list[str] | None,
        typer.Option(
            "--extra-vars",
            "-e",
            help="NAME=VALUE for a role variable, VALUE read as YAML (false, [a, b]); repeatable.",
        ),
    ] = None,
    playbook: Annotated[
        Path | None,
        typer.Option("--playbook", help="Another playbook than the shipped site.yml."),
    ] = None,
    connect_timeout: ConnectTimeoutOpt = 30.0,
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Run directory (default runs/<time>-provision)."),
    ] = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Provision the nodes: driver, Fabric Manager, CUDA, containers, DCGM, tools."""
    from collections import Counter

    from rich.console import Console, Group

    from bringup.findings import exit_code
    from bringup.fleet.provision import ProvisionError, make_request, summary_table
    from bringup.fleet.provision import provision as run_playbooks

    try:
        request = make_request(
            nodes,
            limit,
            tags,
            skip_tags,
            check_mode,
            forks,
            extra_vars or [],
            playbook,
            math.ceil(connect_timeout),  # Ansible takes whole seconds
        )
    except ProvisionError as exc:
        fail(str(exc))
    run = create_run(out_dir, "provision", None, None, probes=["provision"])
    progress, result = run_playbooks(request, run, progress_console())
    if progress.refused is not None:
        # A playbook or role file Ansible cannot parse is bad input, not a node's failure;
        # what ran before it stays in the run directory.
        fail(f"ansible-playbook stopped: {progress.refused} (run directory: {run.path})")
    code = exit_code(result)
    state = run.manifest.status
    run.finish("complete" if state == "running" else state, code)
    if as_json:
        nodes = [
            {"node": n.node, "state": n.status, "reason": n.message}
            for n in progress.nodes.values()
        ]
        hosts = {
            n.node: {
                "status": n.status,
                "ok": n.ok,
                "changed": n.changed,
                "failed": n.failed,
                "skipped": n.skipped,
                "ignored": [t.task for t in n.ignored_tasks()],
                "unreachable": n.unreachable,
                "failed_task": n.failed_task,
                "message": n.message,
            }
            for n in progress.nodes.values()
        }
        data = {"check_mode": request.check_mode, "hosts": hosts}
        print_envelope(result, exit_code=code, run=run, nodes=nodes, data=data)
    elif quiet:
        states = Counter(n.status for n in progress.nodes.values())
        said = ", ".join(f"{count} {state}" for state, count in sorted(states.items()))
        mode = " (check mode)" if request.check_mode else ""
        print(f"provision{mode}: {said or 'no nodes'}; run directory: {run.path}")
    else:
        out = Console()
        out.print(Group(summary_table(progress, request.check_mode)))
        out.print(f"run directory: {run.path}", highlight=False)
    raise typer.Exit(code)
