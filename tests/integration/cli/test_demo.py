"""`bringup check --demo`: the healthy node passes, each faulty node fails on its fault."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, cli):
    out = tmp_path_factory.mktemp("demo") / "run"
    result = cli("check", "--demo", "--out", out, "--json")
    assert result.code == 1, result.stderr
    return result.json()["findings"], out


def _bad(findings, node: str) -> set[tuple[str, str]]:
    return {
        (f["check"], f["status"])
        for f in findings
        if f["node"] == node and f["status"] in ("WARN", "FAIL", "ERROR")
    }


def test_healthy_node_has_no_problem(demo) -> None:
    assert _bad(demo[0], "b300-node01") == set()


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        ("b300-node02", {("gpu.count", "FAIL"), ("topology.gpu_count", "FAIL")}),
        ("b300-node03", {("gpu.nvlink", "FAIL"), ("topology.nvlink", "FAIL")}),
        ("b300-node04", {("gpu.remapped_rows", "FAIL")}),
        ("b300-node05", {("xid.events", "FAIL")}),
        ("b300-node06", {("gpu.clock_events", "WARN")}),
    ],
)
def test_each_fault_is_found_and_nothing_else(demo, node: str, expected: set) -> None:
    assert _bad(demo[0], node) == expected


def test_demo_run_directory_can_be_replayed(demo, tmp_path: Path, cli) -> None:
    findings, out = demo
    again = cli("check", "--replay", out, "--out", tmp_path / "again", "--json")
    assert again.code == 1
    assert again.json()["findings"] == findings
