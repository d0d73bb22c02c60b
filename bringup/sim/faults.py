"""What a simulated node shows: the demo fleet's facts with one planted fault, recorded for
the probes that need GPUs, and the profile simulated nodes (this machine) can meet. Pure,
apart from reading the shipped b300 profile.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Sequence
from functools import cache

import yaml

from bringup.facts import NodeFacts, ProbeRecord
from bringup.node.probes.topology import parse_topo
from bringup.sim.demo import demo_nodes, gpu_identity, topo_text
from bringup.sim.netns import SimClusterError, nodes_memlock_bytes

# The probes a simulated node runs for real unless told otherwise; the others are
# answered from the node's recording. With the simulated NVML the gpu probe runs for real
# too (through the real pynvml); `nvidia-smi topo -m` and the kernel log are not NVML, so
# topology and xid stay recorded.
DEFAULT_LIVE = ("host", "nvme")
NVML_LIVE = ("host", "nvme", "gpu", "telemetry")

# Each planted fault as the simulated NVML shows it (bringup.sim.nvml faults, KIND[:GPU]
# [=VALUE]); faults that live outside NVML (the topology matrix, the kernel log) have none.
NVML_FAULTS: dict[str, tuple[str, ...]] = {
    "healthy": (),
    "missing_gpu": ("missing:7",),
    "no_nvlink": ("nvlink-down:2=all",),
    "node_pair": (),
    "row_remap": ("remap-pending:3",),
    "xid79": (),
    "hw_slowdown": ("hw-slowdown:5=0",),
}

# Planted faults: name -> (index in bringup.sim.demo.demo_nodes(), what the node shows).
# "node_pair" is not in the demo fleet: it is built here from the healthy node.
FAULTS: dict[str, str] = {
    "healthy": "a healthy B300 node",
    "missing_gpu": "7 GPUs instead of 8 (one fell off the bus)",
    "no_nvlink": "GPU 2 without NVLink: NODE/SYS to every other GPU",
    "node_pair": "NODE instead of NV18 between GPU 0 and GPU 1",
    "row_remap": "GPU 3 with a pending row remap",
    "xid79": "XID 79 (GPU 6 fell off the bus) in the kernel log",
    "hw_slowdown": "GPU 5 with HW slowdown active",
}
_DEMO_INDEX = {
    "healthy": 0,
    "missing_gpu": 1,
    "no_nvlink": 2,
    "row_remap": 3,
    "xid79": 4,
    "hw_slowdown": 5,
}


# --- facts of a simulated node: pure functions ------------------------------------------


@cache
def _demo_nodes() -> dict[str, NodeFacts]:
    demo = demo_nodes()
    nodes = {fault: demo[index] for fault, index in _DEMO_INDEX.items()}
    nodes["node_pair"] = _with_node_pair(demo[0])
    return nodes


def _with_node_pair(healthy: NodeFacts) -> NodeFacts:
    """The healthy node with NODE instead of NV18 between GPU 0 and GPU 1 in `topo -m`."""
    rows = topo_text().split("\n")
    for row, column in ((1, 2), (2, 1)):  # row 0 is the header; cell 0 the row's name
        cells = rows[row].split("\t")
        cells[column] = "NODE"
        rows[row] = "\t".join(cells)
    node = copy.deepcopy(healthy)
    facts = dataclasses.asdict(parse_topo("\n".join(rows)))
    node.probes["topology"] = dataclasses.replace(node.probes["topology"], facts=facts)
    return node


def node_facts(name: str, fault: str, live: Sequence[str] = DEFAULT_LIVE) -> NodeFacts:
    """The recording of one simulated node: the demo facts of `fault`, less the live probes."""
    if fault not in FAULTS:
        raise SimClusterError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
    demo = _demo_nodes()[fault]
    probes: dict[str, ProbeRecord] = {}
    for probe, record in demo.probes.items():
        if probe in live:
            continue
        facts = json.loads(json.dumps(record.facts))  # a deep copy, as on disk
        if probe == "host" and facts is not None:
            facts["hostname"] = name
            facts["identity"]["system_serial"] = f"DEMO-SYS-{sim_number(name)}"
            facts["identity"]["machine_id"] = f"{sim_number(name):032x}"
        if probe == "gpu" and facts is not None:
            for gpu in facts["gpus"]:
                gpu["serial"], gpu["uuid"] = gpu_identity(sim_number(name), gpu["index"])
        probes[probe] = dataclasses.replace(record, facts=facts)
    return NodeFacts(
        node=name,
        bringup_version=demo.bringup_version,
        collected_at=demo.collected_at,
        probes=probes,
    )


def sim_profile() -> dict[str, object]:
    """The b300 profile with the host floors a simulated node (this machine) can meet.

    The nodes share this machine's disk, so the 100 GB free-space policy of a real node's
    scratch space is lowered to 1 GB, and they share its memlock limit, which a container
    without CAP_SYS_RESOURCE cannot raise to unlimited; everything else is b300's.
    """
    from bringup.profile import profiles_dir

    data = yaml.safe_load((profiles_dir() / "b300.yaml").read_text())
    data["name"] = "sim-b300"
    data["description"] = (
        "b300 for simulated nodes (bringup.sim.cluster): host floors of this machine"
    )
    data["host"]["min_free_bytes"] = 10**9
    data["host"]["min_memlock_bytes"] = nodes_memlock_bytes()
    return data


def recorded_probes() -> set[str]:
    """The probes a simulated node can answer from its recording (those of the demo)."""
    return set(_demo_nodes()["healthy"].probes)


def nvml_state(fault: str, node: str | None = None) -> dict[str, object]:
    """The simulated NVML state of a node with `fault`: the demo's eight B300 GPUs, with
    serials and UUIDs of the node's own when `node` is given (sim_number)."""
    from bringup.sim import nvml

    if fault not in NVML_FAULTS:
        raise SimClusterError(f"unknown fault {fault!r}; known: {', '.join(NVML_FAULTS)}")
    state = nvml.state_from_profile("b300")
    for spec in NVML_FAULTS[fault]:
        state = nvml.apply_fault(state, spec)
    if node is not None:
        number = sim_number(node)
        for index, gpu in enumerate(state.get("gpus", [])):
            gpu["serial"], gpu["uuid"] = gpu_identity(number, index)
    return dict(state)


def sim_number(node: str) -> int:
    """A number of the simulated node's own, from its name: what tells its serials,
    UUIDs and machine id from every other node's (fleet.identity)."""
    return int(hashlib.sha256(node.encode()).hexdigest()[:7], 16)
