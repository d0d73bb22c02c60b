"""`bringup nccl`: collective bus bandwidth on this node, across nodes, or node pair by pair.

    bringup nccl --local                      every GPU of this node, 8 MiB .. 8 GiB
    bringup nccl --nodes hosts.ini            one job over every node (one rank per GPU)
    bringup nccl --nodes hosts.ini --pairwise every node in pairs, then suspects again
                                              with a known-good partner: names the node

The measuring is the `nccl` probe's (bringup/node/probes/nccl.py). This command builds
its parameters and runs it on the nodes the way every command does (fleet.plan ->
fleet.run), with every node of a job started at once and given its place in the job
(fleet/job.py); the checks judge each node and the job (bringup/checks/nccl.py).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Annotated, Any

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
    not_for,
    open_nodes,
    out,
    print_envelope,
    progress_console,
    record_slurm,
    show_run,
    slurm_choice,
    target,
)

if TYPE_CHECKING:
    from rich.table import Table

    from bringup import profile as profiles
    from bringup.checks.nccl import PairResult
    from bringup.findings import Finding
    from bringup.fleet.inventory import Host
    from bringup.fleet.plan import NodePlan
    from bringup.fleet.target import Nodes
    from bringup.node.nccl_facts import NcclFacts
    from bringup.rundir import RunDir
    from bringup.suite import Suite

DEFAULT_PORT = 29517  # the rendezvous port on the first node of a job (TCPStore)
SLOW_FRACTION = 0.8  # pairwise: a pair below this share of the best pair is slow
_SIZE = re.compile(r"^([0-9]+)([KMGT]?)(?:I?B)?$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}  # as nccl-tests -b/-e


def parse_size(text: str) -> int:
    """Bytes from nccl-tests' size syntax: 8M, 8G, 1K, 4096 (K/M/G are powers of 1024)."""
    match = _SIZE.match(text.strip())
    if match is None:
        raise ValueError(f"not a size: {text!r} (use bytes or 8K, 8M, 8G)")
    return int(match[1]) * _UNITS[match[2].upper()]


def parse_env(pairs: list[str]) -> dict[str, str]:
    """KEY=VALUE pairs from --env; a bad one raises ValueError naming it."""
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ValueError(f"--env {pair!r}: expected NAME=VALUE")
        env[key] = value
    return env


def nccl_suite(params: dict[str, Any]) -> Suite:
    """The one-probe suite every node of a measurement runs: nccl, its deadline above its own."""
    from bringup.node.probes.nccl import Params
    from bringup.suite import ProbeStep, Suite

    timeout = float(params.get("timeout_s", Params().timeout_s)) + 30
    step = ProbeStep(name="nccl", params=params, timeout_s=timeout)
    return Suite(
        name="nccl", description="collective bus bandwidth", budget_s=timeout, probes=[step]
    )


# --- the command ------------------------------------------------------------------------------


def nccl(
    ctx: typer.Context,
    local: LocalOpt = False,
    nodes_file: NodesOpt = None,
    pairwise: Annotated[
        bool, typer.Option("--pairwise", help="With --nodes: test in pairs, name slow nodes.")
    ] = False,
    limit: LimitOpt = None,
    forks: ForksOpt = 64,
    max_raw_mib: MaxRawMibOpt = 256,
    max_raw_files: MaxRawFilesOpt = 2000,
    accept_new_hostkeys: AcceptOpt = False,
    connect_timeout: ConnectTimeoutOpt = 10.0,
    profile_name: ProfileOpt = "auto",
    engine: Annotated[str, typer.Option(help="auto, nccl-tests or torch.")] = "auto",
    backend: Annotated[str, typer.Option(help="torch engine: auto, nccl or gloo (CPU).")] = "auto",
    ranks: Annotated[
        int | None,
        typer.Option(min=1, help="Ranks per node (default: one per GPU; needed on CPU)."),
    ] = None,
    collectives: Annotated[
        list[str] | None,
        typer.Option("--collective", "-c", help="all_reduce (default), all_gather, ... repeat."),
    ] = None,
    min_bytes: Annotated[str, typer.Option("--min-bytes", help="Smallest size (8M).")] = "8M",
    max_bytes: Annotated[str, typer.Option("--max-bytes", help="Largest size (8G).")] = "8G",
    step_factor: Annotated[
        int, typer.Option("--step-factor", min=2, help="Each size is this many times the last.")
    ] = 2,
    iters: Annotated[int, typer.Option("--iters", min=1, help="Timed iterations.")] = 20,
    warmup: Annotated[int, typer.Option("--warmup", "-w", min=0, help="Warm-up iterations.")] = 5,
    no_check: Annotated[
        bool, typer.Option("--no-check", help="Do not count wrong values (-c 0).")
    ] = False,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", min=1.0, callback=finite, help="Seconds the measurement may take."
        ),
    ] = 1500.0,
    rendezvous_timeout: Annotated[
        float,
        typer.Option(
            "--rendezvous-timeout",
            min=1.0,
            callback=finite,
            help="Seconds ranks wait for each other.",
        ),
    ] = 120.0,
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="Rendezvous port (--nodes).")
    ] = DEFAULT_PORT,
    master_addr: Annotated[
        str | None,
        typer.Option("--master-addr", help="Rendezvous address (default: the first node's)."),
    ] = None,
    env: Annotated[
        list[str] | None, typer.Option("--env", help="NAME=VALUE for the ranks (repeatable).")
    ] = None,
    slow_fraction: Annotated[
        float,
        typer.Option(callback=finite, help="--pairwise: slow below this share of the best pair."),
    ] = SLOW_FRACTION,
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
    """All-reduce bus bandwidth (and other collectives): one node, many, or pair by pair."""
    from bringup.node.probes.nccl import Params, validate
    from bringup.node.result import ProbeError

    in_slurm = slurm_choice(slurm, partition, nodelist, nodes_count, account, time_limit)
    chosen = target(
        local,
        nodes_file,
        limit,
        forks,
        accept_new_hostkeys,
        connect_timeout,
        in_slurm,
        "nccl",
        max_raw_mib=max_raw_mib,
        max_raw_files=max_raw_files,
    )
    if pairwise and not chosen.remote:
        fail("--pairwise needs --nodes hosts.ini or --slurm")
    if not 0 < slow_fraction < 1:
        fail("--slow-fraction must be between 0 and 1")
    if not chosen.remote:
        not_for(ctx, "--local (a job on this node alone)", "port", "master_addr")
    if pairwise:
        not_for(ctx, "--pairwise (each pair meets on its first node)", "master_addr")
    else:
        not_for(ctx, "one job (it is for --pairwise)", "slow_fraction")
    try:
        params: dict[str, Any] = {
            "engine": engine,
            "backend": backend,
            "ranks": ranks,
            "collectives": list(collectives or ["all_reduce"]),
            "min_bytes": parse_size(min_bytes),
            "max_bytes": parse_size(max_bytes),
            "step_factor": step_factor,
            "iters": iters,
            "warmup_iters": warmup,
            "check": not no_check,
            "timeout_s": timeout,
            "rendezvous_timeout_s": rendezvous_timeout,
            "env": parse_env(env or []),
        }
        validate(Params(**params))
    except (ValueError, ProbeError) as exc:
        fail(str(exc))
    prof = _load_profile(profile_name)
    with open_nodes(chosen) as nodes:
        _check_env(nodes)
        if pairwise and len(nodes.hosts) < 2:
            fail("--pairwise needs at least 2 nodes")
        _job_plans(nodes, nodes.hosts, params, prof, port, master_addr)  # bad host vars: now
        # A pairwise run's nodes are measured in its sub-runs (pairs-N/), not in it.
        command, probes = ("nccl-pairwise", None) if pairwise else ("nccl", ["nccl"])
        run = create_run(out_dir, command, profile_name, None, probes=probes)
        record_slurm(run, nodes)
        if pairwise:
            findings = _run_pairwise(nodes, params, prof, run, port, slow_fraction)
        else:
            findings = _run_job(nodes, params, prof, run, port, master_addr)
    code = finish_run(run, findings)
    _show(findings, run, as_json, pairwise, quiet)
    raise typer.Exit(code)


def _load_profile(name: str) -> profiles.Profile | str:
    from bringup.commands.common import profile_or_auto

    return profile_or_auto(name)


def _check_env(nodes: Nodes) -> None:
    from bringup.fleet.job import check_env

    try:
        check_env(nodes.hosts)
    except ValueError as exc:
        fail(str(exc))


# --- one job: this node, or every node of the inventory at once -------------------------------


def _run_job(
    nodes: Nodes,
    params: dict[str, Any],
    prof: profiles.Profile | str,
    run: RunDir,
    port: int,
    master_addr: str | None = None,
) -> list[Finding]:
    """One job over every node (or this one); per-node findings, and for a job across
    nodes one `nccl.job` verdict."""
    from bringup.checks.nccl import judge_job
    from bringup.fleet.run import run as run_fleet

    plans = _job_plans(nodes, nodes.hosts, params, prof, port, master_addr)
    # Every node of a job at once: a rendezvous needs them all.
    outcomes = run_fleet(
        plans, run, forks=len(plans), caps=nodes.target.caps, console=progress_console()
    )
    findings = [f for o in outcomes for f in o.findings]
    if not nodes.remote:
        return findings
    job = judge_job(nodes.names, node_results(nodes.names, run))
    run.add_findings(job)
    return [*findings, *job]


def _job_plans(
    nodes: Nodes,
    hosts: list[Host],
    params: dict[str, Any],
    prof: profiles.Profile | str,
    port: int,
    master_addr: str | None = None,
) -> list[NodePlan]:
    """Each host's plan: the nccl probe with its place in the job (across nodes)."""
    from bringup.fleet.job import host_env, job_params
    from bringup.fleet.plan import FleetError, plan_node

    if nodes.remote:
        per_node = job_params(params, hosts, port, master_addr)
    else:
        per_node = [{**params, "env": {**params["env"], **host_env(h)}} for h in hosts]
    suite = nccl_suite(params)
    try:
        return [
            plan_node(
                host,
                nodes.runner(host),
                suite,
                prof,
                params={"nccl": node_params},
                remote=nodes.remote,
            )
            for host, node_params in zip(hosts, per_node, strict=True)
        ]
    except FleetError as exc:
        fail(str(exc))


def node_results(nodes: list[str], run: RunDir) -> dict[str, NcclFacts | str]:
    """Each node's nccl facts as recorded in the run, or why there are none (an error text)."""
    from bringup.facts import FactsError, decode

    results: dict[str, NcclFacts | str] = {}
    for node in nodes:
        record = run.facts_of(node).probes.get("nccl") if node in run.manifest.nodes else None
        if record is None:
            results[node] = "no result from this node"
        elif not record.ok:
            results[node] = record.error or "the nccl probe failed"
        else:
            try:
                results[node] = decode(record)
            except FactsError as exc:
                results[node] = str(exc)
    return results


# --- pairwise ---------------------------------------------------------------------------------


def _run_pairwise(
    nodes: Nodes,
    params: dict[str, Any],
    prof: profiles.Profile | str,
    run: RunDir,
    port: int,
    slow_fraction: float,
) -> list[Finding]:
    """Pairs, then each suspect with a known-good partner; one verdict per node."""
    from bringup.checks.nccl import judge_pairwise, split_pairs
    from bringup.files import write_atomic
    from bringup.fleet.job import pair_up, retest_pairs

    names = nodes.names
    run.add_nodes(names)
    first = _measure_pairs(pair_up(names), nodes, params, prof, run, port)
    good, suspects = split_pairs(first, slow_fraction)
    retests = _measure_pairs(retest_pairs(suspects, good), nodes, params, prof, run, port, "retest")
    findings = judge_pairwise(names, first, retests, slow_fraction)
    run.add_findings(findings)
    pairs = json.dumps([p.as_json() for p in [*first, *retests]], indent=2) + "\n"
    write_atomic(run.path / "pairs.json", pairs)
    return findings


def _measure_pairs(
    pairs: list[tuple[str, str]],
    nodes: Nodes,
    params: dict[str, Any],
    prof: profiles.Profile | str,
    run: RunDir,
    port: int,
    stage: str = "pairs",
) -> list[PairResult]:
    """2-node jobs, node-disjoint pairs at once (at most --forks nodes); each group of
    pairs in its own run directory under the run."""
    from bringup.checks.nccl import PairResult, job_error
    from bringup.fleet.job import rounds
    from bringup.fleet.run import run as run_fleet
    from bringup.rundir import RunDir

    by_name = {h.name: h for h in nodes.hosts}
    per_chunk = max(1, nodes.target.forks // 2)
    results = []
    for index, group in enumerate(rounds(pairs)):
        for chunk in (group[i : i + per_chunk] for i in range(0, len(group), per_chunk)):
            plans = []
            for a, b in chunk:
                plans += _job_plans(nodes, [by_name[a], by_name[b]], params, prof, port)
            sub = RunDir.create(
                run.path / f"{stage}-{index + 1}", "nccl", run.manifest.profile, None
            )
            run_fleet(
                plans, sub, forks=len(plans), caps=nodes.target.caps, console=progress_console()
            )
            sub.finish("complete", 0)
            for a, b in chunk:
                found = node_results([a, b], sub)
                reason = job_error([a, b], found)
                facts = found[a]
                busbw = None
                if reason is None and not isinstance(facts, str):
                    busbw = facts.largest_size_busbw_bytes_per_s
                results.append(PairResult((a, b), busbw, reason, str(sub.path.name)))
    return results


# --- showing the result -----------------------------------------------------------------------


def curve_table(node: str, facts: NcclFacts) -> Table:
    """busbw against message size, out-of-place and in-place: the curve a report plots."""
    from rich.table import Table

    from bringup.checks.nccl import size_text
    from bringup.commands.show import plain

    title = f"{node}: {facts.collective}, {facts.nranks} ranks, {facts.engine}"
    if facts.backend:
        title += f" ({facts.backend})"
    table = Table(title=plain(title), title_justify="left")  # node text: never markup
    for column in ("size", "busbw out-of-place GB/s", "busbw in-place GB/s", "#wrong"):
        table.add_column(column, justify="right")
    for r in facts.rows:
        wrong = [w for w in (r.oop_wrong, r.ip_wrong) if w is not None]
        ip = f"{r.ip_busbw_bytes_per_s / 1e9:.2f}" if facts.in_place_measured else "-"
        table.add_row(
            size_text(r.size_bytes),
            f"{r.oop_busbw_bytes_per_s / 1e9:.2f}",
            ip,
            str(sum(wrong)) if wrong else "N/A",
        )
    return table


def _show(
    findings: list[Finding], run: RunDir, as_json: bool, pairwise: bool, quiet: bool = False
) -> None:
    from bringup.facts import decode
    from bringup.rundir import RunDirError, load_facts

    try:
        facts = [] if pairwise else load_facts(run.path)
    except RunDirError:
        facts = []
    if as_json:
        extra: dict[str, Any] = {
            "facts": {
                node.node: record.facts
                for node in facts
                if (record := node.probes.get("nccl")) is not None
            }
        }
        if pairwise and (run.path / "pairs.json").exists():
            extra["pairs"] = json.loads((run.path / "pairs.json").read_text())
        print_envelope(findings, run=run, data=extra)
        return
    for node in facts[:1] if not quiet else []:  # a job's nodes all show one curve
        record = node.probes.get("nccl")
        if record is not None and record.ok:
            main = decode(record)
            for measured in [main, *main.others]:
                out.print(curve_table(node.node, measured))
    show_run(run, findings, f"profile {run.manifest.profile}", quiet=quiet)
