"""`bringup diagnose`: load every GPU with matmuls while sampling NVML, and say why a GPU is slow.

    bringup diagnose --local --seconds 60          # matmul load on all GPUs, telemetry at 5 Hz
    bringup diagnose --local --watch --seconds 300 # no load: watch the job that runs now
    bringup diagnose --nodes hosts.ini             # the same on every node, over SSH

The node runs one probe (`gemm` with a sustained phase and the sampler on, or `telemetry`
alone with --watch); the controller records it in a run directory and judges it with the
gemm and diagnosis checks (bringup/checks/gemm.py, bringup/checks/throttle.py). With --nodes,
the nodes are also compared with each other (`diagnose.fleet_straggler`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from bringup.commands.common import (
    AcceptOpt,
    AccountOpt,
    ConnectTimeoutOpt,
    ForksOpt,
    JsonOpt,
    LimitOpt,
    LocalOpt,
    MaxRawFilesOpt,
    MaxRawMibOpt,
    NodelistOpt,
    NodesCountOpt,
    NodesOpt,
    OutOpt,
    PartitionOpt,
    ProfileOpt,
    QuietOpt,
    SlurmOpt,
    TimeOpt,
    create_run,
    fail,
    finish_run,
    finite,
    node_entries,
    open_nodes,
    print_envelope,
    profile_or_auto,
    progress_console,
    record_slurm,
    show_run,
    slurm_choice,
    target,
)

if TYPE_CHECKING:
    from bringup.facts import NodeFacts
    from bringup.node.probes.gemm import GemmFacts
    from bringup.suite import Suite

# Beyond the sustained seconds: the sweep, FP8 and the copy take ~1 min on 8 GPUs.
SETUP_S = 300.0


def diagnose_suite(seconds: float, interval_s: float, watch: bool) -> Suite:
    """The one-probe suite a diagnose run sends to each node."""
    from bringup.suite import ProbeStep, Suite

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


def diagnose(
    local: LocalOpt = False,
    nodes_file: NodesOpt = None,
    seconds: Annotated[
        float,
        typer.Option("--seconds", callback=finite, help="Sustained load (or watch) time, s."),
    ] = 60.0,
    interval_s: Annotated[
        float,
        typer.Option(
            "--interval", callback=finite, help="Telemetry sampling interval, s (0.1-0.2)."
        ),
    ] = 0.2,
    watch: Annotated[
        bool, typer.Option("--watch", help="No load of its own: watch a running job.")
    ] = False,
    limit: LimitOpt = None,
    forks: ForksOpt = 64,
    max_raw_mib: MaxRawMibOpt = 256,
    max_raw_files: MaxRawFilesOpt = 2000,
    accept_new_hostkeys: AcceptOpt = False,
    connect_timeout: ConnectTimeoutOpt = 10.0,
    profile_name: ProfileOpt = "auto",
    out_dir: OutOpt = None,
    as_json: JsonOpt = False,
    slurm: SlurmOpt = False,
    partition: PartitionOpt = None,
    nodelist: NodelistOpt = None,
    nodes_count: NodesCountOpt = None,
    account: AccountOpt = None,
    time_limit: TimeOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Load all GPUs with matmuls while sampling NVML at 5-10 Hz; say which GPU is slow, why."""
    from bringup.checks.throttle import judge_gemm_stragglers
    from bringup.fleet.plan import FleetError, plan_node
    from bringup.fleet.run import run as run_fleet

    in_slurm = slurm_choice(slurm, partition, nodelist, nodes_count, account, time_limit)
    chosen = target(
        local,
        nodes_file,
        limit,
        forks,
        accept_new_hostkeys,
        connect_timeout,
        in_slurm,
        "diagnose",
        max_raw_mib=max_raw_mib,
        max_raw_files=max_raw_files,
    )
    if not 0 < seconds <= 86400:
        fail(f"--seconds must be in (0, 86400], not {seconds:g}")
    if not 0.01 <= interval_s <= 10:
        fail(f"--interval must be between 0.01 and 10 s, not {interval_s:g}")
    prof = profile_or_auto(profile_name)
    suite = diagnose_suite(seconds, interval_s, watch)
    with open_nodes(chosen) as nodes:
        try:
            plans = [
                plan_node(host, nodes.runner(host), suite, prof, remote=nodes.remote)
                for host in nodes.hosts
            ]
        except FleetError as exc:
            fail(str(exc))
        probes = [step.name for step in suite.probes]
        run = create_run(out_dir, "diagnose", profile_name, suite.name, probes=probes)
        record_slurm(run, nodes)
        outcomes = run_fleet(
            plans, run, forks=chosen.forks, caps=chosen.caps, console=progress_console()
        )
    findings = [f for outcome in outcomes for f in outcome.findings]
    # The nodes against each other: one GPU node far behind the rest.
    across = judge_gemm_stragglers(recorded_gemm([run.facts_of(plan.node) for plan in plans]))
    run.add_findings(across)
    findings += across
    code = finish_run(run, findings)
    if as_json:
        print_envelope(findings, run=run, nodes=node_entries(outcomes))
    else:
        show_run(run, findings, f"diagnose, profile {run.manifest.profile}", quiet=quiet)
    raise typer.Exit(code)


def recorded_gemm(nodes: list[NodeFacts]) -> dict[str, GemmFacts]:
    """Each node's gemm facts, where its gemm probe answered and the record decodes."""
    from bringup.facts import FactsError, decode

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
