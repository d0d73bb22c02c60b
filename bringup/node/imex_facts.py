"""What a node says about its IMEX service: NVIDIA's `nvidia-imex`, which must run on every
compute tray of a multi-node NVLink domain (GB200/GB300 NVL72) for GPU memory to be shared
across trays (NVIDIA IMEX guide; docs/reference.md#imex).

The gpu probe fills `ImexFacts` (node/imex.py) and the `nvidia-imex-ctl -N` parser
(parsers/imex_ctl.py) fills its `ImexDomain`, so an output someone sends is judged as a
live node's. Each part that could not be read keeps why (`*_error`), never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ImexNode:
    """One line under "Nodes:" of `nvidia-imex-ctl -N`."""

    index: int  # "Node #3"
    address: str  # the IP (or host name) of nodes_config.cfg
    status: str  # "READY", "UNAVAILABLE", "WAITING_FOR_PEERS", ...
    version: str | None = None  # "Version: 570.172" (IMEX 570.1xx and later)
    hostname: str | None = None  # "Hostname: ..." (with -H)
    # The line marks the node that answered (`Node #4   * 10.0.0.5 *`, IMEX 580); None: the
    # output does not say which node is the local one.
    local: bool | None = None


@dataclass
class ImexConnection:
    """One cell of the connectivity table: what node `source` sees of node `target`."""

    source: int
    target: int
    state: str  # "C" connected, "N" never connected, "I", "R", "D", "A", "!V!", "!M!"


@dataclass
class ImexDomain:
    """The whole `nvidia-imex-ctl -N` report: every node's status and the domain's state."""

    state: str | None  # "UP", "DEGRADED", "DOWN" ("Domain State: ..."); None: not printed
    nodes: list[ImexNode] = field(default_factory=list)
    connections: list[ImexConnection] = field(default_factory=list)
    timestamp: str | None = None  # as printed ("5/12/2025 06:08:10.580")


@dataclass
class ImexFacts:
    """The IMEX service on this node. None in a field: not read, and `*_error` says why."""

    # `systemctl is-active nvidia-imex`: "active", "inactive", "failed", ...
    service_state: str | None = None
    service_error: str | None = None
    # `nvidia-imex-ctl -q`: the local daemon's own state ("READY", "WAITING_FOR_PEERS", ...)
    daemon_status: str | None = None
    # `nvidia-imex-ctl -N`, parsed
    domain: ImexDomain | None = None
    domain_error: str | None = None
    # The node list of /etc/nvidia-imex/nodes_config.cfg (IP addresses or host names)
    config_path: str | None = None
    config_nodes: list[str] | None = None
    config_error: str | None = None
    # This node's own names: its IP addresses and host names, to find it in the lists above
    local_addresses: list[str] = field(default_factory=list)
    # Where the facts came from: "node" (the gpu probe) or the pasted tool's name
    source: str = "node"
