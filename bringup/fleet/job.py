"""A torch.distributed job across nodes: each node's place in the job and its environment
from the inventory. The job's nodes are then run at once by `fleet.run` (forks = nodes),
because a rendezvous needs them all.

Shared by `bringup nccl --nodes` and `bringup burnin --nodes --joint`: every node runs its
probe with nnodes, its node_rank, and the rendezvous (master_addr, master_port) on the
first node; `bringup_nccl_env` host or group variables (NCCL_SOCKET_IFNAME, NCCL_IB_HCA,
GLOO_SOCKET_IFNAME, ...) reach that node's ranks.
"""

from __future__ import annotations

from typing import Any

from bringup.fleet.inventory import Host


def host_env(host: Host) -> dict[str, str]:
    """The node's `bringup_nccl_env` variable (a mapping of NCCL_*/GLOO_* settings)."""
    value = host.vars.get("bringup_nccl_env")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"host {host.name}: bringup_nccl_env must be a mapping of NAME: value")
    return {str(k): str(v) for k, v in value.items()}


def job_params(
    base: dict[str, Any], hosts: list[Host], port: int, master_addr: str | None = None
) -> list[dict[str, Any]]:
    """Each node's probe parameters: its rank in the job, the rendezvous, its environment."""
    master = master_addr or hosts[0].address
    return [
        {
            **base,
            "env": {**base.get("env", {}), **host_env(host)},
            "nnodes": len(hosts),
            "node_rank": rank,
            "master_addr": master,
            "master_port": port,
        }
        for rank, host in enumerate(hosts)
    ]


def check_env(hosts: list[Host]) -> None:
    """ValueError naming the first host whose `bringup_nccl_env` is not a mapping."""
    for host in hosts:
        host_env(host)


# --- pairwise: every node in a 2-node job, then each suspect with a known-good partner ------


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
