"""One machine, one node: no serial, UUID or machine id on two nodes of a run.

An inventory that names one machine twice (two addresses of one host, an alias, a copy
and paste) would have that machine measured and accepted twice, and the fleet counted
larger than it is. What identifies a machine, as the probes read it:

    GPU serial, GPU UUID     the gpu probe (NVML, nvidia-smi): each GPU's own
    system serial            the host probe (SMBIOS, /sys/class/dmi/id/product_serial)
    machine id               the host probe (/etc/machine-id, machine-id(5))

`fleet.identity`: a value seen on two nodes or more is a FAIL on each, naming the other
nodes and the value. Like fleet.consistency it says nothing of a node whose every value
is its own (a fleet-wide check adds no PASS line per node). A run of one node has nothing
to compare. Values a tool prints for "unknown"
("N/A", "[N/A]", "0", empty) identify nothing and are left out.

Pure: over each node's recorded facts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, replace

from bringup.checks import finding
from bringup.facts import NodeFacts, decode_record
from bringup.findings import Finding, Status
from bringup.node.gpu_facts import GpuFacts
from bringup.node.probes.host import HostFacts

CHECK = "fleet.identity"
ACTION = (
    "one machine is named twice in the inventory (two addresses or aliases of one host): "
    "remove the duplicate from hosts.ini and measure again; if the nodes are truly "
    "different, compare their serials (`nvidia-smi -q | grep -i serial`, `cat "
    "/etc/machine-id`) and report the cloned value to the provider"
)
# What NVML and nvidia-smi print where a value is not known: no identity.
_UNKNOWN = {"", "n/a", "[n/a]", "0", "none", "unknown", "not available", "[not available]"}


@dataclass(frozen=True, slots=True)
class Mark:
    """One identifying value of a node: what it is ("GPU 3 serial") and the value."""

    kind: str  # "GPU serial", "GPU UUID", "system serial", "machine id": compared within kind
    where: str  # "GPU 3 serial", "system serial"
    value: str


def node_marks(node: NodeFacts) -> list[Mark]:
    """The identifying values the node's gpu and host records show (none where absent)."""
    return decoded_marks({probe: _decoded(node, probe) for probe in ("gpu", "host")})


def decoded_marks(probes: Mapping[str, object]) -> list[Mark]:
    """node_marks from the node's decoded facts by probe (those that decoded)."""
    marks: list[Mark] = []
    gpu = probes.get("gpu")
    if isinstance(gpu, GpuFacts):
        for g in gpu.gpus:
            marks += _mark("GPU serial", f"GPU {g.index} serial", g.serial)
            marks += _mark("GPU UUID", f"GPU {g.index} UUID", g.uuid)
    host = probes.get("host")
    if isinstance(host, HostFacts):
        marks += _mark("system serial", "system serial", host.identity.system_serial)
        marks += _mark("machine id", "machine id", host.identity.machine_id)
    return marks


def judge_identity(nodes: list[NodeFacts]) -> list[Finding]:
    """A fleet.identity FAIL on each node that shares a value with another node."""
    return judge_marks({node.node: node_marks(node) for node in nodes})


def judge_marks(marks: dict[str, list[Mark]]) -> list[Finding]:
    """judge_identity from each node's marks (node_marks), taken as its facts were read:
    a report of ten thousand nodes keeps these, not the facts."""
    if len(marks) < 2:
        return []
    owners: dict[tuple[str, str], set[str]] = defaultdict(set)
    for name, mine in marks.items():
        for mark in mine:
            owners[(mark.kind, mark.value)].add(name)
    # Each shared value's nodes sorted once: a cloned image gives every node the same
    # machine id, and sorting the others for each node again was quadratic (70 s of CPU
    # and half a gigabyte of messages at 10,000 nodes).
    shared_by = {key: sorted(names) for key, names in owners.items() if len(names) > 1}
    found = []
    for name, mine in marks.items():
        shared = []
        for mark in mine:
            group = shared_by.get((mark.kind, mark.value))
            if group is not None:
                shared.append(f"{mark.where} {mark.value} also on {_others(group, name)}")
        if shared:
            first = min(len(shared), 3)
            more = f" (+{len(shared) - first} more)" if len(shared) > first else ""
            message = f"one machine named twice? {'; '.join(shared[:first])}{more}"
            item = finding(CHECK, Status.FAIL, message, value=len(shared), action=ACTION)
            found.append(replace(item, node=name))
    return found


NAMED = 5  # the other nodes a message names; the rest are counted


def _others(group: list[str], name: str) -> str:
    """The nodes of `group` (sorted) other than `name`: the first NAMED, then a count."""
    others = [n for n in group[: NAMED + 1] if n != name][:NAMED]
    rest = len(group) - 1 - len(others)
    return ", ".join(others) + (f" (+{rest} more nodes)" if rest else "")


def _mark(kind: str, where: str, value: str | None) -> list[Mark]:
    if value is None or value.strip().lower() in _UNKNOWN:
        return []
    return [Mark(kind, where, value.strip())]


def _decoded(node: NodeFacts, probe: str) -> object:
    record = node.probes.get(probe)
    if record is None:
        return None
    facts, error = decode_record(record)
    return facts if error is None else None
