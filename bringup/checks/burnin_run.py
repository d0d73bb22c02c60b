"""The burn-in on many nodes: each node on its own, or all nodes as one joint job. Pure.

Each on its own (`--nodes`): every node trains the recipe on its own GPUs at the same time;
each is judged like a `--local` run, and the nodes' median step times are compared
(`burnin.node_spread`): a node well behind the others is the one to look at.

One joint job (`--nodes --joint`): torch.distributed.run on every node with nnodes, its
node_rank and the rendezvous on the first node. Rank 0 (first node) records the loss,
checkpoints and the restore check; every node records its own ranks' step times and its
GPUs' telemetry. The job's facts are the first node's with every node's ranks; a job that
did not run gets one `burnin.job` ERROR naming the node that says why.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any

from bringup import profile as profiles
from bringup import recipe as recipes
from bringup.baseline import NodeBaseline
from bringup.checks.actions import (
    CHECK_ACTIONS,
    CRASHED,
    PROBE_ACTIONS,
    unmeasured_action,
    with_action,
)
from bringup.checks.burnin import (
    CHECKS,
    judge_mfu_against,
    judge_throttle,
    profile_ceiling,
    profile_peak,
)
from bringup.checks.catalog import judge_probe
from bringup.facts import FactsError, NodeFacts, decode
from bringup.findings import Finding, Status
from bringup.node.probes.burnin import BurninFacts

NODE_SPREAD = 0.05  # a node whose median step time is 5% above the nodes' median: WARN


def judge_node_spread(nodes: list[NodeBaseline]) -> list[Finding]:
    """burnin.node_spread: each node's median step time against the median of all nodes."""
    medians = {n.node: n.step_time_median_s for n in nodes if n.step_time_median_s}
    if len(medians) < 2:
        return []
    middle = statistics.median(medians.values())
    found = []
    for node, median in medians.items():
        behind = median / middle - 1
        text = f"median step time {median:.4g} s, {behind:+.1%} against the nodes' {middle:.4g} s"
        if behind > NODE_SPREAD:
            found.append(
                Finding(
                    node=node,
                    check="burnin.node_spread",
                    status=Status.WARN,
                    message=f"{text}: this node trails the others",
                    action="run `bringup diagnose` on this node (clocks, throttling, PCIe)",
                    value=round(behind, 4),
                    unit="ratio",
                )
            )
        else:
            found.append(
                Finding(
                    node=node,
                    check="burnin.node_spread",
                    status=Status.PASS,
                    message=text,
                    value=round(behind, 4),
                    unit="ratio",
                )
            )
    return found


def job_error(nodes: list[str], results: dict[str, BurninFacts | str]) -> str | None:
    """Why the joint job did not run, in the words of the node that says most; None if it ran.

    The first node hosts the rendezvous and can only say that the others did not come; a
    node that could not reach it names the address, so the other nodes speak first.
    """
    for node in [*nodes[1:], *nodes[:1]]:
        result = results[node]
        if isinstance(result, str):
            return f"{node}: {result}"
        if result.error:
            return f"{node}: {result.error}"
    first = results[nodes[0]]
    assert not isinstance(first, str)
    if first.stopped_by is None:
        return f"{nodes[0]}: the trainer did not report its end"
    return None


def merge_job(nodes: list[str], results: dict[str, BurninFacts]) -> BurninFacts:
    """The job's facts: the first node's (rank 0: loss, checkpoints), every node's ranks."""
    first = results[nodes[0]]
    ranks = sorted((r for n in nodes for r in results[n].ranks), key=lambda r: r.rank)
    return dataclasses.replace(first, ranks=ranks, nnodes=len(nodes))


def judge_joined_nodes(
    nodes: list[str],
    results: dict[str, BurninFacts],
    job: BurninFacts,
    prof: profiles.Profile | None,
) -> list[Finding]:
    """burnin.throttle of every node but the first: its own GPUs' telemetry, on that node.

    Only rank 0 (on the first node) records the job's steps; another node's record holds
    its ranks' step times and its telemetry, and no step. Its GPUs trained in every step
    of the job (`job`, the merged facts), so its telemetry is judged within those steps:
    judged alone, its record would read as a burn-in that produced no data.
    """
    found: list[Finding] = []
    for node in nodes[1:]:
        own = dataclasses.replace(results[node], steps=job.steps)
        found += [dataclasses.replace(f, node=node) for f in judge_throttle(own, prof)]
    return found


def judge_job(nodes: list[str], reason: str | None, facts: BurninFacts | None) -> Finding:
    """burnin.job: did every node's ranks meet and train to the end."""
    if reason is not None or facts is None:
        return Finding(
            node=nodes[0],
            check="burnin.job",
            status=Status.ERROR,
            message=f"the {len(nodes)}-node job did not complete: {reason}",
            action="check that every node reaches the first node on the rendezvous port "
            "(firewall) and the interface (bringup_nccl_env: NCCL_SOCKET_IFNAME, "
            "GLOO_SOCKET_IFNAME), then rerun",
        )
    return Finding(
        node=nodes[0],
        check="burnin.job",
        status=Status.PASS,
        message=f"{facts.recipe} over {len(nodes)} nodes ({', '.join(nodes)}), "
        f"{facts.world_size} ranks, {len(facts.steps)} steps",
    )


def job_name(nodes: list[str]) -> str:
    """The joint job's name in the baseline: its nodes, in rank order."""
    return "+".join(nodes)


# --- one node's burn-in, judged with the peak the command chose --------------------------

Peak = tuple[float, str]


def judge_burnin(
    node: NodeFacts,
    recipe: recipes.Recipe,
    prof: profiles.Profile | None,
    peak_tflops: float | None,
) -> tuple[list[Finding], tuple[BurninFacts, Peak | None, Peak | None, Any] | None]:
    """Findings of the run, and (facts, peak, ceiling, profile) when the burn-in reported.
    `prof` is the profile the command chose (--profile, or the one of the GPU it ran on)."""
    record = node.probes.get("burnin")
    if record is None:
        return [], None
    if not record.ok:
        reason = record.error or "probe failed without a reason"
        unmeasured = unmeasured_action("burnin", reason)
        return [
            Finding(check="burnin.run", status=Status.ERROR, message=reason, action=unmeasured)
        ], None
    try:
        facts: BurninFacts = decode(record)
    except FactsError as exc:
        return [
            Finding(check="burnin.run", status=Status.ERROR, message=str(exc), action=CRASHED)
        ], None
    chosen = prof
    findings: list[Finding] = []
    for check in CHECKS:
        if check.name != "burnin.mfu":  # judged below, against the peak this command chose
            findings += _judge_one(check, facts, chosen)
    peak: Peak | None = None
    if peak_tflops:
        peak = (peak_tflops * 1e12, "TFLOP/s (--peak-tflops)")
    elif chosen is not None and facts.device_kind == "cuda":
        peak = profile_peak(chosen)
    gemm = gemm_ceiling(node)
    ceiling = gemm or (profile_ceiling(chosen) if chosen else None)
    findings.append(judge_mfu_against(facts, peak, ceiling))
    gemm_facts, gemm_error = _decoded(node, "gemm")
    if chosen is not None and "gemm" in node.probes:  # the gemm probe's own checks
        findings += judge_probe("gemm", gemm_facts, gemm_error, chosen)
    findings = [
        with_action(f, CHECK_ACTIONS.get(f.check, PROBE_ACTIONS["burnin"])) for f in findings
    ]
    return findings, (facts, peak, ceiling, chosen)


def _judge_one(check: Any, facts: BurninFacts, prof: profiles.Profile | None) -> list[Finding]:
    # Only burnin.mfu reads the profile; the others judge the facts alone.
    try:
        return check.judge(facts, prof)
    except Exception as exc:  # a bug in one check must not hide the others' verdicts
        message = f"check crashed: {exc}"
        return [Finding(check=check.name, status=Status.ERROR, message=message, action=CRASHED)]


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
