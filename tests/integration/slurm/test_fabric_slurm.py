"""The per-rail job under a real Slurm (issue 28): `bringup check --slurm --suite fabric`
pairs the allocation's nodes and runs both sides of each pair at once as over SSH, each
node's rails from its own sysfs tree and stand-in perftest (tests/support/perftest_sim.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from bringup.sim.cluster import SimCluster
from tests.support import REPO
from tests.support.cli import run_cli
from tests.support.cluster import needs_slurm
from tests.support.perftest_sim import with_rails
from tests.support.timing import scaled

pytestmark = [pytest.mark.cluster, pytest.mark.slurm, needs_slurm]


def test_the_rails_of_an_allocation_are_measured_in_pairs(
    make_slurm_cluster: Callable[..., SimCluster], tmp_path: Path
) -> None:
    cluster = make_slurm_cluster(2)
    with_rails(cluster, tmp_path, {})
    out = tmp_path / "run"
    argv = ["check", "--json", "--suite", "fabric", "--profile", str(cluster.profile_path)]
    done = run_cli(
        *argv,
        "--slurm",
        "--nodes",
        str(cluster.inventory),
        "--out",
        str(out),
        cwd=REPO,
        env={**os.environ, **cluster.slurm_env()},
        timeout=scaled(300),
    )
    doc = json.loads(done.stdout) if done.stdout.strip() else {}
    rails = {f["node"]: f for f in doc.get("findings", []) if f["check"] == "fabric.rail_bw"}
    assert set(rails) == {"node01", "node02"}, done.stderr[-3000:]
    assert all(f["status"] == "PASS" for f in rails.values()), rails
    assert rails["node01"]["message"].startswith("8 rails with node02: 768.7-768.7 Gb/s alone")
    manifest = json.loads((out / "ibperf-pairs-1" / "manifest.json").read_text())
    assert manifest["nodes"] == ["node01", "node02"]
    recorded = json.loads((out / "ibperf.json").read_text())["rails"]
    assert {(r["node"], r["partner"]) for r in recorded} == {
        ("node01", "node02"),
        ("node02", "node01"),
    }
