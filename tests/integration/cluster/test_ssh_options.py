"""Every command that reaches nodes takes the same SSH options, with the same meaning.

`check`, `snapshot`, `diagnose`, `nccl` and `burnin` all open their nodes through one place
(bringup/fleet/target.py): a node whose host key is unknown is UNREACHABLE with the same
one-line reason in each, and `--accept-new-hostkeys` lets each of them through.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import nodes_of, run_cli
from tests.support.cluster import needs_cluster

pytestmark = [needs_cluster, pytest.mark.cluster]

UNKNOWN = "host key unknown, run with --accept-new-hostkeys to trust on first use"
# Each command with arguments that make it quick on two CPU-only simulated nodes.
COMMANDS = {
    "snapshot": ["--suite", "quick"],
    "diagnose": ["--watch", "--seconds", "1", "--interval", "0.5"],
    "nccl": [
        *("--backend", "gloo", "--ranks", "1", "--iters", "1", "-w", "0"),
        *("--min-bytes", "64K", "--max-bytes", "64K", "--timeout", "60"),
        *("--rendezvous-timeout", "20"),
    ],
    "burnin": ["--recipe", "tiny", "--nproc", "1", "--steps", "2", "--checkpoint-interval", "1"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_unknown_host_key_is_refused_then_accepted_by_every_command(
    make_cluster, tmp_path: Path, command: str
) -> None:
    cluster = make_cluster(2)
    cluster.forget_host_key("node02")
    base = [command, "--nodes", cluster.inventory, "--connect-timeout", "5", "--json"]
    refused = run_cli(*base, *COMMANDS[command], "--out", tmp_path / "refused")
    assert refused.returncode == 1, refused.stderr[-2000:]
    doc = json.loads(refused.stdout)
    if command == "snapshot":
        assert nodes_of(doc)["node02"]["state"] == "unreachable"
        assert nodes_of(doc)["node02"]["reason"] == UNKNOWN
    else:
        reachable = {f["node"]: f for f in doc["findings"] if f["check"] == "node.reachable"}
        assert reachable["node02"]["status"] == "UNREACHABLE"
        assert reachable["node02"]["message"] == UNKNOWN
    accepted = run_cli(
        *base, *COMMANDS[command], "--accept-new-hostkeys", "--out", tmp_path / "accepted"
    )
    doc = json.loads(accepted.stdout)
    if command == "snapshot":
        assert nodes_of(doc)["node02"]["state"] == "complete", accepted.stderr[-2000:]
    elif command == "burnin":  # judged by the command itself: no PASS line for reaching a node
        assert not [f for f in doc["findings"] if f["status"] == "UNREACHABLE"], accepted.stderr
        assert {f["node"] for f in doc["findings"] if f["check"] == "burnin.run"} == {
            "node01",
            "node02",
        }
    else:
        reachable = {
            f["node"]: f["status"] for f in doc["findings"] if f["check"] == "node.reachable"
        }
        assert reachable == {"node01": "PASS", "node02": "PASS"}, accepted.stderr[-2000:]
    assert cluster.node("node02").address in cluster.known_hosts.read_text()
