"""A torch.distributed job across nodes, from the controller: each node's place in the job,
its environment from the inventory, and every node started at once.

Shared by `bringup nccl --nodes` (nccl_run.py) and `bringup burnin --nodes --joint`
(burnin/command.py): every node runs its probe with nnodes, its node_rank, and the
rendezvous (master_addr, master_port) on the first node; `bringup_nccl_env` host or group
variables (NCCL_SOCKET_IFNAME, NCCL_IB_HCA, GLOO_SOCKET_IFNAME, ...) reach that node's ranks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from bringup.fleet import NodeOutcome, NodePlan
    from bringup.inventory import Host
    from bringup.rundir import RunDir


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


def load_hosts(path: Path, limit: str | None) -> list[Host]:
    """The inventory's nodes; InventoryError or ValueError (bad bringup_nccl_env), one line."""
    from bringup.inventory import load

    hosts = load(path, limit)
    for host in hosts:
        host_env(host)
    return hosts


@dataclass
class Ssh:
    """One connector and one code zip for every node of the run."""

    connector: Any
    code: Any


def connect_settings(accept_new_hostkeys: bool, connect_timeout: float) -> Ssh:
    """The run's SSH connector (host keys verified) and the node-side zip, built once."""
    from bringup.ssh import Connector, SshSettings, build_node_code

    settings = SshSettings(
        connect_timeout_s=connect_timeout, accept_new_hostkeys=accept_new_hostkeys
    )
    return Ssh(Connector(settings), build_node_code())


def launch(plans: list[NodePlan], run: RunDir, console: Console) -> list[NodeOutcome]:
    """Every node of the job at once (a rendezvous needs them all), recorded into `run`."""
    from bringup import fleet

    return fleet.run(plans, run, forks=len(plans), console=console)
