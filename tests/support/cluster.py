"""The simulated-cluster tests' shared pieces: the skip reason and `bringup check` run
against a cluster as a user runs it (clusters that always clean up: conftest.py there)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bringup.sim.cluster import SimCluster
from tests.support import REPO
from tests.support.cli import run_cli

WHY_NOT = SimCluster.available()
needs_cluster = pytest.mark.skipif(WHY_NOT is not None, reason=f"simulated cluster: {WHY_NOT}")


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


BAD = ("FAIL", "ERROR", "UNREACHABLE")


def assert_good_but_simulated(
    code: int, doc: dict[str, Any], stderr: str = "", cpu_burnin: bool = False
) -> None:
    """A run on simulated nodes whose every finding is good: NOT ACCEPTED and exit 1 all
    the same, for where its facts came from alone (simulated GPUs, recordings): a
    simulated cluster is never a live, accepted fleet (docs/reports.md).

    `cpu_burnin`: a burn-in trained on the CPU, whose only bad findings are the ones that
    say so (issue 24): `burnin.mfu` on each node that ran a job of its own, or on a joint
    job's first node (no GPU peak to judge MFU by). That check owns the cause: no
    `report.profile` beside it (a CPU has no profile; one cause, one finding)."""
    bad = [(f["node"], f["check"], f["status"]) for f in doc["findings"] if f["status"] in BAD]
    if cpu_burnin:
        nodes = sorted({f["node"] for f in doc["findings"] if f["check"] == "burnin.run"})
        expected = [(n, "burnin.mfu", "ERROR") for n in nodes]
        assert sorted(bad) == sorted(expected), (bad, stderr[-2000:])
        mfu = [f["message"] for f in doc["findings"] if f["check"] == "burnin.mfu"]
        assert mfu and all("no GPU peak" in m for m in mfu), mfu
        bad = []
    assert bad == [], (bad, stderr[-2000:])
    assert (code, doc["exit_code"], doc["verdict"]) == (1, 1, "NOT ACCEPTED"), stderr[-2000:]
    assert doc["provenance"]["live"] is False and doc["provenance"]["reasons"]


def run_check(
    inventory: Path, *args: str, timeout_s: float = 120, profile: Path | None = None
) -> CheckRun:
    """`bringup check --nodes INVENTORY --json ARGS`: the real CLI in a child process."""
    argv = ["check", "--nodes", str(inventory), "--json"]
    if profile is not None:
        argv += ["--profile", str(profile)]
    started = time.monotonic()
    proc = run_cli(*argv, *args, cwd=REPO, timeout=timeout_s)
    wall = time.monotonic() - started
    try:
        doc = json.loads(proc.stdout) if proc.stdout.strip() else {}
    except json.JSONDecodeError:
        raise AssertionError(f"stdout is not one JSON document: {proc.stdout[:500]}") from None
    return CheckRun(proc.returncode, doc, proc.stderr, wall)


def _slurm_why_not() -> str | None:
    from bringup.sim.slurm import available

    return WHY_NOT or available()


SLURM_WHY_NOT = _slurm_why_not()
needs_slurm = pytest.mark.skipif(
    SLURM_WHY_NOT is not None, reason=f"simulated Slurm: {SLURM_WHY_NOT}"
)


def judged_checks(probes: tuple[str, ...] | list[str]) -> set[str]:
    """The checks the simulated cluster's profile (sim-b300) has each of these probes
    judge: a check that applies only under some profiles (Check.applies: gpu.imex on
    GB200/GB300 trays) speaks only there."""
    from bringup.checks.catalog import checks_for
    from bringup.profile import parse
    from bringup.sim.faults import sim_profile

    profile = parse(sim_profile(), "sim-b300")
    return {
        c.name for p in probes for c in checks_for(p) if c.applies is None or c.applies(profile)
    }
