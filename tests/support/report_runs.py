"""Recorded run directories for the report, exporter and browser tests.

Every run starts from the B300 demo fleet as the real CLI writes it
(`bringup check --demo`, in-process, planted faults included). The richer runs add, to
every node, an `nccl` probe record parsed from a recorded real nccl-tests output (8x H100,
NVLS, NVIDIA/nccl-tests#290: peak 476.53 GB/s, so the B300 floor of 800 GB/s fails it),
and to node01 a `telemetry` record parsed from a recorded real `nvidia-smi dmon` output
(1x A100, pytorch/pytorch#97459). The rest of the acceptance suite is recorded as a
GPU-less machine records it: a real `dcgmi diag` table (DCGM 3.3.3, 8x A100, all pass),
the gemm and p2p probes run for real on this CPU (judged SKIP: not comparable), and the
storage and uplink probes with nothing configured (SKIP). Then the facts are judged with
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
from bringup.facts import NodeFacts, ProbeRecord
from bringup.node.parsers.dmon import parse_dmon
from bringup.node.probes import gemm, p2p, storage, uplink
from bringup.node.probes.dcgm import facts_from_output
from bringup.node.probes.nccl import parse_nccl_tests
from bringup.node.probes.xid import parse_kernel_log
from bringup.rundir import RunDir, load_facts
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
            run.add_record(name, rec.model_dump())
        run.add_findings(judge_node(nodes[name], prof))
    run.finish("complete", 1)
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
