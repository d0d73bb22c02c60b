"""Shared pieces of the simulated-cluster tests: the skip reason, clusters that always
clean up, and the real CLI run as a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bringup.sim.cluster import SimCluster

REPO = Path(__file__).resolve().parents[2]
WHY_NOT = SimCluster.available()
needs_cluster = pytest.mark.skipif(WHY_NOT is not None, reason=f"simulated cluster: {WHY_NOT}")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "cluster: builds a simulated cluster (network namespaces + sshd; root)"
    )


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Callable[..., SimCluster]]:
    """Start SimClusters under tmp_path; every one is stopped, whatever the test did."""
    started: list[SimCluster] = []

    def make(nodes: int, **kwargs: Any) -> SimCluster:
        cluster = SimCluster(nodes, tmp_path / f"cluster{len(started)}", **kwargs)
        started.append(cluster)
        return cluster.start()

    yield make
    for cluster in started:
        cluster.stop()


@dataclass
class CheckRun:
    """One `bringup check --nodes ... --json` run: exit code, JSON document, stderr, wall time."""

    code: int
    doc: dict[str, Any]
    stderr: str
    wall_s: float

    def statuses(self, node: str) -> dict[str, str]:
        """check -> status of one node; a check with several findings keeps the worst."""
        order = ["PASS", "SKIP", "WARN", "FAIL", "ERROR", "UNREACHABLE"]
        result: dict[str, str] = {}
        for f in self.doc["findings"]:
            if f["node"] == node:
                old = result.get(f["check"], "PASS")
                result[f["check"]] = max(old, f["status"], key=order.index)
        return result

    def problems(self, node: str) -> dict[str, str]:
        """check -> status of one node's findings that are not PASS or SKIP."""
        return {c: s for c, s in self.statuses(node).items() if s not in ("PASS", "SKIP")}

    def messages(self, node: str, check: str) -> list[str]:
        return [
            f["message"] for f in self.doc["findings"] if f["node"] == node and f["check"] == check
        ]


def run_check(
    inventory: Path, *args: str, timeout_s: float = 120, profile: Path | None = None
) -> CheckRun:
    """The real CLI in a child process, as a user runs it."""
    argv = [sys.executable, "-m", "bringup.cli", "check", "--nodes", str(inventory), "--json"]
    if profile is not None:
        argv += ["--profile", str(profile)]
    started = time.monotonic()
    proc = subprocess.run(
        [*argv, *args], capture_output=True, text=True, timeout=timeout_s, cwd=REPO, check=False
    )
    wall = time.monotonic() - started
    try:
        doc = json.loads(proc.stdout) if proc.stdout.strip() else {}
    except json.JSONDecodeError:
        raise AssertionError(f"stdout is not one JSON document: {proc.stdout[:500]}") from None
    return CheckRun(proc.returncode, doc, proc.stderr, wall)
