"""Every verdict earned, on the simulated cluster: simulated GPUs, facts answered from a
`bringup_replay` file and one machine named three times are never a live, accepted fleet.

Real sshd, the real probes, the real pynvml over the simulated NVML: the simulator and
the stand-in dcgmi say what they are to the probe, the recorded probes carry the file
they came from, and each node's serials and machine id are its own (bringup.sim.netns,
own_identity) unless the inventory names one node twice.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import REPO
from tests.support.cli import run_cli
from tests.support.cluster import needs_cluster, run_check

pytestmark = [pytest.mark.cluster]


@needs_cluster
def test_simulated_gpus_and_recorded_facts_are_not_accepted(make_cluster, tmp_path: Path) -> None:
    """Healthy nodes, every finding good: NOT ACCEPTED, exit 1, each cause named."""
    cluster = make_cluster(2)
    run = run_check(
        cluster.inventory,
        "--suite",
        "quick",
        "--out",
        str(tmp_path / "run"),
        profile=cluster.profile_path,
    )
    assert cluster.nvml_library is not None, cluster.nvml_why_not
    bad = [f for f in run.doc["findings"] if f["status"] in ("FAIL", "ERROR", "UNREACHABLE")]
    assert bad == []
    assert (run.code, run.doc["exit_code"], run.doc["verdict"]) == (1, 1, "NOT ACCEPTED")
    made = run.doc["provenance"]
    assert not made["live"]
    # In the order first met: the recordings (the demo's, from bringup_replay files) are
    # written when a node is reached, then the live probes answer.
    assert made["reasons"] == [
        "demo data",
        "facts from files on node01, node02",
        "simulated GPUs, dcgmi",  # the gpu probe over the simulated NVML; the stand-in dcgmi
    ]
    assert set(made["mode"].split("+")) == {"simulated", "demo", "file"}


@needs_cluster
def test_one_node_named_three_times_fails_fleet_identity(make_cluster, tmp_path: Path) -> None:
    """Three inventory names, one machine: fleet.identity FAILs on each, naming the others."""
    cluster = make_cluster(2)
    node = cluster.node("node01")
    inventory = cluster.write_inventory(tmp_path / "hosts.ini")
    text = inventory.read_text()
    line = next(line for line in text.splitlines() if line.startswith("node01 "))
    aliases = [line.replace("node01 ", f"{alias} ", 1) for alias in ("alias-a", "alias-b")]
    other = next(line for line in text.splitlines() if line.startswith("node02 "))
    inventory.write_text(text.replace(other, "\n".join(aliases)))
    run = run_check(
        inventory, "--suite", "quick", "--out", str(tmp_path / "run"), profile=cluster.profile_path
    )
    names = ["alias-a", "alias-b", "node01"]
    assert sorted({f["node"] for f in run.doc["findings"]} - {""}) == names, node.address
    for name in names:
        assert run.statuses(name)["fleet.identity"] == "FAIL", name
        [message] = run.messages(name, "fleet.identity")
        others = ", ".join(n for n in names if n != name)
        assert "GPU 0 serial " in message and f"also on {others}" in message, message
    assert run.code == 1 and run.doc["verdict"] == "NOT ACCEPTED"
    # The report of the run says the same, from the run directory alone.
    done = run_cli("report", str(tmp_path / "run"), "--json", cwd=REPO, timeout=120)
    doc = json.loads(done.stdout)
    failing = sorted(f["node"] for f in doc["findings"] if f["check"] == "fleet.identity")
    assert failing == names and done.returncode == 1


@needs_cluster
def test_distinct_simulated_nodes_are_distinct_machines(make_cluster, tmp_path: Path) -> None:
    """Each simulated node shows serials, UUIDs and a machine id of its own: no
    fleet.identity finding on a cluster of different nodes."""
    cluster = make_cluster(3)
    run = run_check(
        cluster.inventory,
        "--suite",
        "quick",
        "--out",
        str(tmp_path / "run"),
        profile=cluster.profile_path,
    )
    assert [f for f in run.doc["findings"] if f["check"] == "fleet.identity"] == []
    ids = set()
    for name in cluster.names:
        facts = json.loads((tmp_path / "run" / "facts" / f"{name}.json").read_text())
        ids.add(facts["probes"]["host"]["facts"]["identity"]["machine_id"])
    assert len(ids) == 3 and None not in ids
