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
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from bringup.fleet.inventory import Host, InventoryError
from bringup.fleet.transport import Runner, TransportError

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

    @property
    def remote(self) -> bool:
        return self.nodes_file is not None


class Nodes:
    """The hosts of a run and a runner for each: SSH (one connector, one code zip for the
    whole run) or the local transport. Close it (or use `with`) to drop the connections."""

    def __init__(self, target: Target, hosts: list[Host]) -> None:
        self.target = target
        self.hosts = hosts
        self._connector = None
        self._code = None
        if target.remote:
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
        if self._connector is None or self._code is None:
            from bringup.fleet.local import local_runner

            return local_runner()
        from bringup.fleet.ssh import ssh_runner

        return ssh_runner(host, self._connector, self._code)

    def close(self) -> None:
        if self._connector is not None:
            self._connector.close()

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
    from bringup.fleet import inventory

    assert target.nodes_file is not None
    try:
        hosts = inventory.load(target.nodes_file, target.limit)
    except InventoryError as exc:
        raise TargetError(str(exc)) from None
    if not hosts:
        chosen = f" match --limit {target.limit}" if target.limit else ""
        raise TargetError(f"{target.nodes_file}: no nodes{chosen}")
    return Nodes(target, hosts)
