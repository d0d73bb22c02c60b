"""`bringup check --nodes hosts.ini` end to end on a simulated cluster: the real CLI, real
sshd, real probes for host (and topology where a node has its own `nvidia-smi`), GPU facts
from recordings. Each fault asserts the exact outcome of its node and that every other
node's findings are complete."""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from bringup.sim.cluster import SimCluster, SimClusterError
from tests.support import REPO
from tests.support.cli import run_cli
from tests.support.cluster import (
    CheckRun,
    assert_good_but_simulated,
    judged_checks,
    needs_cluster,
    run_check,
)
from tests.support.timing import scaled

pytestmark = [pytest.mark.cluster]

QUICK = ("gpu", "topology", "host", "xid", "dcgm")  # dcgm: each node's simulated dcgmi
# What each planted fault must show (check -> worst status) under the b300 profile, and
# nothing else: the recordings of bringup.sim.demo judged by the real checks.
PLANTED: dict[str, dict[str, str]] = {
    "healthy": {},
    # One fault, one FAIL: the other probe's check SKIPs, naming the one that judged it.
    "missing_gpu": {"gpu.count": "FAIL"},
    "no_nvlink": {"topology.nvlink": "FAIL"},
    "node_pair": {"topology.nvlink": "FAIL"},
    "row_remap": {"gpu.remapped_rows": "FAIL"},
    "xid79": {"xid.events": "FAIL"},
    "hw_slowdown": {"gpu.clock_events": "WARN"},
}
EIGHT = {
    "node02": "missing_gpu",
    "node03": "no_nvlink",
    "node04": "node_pair",
    "node05": "row_remap",
    "node06": "xid79",
    "node07": "hw_slowdown",
}
# An nvidia-smi stuck in the driver, as on a GPU that fell off the bus.
HANGING_SMI = "#!/bin/sh\nexec sleep 300\n"


def _all_checks(probes: tuple[str, ...]) -> set[str]:
    return judged_checks(probes) | {"node.reachable"}


def _assert_complete(run: CheckRun, node: str, probes: tuple[str, ...] = QUICK) -> None:
    """The node was reached, every check of every probe judged it, nothing failed."""
    assert set(run.statuses(node)) == _all_checks(probes), node
    assert run.problems(node) == {}, (node, run.problems(node))


def _suite(tmp_path: Path, topology_timeout_s: float) -> Path:
    """The quick suite with host before topology and topology's deadline set."""
    suite = {
        "name": "faults",
        "description": "quick suite, host first, short topology deadline",
        "budget_s": 120,
        "probes": [
            {"name": "gpu", "timeout_s": 60},
            {"name": "host", "timeout_s": 30},
            {"name": "topology", "timeout_s": topology_timeout_s},
            {"name": "xid", "timeout_s": 60},
            {"name": "dcgm", "params": {"level": 1}, "timeout_s": 60},
        ],
    }
    path = tmp_path / "faults.yaml"
    path.write_text(yaml.safe_dump(suite))
    return path


def _check(cluster: SimCluster, tmp_path: Path, *args: str, inventory: Path | None = None):
    out = tmp_path / f"run{len(list(tmp_path.glob('run*')))}"
    return run_check(
        inventory or cluster.inventory,
        "--suite",
        args[0] if args else "quick",
        "--out",
        str(out),
        *args[1:],
        profile=cluster.profile_path,
    )


# --- the fleet matrix -----------------------------------------------------------------------


@needs_cluster
def test_eight_nodes_show_the_planted_faults_and_only_them(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(8, faults=EIGHT)
    run = _check(cluster, tmp_path)
    assert run.code == 1, run.stderr
    for name in cluster.names:
        fault = EIGHT.get(name, "healthy")
        assert run.problems(name) == PLANTED[fault], (name, fault)
        assert set(run.statuses(name)) == _all_checks(QUICK), name  # every check judged
        assert run.statuses(name)["node.reachable"] == "PASS"
    # The run directory has every node's facts, the live host probe among them.
    facts_dir = Path(run.doc["run_dir"]) / "facts"
    facts = sorted(p.stem for p in facts_dir.glob("*.json"))
    assert facts == cluster.names
    # Every node's GPUs were read through NVML (its own simulated libnvidia-ml.so.1 and the
    # real pynvml), not answered from a recording.
    assert cluster.nvml_library is not None, cluster.nvml_why_not
    for name in cluster.names:
        gpu = json.loads((facts_dir / f"{name}.json").read_text())["probes"]["gpu"]
        assert gpu["facts"]["source"] == "nvml" and "replayed" not in gpu["params"], name


@needs_cluster
def test_the_matrix_a_user_sees(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(8, faults=EIGHT)
    argv = ["check", "--nodes", str(cluster.inventory), "--profile", str(cluster.profile_path)]
    argv += ["--suite", "quick", "--out", str(tmp_path / "run")]
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    done = run_cli(*argv, cwd=REPO, env=env, timeout=120)
    assert done.returncode == 1, done.stderr
    # A cell is the worst status and how many checks have it ("PASS 12"), the checks of a
    # bad one on the lines below it: each cell's lines joined ("FAIL 1 count").
    rows: dict[str, list[str]] = {}
    node = None
    for line in done.stdout.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and re.fullmatch(r"node\d\d", cells[0]):
            node = cells[0] if cells[0] not in rows else None
            if node:
                rows[node] = cells[1:]
        elif cells and cells[0] == "" and node:
            rows[node] = [f"{a} {b}".strip() for a, b in zip(rows[node], cells[1:], strict=True)]
        else:
            node = None
    header = next(line for line in done.stdout.splitlines() if "┃ node" in line)
    columns = [c.strip() for c in header.split("┃")[1:-1]][1:]
    matrix = {node: dict(zip(columns, cells, strict=True)) for node, cells in rows.items()}
    assert matrix["node01"] == matrix["node08"]
    passed = re.compile(r"PASS \d+")
    assert all(passed.fullmatch(matrix["node01"][c]) for c in ("node", "gpu", "topology", "xid"))
    assert matrix["node02"]["gpu"] == "FAIL 1 count"
    # Its topology count stepped aside for gpu.count: the rest of topology passed.
    assert passed.fullmatch(matrix["node02"]["topology"])
    # node03's NVLink finding is judged by topology.nvlink: its GPU checks passed.
    assert passed.fullmatch(matrix["node03"]["gpu"])
    assert matrix["node03"]["topology"] == "FAIL 1 nvlink"
    assert passed.fullmatch(matrix["node04"]["gpu"])
    assert matrix["node04"]["topology"] == "FAIL 1 nvlink"
    assert matrix["node05"]["gpu"] == "FAIL 1 remapped_rows"
    assert matrix["node06"]["xid"] == "FAIL 1 events"
    assert matrix["node07"]["gpu"] == "WARN 1 clock_events"
    assert "GPU0-GPU1: NODE, expected NV18" in done.stdout  # the pair, in "what to do"


# --- nodes that cannot be reached -----------------------------------------------------------


def _unreachable(run: CheckRun, node: str) -> str:
    """The reason of an unreachable node, which must have no other finding."""
    assert run.statuses(node) == {"node.reachable": "UNREACHABLE"}, run.statuses(node)
    [message] = run.messages(node, "node.reachable")
    return message


@needs_cluster
def test_a_node_whose_sshd_is_stopped_is_unreachable(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(3)
    cluster.stop_sshd("node02")
    run = _check(cluster, tmp_path)
    assert run.code == 1
    address = cluster.node("node02").address
    assert _unreachable(run, "node02") == f"connection refused by {address}:22 (is sshd running?)"
    _assert_complete(run, "node01")
    _assert_complete(run, "node03")


@needs_cluster
def test_a_node_presenting_another_host_key_is_refused(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(3)
    cluster.swap_host_key("node03")
    before = cluster.known_hosts.read_text()
    # Refused always: trust on first use must not replace a key that changed.
    run = _check(cluster, tmp_path, "quick", "--accept-new-hostkeys")
    assert run.code == 1
    message = _unreachable(run, "node03")
    assert message.startswith(f"host key mismatch: {cluster.node('node03').address} presented")
    assert "refused" in message
    assert cluster.known_hosts.read_text() == before
    _assert_complete(run, "node01")
    _assert_complete(run, "node02")


@needs_cluster
def test_an_unknown_host_key_needs_accept_new_hostkeys(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(2)
    cluster.forget_host_key("node01")
    run = _check(cluster, tmp_path)
    assert _unreachable(run, "node01") == (
        "host key unknown, run with --accept-new-hostkeys to trust on first use"
    )
    _assert_complete(run, "node02")
    trusted = _check(cluster, tmp_path, "quick", "--accept-new-hostkeys")
    assert_good_but_simulated(trusted.code, trusted.doc, trusted.stderr)
    _assert_complete(trusted, "node01")
    assert cluster.node("node01").address in cluster.known_hosts.read_text()


@needs_cluster
def test_a_wrong_key_or_user_is_a_clear_auth_error(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(3)
    stranger = cluster.stranger_key()
    inventory = cluster.write_inventory(
        tmp_path / "wrong.ini",
        host_vars={
            "node01": {"ansible_ssh_private_key_file": str(stranger)},
            "node02": {"ansible_user": "nobody"},
        },
    )
    run = _check(cluster, tmp_path, inventory=inventory)
    assert run.code == 1
    assert _unreachable(run, "node01") == (
        f"authentication failed for user root (tried: {stranger})"
    )
    assert _unreachable(run, "node02").startswith("authentication failed for user nobody")
    _assert_complete(run, "node03")


@needs_cluster
def test_a_name_that_does_not_resolve_is_unreachable(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(2)
    inventory = cluster.write_inventory(
        tmp_path / "dns.ini", host_vars={"node02": {"ansible_host": "node02.invalid"}}
    )
    run = _check(cluster, tmp_path, inventory=inventory)
    assert _unreachable(run, "node02").startswith("cannot resolve node02.invalid")
    _assert_complete(run, "node01")


def test_a_malformed_inventory_is_exit_2_naming_the_line(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[sim]\nnode01 ansible_host=10.231.9.1\nnode02 ansible_host\n")
    run = run_check(inventory, "--suite", "quick", "--out", str(tmp_path / "run"))
    assert run.code == 2
    reason = f"{inventory} line 3: Expected key=value host variable assignment, got: ansible_host"
    # --json: stdout still carries one JSON document, the error and the exit code.
    assert (run.doc["error"], run.doc["exit_code"], run.doc["verdict"]) == (reason, 2, None)
    assert run.stderr.strip().splitlines() == [f"error: {reason}"]


# --- nodes that fail during the run ---------------------------------------------------------


def _in_background(action: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    return thread


@needs_cluster
def test_a_hung_probe_is_an_error_at_its_deadline(make_cluster, tmp_path: Path) -> None:
    # node02 has its own nvidia-smi, which hangs; its topology probe runs for real.
    cluster = make_cluster(3, live={"node02": ("host", "nvme", "topology")})
    cluster.install_tool("node02", "nvidia-smi", HANGING_SMI)
    run = _check(cluster, tmp_path, str(_suite(tmp_path, topology_timeout_s=3)))
    assert run.code == 1
    # The stuck tool sleeps 300 s: the run ended because the deadline was enforced.
    assert run.wall_s < 120
    assert run.problems("node02") == {
        "topology.gpu_count": "ERROR",
        "topology.nvlink": "ERROR",
        "topology.nic_affinity": "ERROR",
    }
    assert all("timed out after 3 s" in m for m in run.messages("node02", "topology.nvlink"))
    assert set(run.statuses("node02")) == _all_checks(QUICK)  # host, gpu, xid all judged
    _assert_complete(run, "node01")
    _assert_complete(run, "node03")


@needs_cluster
def test_a_hung_tool_is_not_left_running(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(1, live={"node01": ("host", "nvme", "topology")})
    cluster.install_tool("node01", "nvidia-smi", HANGING_SMI)
    _check(cluster, tmp_path, str(_suite(tmp_path, topology_timeout_s=2)))
    assert cluster.wait_for_process("node01", "sleep 300", timeout_s=0.5) is None


@needs_cluster
def test_a_node_killed_mid_run_keeps_what_it_measured(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(3, live={"node02": ("host", "nvme", "topology")})
    cluster.install_tool("node02", "nvidia-smi", HANGING_SMI)

    def crash() -> None:
        # The host probe has answered once topology's nvidia-smi runs (host comes first).
        if cluster.wait_for_process("node02", "sleep 300", timeout_s=scaled(60)):
            cluster.kill_node_processes("node02")

    killer = _in_background(crash)
    run = _check(cluster, tmp_path, str(_suite(tmp_path, topology_timeout_s=30)))
    killer.join()
    assert run.code == 1
    problems = run.problems("node02")
    assert problems == {
        "node.run": "ERROR",
        "topology.gpu_count": "ERROR",
        "topology.nvlink": "ERROR",
        "topology.nic_affinity": "ERROR",
        "dcgm.diag": "ERROR",  # the step after topology never ran
    }
    # What was recorded before the crash is kept and judged: host live, gpu and xid replayed.
    assert set(run.statuses("node02")) == _all_checks(QUICK) | {"node.run"}
    [message] = run.messages("node02", "node.run")
    assert "3 probe(s) recorded are kept" in message
    _assert_complete(run, "node01")
    _assert_complete(run, "node03")


@needs_cluster
def test_a_frozen_node_ends_at_the_controllers_deadline(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(3, live={"node02": ("host", "nvme", "topology")})
    cluster.install_tool("node02", "nvidia-smi", HANGING_SMI)

    def hang() -> None:
        # Everything on the node stops (node side, sshd session): it sends nothing more.
        if cluster.wait_for_process("node02", "sleep 300", timeout_s=scaled(60)):
            cluster.freeze("node02")

    freezer = _in_background(hang)
    run = _check(cluster, tmp_path, str(_suite(tmp_path, topology_timeout_s=2)))
    freezer.join()
    assert run.code == 1
    assert run.wall_s < 120  # the node never answers: only the controller's deadline ends it
    assert run.problems("node02") == {
        "node.run": "ERROR",
        "topology.gpu_count": "ERROR",
        "topology.nvlink": "ERROR",
        "topology.nic_affinity": "ERROR",
        "dcgm.diag": "ERROR",  # the step after topology never ran
    }
    _assert_complete(run, "node01")
    _assert_complete(run, "node03")


# --- a degraded network ---------------------------------------------------------------------


@needs_cluster
def test_packet_loss_and_a_slow_link_still_complete(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(3)
    cluster.add_loss("node02", 5)
    cluster.limit_rate("node03", 4_000_000)  # 4 Mbit/s: the probe zip takes a while
    run = _check(cluster, tmp_path)
    assert_good_but_simulated(run.code, run.doc, run.stderr)
    for name in cluster.names:
        _assert_complete(run, name)


@needs_cluster
def test_added_latency_still_completes(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(2)
    try:
        cluster.add_latency("node02", 100, loss_pct=2)
    except SimClusterError as exc:
        pytest.skip(str(exc))
    run = _check(cluster, tmp_path)
    assert_good_but_simulated(run.code, run.doc, run.stderr)
    for name in cluster.names:
        _assert_complete(run, name)
