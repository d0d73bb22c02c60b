"""Multi-node jobs through Slurm on the simulated cluster: `bringup nccl --slurm` (gloo
ranks, one torch.distributed.run per node in its own srun step) and `bringup burnin
--joint --slurm` (the tiny recipe over 2 nodes). No inventory: the nodes are the
allocation's, the rendezvous is the first node's NodeAddr as Slurm knows it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bringup.sim.cluster import SimCluster
from tests.support import REPO
from tests.support.cli import run_cli
from tests.support.cluster import assert_good_but_simulated, needs_slurm

NEEDED = ("torch", "deepspeed", "transformers", "peft")
MISSING = [m for m in NEEDED if importlib.util.find_spec(m) is None]
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.slurm,
    needs_slurm,
    pytest.mark.skipif(bool(MISSING), reason=f"the jobs need {', '.join(MISSING)} on the nodes"),
    pytest.mark.usefixtures("deepspeed_cpu_op"),  # built once per session (tests/conftest.py)
]

# One gloo rank per node (2 shared cores here), small messages, few iterations.
SMALL = ("--backend", "gloo", "--ranks", "1", "--iters", "3", "-w", "1", "--timeout", "90")
TINY = ("--recipe", "tiny", "--nproc", "1", "--steps", "8", "--checkpoint-interval", "4")
PORT = "29519"


@dataclass
class JobRun:
    code: int
    doc: dict[str, Any]
    stderr: str

    def findings(self, check: str) -> dict[str, dict[str, Any]]:
        return {f["node"]: f for f in self.doc["findings"] if f["check"] == check}


def _slurm_cluster(make: Callable[..., SimCluster], nodes: int) -> SimCluster:
    """Nodes whose python3 is this interpreter (torch & co. are here), as a site's image."""
    cluster = make(nodes)
    for name in cluster.names:
        cluster.install_tool(name, "python3", f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    return cluster


def _bringup(cluster: SimCluster, *argv: str, timeout_s: float = 300) -> JobRun:
    run_dir = cluster.workdir / "run"
    env = {**os.environ, **cluster.slurm_env()}
    proc = run_cli(
        *argv, "--slurm", "--nodes-count", str(len(cluster.names)), "--json",
        "--out", str(run_dir), cwd=REPO, env=env, timeout=timeout_s,
    )  # fmt: skip
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"not one JSON document: {proc.stdout[:500]} {proc.stderr}") from None
    return JobRun(proc.returncode, doc, proc.stderr)


def _firewall(cluster: SimCluster, node: str, port: str) -> None:
    """Drop the rendezvous port on the node: the other node's ranks cannot join."""
    rules = (
        "table inet bringup_test {\n"
        f"  chain input {{ type filter hook input priority 0; tcp dport {port} drop; }}\n"
        "}\n"
    )
    netns = cluster.node(node).netns
    subprocess.run(
        ["ip", "netns", "exec", netns, "nft", "-f", "-"], input=rules, text=True, check=True
    )


def test_all_reduce_across_two_nodes_under_srun(
    make_slurm_cluster: Callable[..., SimCluster],
) -> None:
    cluster = _slurm_cluster(make_slurm_cluster, 2)
    profile = str(cluster.profile_path)
    run = _bringup(
        cluster,
        "nccl",
        "--profile",
        profile,
        "--port",
        PORT,
        *SMALL,
        "--min-bytes",
        "64K",
        "--max-bytes",
        "128K",
    )
    job = run.findings("nccl.job")["node01"]
    assert job["status"] == "PASS", (job, run.stderr[-2000:])
    assert job["message"].startswith("all_reduce over 2 nodes, 2 ranks: busbw ")
    facts = run.doc["data"]["facts"]["node01"]
    assert (facts["nranks"], facts["launched_ranks"], facts["complete"]) == (2, 2, True)
    manifest = json.loads((cluster.workdir / "run" / "manifest.json").read_text())
    assert manifest["slurm_nodes"] == ["node01", "node02"]
    # Gloo on the CPU under the B300 profile is no NCCL measurement: not accepted.
    busbw = run.findings("nccl.allreduce_busbw")
    assert {f["status"] for f in busbw.values()} == {"ERROR"}, busbw
    assert all(f["message"].startswith("ran on gloo/CPU, not NCCL") for f in busbw.values())
    assert run.code == 1, run.stderr


def test_a_node_that_cannot_join_the_nccl_job_is_named(
    make_slurm_cluster: Callable[..., SimCluster],
) -> None:
    cluster = _slurm_cluster(make_slurm_cluster, 2)
    _firewall(cluster, "node01", PORT)
    profile = str(cluster.profile_path)
    run = _bringup(
        cluster, "nccl", "--profile", profile, "--port", PORT, *SMALL,
        "--rendezvous-timeout", "5",
    )  # fmt: skip
    assert run.code == 1
    job = run.findings("nccl.job")["node01"]
    assert job["status"] == "ERROR"
    assert job["message"].startswith("the 2-node job did not complete: node02: rank 1 on ")
    # The rendezvous is node01's NodeAddr, from Slurm (no inventory named it).
    assert f"({cluster.node('node01').address}, {PORT})" in job["message"]


def test_the_tiny_burnin_over_two_nodes_under_srun(
    make_slurm_cluster: Callable[..., SimCluster], tmp_path: Path
) -> None:
    cluster = _slurm_cluster(make_slurm_cluster, 2)
    work = str(tmp_path / "nodes")
    run = _bringup(
        cluster, "burnin", "--joint", "--port", PORT, "--node-work-dir", work, *TINY,
        timeout_s=300,
    )  # fmt: skip
    # Trained for real, but its telemetry is the simulated NVML's: never ACCEPTED.
    assert_good_but_simulated(run.code, run.doc, run.stderr, cpu_burnin=True)
    job = run.findings("burnin.job")["node01"]
    assert job["status"] == "PASS"
    assert job["message"] == "tiny over 2 nodes (node01, node02), 2 ranks, 8 steps"
    # Rank 1 ran on node02 (its srun step) and wrote its steps in node02's work directory.
    [node02] = (tmp_path / "nodes").glob("*-node02-*")
    assert (node02 / "rank1.jsonl").is_file() and not (node02 / "rank0.jsonl").exists()


# The planted slow link and the share of the best pair below which a pair is slow. The
# busbw here is wall-clock time of gloo on CPU ranks that share this machine's cores, so a
# CPU load beside the test slows the healthy pairs, and by different amounts (the best
# pair may run while the load pauses). The margins are far beyond what load does: a 1 MiB
# all_reduce of a healthy pair reaches 0.16 to 0.69 GB/s here, idle or beside
# `stress-ng --cpu 2` at load 17; node03's link, 3 Mbit/s (tc, timed by the kernel, which
# no load makes faster), gives about 0.00034 GB/s. Judged at 0.025 x the best pair, a
# healthy pair may run 40x slower than the best one and still pass, and node03 stays
# slow unless load slows the best pair 35x or more (to under 0.0135 GB/s).
SLOW_LINK_BIT_S = 3_000_000
SLOW_FRACTION = "0.025"


def test_pairwise_under_srun_names_the_slow_node(
    make_slurm_cluster: Callable[..., SimCluster],
) -> None:
    cluster = _slurm_cluster(make_slurm_cluster, 4)
    cluster.limit_rate("node03", SLOW_LINK_BIT_S)
    profile = str(cluster.profile_path)
    # --no-check: no correctness pass, one operation less per case on the slow link (each
    # costs node03 about 3 s); wrong values are not what this test is about.
    run = _bringup(
        cluster, "nccl", "--pairwise", "--profile", profile, "--port", PORT, *SMALL,
        "--no-check", "--min-bytes", "1M", "--max-bytes", "1M",
        "--slow-fraction", SLOW_FRACTION,
    )  # fmt: skip
    verdicts = run.findings("nccl.pairwise")
    assert {n: f["status"] for n, f in verdicts.items()} == {
        "node01": "PASS",
        "node02": "PASS",
        "node03": "FAIL",
        "node04": "PASS",
    }, (verdicts, run.stderr[-2000:])
    assert verdicts["node03"]["message"].startswith("node03 is slow: with node01: ")
    pairs = [tuple(p["nodes"]) for p in run.doc["data"]["pairs"]]
    assert pairs == [("node01", "node02"), ("node03", "node04"), ("node03", "node01"),
                     ("node04", "node02")]  # fmt: skip
