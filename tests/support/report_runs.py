"""Recorded run directories for the report, exporter and browser tests.

Every run starts from the B300 demo fleet as the real CLI writes it
(`bringup check --demo`, in-process, planted faults included). The richer runs add, to
every node, an `nccl` probe record parsed from a recorded real nccl-tests output (8x H100,
NVLS, NVIDIA/nccl-tests#290: peak 476.53 GB/s, so the B300 floor of 800 GB/s fails it),
and to node01 a `telemetry` record parsed from a recorded real `nvidia-smi dmon` output
(1x A100, pytorch/pytorch#97459). The rest of the acceptance suite is recorded as a
GPU-less machine records it: a real `dcgmi diag` table (DCGM 3.3.3, 8x A100, all pass),
the gemm and p2p probes run for real on this CPU (judged SKIP: not comparable), and the
storage and uplink probes with nothing configured (SKIP), the fabric probe with no RDMA
device (SKIP). Then the facts are judged with
the real checks, as `bringup check` would, and written with the real RunDir.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bringup import profile
from bringup.checks.catalog import judge_node
from bringup.facts import NodeFacts, ProbeRecord, record_json
from bringup.findings import Finding, Status, exit_code
from bringup.node.parsers.dmon import parse_dmon
from bringup.node.probes import fabric, gemm, p2p, storage, uplink
from bringup.node.probes.dcgm import facts_from_output
from bringup.node.probes.nccl import parse_nccl_tests
from bringup.node.probes.xid import parse_kernel_log
from bringup.rundir import RunDir, load_facts
from bringup.sim.demo import demo_fleet, demo_nodes, gpu_identity
from tests.support import FIXTURES
from tests.support.cli import invoke

NCCL_LOG = FIXTURES / "nccl" / "nccltests-290-h100x8-single-node-nvls.txt"
DMON_LOG = FIXTURES / "dmon" / "pytorch-97459-a100-dmon-appclocks.txt"
DCGM_LOG = FIXTURES / "dcgm" / "awsdt-efa-cheatsheet-p4de-a100x8-dcgm3.3.3-r2-pass.txt"
# A real Xid 48 line (gpu-operator#1146), planted as a new event in a later run.
XID48_LOG = FIXTURES / "xid" / "gpuoperator-1146-xid48-dbe-syslog-TRUNCATED.txt"
STAMP = "2026-11-29T12:00:00+00:00"

Mutation = Callable[[dict[str, NodeFacts]], None]


def demo_run(out: Path) -> Path:
    """The demo fleet's run directory, written by the real CLI."""
    result = invoke("check", "--demo", "--out", out)
    assert result.exit_code == 1, result.output  # the demo has planted faults
    return out


def record(probe: str, facts: Any) -> ProbeRecord:
    return ProbeRecord(
        probe=probe, ok=True, facts=dataclasses.asdict(facts), started_at=STAMP, duration_s=1.5
    )


@functools.cache
def _rest_of_acceptance() -> dict[str, Any]:
    """The acceptance suite's other probes, as a GPU-less machine records them."""
    return {
        "dcgm": facts_from_output(DCGM_LOG.read_text()),
        "gemm": gemm.collect(gemm.Params(device="cpu", m_sizes=[32], nk=64, iterations=2)).facts,
        "p2p": p2p.collect(p2p.Params(device="cpu", size_bytes=1 << 16, iterations=2)).facts,
        "storage": storage.collect(storage.Params()).facts,
        "uplink": uplink.collect(uplink.Params()).facts,
        # This machine has no RDMA device: the fabric probe says so (its checks SKIP).
        "fabric": fabric.collect(fabric.Params(interval_s=0)).facts,
    }


def with_measurements(nodes: dict[str, NodeFacts]) -> None:
    """Add the recorded nccl run and the rest of the acceptance suite to every node, and
    the recorded dmon timeline to node01."""
    nccl = parse_nccl_tests(NCCL_LOG.read_text())
    for node in nodes.values():
        node.probes["nccl"] = record("nccl", nccl)
        for probe, facts in _rest_of_acceptance().items():
            node.probes[probe] = record(probe, facts)
    timeline = parse_dmon(DMON_LOG.read_text())
    nodes["b300-node01"].probes["telemetry"] = record("telemetry", timeline)


def write_run(demo: Path, out: Path, *mutations: Mutation, profile_name: str = "b300") -> Path:
    """A run directory from the demo's facts, each mutation applied, judged by the checks."""
    nodes = {n.node: copy.deepcopy(n) for n in load_facts(demo)}
    for mutate in mutations:
        mutate(nodes)
    prof = profile.load(profile_name)
    run = RunDir.create(out, "check", profile_name, "acceptance")
    run.manifest.started_at = STAMP
    for name in sorted(nodes):
        run.add_node(name)
        for rec in nodes[name].probes.values():
            run.add_record(name, record_json(rec))
        run.add_findings(judge_node(nodes[name], prof))
    run.finish("complete", 1)
    return out


# The probes the demo's nodes record: the suite a clean run of them was planned with.
DEMO_PROBES = ("gpu", "topology", "host", "xid", "nvme")


def demo_suite(folder: Path) -> str:
    """A suite file of exactly the demo's probes (the shipped suites ask for more: dcgm)."""
    path = folder / "demo-probes.yaml"
    steps = "".join(f"  - name: {probe}\n    timeout_s: 60\n" for probe in DEMO_PROBES)
    path.write_text(
        "name: demo-probes\ndescription: the demo's probes\nbudget_s: 300\nprobes:\n" + steps
    )
    return str(path)


def clean_run(
    out: Path, suite: str | None = "demo", names: tuple[str, ...] = ("b300-node01", "b300-node07")
) -> Path:
    """A run that passes: the demo's healthy node01 under each name, judged, closed as the
    CLI closes a run (its exit code from its findings). Every gap planted in it is the one
    reason it is not accepted. `suite` "demo" is a suite of exactly the demo's probes."""
    healthy = next(n for n in demo_nodes() if n.node == "b300-node01")
    prof = profile.load("b300")
    # A live run: the healthy node's facts as its probes would record them on each machine,
    # with serials and ids of its own (bringup/checks/identity.py), no demo label.
    probes = {name: dataclasses.replace(rec, provenance=[]) for name, rec in healthy.probes.items()}
    healthy = dataclasses.replace(healthy, probes=probes)
    if suite == "demo":
        out.parent.mkdir(parents=True, exist_ok=True)
        suite = demo_suite(out.parent)
    run = RunDir.create(out, "check", "b300", suite)
    run.manifest.started_at = STAMP
    findings = []
    for number, name in enumerate(names, start=1):
        node = dataclasses.replace(copy.deepcopy(healthy), node=name)
        own_machine(node, number)
        run.add_node(name)
        for rec in node.probes.values():
            run.add_record(name, record_json(rec))
        judged = judge_node(node, prof)
        run.add_findings(judged)
        findings += judged
    run.manifest.findings_bad = sum(1 for f in findings if f.status.bad)
    run.finish("complete", exit_code(findings))
    return out


def own_machine(node: NodeFacts, number: int) -> None:
    """The node's GPU serials and UUIDs, system serial and machine id made its own."""
    gpu = node.probes["gpu"].facts or {}
    for g in gpu.get("gpus", []):
        g["serial"], g["uuid"] = gpu_identity(number, g["index"])
    identity = (node.probes["host"].facts or {}).get("identity", {})
    identity["system_serial"] = f"DEMO-SYS-{number:02d}"
    identity["machine_id"] = f"{number:032x}"


def fleet_run(out: Path, size: int) -> Path:
    """The demo fleet grown to `size` nodes (the six demo nodes, then healthy ones), judged
    by the checks and closed as the CLI closes a run."""
    prof = profile.load("b300")
    run = RunDir.create(out, "check", "b300", None)
    run.manifest.started_at = STAMP
    findings: list[Finding] = []
    for node in demo_fleet(size):
        run.add_node(node.node)
        for rec in node.probes.values():
            run.add_record(node.node, record_json(rec))
        judged = judge_node(node, prof)
        run.add_findings(judged)
        findings += judged
    run.finish("complete", exit_code(findings))
    return out


# The node-reported strings hostile_run plants, each in its own place.
HOSTILE_FIELDS = (
    "node",
    "gpu",
    "serial",
    "vbios",
    "host",
    "kernel",
    "xid",
    "path",
    "collective",
    "message",
)


def hostile_run(out: Path, text: str, **fields: str) -> Path:
    """A run of one node whose every reported string carries `text` (or `fields[name]`,
    for each name of HOSTILE_FIELDS given): the node's name, GPU name, serials, VBIOS,
    host strings (hostname, OS, CPU), kernel, an Xid line, an NVMe path and the collective
    of an NCCL curve (so the plots draw it), judged by the real checks, plus one finding
    with the message in each of its text fields (a check need not echo all of them).

    From the demo's node05 (it has an Xid line) and the recorded nccl-tests output.
    """
    said = {name: fields.get(name, text) for name in HOSTILE_FIELDS}
    base = next(n for n in demo_nodes() if n.node == "b300-node05")
    name = f"node-{said['node']}"
    node = dataclasses.replace(copy.deepcopy(base), node=name)
    facts: dict[str, Any] = {probe: record.facts for probe, record in node.probes.items()}
    for gpu in facts["gpu"]["gpus"]:
        gpu.update(name=f"NVIDIA {said['gpu']}", serial=said["serial"], vbios_version=said["vbios"])
    facts["host"].update(
        hostname=said["host"],
        os_release=said["host"],
        cpu_model=said["host"],
        kernel=said["kernel"],
    )
    identity = facts["host"]["identity"]
    identity.update(chassis_serial=said["host"], bios_version=said["host"])
    identity["nics"][0].update(name=said["host"], firmware=said["host"], psid=said["host"])
    identity["unavailable"]["bmc_firmware"] = said["host"]
    facts["xid"]["xids"][0]["line"] = f"NVRM: Xid (PCI:0000:ba:00): 79, {said['xid']}"
    facts["nvme"]["paths"][0]["path"] = f"/data/{said['path']}"
    nccl = dataclasses.replace(
        parse_nccl_tests(NCCL_LOG.read_text()), collective=said["collective"]
    )
    node.probes["nccl"] = record("nccl", nccl)
    run = RunDir.create(out, "check", "b300", "acceptance")
    run.manifest.started_at = STAMP
    run.add_node(name)
    for rec in node.probes.values():
        run.add_record(name, record_json(rec))
    message = said["message"]
    planted = Finding(
        node=name,
        check="gpu.name",
        status=Status.FAIL,
        message=f"GPU name {message}",
        value=message,
        expected=message,
        unit=message,
        action=f"replace {message}",
    )
    findings = [*judge_node(node, profile.load("b300")), planted]
    run.add_findings(findings)
    run.finish("complete", exit_code(findings))
    return out


# --- planted regressions for the baseline comparison --------------------------------------


def busbw_down(node: str, factor: float) -> Mutation:
    def mutate(nodes: dict[str, NodeFacts]) -> None:
        facts = nodes[node].probes["nccl"].facts
        assert facts is not None
        for row in facts["rows"]:
            for key in ("oop_busbw_bytes_per_s", "ip_busbw_bytes_per_s"):
                row[key] *= factor

    return mutate


def new_xid(node: str) -> Mutation:
    def mutate(nodes: dict[str, NodeFacts]) -> None:
        facts = nodes[node].probes["xid"].facts
        assert facts is not None
        event = parse_kernel_log(XID48_LOG.read_text()).xids[0]
        facts["xids"].append(dataclasses.asdict(event))

    return mutate


def serial_changed(node: str, gpu: int, serial: str) -> Mutation:
    def mutate(nodes: dict[str, NodeFacts]) -> None:
        facts = nodes[node].probes["gpu"].facts
        assert facts is not None
        facts["gpus"][gpu]["serial"] = serial

    return mutate


def scale_run(out: Path, size: int) -> Path:
    """A run of `size` nodes as benchmarks/scale.py makes one: node0001, node0002, ...
    answer in turn with the records of the six demo nodes (the healthy one and the five
    faults), each its own machine (its own serials), judged by the real checks; each
    node's facts written once, as a replay writes them."""
    prof = profile.load("b300")
    run = RunDir.create(out, "check", "b300", None)
    run.manifest.started_at = STAMP
    demo = demo_nodes()
    width = max(4, len(str(size)))
    findings: list[Finding] = []
    for i in range(size):
        node = copy.deepcopy(demo[i % len(demo)])
        node.node = f"node{i + 1:0{width}d}"
        own_machine(node, i + 1)
        run.add_recorded(node)
        judged = judge_node(node, prof)
        run.add_findings(judged)
        findings += judged
    run.finish("complete", exit_code(findings))
    return out
