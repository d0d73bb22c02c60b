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

import copy
import dataclasses
import statistics
from typing import Any

from bringup.baseline import NodeBaseline
from bringup.findings import Finding, Status
from bringup.probes.burnin import BurninFacts

NODE_SPREAD = 0.05  # a node whose median step time is 5% above the nodes' median: WARN


def node_work_dir(base: str, run_name: str, node: str) -> str:
    """Where a node keeps its ranks' outputs and checkpoints: its own disk, one per node."""
    return f"{base.rstrip('/')}/{run_name}/{node}"


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


def node_spread_findings(nodes: list[NodeBaseline]) -> list[Finding]:
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


def job_finding(nodes: list[str], reason: str | None, facts: BurninFacts | None) -> Finding:
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
