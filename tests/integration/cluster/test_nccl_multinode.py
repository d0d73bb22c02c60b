"""`bringup nccl --nodes` on simulated nodes: real gloo ranks in network namespaces, reached
over real SSH, with a real rendezvous across the bridge; and `--pairwise` finding the node
whose link was slowed with tc (netem latency where the kernel has it, tbf rate otherwise)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bringup.sim.cluster import SimCluster, SimClusterError
from tests.support import REPO
from tests.support.cli import run_cli
from tests.support.cluster import needs_cluster

pytest.importorskip("torch", reason="the nccl probe's torch engine needs torch on the nodes")

pytestmark = [needs_cluster, pytest.mark.cluster]

# One gloo rank per node (2 shared cores here), small messages, few iterations.
SMALL = ("--backend", "gloo", "--ranks", "1", "--iters", "3", "-w", "1", "--timeout", "90")


@dataclass
class NcclRun:
    code: int
    doc: dict[str, Any]
    stderr: str

    def findings(self, check: str) -> dict[str, dict[str, Any]]:
        return {f["node"]: f for f in self.doc["findings"] if f["check"] == check}


def inventory(cluster: SimCluster, extra: dict[str, dict[str, str]] | None = None) -> Path:
    """hosts.ini whose nodes run the probe with this Python (torch is installed there)."""
    host_vars = {name: {"ansible_python_interpreter": sys.executable} for name in cluster.names}
    for name, values in (extra or {}).items():
        host_vars[name].update(values)
    return cluster.write_inventory(host_vars=host_vars)


def bringup_nccl(cluster: SimCluster, hosts: Path, *args: str, timeout_s: float = 300) -> NcclRun:
    argv = ["nccl", "--nodes", str(hosts), "--json", "--profile", str(cluster.profile_path)]
    argv += ["--out", str(cluster.workdir / "run")]
    proc = run_cli(*argv, *args, cwd=REPO, timeout=timeout_s)
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"not one JSON document: {proc.stdout[:500]} {proc.stderr}") from None
    return NcclRun(proc.returncode, doc, proc.stderr)


@pytest.mark.parametrize("nodes", [2, 4])
def test_all_reduce_across_nodes(make_cluster: Callable[..., SimCluster], nodes: int) -> None:
    cluster = make_cluster(nodes)
    run = bringup_nccl(
        cluster, inventory(cluster), *SMALL, "--min-bytes", "64K", "--max-bytes", "128K"
    )
    job = run.findings("nccl.job")["node01"]
    assert job["status"] == "PASS", job
    assert job["message"].startswith(f"all_reduce over {nodes} nodes, {nodes} ranks: busbw ")
    # Gloo on the CPU under the B300 profile is no NCCL measurement: said on every node,
    # never a silent PASS or SKIP, and the run is not accepted.
    busbw = run.findings("nccl.allreduce_busbw")
    assert sorted(busbw) == cluster.names and {f["status"] for f in busbw.values()} == {"ERROR"}
    assert all(
        f["message"].startswith(
            f"ran on gloo/CPU, not NCCL: the torch engine's all_reduce over {nodes} ranks "
        )
        for f in busbw.values()
    )
    assert run.code == 1, run.stderr
    facts = run.doc["data"]["facts"]["node01"]
    assert (facts["nranks"], facts["launched_ranks"], facts["complete"]) == (nodes, nodes, True)
    factor = 2 * (nodes - 1) / nodes
    for row in facts["rows"]:
        assert row["oop_wrong"] == 0 and row["ip_wrong"] == 0
        assert row["oop_algbw_bytes_per_s"] == row["size_bytes"] / row["oop_time_s"]
        assert row["oop_busbw_bytes_per_s"] == row["oop_algbw_bytes_per_s"] * factor
    # Every node saw the same job: times are averaged over all ranks.
    rows = {node: f["rows"] for node, f in run.doc["data"]["facts"].items()}
    assert all(r == rows["node01"] for r in rows.values())


def test_ranks_that_cannot_meet_give_one_clear_error(
    make_cluster: Callable[..., SimCluster],
) -> None:
    cluster = make_cluster(2)
    # A firewall on the first node drops the rendezvous port: node02's rank cannot join.
    rules = (
        "table inet bringup_test {\n"
        "  chain input { type filter hook input priority 0; tcp dport 29517 drop; }\n"
        "}\n"
    )
    netns = cluster.node("node01").netns
    subprocess.run(
        ["ip", "netns", "exec", netns, "nft", "-f", "-"], input=rules, text=True, check=True
    )
    run = bringup_nccl(cluster, inventory(cluster), *SMALL, "--rendezvous-timeout", "5")
    assert run.code == 1
    job = run.findings("nccl.job")["node01"]
    assert job["status"] == "ERROR"
    assert job["message"].startswith("the 2-node job did not complete: node02: rank 1 on ")
    assert "10.231." in job["message"] and "29517" in job["message"]
    assert "firewall" in job["action"]


def _slow_down(cluster: SimCluster, node: str, how: str) -> None:
    if how == "netem":
        try:
            cluster.add_latency(node, 20)
        except SimClusterError as exc:
            pytest.skip(str(exc))
    else:
        cluster.limit_rate(node, 20_000_000)  # 20 Mbit/s against a veth's many Gbit/s


@pytest.mark.parametrize("how", ["netem", "tbf"])
def test_pairwise_names_the_slow_node(make_cluster: Callable[..., SimCluster], how: str) -> None:
    cluster = make_cluster(4)
    hosts = inventory(cluster)
    _slow_down(cluster, "node03", how)
    # The slowed node is tens of times slower; 0.1 x the best pair leaves room for the
    # noise of gloo on two shared cores (a real fabric uses the default, 0.8).
    run = bringup_nccl(
        cluster,
        hosts,
        "--pairwise",
        *SMALL,
        "--min-bytes",
        "1M",
        "--max-bytes",
        "1M",
        "--slow-fraction",
        "0.1",
    )
    verdicts = run.findings("nccl.pairwise")
    assert {n: f["status"] for n, f in verdicts.items()} == {
        "node01": "PASS",
        "node02": "PASS",
        "node03": "FAIL",
        "node04": "PASS",
    }, verdicts
    assert verdicts["node03"]["message"].startswith("node03 is slow: with node01: ")
    assert "the slow one was its first partner" in verdicts["node04"]["message"]
    assert run.code == 1
    pairs = [tuple(p["nodes"]) for p in run.doc["data"]["pairs"]]
    assert pairs == [("node01", "node02"), ("node03", "node04"), ("node03", "node01"),
                     ("node04", "node02")]  # fmt: skip
    assert (cluster.workdir / "run" / "pairs-1" / "facts" / "node03.json").is_file()
