"""`bringup burnin`: run the reference fine-tune, judge it, and write the node's baseline.

    bringup burnin --local --recipe tiny --steps 12
    bringup burnin --local --recipe llama-8b-lora --minutes 20 --profile h200 --with-gemm
    bringup burnin --nodes hosts.ini --recipe llama-8b-lora --minutes 20          each node
    bringup burnin --nodes hosts.ini --joint --recipe llama-70b-lora --minutes 30  one job

The command is the usual pipeline with one probe: the `burnin` probe runs on every node
(fleet.plan -> fleet.run, the same path as `bringup check`), its facts land in the run
directory as they arrive, bringup/checks/burnin_run.py judges them with the peak chosen
here, and baseline.json is written beside them. `--baseline FILE` judges this run against
an earlier baseline. With `--nodes` every node trains on its own at once, or, with
`--joint`, all nodes as one job (their place in it from fleet/job.py).
"""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bringup.commands import complete
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
    err,
    fail,
    finish_run,
    finite,
    load_profile,
    not_for,
    open_nodes,
    out,
    print_envelope,
    progress_console,
    record_slurm,
    run_origin,
    slurm_choice,
    target,
)

if TYPE_CHECKING:
    from bringup import baseline as baselines
    from bringup import profile as profiles
    from bringup import recipe as recipes
    from bringup.facts import NodeFacts
    from bringup.findings import Finding
    from bringup.fleet.inventory import Host
    from bringup.fleet.plan import NodePlan
    from bringup.fleet.run import NodeOutcome
    from bringup.fleet.target import Nodes
    from bringup.rundir import RunDir
    from bringup.suite import Suite

DEFAULT_PORT = 29518  # --joint: the rendezvous port on the first node (nccl uses 29517)
# --nodes: the base of each node's work directory; "" = the node user's own cache,
# ~/.cache/bringup/burnin. The node makes <base>/<run>-<node>-<random> there, private, and
# refuses a base others could change (bringup/node/workdir.py): never a fixed /tmp name.
NODE_WORK_DIR = ""
STARTUP_S = 900.0  # model build, checkpoint verification and teardown beyond the training
STEPS_DEADLINE_S = 3600.0  # a --steps run whose duration cannot be known in advance
GEMM_TIMEOUT_S = 900.0


def burnin(
    ctx: typer.Context,
    local: LocalOpt = False,
    nodes_file: NodesOpt = None,
    joint: Annotated[
        bool, typer.Option("--joint", help="With --nodes: all nodes as one training job.")
    ] = False,
    limit: LimitOpt = None,
    forks: ForksOpt = 64,
    max_raw_mib: MaxRawMibOpt = 256,
    max_raw_files: MaxRawFilesOpt = 2000,
    recipe_name: Annotated[
        str,
        typer.Option(
            "--recipe",
            "-r",
            help="Recipe name (tiny, llama-8b-lora, ...) or YAML.",
            autocompletion=complete.recipes,
        ),
    ] = "tiny",
    steps: Annotated[
        int | None, typer.Option("--steps", min=1, help="Train this many steps.")
    ] = None,
    minutes: Annotated[
        float | None,
        typer.Option("--minutes", min=0.01, callback=finite, help="Train this long."),
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
    profile_name: ProfileOpt = "auto",
    peak_tflops: Annotated[
        float | None,
        typer.Option(
            "--peak-tflops",
            min=0.001,
            callback=finite,
            help="Peak to compute MFU against (TFLOP/s).",
        ),
    ] = None,
    with_gemm: Annotated[
        bool, typer.Option("--with-gemm", help="Measure the matmul ceiling first (gemm probe).")
    ] = False,
    baseline_file: Annotated[
        Path | None,
        typer.Option(
            "--baseline", help="Judge against this baseline (its run dir, or a handover bundle)."
        ),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option("--resume", help="Continue from a checkpoint (work/checkpoints/step<N>)."),
    ] = None,
    keep_checkpoints: Annotated[
        bool, typer.Option(help="Keep the checkpoints in the run directory.")
    ] = True,
    node_work_dir: Annotated[
        str,
        typer.Option(
            "--node-work-dir",
            help="--nodes: base of each node's work directory (default: ~/.cache/bringup/burnin"
            " of the node's user); checked on the node.",
        ),
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
        typer.Option(
            "--rendezvous-timeout",
            min=1.0,
            callback=finite,
            help="--joint: seconds to wait for nodes.",
        ),
    ] = 300.0,
    accept_new_hostkeys: AcceptOpt = False,
    connect_timeout: ConnectTimeoutOpt = 10.0,
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
    """Run a reference LoRA fine-tune (DeepSpeed ZeRO-3) and record the node's MFU baseline."""
    from bringup import recipe as recipes
    from bringup.fleet.run import run as run_fleet
    from bringup.rundir import default_path

    in_slurm = slurm_choice(slurm, partition, nodelist, nodes_count, account, time_limit)
    chosen = target(
        local,
        nodes_file,
        limit,
        forks,
        accept_new_hostkeys,
        connect_timeout,
        in_slurm,
        "burnin",
        max_raw_mib=max_raw_mib,
        max_raw_files=max_raw_files,
    )
    if joint and not chosen.remote:
        fail("--joint needs --nodes hosts.ini or --slurm")
    if not joint:
        why = "a run of each node on its own (it is for --joint)"
        not_for(ctx, why, "port", "master_addr", "rendezvous_timeout")
    if not chosen.remote:
        not_for(ctx, "--local (the work directory is in the run directory)", "node_work_dir")
    if resume is not None and chosen.remote:
        fail("--resume works with --local only (a checkpoint lives on one node)")
    if steps is not None and minutes is not None:
        fail("give --steps or --minutes, not both")
    if zero not in (None, 2, 3):
        fail(f"--zero {zero}: ZeRO stage must be 2 or 3")
    if data is not None and not data.is_file():
        fail(f"--data {data}: not a file")
    if resume is not None and not (resume / "adapter").is_dir():
        fail(f"--resume {resume}: not a burn-in checkpoint (…/work/checkpoints/step<N>)")
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
        fail(str(exc))
    auto = profile_name == "auto"  # the peak from the GPU's own profile (profile_for)
    prof = None if auto else load_profile(profile_name)
    job = Job(recipe, nproc, keep_checkpoints, with_gemm, node_work_dir, port, master_addr)
    job.rendezvous_timeout_s = rendezvous_timeout
    job.resume = str(resume.resolve()) if resume is not None else None
    run_path = out_dir or default_path("burnin")
    with open_nodes(chosen) as nodes:
        plans = _plans(nodes, run_path, job, joint)  # a bad host variable is said before the run
        probes = [step.name for step in burnin_suite(job).probes]
        run = create_run(
            run_path, "burnin", None if auto else profile_name, "burnin", probes=probes
        )
        record_slurm(run, nodes)
        if joint:  # the job's verdict is each of its nodes' (checks/completeness.py)
            run.manifest.jobs = [list(nodes.names)]
        outcomes = {
            o.node: o
            for o in run_fleet(
                plans, run, forks=len(plans), caps=chosen.caps, console=progress_console()
            )
        }
    if joint:
        findings, node_bases = _judge_joint(run, nodes.names, outcomes, recipe, prof, peak_tflops)
    else:
        findings, node_bases = _judge_each(run, nodes.names, outcomes, recipe, prof, peak_tflops)
    _finish(run, findings, node_bases, recipe.name, previous, as_json, quiet)


# --- what each node runs ------------------------------------------------------------------


class Job:
    """What the burn-in asks of the nodes: the recipe, how to run it, where it works."""

    def __init__(
        self,
        recipe: recipes.Recipe,
        nproc: int = 0,
        keep_checkpoints: bool = True,
        with_gemm: bool = False,
        node_work_dir: str = NODE_WORK_DIR,
        port: int = DEFAULT_PORT,
        master_addr: str | None = None,
    ) -> None:
        self.recipe = recipe
        self.nproc = nproc
        self.keep_checkpoints = keep_checkpoints
        self.with_gemm = with_gemm
        self.node_work_dir = node_work_dir
        self.port = port
        self.master_addr = master_addr
        self.rendezvous_timeout_s = 300.0
        self.resume: str | None = None


def burnin_suite(job: Job) -> Suite:
    """The suite every node runs: optionally the gemm probe, then the burnin probe."""
    from bringup import recipe as recipes
    from bringup.suite import ProbeStep, Suite

    train = job.recipe.train
    deadline = train.minutes * 60 + STARTUP_S if train.minutes else STEPS_DEADLINE_S
    params = {
        "recipe": recipes.to_json(job.recipe),
        "deepspeed_config": recipes.deepspeed_config(job.recipe),
        "nproc": job.nproc,
        "deadline_s": deadline,
        "keep_checkpoints": job.keep_checkpoints,
    }
    steps = [ProbeStep(name="burnin", params=params, timeout_s=deadline + 120)]
    if job.with_gemm:
        steps.insert(0, ProbeStep(name="gemm", params={}, timeout_s=GEMM_TIMEOUT_S))
    budget = sum(step.timeout_s for step in steps)
    return Suite(name="burnin", description="reference fine-tune", budget_s=budget, probes=steps)


def node_params(job: Job, hosts: list[Host], run_name: str, joint: bool) -> list[dict[str, Any]]:
    """Each remote node's burnin parameters: its own work directory and environment, and
    its place in a joint job."""
    from bringup import recipe as recipes
    from bringup.fleet.job import host_env, job_params

    base: dict[str, Any] = {}
    if joint:
        base["deepspeed_config"] = joint_deepspeed_config(recipes.deepspeed_config(job.recipe))
        base["rendezvous_timeout_s"] = job.rendezvous_timeout_s
        per_node = job_params(base, hosts, job.port, job.master_addr)
    else:
        per_node = [{**base, "env": host_env(h)} for h in hosts]
    for host, params in zip(hosts, per_node, strict=True):
        params["work_base"] = job.node_work_dir
        params["work_prefix"] = node_work_prefix(run_name, host.name)
    return per_node


def node_work_prefix(run_name: str, node: str) -> str:
    """How a node's work directory starts (the node adds a random end): its run and name."""
    return f"{run_name}-{node}-"


def joint_deepspeed_config(config: dict[str, Any]) -> dict[str, Any]:
    """The config for a job across nodes: checkpoints written to each node's own disk.

    Without `use_node_local_storage` only global rank 0 writes the model states file, and
    the ranks of the other nodes could not load the checkpoint back without a shared disk.
    """
    joint = copy.deepcopy(config)
    checkpoint = joint.setdefault("checkpoint", {})
    if isinstance(checkpoint, dict):
        checkpoint["use_node_local_storage"] = True
    return joint


def _plans(nodes: Nodes, run_path: Path, job: Job, joint: bool) -> list[NodePlan]:
    """What every node runs: the burn-in, all nodes at once (fleet.run records each)."""
    from bringup.fleet.plan import FleetError, plan_node

    suite = burnin_suite(job)
    if nodes.remote:
        per_node = node_params(job, nodes.hosts, run_path.name, joint)
    else:  # this machine: the work directory is inside the run directory
        local: dict[str, Any] = {"work_dir": str((run_path / "work").resolve())}
        per_node = [local if job.resume is None else {**local, "resume": job.resume}]
    try:
        plans = [
            # No profile: the burn-in is judged here, with the peak this command chose.
            plan_node(
                host,
                nodes.runner(host),
                suite,
                None,
                params={"burnin": params},
                remote=nodes.remote,
            )
            for host, params in zip(nodes.hosts, per_node, strict=True)
        ]
    except FleetError as exc:
        fail(str(exc))
    return plans


# --- judging ------------------------------------------------------------------------------


def outcome_finding(outcome: NodeOutcome) -> Finding | None:
    """What happened to a node that did not answer: unreachable, or died mid-run."""
    from bringup.findings import Finding, Status

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


def profile_for(node: NodeFacts, prof: profiles.Profile | None) -> profiles.Profile | None:
    """--profile, else the shipped profile of the GPU model the burn-in ran on (files are
    read here, in the command: the checks only judge what they are given)."""
    if prof is not None:
        return prof
    from bringup import profile as profiles

    record = node.probes.get("burnin")
    facts = record.facts if record is not None and record.ok else None
    name = facts.get("device_name") if isinstance(facts, dict) else None
    return profiles.for_gpu(name if isinstance(name, str) else None)


def _judge_each(
    run: RunDir,
    names: list[str],
    outcomes: dict[str, NodeOutcome],
    recipe: recipes.Recipe,
    prof: profiles.Profile | None,
    peak_tflops: float | None,
) -> tuple[list[Finding], list[baselines.NodeBaseline]]:
    """Every node trained on its own: each judged, then the nodes' step times compared."""
    from bringup import baseline as baselines
    from bringup.checks.burnin_run import judge_burnin, judge_node_spread
    from bringup.findings import Status

    findings: list[Finding] = []
    node_bases = []
    for node in names:
        problem = outcome_finding(outcomes[node])
        findings += [problem] if problem else []
        if problem and problem.status == Status.UNREACHABLE:
            continue
        node_facts = run.facts_of(node)
        judged, result = judge_burnin(
            node_facts, recipe, profile_for(node_facts, prof), peak_tflops
        )
        findings += [replace(f, node=f.node or node) for f in judged]
        if result is not None:
            facts, peak, ceiling, chosen = result
            run.manifest.profile = run.manifest.profile or (chosen.name if chosen else None)
            node_bases.append(baselines.summarize(node, facts, peak, ceiling))
    findings += judge_node_spread(node_bases)
    return findings, node_bases


def _judge_joint(
    run: RunDir,
    names: list[str],
    outcomes: dict[str, NodeOutcome],
    recipe: recipes.Recipe,
    prof: profiles.Profile | None,
    peak_tflops: float | None,
) -> tuple[list[Finding], list[baselines.NodeBaseline]]:
    """All nodes as one job: one verdict on the job, then its facts judged as one."""
    import dataclasses

    from bringup import baseline as baselines
    from bringup.checks.burnin_run import (
        job_error,
        job_name,
        judge_burnin,
        judge_job,
        judge_joined_nodes,
        merge_job,
    )
    from bringup.facts import decode
    from bringup.node.probes.burnin import BurninFacts

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
    reason = job_error(names, results)
    if reason is not None:
        return [*findings, judge_job(names, reason, None)], []
    complete = {n: r for n, r in results.items() if isinstance(r, BurninFacts)}
    merged = merge_job(names, complete)
    first = run.facts_of(names[0])
    first.probes["burnin"] = replace(first.probes["burnin"], facts=dataclasses.asdict(merged))
    judged, result = judge_burnin(first, recipe, profile_for(first, prof), peak_tflops)
    findings.append(judge_job(names, None, merged))
    findings += [replace(f, node=f.node or names[0]) for f in judged]
    findings += judge_joined_nodes(names, complete, merged, prof)  # their own telemetry
    if result is None:
        return findings, []
    facts, peak, ceiling, chosen = result
    run.manifest.profile = run.manifest.profile or (chosen.name if chosen else None)
    return findings, [baselines.summarize(job_name(names), facts, peak, ceiling)]


def _finish(
    run: RunDir,
    findings: list[Finding],
    node_bases: list[baselines.NodeBaseline],
    recipe: str,
    previous: baselines.Baseline | None,
    as_json: bool,
    quiet: bool = False,
) -> None:
    """Write the baseline (when any node reported), the findings, the manifest; show; exit."""
    from bringup import baseline as baselines
    from bringup.checks.burnin import judge_baseline
    from bringup.commands.report import judge_whole
    from bringup.commands.show import plain
    from bringup.rundir import now

    # A baseline is what a completed burn-in measured: none from a trainer that did not
    # finish on every node (its figures would be nulls that `plan` and `report` trust).
    unfinished = sorted({f.node for f in findings if f.status.bad and f.check in _COMPLETED_BY})
    if node_bases and not unfinished:
        base = baselines.build(node_bases, recipe, run.manifest.profile, now())
        baselines.write(run.path / "baseline.json", base)
        if previous is not None:
            findings += judge_baseline(base, previous)
    run.add_findings(findings)
    # The whole run judged as `report` will judge it: the same verdict on the console.
    findings += judge_whole(run)
    code = finish_run(run, findings)
    if unfinished and not as_json:
        where = ", ".join(unfinished)
        err.print(plain(f"no baseline.json: the burn-in did not complete on {where}"))
    _show(run, findings, as_json, quiet)
    raise typer.Exit(code)


# The checks that say a node's burn-in ran to its end: any of them bad, no baseline.
_COMPLETED_BY = ("burnin.run", "burnin.job", "node.run", "node.reachable")


def _show(run: RunDir, findings: list[Finding], as_json: bool, quiet: bool = False) -> None:
    from bringup import baseline as baselines
    from bringup.commands.show import node_table, plain, summary_line, verdict_line

    base_path = run.path / "baseline.json"
    base = baselines.load(base_path) if base_path.exists() else None
    if as_json:
        data = {"baseline": base.model_dump(mode="json") if base else None}
        print_envelope(findings, run=run, data=data)
        return
    if not quiet:
        out.print(node_table(findings, f"burn-in — {', '.join(run.manifest.nodes)}"))
        for n in base.nodes if base else []:
            out.print(plain(_figures(n)))
        out.print(summary_line(findings))
        if base is not None:
            out.print(plain(f"baseline: {base_path}"))
        out.print(plain(f"run directory: {run.path}"))
    line = verdict_line(findings, origin=run_origin(run), overrides=bool(run.manifest.overrides))
    out.print(line, highlight=False, soft_wrap=True)


def _figures(n: baselines.NodeBaseline) -> str:
    """One node's headline figures, as the console shows them after the table."""
    from bringup.measurements import shown

    parts = [f"{n.node}: {n.recipe} on {n.world_size} × {n.device_name or n.device_kind}"]
    if n.tokens_per_s_per_gpu is not None:
        # The report's rendering of the same figure (bringup.measurements.shown).
        parts.append(f"{shown('burnin.tokens_per_s', n.tokens_per_s_per_gpu)} per GPU")
    if n.step_time_median_s is not None and n.step_time_p99_s is not None:
        parts.append(f"step {n.step_time_median_s:.4g} s (p99 {n.step_time_p99_s:.4g} s)")
    if n.model_flops_per_s_per_gpu is not None:
        parts.append(f"{n.model_flops_per_s_per_gpu / 1e12:.4g} TFLOP/s model")
    if n.mfu is not None:
        parts.append(f"MFU {n.mfu:.1%}")
    if n.loss_first is not None and n.loss_last is not None:
        parts.append(f"loss {n.loss_first:.3f} → {n.loss_last:.3f}")
    return ", ".join(parts)


def _load_baseline(path: Path) -> baselines.Baseline:
    from bringup import baseline as baselines

    try:
        return baselines.load_complete(path)
    except baselines.BaselineError as exc:
        fail(str(exc))
