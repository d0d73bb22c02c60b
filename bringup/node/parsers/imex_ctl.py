"""`nvidia-imex-ctl -N` (text): the IMEX domain's nodes, connectivity table and state.

The format, as IMEX prints it (tests/fixtures/imex/SOURCES.md has real captures):

    Nodes:
    Node #0   - 172.31.48.81    - READY                - Version: 570.172
    Node #4   * 10.0.0.5 *      - READY   - Version: 580.95.09   - Hostname: tray05
     Nodes From\\To  0   1
           0        C   C
    Domain State: UP

IMEX 570.00 prints no Version; 580 marks the node that answered with `*` around its
address and adds `- Hostname:` under -H. Everything else (the legend, the timestamp, lines
a paste carries around it) is skipped.
"""

from __future__ import annotations

import re

from bringup.node.imex_facts import ImexConnection, ImexDomain, ImexNode
from bringup.node.result import ParseError

_NODE = re.compile(
    r"^\s*Node\s+#(?P<index>\d+)\s+(?P<mark>[-*])\s+(?P<address>\S+)\s+\*?\s*-\s+(?P<status>\S+)"
    r"(?P<rest>.*)$"
)
_VERSION = re.compile(r"-\s*Version:\s*(\S+)")
_HOSTNAME = re.compile(r"-\s*Hostname:\s*(\S+)")
_TABLE_HEADER = re.compile(r"^\s*Nodes\s+From\\To\s+(?P<targets>[\d\s]+)$")
_TABLE_ROW = re.compile(r"^\s*(?P<source>\d+)\s{2,}(?P<cells>\S.*)$")
_STATE = re.compile(r"^\s*Domain\s+State:\s*(?P<state>\S+)", re.I)
_TIMESTAMP = re.compile(r"^\s*(\d{1,2}/\d{1,2}/\d{4}\s+\d{1,2}:\d{2}:\d{2}(?:\.\d+)?)\s*$")


def detect(text: str) -> bool:
    """An `nvidia-imex-ctl -N` report: its node lines or its domain state line."""
    return bool(re.search(r"^\s*Domain State:\s*\S+", text, re.M)) or (
        "Connectivity Table Legend" in text and bool(re.search(r"^\s*Node #\d+\s", text, re.M))
    )


def parse_imex_domain(text: str) -> ImexDomain:
    """The domain report; ParseError when the text has neither node lines nor a state."""
    domain = ImexDomain(state=None)
    targets: list[int] = []
    for line in text.splitlines():
        if match := _NODE.match(line):
            domain.nodes.append(_node(match))
        elif match := _TABLE_HEADER.match(line):
            targets = [int(t) for t in match["targets"].split()]
        elif targets and (match := _TABLE_ROW.match(line)):
            source = int(match["source"])
            for target, cell in zip(targets, match["cells"].split(), strict=False):
                domain.connections.append(ImexConnection(source, target, cell))
        elif match := _STATE.match(line):
            domain.state = match["state"].upper()
        elif (match := _TIMESTAMP.match(line)) and domain.timestamp is None:
            domain.timestamp = match[1]
    if domain.state is None and not domain.nodes:
        raise ParseError("no `Node #` lines and no `Domain State:` line")
    if any(node.local for node in domain.nodes):  # one marked: every other one is not local
        for node in domain.nodes:
            node.local = bool(node.local)
    return domain


def _node(match: re.Match[str]) -> ImexNode:
    rest = match["rest"]
    version, hostname = _VERSION.search(rest), _HOSTNAME.search(rest)
    return ImexNode(
        index=int(match["index"]),
        address=match["address"],
        status=match["status"].upper(),
        version=version[1] if version else None,
        hostname=hostname[1] if hostname else None,
        # IMEX 580 marks the answering node; before it, no line says which is local.
        local=True if match["mark"] == "*" else None,
    )


def parse_nodes_config(text: str) -> list[str]:
    """The entries of nodes_config.cfg: one IP address or host name a line; blank lines
    and `#` comments skipped (the IMEX guide's format)."""
    entries = []
    for line in text.splitlines():
        entry = line.split("#", 1)[0].strip()
        if entry:
            entries.append(entry)
    return entries
