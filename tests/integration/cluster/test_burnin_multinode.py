"""`bringup burnin --nodes` on 2 simulated nodes: the tiny recipe trained for real over SSH.

Each node is a network namespace with its own sshd; the probe code goes over as the zip
(bringup/fleet/ssh.py), and the trainer runs from it under this interpreter (torch, DeepSpeed,
transformers, peft installed here; the nodes share this machine's filesystem). Per-node
mode runs two independent jobs; --joint one 2-rank job whose ranks meet across the
bridge; a firewall on the first node shows the joint job's one clear failure.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bringup import baseline as baselines
from bringup.sim.cluster import SimCluster
from tests.support import REPO
from tests.support.cli import run_cli
from tests.support.cluster import assert_good_but_simulated, needs_cluster

NEEDED = ("torch", "deepspeed", "transformers", "peft")
MISSING = [m for m in NEEDED if importlib.util.find_spec(m) is None]
pytestmark = [
    pytest.mark.cluster,
    needs_cluster,
    pytest.mark.skipif(bool(MISSING), reason=f"burn-in needs {', '.join(MISSING)} on the nodes"),
]

# One rank per node on 2 shared cores; 8 steps with a checkpoint at 4 (restore checked).
TINY = ("--recipe", "tiny", "--nproc", "1", "--steps", "8", "--checkpoint-interval", "4")
PORT = "29518"
GOOD = ("PASS", "SKIP")


@dataclass
class BurninRun:
    code: int
    doc: dict[str, Any]
    stderr: str
    run_dir: Path

    def findings(self, check: str) -> dict[str, dict[str, Any]]:
        return {f["node"]: f for f in self.doc["findings"] if f["check"] == check}

    def statuses(self) -> dict[tuple[str, str], str]:
        return {(f["node"], f["check"]): f["status"] for f in self.doc["findings"]}


def inventory(cluster: SimCluster) -> Path:
    """hosts.ini whose nodes run the node side with this interpreter (torch & co. are here)."""
    host_vars = {name: {"ansible_python_interpreter": sys.executable} for name in cluster.names}
    return cluster.write_inventory(host_vars=host_vars)


def bringup_burnin(cluster: SimCluster, *args: str, timeout_s: float = 240) -> BurninRun:
    run_dir = cluster.workdir / "run"
    argv = ["burnin", "--nodes", str(inventory(cluster)), "--json", "--out", str(run_dir)]
    argv += ["--node-work-dir", str(cluster.workdir / "nodes"), *TINY]
    proc = run_cli(*argv, *args, cwd=REPO, timeout=timeout_s)
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"not one JSON document: {proc.stdout[:500]} {proc.stderr}") from None
    return BurninRun(proc.returncode, doc, proc.stderr, run_dir)


def node_work_dir(cluster: SimCluster, run: BurninRun, node: str) -> Path:
    """The node's one work directory: new and private, <base>/<run>-<node>-<random>."""
    [work] = (cluster.workdir / "nodes").glob(f"{run.run_dir.name}-{node}-*")
    assert work.stat().st_mode & 0o777 == 0o700
    return work


def test_each_node_trains_on_its_own(make_cluster: Callable[..., SimCluster]) -> None:
    cluster = make_cluster(2)
    run = bringup_burnin(cluster)
    # Trained for real, but its telemetry is the simulated NVML's: never ACCEPTED.
    assert_good_but_simulated(run.code, run.doc, run.stderr, cpu_burnin=True)
    statuses = run.statuses()
    for node in cluster.names:
        for check in ("burnin.run", "burnin.loss", "burnin.checkpoint", "burnin.node_spread"):
            assert statuses[(node, check)] in ("PASS", "WARN"), (node, check, statuses)
        assert statuses[(node, "burnin.loss")] == "PASS"
        assert statuses[(node, "burnin.checkpoint")] == "PASS"
    base = baselines.load(run.run_dir)  # validates against the schema
    assert [n.node for n in base.nodes] == cluster.names
    for n in base.nodes:
        assert n.world_size == 1 and n.steps_measured == 6  # 8 steps, 2 warm-up
        assert n.loss_last is not None and n.loss_first is not None
        assert n.loss_last < n.loss_first
        assert n.checkpoint_bit_identical is True
    assert base.step_time_node_spread is not None and base.step_time_node_spread >= 0
    # Each node's trainer wrote into its own work directory, on "its own" disk.
    for node in cluster.names:
        work = node_work_dir(cluster, run, node)
        assert (work / "rank0.jsonl").is_file() and (work / "checkpoints" / "step4").is_dir()
        assert (run.run_dir / "raw" / node / "burnin" / "trainer.log").is_file()


def test_all_nodes_as_one_joint_job(make_cluster: Callable[..., SimCluster]) -> None:
    cluster = make_cluster(2)
    run = bringup_burnin(cluster, "--joint", "--port", PORT)
    # Trained for real, but its telemetry is the simulated NVML's: never ACCEPTED.
    assert_good_but_simulated(run.code, run.doc, run.stderr, cpu_burnin=True)
    job = run.findings("burnin.job")["node01"]
    assert job["status"] == "PASS"
    assert job["message"] == "tiny over 2 nodes (node01, node02), 2 ranks, 8 steps"
    statuses = run.statuses()
    assert statuses[("node01", "burnin.loss")] == "PASS"
    assert statuses[("node01", "burnin.checkpoint")] == "PASS"
    base = baselines.load(run.run_dir)
    (joint,) = base.nodes
    assert joint.node == "node01+node02" and joint.world_size == 2
    assert len(joint.peak_memory_bytes) == 2  # a rank on each node
    assert joint.loss_last is not None and joint.loss_first is not None
    assert joint.loss_last < joint.loss_first
    assert joint.checkpoint_bit_identical is True
    # Rank 1 ran on node02 and wrote its steps there; node-local checkpoint storage.
    node02 = node_work_dir(cluster, run, "node02")
    assert (node02 / "rank1.jsonl").is_file() and not (node02 / "rank0.jsonl").exists()
    assert any((node02 / "checkpoints" / "step4").glob("*model_states.pt"))


def test_a_node_that_cannot_join_gives_one_clear_finding(
    make_cluster: Callable[..., SimCluster],
) -> None:
    cluster = make_cluster(2)
    # A firewall on the first node drops the rendezvous port: node02's rank cannot join.
    rules = (
        "table inet bringup_test {\n"
        f"  chain input {{ type filter hook input priority 0; tcp dport {PORT} drop; }}\n"
        "}\n"
    )
    netns = cluster.node("node01").netns
    subprocess.run(
        ["ip", "netns", "exec", netns, "nft", "-f", "-"], input=rules, text=True, check=True
    )
    run = bringup_burnin(cluster, "--joint", "--port", PORT, "--rendezvous-timeout", "10")
    assert run.code == 1
    assert (run.doc["exit_code"], run.doc["verdict"]) == (1, "NOT ACCEPTED")
    # One finding, naming the cause: node02's facts judged by nothing and no profile
    # chosen are that job's failure, not a report.missing and a report.profile beside it.
    (job,) = [f for f in run.doc["findings"] if f["status"] not in GOOD]
    assert (job["node"], job["check"], job["status"]) == ("node01", "burnin.job", "ERROR")
    assert job["message"].startswith("the 2-node job did not complete: node02: ")
    assert cluster.node("node01").address in job["message"] and PORT in job["message"]
    assert "firewall" in job["action"]
    assert run.doc["data"]["baseline"] is None
    # `report` on the run afterwards judges it alike: the same one finding.
    where = cluster.workdir / "report"
    proc = run_cli("report", run.run_dir, "--format", "json", "--out", where, cwd=REPO)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads((where / "report.json").read_text())
    problems = [(f["node"], f["check"]) for f in doc["findings"] if f["status"] not in GOOD]
    assert problems == [("node01", "burnin.job")], problems
