"""`bringup check --demo`: the healthy node passes, each faulty node fails on its fault.

One fault, one finding: node02's missing GPU is seen by NVML and by the topology matrix,
node03's GPU without NVLink likewise, and each is still one FAIL (the other check says
which one judged it).
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, cli):
    out = tmp_path_factory.mktemp("demo") / "run"
    result = cli("check", "--demo", "--out", out, "--json")
    assert result.code == 1, result.stderr
    return result.json()["findings"], out


def _bad(findings, node: str) -> list[tuple[str, str]]:
    """Every WARN/FAIL/ERROR of a node, one entry per finding (a repeat would show)."""
    return [
        (f["check"], f["status"])
        for f in findings
        if f["node"] == node and f["status"] in ("WARN", "FAIL", "ERROR")
    ]


def test_healthy_node_has_no_problem(demo) -> None:
    assert _bad(demo[0], "b300-node01") == []


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        ("b300-node02", [("gpu.count", "FAIL")]),
        ("b300-node03", [("topology.nvlink", "FAIL")]),
        ("b300-node04", [("gpu.remapped_rows", "FAIL")]),
        ("b300-node05", [("xid.events", "FAIL")]),
        ("b300-node06", [("gpu.clock_events", "WARN")]),
    ],
)
def test_each_fault_is_found_once_and_nothing_else(demo, node: str, expected: list) -> None:
    assert _bad(demo[0], node) == expected


def _message(findings, node: str, check: str, status: str) -> str:
    (found,) = [
        f["message"]
        for f in findings
        if (f["node"], f["check"], f["status"]) == (node, check, status)
    ]
    return found


def test_the_owner_of_a_fault_carries_the_other_probe_evidence(demo) -> None:
    findings = demo[0]
    assert _message(findings, "b300-node02", "gpu.count", "FAIL") == (
        "7 GPUs, expected 8 (the topology matrix shows 7 too)"
    )
    assert _message(findings, "b300-node02", "topology.gpu_count", "SKIP") == (
        "7 GPUs in the topology, as NVML lists: the count is judged by gpu.count"
    )
    assert _message(findings, "b300-node03", "topology.nvlink", "FAIL") == (
        "GPU2 has no NVLink to any other GPU (NODE/SYS to all 7, topo -m) "
        "and NVML reports all 18 links down"
    )
    assert _message(findings, "b300-node03", "gpu.nvlink", "SKIP").startswith(
        "GPU 2: all 18 links down: judged by topology.nvlink"
    )


def test_demo_run_directory_can_be_replayed(demo, tmp_path: Path, cli) -> None:
    findings, out = demo
    again = cli("check", "--replay", out, "--out", tmp_path / "again", "--json")
    assert again.code == 1
    assert again.json()["findings"] == findings
