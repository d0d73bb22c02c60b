"""`bringup nccl`: collective bus bandwidth on this node, across nodes, or node pair by pair.

    bringup nccl --local                      every GPU of this node, 8 MiB .. 8 GiB
    bringup nccl --nodes hosts.ini            one job over every node (one rank per GPU)
    bringup nccl --nodes hosts.ini --pairwise every node in pairs, then suspects again
                                              with a known-good partner: names the node

The measuring is the `nccl` probe's (bringup/probes/nccl.py); this module builds its
parameters, launches it on the nodes (the local transport, or SSH through bringup.fleet
with every node of a job started at once), records the run directory and judges it.

Across nodes every node runs the probe with its place in the job (node_rank, nnodes) and
the rendezvous address of the first node; `bringup_nccl_env` host or group variables
(NCCL_SOCKET_IFNAME, NCCL_IB_HCA, GLOO_SOCKET_IFNAME, ...) reach that node's ranks
(bringup/multinode.py, shared with the burn-in's joint job).
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from bringup import profile as profiles
from bringup.checks import nccl as nccl_checks
from bringup.checks.catalog import judge_node
from bringup.console import show_findings
from bringup.facts import NodeFacts, decode
from bringup.findings import Finding, Status, exit_code
from bringup.multinode import Ssh, connect_settings, job_params, launch
from bringup.multinode import host_env as host_env  # tests and callers use nccl_run.host_env
from bringup.options import AcceptOpt, ConnectTimeoutOpt, JsonOpt, LimitOpt
from bringup.probes import nccl
from bringup.probes.result import ProbeError
from bringup.rundir import RunDir, RunDirError, default_path, load_facts
from bringup.transport import TransportError, run_local

if TYPE_CHECKING:
    from bringup.fleet import NodeOutcome, NodePlan
    from bringup.inventory import Host

out = Console()
err = Console(stderr=True)

DEFAULT_PORT = 29517  # the rendezvous port on the first node of a job (TCPStore)
SLACK_S = 60.0  # beyond the probe's own deadline: start, rendezvous, transfers
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


def probe_request(params: dict[str, Any]) -> dict[str, Any]:
    """The node-side request: the nccl probe alone, with a step deadline above its own."""
    timeout = float(params.get("timeout_s", nccl.Params().timeout_s)) + 30
    return {"probes": [{"name": "nccl", "params": params, "timeout_s": timeout}]}


# --- across nodes: the job's plan (pure) ------------------------------------------------------


def pair_up(nodes: list[str]) -> list[tuple[str, str]]:
    """First-round pairs: neighbours; an odd node out is paired with the first node."""
    pairs = [(nodes[i], nodes[i + 1]) for i in range(0, len(nodes) - 1, 2)]
    if len(nodes) % 2 and len(nodes) > 1:
        pairs.append((nodes[-1], nodes[0]))
    return pairs


def rounds(pairs: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """Pairs grouped so that no node is in two pairs of one round (those run at once)."""
    scheduled: list[list[tuple[str, str]]] = []
    for pair in pairs:
        for group in scheduled:
            if not {n for p in group for n in p} & set(pair):
                group.append(pair)
                break
        else:
            scheduled.append([pair])
    return scheduled


def retest_pairs(suspects: list[str], good: list[str]) -> list[tuple[str, str]]:
    """Each suspect with a known-good partner, spreading suspects over the good nodes."""
    return [(node, good[i % len(good)]) for i, node in enumerate(suspects)] if good else []


# --- the command ------------------------------------------------------------------------------


def register(app: typer.Typer) -> None:
    """Add `bringup nccl` to the CLI."""
    app.command("nccl")(nccl_command)


def nccl_command(
    local: Annotated[bool, typer.Option("--local", help="Measure this node's GPUs.")] = False,
    nodes: Annotated[
        Path | None, typer.Option("--nodes", help="Ansible inventory: one job over its nodes.")
    ] = None,
    pairwise: Annotated[
        bool, typer.Option("--pairwise", help="With --nodes: test in pairs, name slow nodes.")
    ] = False,
    limit: LimitOpt = None,
    profile_name: Annotated[
        str, typer.Option("--profile", "-p", help="Profile name (b300, h100, ...) or YAML path.")
    ] = "b300",
    engine: Annotated[str, typer.Option(help="auto, nccl-tests or torch.")] = "auto",
    backend: Annotated[str, typer.Option(help="torch engine: auto, nccl or gloo (CPU).")] = "auto",
    ranks: Annotated[
        int | None, typer.Option(help="Ranks per node (default: one per GPU; needed on CPU).")
    ] = None,
    collectives: Annotated[
        list[str] | None,
        typer.Option("--collective", "-c", help="all_reduce (default), all_gather, ... repeat."),
    ] = None,
    min_bytes: Annotated[str, typer.Option("--min-bytes", "-b", help="Smallest size.")] = "8M",
    max_bytes: Annotated[str, typer.Option("--max-bytes", "-e", help="Largest size.")] = "8G",
    step_factor: Annotated[int, typer.Option("--step-factor", "-f")] = 2,
    iters: Annotated[int, typer.Option("--iters", "-n", help="Timed iterations.")] = 20,
    warmup: Annotated[int, typer.Option("--warmup", "-w", help="Warm-up iterations.")] = 5,
    no_check: Annotated[
        bool, typer.Option("--no-check", help="Do not count wrong values (-c 0).")
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds the measurement may take.")
    ] = 1500.0,
    rendezvous_timeout: Annotated[
        float, typer.Option("--rendezvous-timeout", help="Seconds ranks wait for each other.")
    ] = 120.0,
    port: Annotated[int, typer.Option("--port", help="Rendezvous port (--nodes).")] = DEFAULT_PORT,
    master_addr: Annotated[
        str | None,
        typer.Option("--master-addr", help="Rendezvous address (default: the first node's)."),
    ] = None,
    env: Annotated[
        list[str] | None, typer.Option("--env", help="NAME=VALUE for the ranks (repeatable).")
    ] = None,
    slow_fraction: Annotated[
        float, typer.Option(help="--pairwise: slow below this share of the best pair.")
    ] = SLOW_FRACTION,
    forks: Annotated[int, typer.Option(help="--pairwise: pairs measured at once (max).")] = 64,
    accept_new_hostkeys: AcceptOpt = False,
    connect_timeout: ConnectTimeoutOpt = 10.0,
    out_dir: Annotated[
        Path | None, typer.Option("--out", "-o", help="Run directory (default runs/<time>-nccl).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """All-reduce bus bandwidth (and other collectives): one node, many, or pair by pair."""
    if (local, nodes is not None).count(True) != 1:
        _fail("say where to measure: --local or --nodes hosts.ini")
    if pairwise and nodes is None:
        _fail("--pairwise needs --nodes hosts.ini")
    if not 0 < slow_fraction < 1:
        _fail("--slow-fraction must be between 0 and 1")
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
        nccl.validate(nccl.Params(**params))
    except (ValueError, ProbeError) as exc:
        _fail(str(exc))
    prof = _profile(profile_name)
    command = "nccl-pairwise" if pairwise else "nccl"
    run = _create_run(out_dir, command, profile_name)
    if local:
        findings = _run_local(params, prof, run)
    else:
        assert nodes is not None
        hosts = _hosts(nodes, limit)
        ssh = _ssh(accept_new_hostkeys, connect_timeout)
        if pairwise:
            findings = _run_pairwise(
                hosts, params, prof, run, ssh, port, slow_fraction, max(1, forks)
            )
        else:
            findings = _run_job(hosts, params, prof, run, ssh, port, master_addr)
    code = exit_code(findings)
    run.finish("complete" if run.manifest.status == "running" else run.manifest.status, code)
    _show(findings, run, as_json, pairwise)
    raise typer.Exit(code)


def _fail(message: str) -> NoReturn:
    from bringup.cli import fail  # lazily: cli will import this module to register it

    fail(message)


def _profile(name: str) -> profiles.Profile:
    try:
        return profiles.load(name)
    except profiles.ProfileError as exc:
        _fail(str(exc))


def _create_run(out_dir: Path | None, command: str, profile_name: str) -> RunDir:
    try:
        return RunDir.create(out_dir or default_path(command), command, profile_name, None)
    except RunDirError as exc:
        _fail(str(exc))


# --- one node ---------------------------------------------------------------------------------


def _run_local(params: dict[str, Any], prof: profiles.Profile, run: RunDir) -> list[Finding]:
    """The probe on this machine through the local transport; the record kept as it arrives."""
    node = socket.gethostname()
    run.add_node(node)
    request = probe_request(params)
    try:
        with err.status(f"{node}: measuring {', '.join(params['collectives'])}"):
            for record in run_local(request, request["probes"][0]["timeout_s"] + SLACK_S):
                run.add_record(node, record)
    except TransportError as exc:
        run.manifest.status = "interrupted"
        err.print(f"[magenta]node side failed:[/] {exc}")
    except KeyboardInterrupt:
        run.manifest.status = "interrupted"
        err.print("[yellow]interrupted: keeping what was measured[/]")
    findings = judge_node(run.facts_of(node), prof) if _recorded(run, node) else []
    if not findings:
        findings = [
            Finding(
                node=node,
                check=nccl_checks.CHECK,
                status=Status.ERROR,
                message="the nccl probe returned nothing (node side failed or was interrupted)",
            )
        ]
    run.add_findings(findings)
    return findings


def _recorded(run: RunDir, node: str) -> bool:
    return "nccl" in run.facts_of(node).probes


# --- many nodes -------------------------------------------------------------------------------


def _hosts(path: Path, limit: str | None) -> list[Host]:
    from bringup.inventory import InventoryError
    from bringup.multinode import load_hosts

    try:
        return load_hosts(path, limit)
    except (InventoryError, ValueError) as exc:
        _fail(str(exc))


def _ssh(accept_new_hostkeys: bool, connect_timeout: float) -> Ssh:
    return connect_settings(accept_new_hostkeys, connect_timeout)


def _plans(
    hosts: list[Host], all_params: list[dict[str, Any]], prof: profiles.Profile, ssh: Ssh
) -> list[NodePlan]:
    """One fleet plan per node: the nccl probe with that node's place in the job."""
    from bringup.fleet import FleetError, NodePlan, node_profile, ssh_runner

    plans = []
    for host, params in zip(hosts, all_params, strict=True):
        request = probe_request(params)
        try:
            judged_by = node_profile(prof, host.vars.get("bringup_profile_overrides"), host.name)
        except FleetError as exc:
            _fail(str(exc))
        plans.append(
            NodePlan(
                node=host.name,
                runner=ssh_runner(host, ssh.connector, ssh.code),
                request=request,
                profile=judged_by,
                deadline_s=request["probes"][0]["timeout_s"] + SLACK_S,
            )
        )
    return plans


def _launch(plans: list[NodePlan], run: RunDir) -> list[NodeOutcome]:
    """Every node of the job at once (a rendezvous needs them all), recorded into `run`."""
    return launch(plans, run, err)


def _run_job(
    hosts: list[Host],
    params: dict[str, Any],
    prof: profiles.Profile,
    run: RunDir,
    ssh: Ssh,
    port: int,
    master_addr: str | None,
) -> list[Finding]:
    """One job over every node; per-node findings plus one `nccl.job` verdict."""
    plans = _plans(hosts, job_params(params, hosts, port, master_addr), prof, ssh)
    outcomes = _launch(plans, run)
    findings = [f for o in outcomes for f in o.findings]
    job = judge_job([h.name for h in hosts], run)
    run.add_findings(job)
    return [*findings, *job]


def node_results(nodes: list[str], run: RunDir) -> dict[str, nccl.NcclFacts | str]:
    """Each node's nccl facts, or why there are none (an error text)."""
    results: dict[str, nccl.NcclFacts | str] = {}
    for node in nodes:
        record = run.facts_of(node).probes.get("nccl") if node in run.manifest.nodes else None
        if record is None:
            results[node] = "no result from this node"
        elif not record.ok:
            results[node] = record.error or "the nccl probe failed"
        else:
            results[node] = decode(record)
    return results


def job_error(nodes: list[str], results: dict[str, nccl.NcclFacts | str]) -> str | None:
    """Why the job failed, in the words of the rank that says most; None when it ran.

    The first node hosts the rendezvous and can only say "timed out waiting for clients";
    a node that could not reach it names the address and the error, so it speaks first.
    """
    for node in [*nodes[1:], *nodes[:1]]:
        result = results[node]
        if isinstance(result, str):
            return f"{node}: {result}"
        if not result.complete and result.errors:
            return f"{node}: {nccl_checks.first_error(result.errors)}"
        if not result.complete or not result.rows:
            return f"{node}: the measurement did not finish"
    return None


def judge_job(nodes: list[str], run: RunDir) -> list[Finding]:
    """nccl.job: did every node's ranks meet and finish; the job's busbw at the largest size."""
    results = node_results(nodes, run)
    reason = job_error(nodes, results)
    if reason is not None:
        return [
            Finding(
                node=nodes[0],
                check="nccl.job",
                status=Status.ERROR,
                message=f"the {len(nodes)}-node job did not complete: {reason}",
                action="check that every node reaches the first node on the rendezvous port "
                "(firewall) and the interface (bringup_nccl_env: NCCL_SOCKET_IFNAME, "
                "GLOO_SOCKET_IFNAME), then rerun",
            )
        ]
    first = results[nodes[0]]
    assert isinstance(first, nccl.NcclFacts)
    busbw = first.largest_size_busbw_bytes_per_s or 0.0
    return [
        Finding(
            node=nodes[0],
            check="nccl.job",
            status=Status.PASS,
            message=f"{first.collective} over {len(nodes)} nodes, {first.nranks} ranks: "
            f"busbw {busbw / nccl_checks.GB:.2f} GB/s at the largest size",
            value=round(busbw / nccl_checks.GB, 3),
            unit="GB/s",
        )
    ]


# --- pairwise ---------------------------------------------------------------------------------


def _run_pairwise(
    hosts: list[Host],
    params: dict[str, Any],
    prof: profiles.Profile,
    run: RunDir,
    ssh: Ssh,
    port: int,
    slow_fraction: float,
    forks: int,
) -> list[Finding]:
    """Pairs, then each suspect with a known-good partner; one verdict per node."""
    if len(hosts) < 2:
        _fail("--pairwise needs at least 2 nodes")
    by_name = {h.name: h for h in hosts}
    run.add_nodes(list(by_name))
    first = _measure_pairs(pair_up(list(by_name)), by_name, params, prof, run, ssh, port, forks)
    good, suspects = nccl_checks.split_pairs(first, slow_fraction)
    retests = _measure_pairs(
        retest_pairs(suspects, good), by_name, params, prof, run, ssh, port, forks, "retest"
    )
    findings = nccl_checks.judge_pairwise(list(by_name), first, retests, slow_fraction)
    run.add_findings(findings)
    (run.path / "pairs.json").write_text(
        json.dumps([p.as_json() for p in [*first, *retests]], indent=2) + "\n"
    )
    return findings


def _measure_pairs(
    pairs: list[tuple[str, str]],
    hosts: dict[str, Host],
    params: dict[str, Any],
    prof: profiles.Profile,
    run: RunDir,
    ssh: Ssh,
    port: int,
    forks: int,
    stage: str = "pairs",
) -> list[nccl_checks.PairResult]:
    """2-node jobs, node-disjoint pairs at once; each round in its own run directory."""
    results = []
    for index, group in enumerate(rounds(pairs)):
        for chunk in (group[i : i + forks] for i in range(0, len(group), forks)):
            sub = RunDir.create(
                run.path / f"{stage}-{index + 1}", "nccl", run.manifest.profile, None
            )
            plans = []
            for a, b in chunk:
                pair_hosts = [hosts[a], hosts[b]]
                plans += _plans(pair_hosts, job_params(params, pair_hosts, port), prof, ssh)
            _launch(plans, sub)
            sub.finish("complete", 0)
            for a, b in chunk:
                found = node_results([a, b], sub)
                reason = job_error([a, b], found)
                facts = found[a]
                busbw = facts.largest_size_busbw_bytes_per_s if reason is None else None
                assert reason is not None or isinstance(facts, nccl.NcclFacts)
                results.append(nccl_checks.PairResult((a, b), busbw, reason, str(sub.path.name)))
    return results


# --- showing the result -----------------------------------------------------------------------


def curve_table(node: str, facts: nccl.NcclFacts) -> Table:
    """busbw against message size, out-of-place and in-place: the curve a report plots."""
    title = f"{node}: {facts.collective}, {facts.nranks} ranks, {facts.engine}"
    if facts.backend:
        title += f" ({facts.backend})"
    table = Table(title=title, title_justify="left")
    for column in ("size", "busbw out-of-place GB/s", "busbw in-place GB/s", "#wrong"):
        table.add_column(column, justify="right")
    for r in facts.rows:
        wrong = [w for w in (r.oop_wrong, r.ip_wrong) if w is not None]
        ip = f"{r.ip_busbw_bytes_per_s / 1e9:.2f}" if facts.in_place_measured else "-"
        table.add_row(
            nccl_checks.size_text(r.size_bytes),
            f"{r.oop_busbw_bytes_per_s / 1e9:.2f}",
            ip,
            str(sum(wrong)) if wrong else "N/A",
        )
    return table


def _show(findings: list[Finding], run: RunDir, as_json: bool, pairwise: bool) -> None:
    facts = _facts(run) if not pairwise else []
    if as_json:
        doc: dict[str, Any] = {
            "run_dir": str(run.path),
            "exit_code": exit_code(findings),
            "findings": [f.model_dump(mode="json") for f in findings],
            "facts": {
                node.node: record.facts
                for node in facts
                if (record := node.probes.get("nccl")) is not None
            },
        }
        if pairwise and (run.path / "pairs.json").exists():
            doc["pairs"] = json.loads((run.path / "pairs.json").read_text())
        print(json.dumps(doc, indent=2))
        return
    for node in facts[:1] if len(facts) > 1 else facts:  # a job's nodes all show one curve
        record = node.probes.get("nccl")
        if record is not None and record.ok:
            main = decode(record)
            for measured in [main, *main.others]:
                out.print(curve_table(node.node, measured))
    show_findings(out, findings, run.manifest.nodes, f"profile {run.manifest.profile}")
    out.print(f"run directory: {run.path}", highlight=False)


def _facts(run: RunDir) -> list[NodeFacts]:
    try:
        return load_facts(run.path)
    except RunDirError:
        return []
