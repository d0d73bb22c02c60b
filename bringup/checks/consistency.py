"""Fleet consistency: the odd node out, and every node against a golden manifest.

Half of bring-up problems show as one node unlike its identical peers: another VBIOS, a
driver left behind, one GPU at PCIe x8, a NIC at half rate, a kernel parameter missing.
Each node's compared fields are read from its facts as a flat mapping, "driver_version",
"gpu3.pcie_width", "gpu3.nvlink7", "cmdline.iommu", "nic.mlx5_0/1.rate" (FIELDS_HELP):

- `fleet.consistency` (every run of 3 nodes or more): a node whose value differs from the
  value a strict majority of the nodes show, one WARN per node and field. Which one is
  right is not known, only that it is the odd one out.
- `fleet.golden` (`check --golden FILE`, FILE from `bringup learn`): every field of the
  manifest on every node; a different or missing value FAILs, naming node and field.

Fields that legitimately differ between nodes (serial numbers, UUIDs, host names, the
root file system's UUID on the kernel command line) are not compared. The PCIe generation
compared is the GPU's maximum: the current one drops at idle to save power.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from bringup.checks import finding
from bringup.facts import NodeFacts, decode_record
from bringup.findings import Finding, Status, equal
from bringup.node.fabric_facts import FabricFacts
from bringup.node.gpu_facts import GpuFacts
from bringup.node.probes.host import HostFacts
from bringup.node.probes.topology import TopologyFacts

Value = str | int | bool
Fields = dict[str, Value]  # flat: "gpu3.pcie_width" -> 16
ABSENT = "(absent)"
PRESENT = "(present)"  # a whole GPU, collapsed
MIN_NODES = 3  # with two nodes a majority cannot say which one is odd
# Kernel parameters naming this node's own disks or boot entry, not its configuration.
NODE_OWN_CMDLINE = {"BOOT_IMAGE", "root", "initrd", "resume", "rd.luks.uuid", "cryptdevice"}

FIELDS_HELP = """\
node: driver_version, cuda_driver_version (gpu probe); kernel, cmdline.<parameter>,
      firmware.<bios|rdma device>, nic.<device>/<port>.<state|rate|link_layer> (host probe);
      psid.<rdma device> (fabric probe)
gpu<i>: pci_bus_id, pcie_gen (the GPU's maximum), pcie_width (current), vbios_version,
        nvlink_count, nvlink<l> (up/down) (gpu probe); nic, nic_rate (topology + host)"""


# --- fields from facts --------------------------------------------------------------------


def node_fields(probes: Mapping[str, Any]) -> dict[str, Fields]:
    """The compared fields of one node, by the probe they come from ({} where none answered)."""
    found: dict[str, Fields] = {}
    gpu, host, topo = probes.get("gpu"), probes.get("host"), probes.get("topology")
    if isinstance(gpu, GpuFacts):
        found["gpu"] = _gpu_fields(gpu)
    if isinstance(host, HostFacts):
        found["host"] = _host_fields(host)
    if isinstance(topo, TopologyFacts):
        found["topology"] = _nic_fields(topo, host if isinstance(host, HostFacts) else None)
    fabric = probes.get("fabric")
    if isinstance(fabric, FabricFacts):
        found["fabric"] = _fabric_fields(fabric)
    return found


def fleet_fields(nodes: list[NodeFacts]) -> dict[str, dict[str, Fields]]:
    """node -> its compared fields by probe, from recorded facts (probes that answered)."""
    fleet: dict[str, dict[str, Fields]] = {}
    for node in nodes:
        decoded = {}
        for name, record in node.probes.items():
            facts, error = decode_record(record)
            if error is None:
                decoded[name] = facts
        fleet[node.node] = node_fields(decoded)
    return fleet


def _gpu_fields(facts: GpuFacts) -> Fields:
    fields: Fields = {}
    _put(fields, "driver_version", facts.driver_version)
    _put(fields, "cuda_driver_version", facts.cuda_driver_version)
    for gpu in facts.gpus:
        if gpu.error:
            continue  # a lost GPU: its fields are absent, and gpu.count names it
        at = f"gpu{gpu.index}."
        # NVML prints hex digits in capitals, nvidia-smi's XML in lower case: the same bus.
        _put(fields, at + "pci_bus_id", gpu.pci_bus_id.lower() if gpu.pci_bus_id else None)
        _put(fields, at + "pcie_gen", gpu.pcie_gen_max)
        _put(fields, at + "pcie_width", gpu.pcie_width_current)
        _put(fields, at + "vbios_version", gpu.vbios_version)
        if gpu.nvlinks or gpu.nvlinks_all_inactive is not None:
            fields[at + "nvlink_count"] = len(gpu.nvlinks)
        for link in gpu.nvlinks:
            fields[f"{at}nvlink{link.link}"] = "up" if link.active else "down"
    return fields


def _host_fields(facts: HostFacts) -> Fields:
    fields: Fields = {"kernel": facts.kernel}
    for key, value in cmdline_params(facts.cmdline or "").items():
        fields[f"cmdline.{key}"] = value
    for name, version in facts.firmware.items():
        fields[f"firmware.{name}"] = version
    for port in facts.ib_ports:
        at = f"nic.{port.device}/{port.port}."
        _put(fields, at + "state", port.state)
        _put(fields, at + "rate", port.rate)
        _put(fields, at + "link_layer", port.link_layer)
    return fields


def _fabric_fields(facts: FabricFacts) -> Fields:
    """Each RDMA device's PSID (its firmware is compared as firmware.<device>, host probe)."""
    fields: Fields = {}
    for device in facts.devices:
        _put(fields, f"psid.{device.name}", device.board_id)
    return fields


def _nic_fields(topo: TopologyFacts, host: HostFacts | None) -> Fields:
    """Each GPU's nearest NIC (PIX/PXB in `topo -m`) and, from the host probe, its rate."""
    rates = {p.device: p.rate for p in (host.ib_ports if host else []) if p.port == 1}
    fields: Fields = {}
    for nic in topo.nic_details:
        for index in nic.nearest_gpus:
            key = f"gpu{index}.nic"
            if key in fields:
                continue  # the first NIC listed as nearest
            fields[key] = nic.name
            _put(fields, f"gpu{index}.nic_rate", rates.get(nic.name))
    return fields


def cmdline_params(cmdline: str) -> dict[str, str]:
    """key -> value of the kernel command line ("" for a bare flag), node-own keys left out."""
    found: dict[str, str] = {}
    for word in cmdline.split():
        key, _, value = word.partition("=")
        if key and key not in NODE_OWN_CMDLINE:
            found[key] = value
    return found


def _put(fields: Fields, key: str, value: Value | None) -> None:
    if value is not None:
        fields[key] = value


# --- across the fleet ----------------------------------------------------------------------


def majority(nodes: Mapping[str, dict[str, Fields]]) -> tuple[Fields, dict[str, list[str]]]:
    """(the value of every field a strict majority of nodes agree on, the fields that have
    no majority -> their values). A node counts for a field when its probe answered."""
    agreed: Fields = {}
    split: dict[str, list[str]] = {}
    for poll in polls(nodes):
        if poll.majority:
            if poll.top != ABSENT:
                agreed[poll.key] = poll.top
        else:
            split[poll.key] = sorted({str(value) for value, _ in poll.answers})
    return agreed, split


@dataclass
class Poll:
    """One field's vote across the nodes whose probe answered: each Fields object's value
    with the nodes that hold it (in node order of their first), the value most show and
    how many do."""

    key: str
    answers: list[tuple[Value, list[str]]]
    top: Value
    count: int
    voters: int

    @property
    def majority(self) -> bool:
        return 2 * self.count > self.voters


def polls(nodes: Mapping[str, dict[str, Fields]]) -> list[Poll]:
    """Every field's Poll, in field order (_order).

    Nodes alike share one Fields object (fleet.run's Shared holds equal fields once): each
    distinct object is read once with the nodes that hold it, so ten thousand identical
    nodes cost what one does, not ten thousand times two hundred look-ups. Fields equal but
    not shared are counted apart, to the same result."""
    holders = _holders(nodes)
    keys = {(probe, key) for probe, held in holders.items() for fields, _ in held for key in fields}
    found = []
    for probe, key in sorted(keys, key=lambda pk: _order(pk[1])):
        # A Counter over the values in node order, as over every node's own: the first
        # node's value wins a tie, and values equal to Python (1, 1.0, True) are one.
        answers = [(fields.get(key, ABSENT), nodes_of) for fields, nodes_of in holders[probe]]
        counts: Counter[Value] = Counter()
        for value, nodes_of in answers:
            counts[value] += len(nodes_of)
        (top, count), *_ = counts.most_common(1)
        found.append(Poll(key, answers, top, count, sum(counts.values())))
    return found


def _holders(nodes: Mapping[str, dict[str, Fields]]) -> dict[str, list[tuple[Fields, list[str]]]]:
    """probe -> [(a Fields object, the nodes that hold that very object)], in node order of
    each object's first holder."""
    by_probe: dict[str, dict[int, tuple[Fields, list[str]]]] = {}
    for node, groups in nodes.items():
        for probe, fields in groups.items():
            held = by_probe.setdefault(probe, {})
            entry = held.get(id(fields))  # the objects live in `nodes` meanwhile: ids unique
            if entry is None:
                held[id(fields)] = (fields, [node])
            else:
                entry[1].append(node)
    return {probe: list(held.values()) for probe, held in by_probe.items()}


# The per-node checks that judge a field against the profile: where one of them already
# flagged the node, the odd value is its finding, not a second one (one fault, one finding).
OWNERS: list[tuple[str, tuple[str, ...]]] = [
    (r"gpu[0-9]+", ("gpu.count", "topology.gpu_count")),
    (r"gpu[0-9]+\.nvlink.*", ("gpu.nvlink", "topology.nvlink", "gpu.fabric")),
    (r"gpu[0-9]+\.pcie_.*", ("gpu.pcie",)),
    (r"gpu[0-9]+\.nic.*", ("topology.nic_affinity", "host.ib_ports")),
    (r"(cuda_)?driver_version", ("gpu.driver",)),
    (r"nic\..*", ("host.ib_ports", "fabric.ports")),
    (r"cmdline\.(iommu.*|intel_iommu|amd_iommu|pcie_acs_override)", ("host.iommu",)),
]


def owned(key: str, flagged: set[str]) -> bool:
    """True when a check that judges this field flagged the node (`flagged`: check names)."""
    return any(re.fullmatch(p, key) and flagged & set(checks) for p, checks in OWNERS)


def judge_consistency(
    nodes: Mapping[str, dict[str, Fields]], flagged: Mapping[str, set[str]] | None = None
) -> list[Finding]:
    """A WARN per node and field that differs from the fleet's majority (3 nodes or more),
    unless a check that owns the field already flagged that node (`flagged`: node -> the
    checks with a WARN, FAIL or ERROR there)."""
    if len(nodes) < MIN_NODES:
        return []
    odd: dict[str, list[Diff]] = {}
    agreed: Fields = {}
    for poll in polls(nodes):
        if poll.majority and poll.top != ABSENT:
            agreed[poll.key] = poll.top  # what majority() agrees on, few voters or many
        if poll.voters < MIN_NODES or not poll.majority:
            continue  # too few to tell, or no majority: nothing to call odd
        votes = f"{poll.count} of {poll.voters}"
        for value, members in poll.answers:
            if value != poll.top:
                for node in members:
                    odd.setdefault(node, []).append(Diff(poll.key, value, poll.top, votes))
    findings = []
    for node, diffs in sorted(odd.items()):
        for diff in collapse(diffs, agreed):
            if owned(diff.key, (flagged or {}).get(node, set())):
                continue
            have = "it" if diff.want == PRESENT else _shown(diff.want)
            message = f"{diff.said()}; {diff.votes} nodes have {have}"
            findings.append(_flag("fleet.consistency", Status.WARN, message, diff, node))
    return findings


def judge_golden(
    golden: Fields, nodes: Mapping[str, dict[str, Fields]], source: str
) -> list[Finding]:
    """Every node against the golden manifest: a FAIL per field that differs or is missing."""
    findings: list[Finding] = []
    for node, groups in sorted(nodes.items()):
        diffs: list[Diff] = []
        compared = 0
        unanswered: dict[str, int] = {}
        for key, want in golden.items():
            probe = probe_of(key)
            if probe not in groups:
                unanswered[probe] = unanswered.get(probe, 0) + 1
                continue
            compared += 1
            got = groups[probe].get(key, ABSENT)
            if got != want:
                diffs.append(Diff(key, got, want))
        mine = [
            _flag(
                "fleet.golden",
                Status.FAIL,
                f"{d.said()}, golden: {_shown(d.want)} ({source})",
                d,
                node,
            )
            for d in collapse(diffs, golden)
        ]
        for probe, count in sorted(unanswered.items()):
            message = f"{count} fields of {source} not compared: the {probe} probe did not answer"
            action = (
                f"rerun `bringup check` with the {probe} probe on this node (its ERROR says why)"
            )
            mine.append(
                replace(finding("fleet.golden", Status.ERROR, message, action=action), node=node)
            )
        if not mine:
            passed = finding("fleet.golden", Status.PASS, f"{compared} fields as in {source}")
            mine.append(replace(passed, node=node))
        findings += mine
    return findings


@dataclass
class Diff:
    """One field (or, collapsed, a GPU's links or a whole GPU) unlike the reference."""

    key: str
    got: Value
    want: Value
    votes: str = ""  # "7 of 8" for the majority
    many: bool = False  # the key names several fields

    def said(self) -> str:
        return f"{self.key} {'are' if self.many else 'is'} {_shown(self.got)}"


def collapse(diffs: list[Diff], reference: Fields) -> list[Diff]:
    """One diff for a GPU absent altogether, one for a GPU's links in the same state."""
    by_gpu: dict[str, list[Diff]] = {}
    rest: list[Diff] = []
    for diff in diffs:
        match = re.match(r"(gpu[0-9]+)\.", diff.key)
        (by_gpu.setdefault(match.group(1), []) if match else rest).append(diff)
    out = list(rest)
    for gpu, mine in by_gpu.items():
        expected = [k for k in reference if k.startswith(gpu + ".")]
        if len(mine) == len(expected) > 1 and all(d.got == ABSENT for d in mine):
            out.append(Diff(gpu, ABSENT, PRESENT, mine[0].votes))
            continue
        links: dict[tuple[Value, Value], list[int]] = {}
        for diff in mine:
            link = re.fullmatch(r"gpu[0-9]+\.nvlink([0-9]+)", diff.key)
            if link:
                links.setdefault((diff.got, diff.want), []).append(int(link.group(1)))
            else:
                out.append(diff)
        for (got, want), numbers in links.items():
            votes = mine[0].votes
            key = f"{gpu}.nvlink{_ranges(numbers)}"
            out.append(Diff(key, got, want, votes, many=len(numbers) > 1))
    return out


def _ranges(numbers: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2,5,7-8"."""
    parts: list[str] = []
    for n in sorted(numbers):
        if parts and n == int(parts[-1].split("-")[-1]) + 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{n}"
        else:
            parts.append(str(n))
    return ",".join(parts)


def _flag(check: str, status: Status, message: str, diff: Diff, node: str) -> Finding:
    found = finding(
        check,
        status,
        message,
        value=_typed_value(diff.got),
        expected=equal(_typed_value(diff.want)),
        action=_ACTION,
    )
    return replace(found, node=node)


def _typed_value(value: Value) -> int | float | str | bool:
    """A field's value as the finding carries it: typed when it is one number, string or
    flag; a list or mapping as its text."""
    return value if isinstance(value, (int, float, str, bool)) else str(value)


_ACTION = (
    "bring the node in line with its peers (driver, firmware and VBIOS updates, the kernel "
    "command line, reseating a GPU or cable), or update the golden manifest if the change "
    "is intended"
)


def probe_of(key: str) -> str:
    """Which probe a field comes from."""
    if re.fullmatch(r"gpu[0-9]+\.nic(_rate)?", key):
        return "topology"
    if key.startswith("gpu") or key in ("driver_version", "cuda_driver_version"):
        return "gpu"
    return "host"


def _order(key: str) -> tuple[int, int, int, str]:
    """Node fields first, then GPUs by index, each GPU's links last, by number."""
    match = re.match(r"gpu([0-9]+)\.(?:nvlink([0-9]+)$)?", key)
    if match is None:
        return (0, 0, 0, key)
    if match.group(2) is not None:
        return (1, int(match.group(1)), 1, f"{int(match.group(2)):03d}")
    return (1, int(match.group(1)), 0, key)


def _shown(value: Value) -> str:
    if value in (ABSENT, PRESENT):
        return str(value).strip("()")
    return repr(value)


# --- the manifest as a person edits it -----------------------------------------------------


def to_manifest(fields: Fields) -> dict[str, Any]:
    """Flat fields -> the nested document `bringup learn` writes (node:, gpus:)."""
    node: dict[str, Any] = {}
    gpus: dict[int, dict[str, Any]] = {}
    for key, value in sorted(fields.items(), key=lambda kv: _order(kv[0])):
        if match := re.fullmatch(r"gpu([0-9]+)\.nvlink([0-9]+)", key):
            links = gpus.setdefault(int(match.group(1)), {}).setdefault("nvlinks", {})
            links[int(match.group(2))] = value
        elif match := re.fullmatch(r"gpu([0-9]+)\.(.+)", key):
            gpus.setdefault(int(match.group(1)), {})[match.group(2)] = value
        elif key.startswith(("cmdline.", "firmware.")):
            group, _, name = key.partition(".")
            node.setdefault(group, {})[name] = value
        elif key.startswith("nic."):
            port, _, attribute = key[len("nic.") :].rpartition(".")
            node.setdefault("nic_ports", {}).setdefault(port, {})[attribute] = value
        else:
            node[key] = value
    for attributes in gpus.values():  # links 0..n-1: a list, one state per link
        links = attributes.get("nvlinks")
        if links is not None and sorted(links) == list(range(len(links))):
            attributes["nvlinks"] = [links[i] for i in range(len(links))]
    return {"node": node, "gpus": gpus}


def from_manifest(doc: Any) -> Fields:
    """The nested document -> flat fields; ValueError naming what is malformed."""
    if not isinstance(doc, dict):
        raise ValueError("a golden manifest is a mapping with `node:` and `gpus:`")
    unknown = set(doc) - {"node", "gpus"}
    if unknown:
        raise ValueError(f"unknown section(s) {', '.join(sorted(unknown))}: only node, gpus")
    fields: Fields = {}
    for key, value in (doc.get("node") or {}).items():
        if key in ("cmdline", "firmware"):
            for name, inner in _mapping(value, key).items():
                fields[f"{key}.{name}"] = _scalar(inner, f"{key}.{name}")
        elif key == "nic_ports":
            for port, attributes in _mapping(value, key).items():
                for attribute, inner in _mapping(attributes, f"nic_ports.{port}").items():
                    fields[f"nic.{port}.{attribute}"] = _scalar(inner, f"nic.{port}.{attribute}")
        else:
            fields[str(key)] = _scalar(value, str(key))
    for index, attributes in _mapping(doc.get("gpus") or {}, "gpus").items():
        if not str(index).isdigit():
            raise ValueError(f"gpus: {index!r} is not a GPU index")
        for key, value in _mapping(attributes, f"gpus.{index}").items():
            if key == "nvlinks":
                for link, state in _mapping(value, f"gpus.{index}.nvlinks").items():
                    fields[f"gpu{index}.nvlink{link}"] = _scalar(state, f"gpu{index}.nvlink{link}")
            else:
                fields[f"gpu{index}.{key}"] = _scalar(value, f"gpu{index}.{key}")
    return fields


def _mapping(value: Any, where: str) -> dict[Any, Any]:
    if isinstance(value, list):  # nvlinks written as a list: index = link number
        return dict(enumerate(value))
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected a mapping")
    return value


def _scalar(value: Any, where: str) -> Value:
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return str(value)  # "13.0" read back as a number by a hand edit
    raise ValueError(f"{where}: expected a string or number, got {type(value).__name__}")
