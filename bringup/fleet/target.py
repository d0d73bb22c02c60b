"""Where a command's probes run: this machine, or the nodes of an inventory over SSH.

Every command that touches nodes (check, snapshot, nccl, burnin, diagnose) takes the same
options (`--local | --nodes FILE`, `--limit`, `--forks`, `--accept-new-hostkeys`,
`--connect-timeout`) and opens its nodes here, then plans and runs them with fleet.plan
and fleet.run:

    with open_nodes(Target(nodes_file=Path("hosts.ini"))) as nodes:
        plans = [plan_node(h, nodes.runner(h), suite, profile) for h in nodes.hosts]
        outcomes = run(plans, rundir, forks=nodes.target.forks)

The local machine is one host named after its hostname, reached through the local
transport (a child process): the same planning, recording and judging as a remote node.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from bringup.fleet.inventory import Host, InventoryError
from bringup.fleet.slurm import Allocation, SlurmChoice
from bringup.fleet.transport import NodeCaps, Runner, TransportError

DEFAULT_FORKS = 64
DEFAULT_CONNECT_TIMEOUT_S = 10.0


class TargetError(Exception):
    """The nodes cannot be opened (inventory, SSH settings); one line."""


@dataclass(frozen=True)
class Target:
    """The command line's choice of nodes; `nodes_file` None means this machine."""

    nodes_file: Path | None = None
    limit: str | None = None
    forks: int = DEFAULT_FORKS
    accept_new_hostkeys: bool = False
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    # --slurm: the nodes of a Slurm allocation, reached with srun (fleet/slurm.py); an
    # inventory given too names the nodes and gives their host variables.
    slurm: SlurmChoice | None = None
    job_name: str = "bringup"
    # --max-raw-mib / --max-raw-files: what one node may store (fleet/run.py RecordGate).
    caps: NodeCaps = field(default_factory=NodeCaps)

    @property
    def remote(self) -> bool:
        return self.nodes_file is not None or self.slurm is not None


class Nodes:
    """The hosts of a run and a runner for each: SSH (one connector, one code zip for the
    whole run) or the local transport. Close it (or use `with`) to drop the connections."""

    def __init__(
        self, target: Target, hosts: list[Host], allocation: Allocation | None = None
    ) -> None:
        self.target = target
        self.hosts = hosts
        self.allocation = allocation
        self._connector = None
        self._code = None
        self._launcher = None
        if allocation is not None:
            from bringup.fleet.node_code import build_node_code
            from bringup.fleet.slurm_step import StepLauncher

            self._code = build_node_code()
            self._launcher = StepLauncher(allocation, self._code)
        elif target.remote:
            from bringup.fleet import ssh
            from bringup.fleet.node_code import build_node_code

            settings = ssh.SshSettings(
                connect_timeout_s=target.connect_timeout_s,
                accept_new_hostkeys=target.accept_new_hostkeys,
            )
            try:
                self._connector = ssh.Connector(settings)
            except TransportError as exc:
                raise TargetError(str(exc)) from None
            self._code = build_node_code()

    @property
    def remote(self) -> bool:
        return self.target.remote

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def runner(self, host: Host) -> Runner:
        if self._launcher is not None:
            return self._launcher.runner(host)
        if self._connector is None or self._code is None:
            from bringup.fleet.local import local_runner

            return local_runner()
        from bringup.fleet.ssh import ssh_runner

        return ssh_runner(host, self._connector, self._code)

    def close(self) -> None:
        if self._connector is not None:
            self._connector.close()
        if self._launcher is not None:
            self._launcher.close()
        if self.allocation is not None:
            from bringup.fleet.slurm import release

            release(self.allocation)

    def __enter__(self) -> Nodes:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def this_machine() -> Host:
    """The local node: named by its hostname, reached without SSH."""
    return Host(name=socket.gethostname(), address="127.0.0.1")


def open_nodes(target: Target) -> Nodes:
    """The target's hosts (the inventory read as Ansible reads it, `--limit` applied)."""
    if not target.remote:
        return Nodes(target, [this_machine()])
    hosts = _inventory_hosts(target) if target.nodes_file is not None else []
    if target.slurm is not None:
        return _slurm_nodes(target, hosts)
    return Nodes(target, hosts)


def _inventory_hosts(target: Target) -> list[Host]:
    from bringup.fleet import inventory

    assert target.nodes_file is not None
    try:
        hosts = inventory.load(target.nodes_file, target.limit)
    except InventoryError as exc:
        raise TargetError(str(exc)) from None
    if not hosts:
        chosen = f" match --limit {target.limit}" if target.limit else ""
        raise TargetError(f"{target.nodes_file}: no nodes{chosen}")
    return hosts


def _slurm_nodes(target: Target, inventory_hosts: list[Host]) -> Nodes:
    """The allocation's nodes, named by Slurm; an inventory's hosts give their variables
    (by the same name) and, unless --nodelist says otherwise, which nodes to allocate."""
    from bringup.fleet.slurm import SlurmError, addresses, allocate, release

    assert target.slurm is not None
    named = [] if target.slurm.nodelist else [h.name for h in inventory_hosts]
    try:
        allocation = allocate(target.slurm, named, target.job_name)
    except SlurmError as exc:
        raise TargetError(f"--slurm: {exc}") from None
    known = {h.name: h for h in inventory_hosts}
    try:
        # A node the inventory does not name is reached (a rendezvous on it) at its NodeAddr.
        unknown = [name for name in allocation.nodes if name not in known]
        where = addresses(unknown) if unknown else {}
        hosts = [known.get(n) or Host(name=n, address=where[n]) for n in allocation.nodes]
        return Nodes(target, hosts, allocation)
    except SlurmError as exc:
        release(allocation)
        raise TargetError(f"--slurm: {exc}") from None
    except BaseException:
        release(allocation)
        raise
