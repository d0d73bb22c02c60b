"""`bringup burnin`: run the reference fine-tune, judge it, and write the node's baseline.

    bringup burnin --local --recipe tiny --steps 12
    bringup burnin --local --recipe llama-8b-lora --minutes 20 --profile h200 --with-gemm
    bringup burnin --nodes hosts.ini --recipe llama-8b-lora --minutes 20          each node
    bringup burnin --nodes hosts.ini --joint --recipe llama-70b-lora --minutes 30  one job

The command is the usual pipeline with one probe: the `burnin` probe runs on the node
(through the same node side and transport as `bringup check`), its facts land in the run
directory as they arrive, bringup/checks/burnin.py judges them, and baseline.json is
written beside them. `--baseline FILE` judges this run against an earlier baseline.
With `--nodes` the probe runs on every node over SSH (bringup.fleet), each node on its own
or, with `--joint`, as one job across the nodes (bringup/burnin/nodes.py).
"""

from __future__ import annotations

import dataclasses
import json
import socket
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console

from bringup import baseline as baselines
from bringup import multinode
from bringup import profile as profiles
from bringup import recipe as recipes
from bringup.burnin import nodes as multi
from bringup.checks import burnin as checks
from bringup.checks.catalog import judge_probe
from bringup.facts import FactsError, NodeFacts, decode
from bringup.findings import Finding, Status, exit_code
from bringup.options import AcceptOpt, ConnectTimeoutOpt, JsonOpt, LimitOpt
from bringup.probes.burnin import BurninFacts
from bringup.rundir import RunDir, RunDirError, default_path, load_facts, now
from bringup.transport import TransportError, run_local

if TYPE_CHECKING:
    from bringup.fleet import NodeOutcome
    from bringup.inventory import Host

out = Console()
err = Console(stderr=True)

DEFAULT_PORT = 29518  # --joint: the rendezvous port on the first node (nccl uses 29517)
NODE_WORK_DIR = "/tmp/bringup-burnin"  # --nodes: <this>/<run>/<node> on each node's disk
STARTUP_S = 900.0  # model build, checkpoint verification and teardown beyond the training
STEPS_DEADLINE_S = 3600.0  # a --steps run whose duration cannot be known in advance
GEMM_TIMEOUT_S = 900.0


def register(app: typer.Typer) -> None:
    """Add the `burnin` command to the bringup CLI."""
    app.command("burnin")(burnin)


def burnin(
    local: Annotated[bool, typer.Option("--local", help="Run on this machine.")] = False,
    nodes: Annotated[
        Path | None, typer.Option("--nodes", help="Ansible inventory: run on every node.")
    ] = None,
    joint: Annotated[
        bool, typer.Option("--joint", help="With --nodes: all nodes as one training job.")
    ] = False,
    limit: LimitOpt = None,
    recipe_name: Annotated[
        str, typer.Option("--recipe", "-r", help="Recipe name (tiny, llama-8b-lora, ...) or YAML.")
    ] = "tiny",
    steps: Annotated[
        int | None, typer.Option("--steps", min=1, help="Train this many steps.")
    ] = None,
    minutes: Annotated[
        float | None, typer.Option("--minutes", min=0.01, help="Train this long.")
    ] = None,
    nproc: Annotated[
        int, typer.Option("--nproc", min=0, help="Ranks on the node (0: one per GPU, 1 on CPU).")
    ] = 0,
    zero: Annotated[int | None, typer.Option("--zero", help="ZeRO stage: 3 or 2.")] = None,
    data: Annotated[
        Path | None, typer.Option("--data", help="Local JSONL of prompt/response pairs.")
    ] = None,
    checkpoint_interval: Annotated[
        int | None, typer.Option("--checkpoint-interval", min=1, help="Steps between checkpoints.")
    ] = None,
    profile_name: Annotated[
        str | None,
        typer.Option("--profile", "-p", help="Profile for the peak (default: by GPU name)."),
    ] = None,
    peak_tflops: Annotated[
        float | None,
        typer.Option("--peak-tflops", min=0.0, help="Peak to compute MFU against (TFLOP/s)."),
    ] = None,
    with_gemm: Annotated[
        bool, typer.Option("--with-gemm", help="Measure the matmul ceiling first (gemm probe).")
    ] = False,
    baseline_file: Annotated[
        Path | None, typer.Option("--baseline", help="Judge against this baseline (or run dir).")
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option("--resume", help="Continue from a checkpoint (work/checkpoints/step<N>)."),
    ] = None,
    keep_checkpoints: Annotated[
        bool, typer.Option(help="Keep the checkpoints in the run directory.")
    ] = True,
    node_work_dir: Annotated[
        str, typer.Option("--node-work-dir", help="--nodes: work directory on each node.")
    ] = NODE_WORK_DIR,
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="--joint: rendezvous port.")
    ] = DEFAULT_PORT,
    master_addr: Annotated[
        str | None,
        typer.Option("--master-addr", help="--joint: rendezvous address (default: first node)."),
    ] = None,
    rendezvous_timeout: Annotated[
        float,
        typer.Option("--rendezvous-timeout", min=1.0, help="--joint: seconds to wait for nodes."),
    ] = 300.0,
    accept_new_hostkeys: AcceptOpt = False,
    connect_timeout: ConnectTimeoutOpt = 10.0,
    out_dir: Annotated[
        Path | None, typer.Option("--out", "-o", help="Run directory (default runs/<time>-burnin).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a reference LoRA fine-tune (DeepSpeed ZeRO-3) and record the node's MFU baseline."""
    if local == (nodes is not None):
        _fail("say where to run: --local (this machine) or --nodes hosts.ini")
    if joint and nodes is None:
        _fail("--joint needs --nodes hosts.ini")
    if resume is not None and nodes is not None:
        _fail("--resume works with --local only (a checkpoint lives on one node)")
    if steps is not None and minutes is not None:
        _fail("give --steps or --minutes, not both")
    if zero not in (None, 2, 3):
        _fail(f"--zero {zero}: ZeRO stage must be 2 or 3")
    if data is not None and not data.is_file():
        _fail(f"--data {data}: not a file")
    if resume is not None and not (resume / "adapter").is_dir():
        _fail(f"--resume {resume}: not a burn-in checkpoint (…/work/checkpoints/step<N>)")
    previous = _load_baseline(baseline_file) if baseline_file else None
    try:
        recipe = recipes.with_overrides(
            recipes.load(recipe_name),
            steps=steps,
            minutes=minutes,
            zero_stage=zero,
            data_path=str(data.resolve()) if data else None,
            checkpoint_interval=checkpoint_interval,
        )
        recipes.deepspeed_config(recipe)  # a broken DeepSpeed file is bad input, said now
    except recipes.RecipeError as exc:
        _fail(str(exc))
    prof = _load_profile(profile_name) if profile_name else None
    hosts = _hosts(nodes, limit) if nodes is not None else []
    try:
        run = RunDir.create(out_dir or default_path("burnin"), "burnin", profile_name, None)
    except RunDirError as exc:
        _fail(str(exc))
    if nodes is not None:
        request = build_request(recipe, "", nproc, keep_checkpoints, with_gemm)
        launch = Launch(
            hosts,
            request,
            node_work_dir,
            port,
            master_addr,
            rendezvous_timeout,
            multinode.connect_settings(accept_new_hostkeys, connect_timeout),
        )
        if joint:
            findings, node_bases = _run_joint(run, launch, recipe, prof, peak_tflops)
        else:
            findings, node_bases = _run_each(run, launch, recipe, prof, peak_tflops)
        _finish(run, findings, node_bases, recipe.name, previous, as_json)
    node = socket.gethostname()
    run.add_node(node)
    work = str((run.path / "work").resolve())
    request = build_request(recipe, work, nproc, keep_checkpoints, with_gemm)
    if resume is not None:
        request["probes"][-1]["params"]["resume"] = str(resume.resolve())
    _probe(run, node, request)
    node_facts = load_facts(run.path)[0]
    findings, result = judge(node_facts, recipe, prof, peak_tflops)
    node_bases = []
    if result is not None:
        facts, peak, ceiling, chosen = result
        run.manifest.profile = chosen.name if chosen else profile_name
        node_bases.append(baselines.summarize(node, facts, peak, ceiling))
    findings = [f.model_copy(update={"node": f.node or node}) for f in findings]
    if run.manifest.status == "interrupted":
        findings.append(
            Finding(
                node=node,
                check="run",
                status=Status.ERROR,
                message="run interrupted: the burn-in did not report back",
            )
        )
    _finish(run, findings, node_bases, recipe.name, previous, as_json)


def _finish(
    run: RunDir,
    findings: list[Finding],
    node_bases: list[baselines.NodeBaseline],
    recipe: str,
    previous: baselines.Baseline | None,
    as_json: bool,
) -> NoReturn:
    """Write the baseline (when any node reported), the findings, the manifest; show; exit."""
    if node_bases:
        base = baselines.build(node_bases, recipe, run.manifest.profile, now())
        baselines.write(run.path / "baseline.json", base)
        if previous is not None:
            findings += checks.compare(base, previous)
    run.add_findings(findings)
    code = exit_code(findings)
    run.finish("complete" if run.manifest.status == "running" else run.manifest.status, code)
    _show(run, findings, as_json)
    raise typer.Exit(code)


def build_request(
    recipe: recipes.Recipe, work: str, nproc: int, keep_checkpoints: bool, with_gemm: bool
) -> dict[str, Any]:
    """The node-side request: optionally the gemm probe, then the burnin probe."""
    train = recipe.train
    deadline = train.minutes * 60 + STARTUP_S if train.minutes else STEPS_DEADLINE_S
    params = {
        "recipe": recipe.model_dump(mode="json"),
        "deepspeed_config": recipes.deepspeed_config(recipe),
        "nproc": nproc,
        "deadline_s": deadline,
        "work_dir": work,
        "keep_checkpoints": keep_checkpoints,
    }
    probes = [{"name": "burnin", "params": params, "timeout_s": deadline + 120}]
    if with_gemm:
        probes.insert(0, {"name": "gemm", "params": {}, "timeout_s": GEMM_TIMEOUT_S})
    return {"probes": probes}


# --- on many nodes ------------------------------------------------------------------------


@dataclass
class Launch:
    """What `--nodes` runs where: the nodes, the request, and the joint job's rendezvous."""

    hosts: list[Host]
    request: dict[str, Any]  # build_request's; work_dir and job parameters set per node
    node_work_dir: str
    port: int
    master_addr: str | None
    rendezvous_timeout_s: float
    ssh: multinode.Ssh

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hosts]


def _hosts(path: Path, limit: str | None) -> list[Host]:
    from bringup.inventory import InventoryError

    try:
        hosts = multinode.load_hosts(path, limit)
    except (InventoryError, ValueError) as exc:
        _fail(str(exc))
    if not hosts:
        _fail(f"{path}: no nodes{f' match --limit {limit}' if limit else ''}")
    return hosts


def node_requests(
    launch: Launch, run_name: str, joint: bool, deepspeed_config: dict[str, Any]
) -> list[dict[str, Any]]:
    """Each node's request: its own work directory and environment; its place in a joint job."""
    burnin = launch.request["probes"][-1]
    base = {**burnin["params"], "deepspeed_config": deepspeed_config}
    if joint:
        base["rendezvous_timeout_s"] = launch.rendezvous_timeout_s
        params = multinode.job_params(base, launch.hosts, launch.port, launch.master_addr)
    else:
        params = [{**base, "env": multinode.host_env(h)} for h in launch.hosts]
    requests = []
    for host, node_params in zip(launch.hosts, params, strict=True):
        node_params["work_dir"] = multi.node_work_dir(launch.node_work_dir, run_name, host.name)
        probes = [*launch.request["probes"][:-1], {**burnin, "params": node_params}]
        requests.append({"probes": probes})
    return requests


def _launch_nodes(run: RunDir, launch: Launch, joint: bool) -> dict[str, NodeOutcome]:
    """The burn-in on every node at once over SSH, each record kept as it arrives."""
    from bringup.fleet import NodePlan, ssh_runner

    ds_config = launch.request["probes"][-1]["params"]["deepspeed_config"]
    if joint:
        ds_config = multi.joint_deepspeed_config(ds_config)
    requests = node_requests(launch, run.path.name, joint, ds_config)
    plans = [
        NodePlan(
            node=host.name,
            runner=ssh_runner(host, launch.ssh.connector, launch.ssh.code),
            request=request,
            profile=None,  # judged here, not by the suite's checks
            deadline_s=sum(float(p["timeout_s"]) for p in request["probes"]) + 60,
        )
        for host, request in zip(launch.hosts, requests, strict=True)
    ]
    outcomes = multinode.launch(plans, run, err)
    launch.ssh.connector.close()
    return {o.node: o for o in outcomes}


def outcome_finding(outcome: NodeOutcome) -> Finding | None:
    """What happened to a node that did not answer: unreachable, or died mid-run."""
    if outcome.state == "unreachable":
        return Finding(
            node=outcome.node,
            check="node.reachable",
            status=Status.UNREACHABLE,
            message=outcome.reason or "unreachable",
            action="check that the node is up, sshd runs and the address and port are right",
        )
    if outcome.state in ("error", "interrupted"):
        what = "run interrupted" if outcome.state == "interrupted" else outcome.reason
        return Finding(
            node=outcome.node,
            check="node.run",
            status=Status.ERROR,
            message=f"{what or 'node side failed'}; what was recorded is kept",
        )
    return None


def _run_each(
    run: RunDir,
    launch: Launch,
    recipe: recipes.Recipe,
    prof: profiles.Profile | None,
    peak_tflops: float | None,
) -> tuple[list[Finding], list[baselines.NodeBaseline]]:
    """Every node trains on its own; each judged, then the nodes' step times compared."""
    outcomes = _launch_nodes(run, launch, joint=False)
    findings: list[Finding] = []
    node_bases = []
    for node in launch.names:
        problem = outcome_finding(outcomes[node])
        findings += [problem] if problem else []
        if problem and problem.status == Status.UNREACHABLE:
            continue
        judged, result = judge(run.facts_of(node), recipe, prof, peak_tflops)
        findings += [f.model_copy(update={"node": f.node or node}) for f in judged]
        if result is not None:
            facts, peak, ceiling, chosen = result
            run.manifest.profile = run.manifest.profile or (chosen.name if chosen else None)
            node_bases.append(baselines.summarize(node, facts, peak, ceiling))
    findings += multi.node_spread_findings(node_bases)
    return findings, node_bases


def _run_joint(
    run: RunDir,
    launch: Launch,
    recipe: recipes.Recipe,
    prof: profiles.Profile | None,
    peak_tflops: float | None,
) -> tuple[list[Finding], list[baselines.NodeBaseline]]:
    """All nodes as one job: one verdict on the job, then its facts judged as one."""
    names = launch.names
    outcomes = _launch_nodes(run, launch, joint=True)
    findings = [f for o in outcomes.values() if (f := outcome_finding(o)) is not None]
    results: dict[str, BurninFacts | str] = {}
    for node in names:
        record = run.facts_of(node).probes.get("burnin")
        if record is None:
            reason = outcomes[node].reason or "no result from this node"
            results[node] = f"{outcomes[node].state}: {reason}"
        elif not record.ok:
            results[node] = record.error or "the burnin probe failed"
        else:
            results[node] = decode(record)
    reason = multi.job_error(names, results)
    if reason is not None:
        return [*findings, multi.job_finding(names, reason, None)], []
    complete = {n: r for n, r in results.items() if isinstance(r, BurninFacts)}
    job = multi.merge_job(names, complete)
    first = run.facts_of(names[0])
    first.probes["burnin"] = first.probes["burnin"].model_copy(
        update={"facts": dataclasses.asdict(job)}
    )
    judged, result = judge(first, recipe, prof, peak_tflops)
    findings.append(multi.job_finding(names, None, job))
    findings += [f.model_copy(update={"node": f.node or names[0]}) for f in judged]
    for node in names[1:]:  # the other nodes' GPUs: their own telemetry
        findings += [
            f.model_copy(update={"node": node}) for f in checks.judge_throttle(complete[node], prof)
        ]
    if result is None:
        return findings, []
    facts, peak, ceiling, chosen = result
    run.manifest.profile = run.manifest.profile or (chosen.name if chosen else None)
    return findings, [baselines.summarize(multi.job_name(names), facts, peak, ceiling)]


def _probe(run: RunDir, node: str, request: dict[str, Any]) -> None:
    """Run the request on this machine, recording each probe as it finishes."""
    deadline = sum(p["timeout_s"] for p in request["probes"]) + 60
    try:
        with err.status(f"{node}: burn-in running") as status:
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


Peak = tuple[float, str]


def judge(
    node: NodeFacts,
    recipe: recipes.Recipe,
    prof: profiles.Profile | None,
    peak_tflops: float | None,
) -> tuple[list[Finding], tuple[BurninFacts, Peak | None, Peak | None, Any] | None]:
    """Findings of the run, and (facts, peak, ceiling, profile) when the burn-in reported."""
    record = node.probes.get("burnin")
    if record is None:
        return [], None
    if not record.ok:
        reason = record.error or "probe failed without a reason"
        return [Finding(check="burnin.run", status=Status.ERROR, message=reason)], None
    try:
        facts: BurninFacts = decode(record)
    except FactsError as exc:
        return [Finding(check="burnin.run", status=Status.ERROR, message=str(exc))], None
    chosen = prof or _profile_for(facts.device_name)
    findings: list[Finding] = []
    for check in checks.CHECKS:
        if check.name != "burnin.mfu":  # judged below, against the peak this command chose
            findings += _judge_one(check, facts, chosen)
    peak: Peak | None = None
    if peak_tflops:
        peak = (peak_tflops * 1e12, "TFLOP/s (--peak-tflops)")
    elif chosen is not None and facts.device_kind == "cuda":
        peak = checks.profile_peak(chosen)
    gemm = gemm_ceiling(node)
    ceiling = gemm or (checks.profile_ceiling(chosen) if chosen else None)
    findings.append(checks.mfu_finding(facts, peak, ceiling))
    gemm_facts, gemm_error = _decoded(node, "gemm")
    if chosen is not None and "gemm" in node.probes:  # the gemm probe's own checks
        findings += judge_probe("gemm", gemm_facts, gemm_error, chosen)
    return findings, (facts, peak, ceiling, chosen)


def _judge_one(check: Any, facts: BurninFacts, prof: profiles.Profile | None) -> list[Finding]:
    # Only burnin.mfu reads the profile; the others judge the facts alone.
    try:
        return check.judge(facts, prof)
    except Exception as exc:  # a bug in one check must not hide the others' verdicts
        return [Finding(check=check.name, status=Status.ERROR, message=f"check crashed: {exc}")]


def gemm_ceiling(node: NodeFacts) -> Peak | None:
    """The median of the GPUs' best BF16 matmul FLOP/s, when the gemm probe ran here."""
    facts, error = _decoded(node, "gemm")
    if facts is None or error:
        return None
    best = [g.bf16_flops_per_s for g in facts.gpus if g.bf16_flops_per_s]
    if not best:
        return None
    return statistics.median(best), f"matmul ceiling (gemm probe, {facts.device})"


def _decoded(node: NodeFacts, probe: str) -> tuple[Any, str | None]:
    record = node.probes.get(probe)
    if record is None:
        return None, f"no {probe} record"
    if not record.ok:
        return None, record.error or "probe failed"
    try:
        return decode(record), None
    except FactsError as exc:
        return None, str(exc)


def _profile_for(device_name: str | None) -> profiles.Profile | None:
    """The shipped profile whose GPU model is the name the trainer saw, if any."""
    if not device_name:
        return None
    for name in profiles.available():
        try:
            candidate = profiles.load(name)
        except profiles.ProfileError:
            continue
        if candidate.gpu.model == device_name:
            return candidate
    return None


def _show(run: RunDir, findings: list[Finding], as_json: bool) -> None:
    from bringup.console import node_table, summary_line

    code = exit_code(findings)
    base_path = run.path / "baseline.json"
    base = baselines.load(base_path) if base_path.exists() else None
    if as_json:
        doc = {
            "run_dir": str(run.path),
            "exit_code": code,
            "baseline": base.model_dump(mode="json") if base else None,
            "findings": [f.model_dump(mode="json") for f in findings],
        }
        print(json.dumps(doc, indent=2))
        return
    out.print(node_table(findings, f"burn-in — {', '.join(run.manifest.nodes)}"))
    for n in base.nodes if base else []:
        out.print(_figures(n), highlight=False)
    out.print(summary_line(findings))
    if base is not None:
        out.print(f"baseline: {base_path}", highlight=False)
    out.print(f"run directory: {run.path}", highlight=False)


def _figures(n: baselines.NodeBaseline) -> str:
    parts = [f"{n.node}: {n.recipe} on {n.world_size} × {n.device_name or n.device_kind}"]
    if n.tokens_per_s_per_gpu is not None:
        parts.append(f"{n.tokens_per_s_per_gpu:.5g} tokens/s per GPU")
    if n.step_time_median_s is not None and n.step_time_p99_s is not None:
        parts.append(f"step {n.step_time_median_s:.4g} s (p99 {n.step_time_p99_s:.4g} s)")
    if n.model_flops_per_s_per_gpu is not None:
        parts.append(f"{n.model_flops_per_s_per_gpu / 1e12:.4g} TFLOP/s model")
    if n.mfu is not None:
        parts.append(f"MFU {n.mfu:.1%}")
    if n.loss_first is not None and n.loss_last is not None:
        parts.append(f"loss {n.loss_first:.3f} → {n.loss_last:.3f}")
    return ", ".join(parts)


def _load_profile(name: str) -> profiles.Profile:
    try:
        return profiles.load(name)
    except profiles.ProfileError as exc:
        _fail(str(exc))


def _load_baseline(path: Path) -> baselines.Baseline:
    try:
        return baselines.load(path)
    except baselines.BaselineError as exc:
        _fail(str(exc))


def _fail(message: str) -> NoReturn:
    from bringup.cli import fail  # lazily: cli imports this module to register the command

    fail(message)
