"""The simulated cluster itself: real sshd per node, host keys verified, namespaces
isolated, faults that act, and nothing left behind."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import paramiko
import pytest

from bringup.sim.cluster import NETNS_DIR, STATE_DIR, SimCluster, SimClusterError
from tests.support import REPO
from tests.support.cluster import needs_cluster
from tests.support.timing import scaled

pytestmark = [pytest.mark.cluster, needs_cluster]


def _connect(cluster: SimCluster, node: str, key: Path | None = None) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    client.load_host_keys(str(cluster.known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(
        cluster.node(node).address,
        username="root",
        key_filename=str(key or cluster.key_file),
        look_for_keys=False,
        allow_agent=False,
        timeout=scaled(10),
    )
    return client


def _exec(client: paramiko.SSHClient, command: str) -> str:
    _, stdout, _ = client.exec_command(command, timeout=scaled(20))
    return stdout.read().decode()


def _openssh(cluster: SimCluster, node: str, command: str) -> subprocess.CompletedProcess[str]:
    argv = [
        "ssh",
        "-i",
        str(cluster.key_file),
        "-o",
        f"UserKnownHostsFile={cluster.known_hosts}",
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=yes",
        f"root@{cluster.node(node).address}",
        command,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=scaled(30), check=False)


def test_every_node_answers_over_ssh_with_a_verified_host_key(make_cluster) -> None:
    cluster = make_cluster(3)
    for name in cluster.names:
        client = _connect(cluster, name)
        # The session runs inside the node's namespace: it sees only its own address.
        assert cluster.node(name).address in _exec(client, "ip -o -4 addr show dev eth0")
        client.close()
    # OpenSSH, as Ansible uses it, accepts the same files.
    done = _openssh(cluster, "node02", "echo ok")
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr


def test_every_session_gets_the_nodes_own_and_the_clusters_environment(make_cluster) -> None:
    shared = {"TORCH_EXTENSIONS_DIR": "/the/clusters/build/cache"}  # SimCluster's env
    cluster = make_cluster(2, nvml=False, env=shared)
    for name in cluster.names:
        client = _connect(cluster, name)
        got = _exec(client, "printenv XDG_CACHE_HOME TORCH_EXTENSIONS_DIR").split()
        client.close()
        assert got == [str(cluster.node(name).cache_dir), shared["TORCH_EXTENSIONS_DIR"]]


def test_hosts_ini_names_every_node_with_its_recording(make_cluster) -> None:
    cluster = make_cluster(2, faults={"node02": "xid79"})
    text = cluster.inventory.read_text()
    for name in cluster.names:
        node = cluster.node(name)
        assert f"{name} ansible_host={node.address} bringup_replay={node.facts_file}" in text
    assert f"ansible_ssh_common_args='-o UserKnownHostsFile={cluster.known_hosts}'" in text
    recorded = json.loads(cluster.node("node02").facts_file.read_text())
    # host, nvme, and gpu through the node's simulated NVML, run live; topo -m and the
    # kernel log are not NVML: recorded.
    assert sorted(recorded["probes"]) == ["topology", "xid"]
    assert recorded["probes"]["xid"]["facts"]["xids"][0]["xid"] == 79


def test_namespaces_are_isolated(make_cluster) -> None:
    cluster = make_cluster(2)
    client = _connect(cluster, "node01")
    # No default route: a node reaches its cluster's subnet and nothing else.
    routes = _exec(client, "ip -4 route").strip().splitlines()
    assert routes == [
        f"{cluster.node('node01').address.rsplit('.', 1)[0]}.0/24 dev eth0 proto kernel "
        f"scope link src {cluster.node('node01').address}"
    ]
    # The node's sshd listens on its address only, not in the root namespace.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", 22), timeout=scaled(2)).close()
    client.close()


def test_a_changed_host_key_is_refused(make_cluster) -> None:
    cluster = make_cluster(2)
    cluster.swap_host_key("node02")
    with pytest.raises(paramiko.BadHostKeyException):
        _connect(cluster, "node02")
    _connect(cluster, "node01").close()  # the others are untouched
    done = _openssh(cluster, "node02", "true")
    assert done.returncode == 255
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in done.stderr


def test_an_unknown_host_key_is_refused(make_cluster) -> None:
    cluster = make_cluster(2)
    cluster.forget_host_key("node01")
    with pytest.raises(paramiko.SSHException, match="not found in known_hosts"):
        _connect(cluster, "node01")


def test_a_key_no_node_knows_is_refused(make_cluster) -> None:
    cluster = make_cluster(1)
    with pytest.raises(paramiko.AuthenticationException):
        _connect(cluster, "node01", key=cluster.stranger_key())


def test_a_stopped_sshd_refuses_connections_and_comes_back(make_cluster) -> None:
    cluster = make_cluster(1)
    cluster.stop_sshd("node01")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((cluster.node("node01").address, 22), timeout=scaled(5)).close()
    cluster.start_sshd("node01")
    _connect(cluster, "node01").close()


def test_kill_freeze_and_tools_act_on_one_node_only(make_cluster) -> None:
    cluster = make_cluster(2)
    cluster.install_tool("node01", "nvidia-smi", "#!/bin/sh\nexec sleep 300\n")
    client = _connect(cluster, "node01")
    client.exec_command("nvidia-smi topo -m")  # found on the node's PATH: it hangs
    pid = cluster.wait_for_process("node01", "sleep 300", timeout_s=scaled(10))
    assert pid is not None
    assert cluster.wait_for_process("node02", "sleep 300", timeout_s=0.2) is None
    stopped = cluster.freeze("node01")
    assert pid in stopped
    assert cluster.node("node01").sshd.pid not in stopped  # new connections still arrive
    assert _reaches_state(pid, "T")  # stopped (the signal is delivered asynchronously)
    cluster.kill_node_processes("node01")
    assert cluster.pids("node01") == []
    assert cluster.pids("node02") != []  # node02's sshd lives on
    client.close()


def _reaches_state(pid: int, state: str) -> bool:
    for _ in range(200):
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == state:
            return True
        time.sleep(0.01)
    return False


def test_packet_loss_and_rate_limit_still_let_ssh_through(make_cluster) -> None:
    cluster = make_cluster(1)
    cluster.add_loss("node01", 10)
    cluster.limit_rate("node01", 2_000_000)
    client = _connect(cluster, "node01")
    assert _exec(client, "echo through") == "through\n"
    client.close()
    cluster.clear_network_faults("node01")


def test_latency_needs_netem_or_says_so(make_cluster) -> None:
    cluster = make_cluster(1)
    try:
        cluster.add_latency("node01", 50)
    except SimClusterError as exc:
        assert "CONFIG_NET_SCH_NETEM" in str(exc)
        pytest.skip(str(exc))
    client = _connect(cluster, "node01")
    assert _exec(client, "echo slow") == "slow\n"
    client.close()


def _ours(run: int) -> list[str]:
    prefix = f"bu-{run}-"
    names = [p.name for p in NETNS_DIR.iterdir()] if NETNS_DIR.exists() else []
    names += [p.name for p in Path("/sys/class/net").iterdir()]
    return sorted(n for n in names if n.startswith(prefix))


def test_stop_removes_namespaces_processes_and_files(tmp_path: Path) -> None:
    cluster = SimCluster(3, tmp_path / "c")
    cluster.start()
    run = cluster.run
    assert run is not None
    pids = [cluster.node(n).sshd.pid for n in cluster.names]
    assert len(_ours(run)) == 3 + 3 + 1  # namespaces, veths, bridge
    cluster.stop()
    assert _ours(run) == []
    assert all(not Path(f"/proc/{pid}").exists() for pid in pids)
    assert list((tmp_path / "c").iterdir()) == []
    assert not (STATE_DIR / f"{run}.json").exists()


def test_a_failing_build_cleans_up(tmp_path: Path) -> None:
    with pytest.raises(SimClusterError, match="unknown fault"):
        SimCluster(2, tmp_path, faults={"node01": "melted"})
    with pytest.raises(SimClusterError, match="unknown node"):
        SimCluster(2, tmp_path, faults={"node09": "xid79"})


CRASHING_OWNER = """
import os, sys
from pathlib import Path
from bringup.sim.cluster import SimCluster
cluster = SimCluster(2, Path(sys.argv[1])).start()
print(cluster.run, flush=True)
os.kill(os.getpid(), 9)  # a test run killed hard: no stop(), no atexit
"""


def test_a_crashed_cluster_is_swept_at_the_next_start(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CRASHING_OWNER, str(tmp_path / "crashed")],
        capture_output=True,
        text=True,
        timeout=scaled(60),
        check=False,
        cwd=REPO,
    )
    run = int(done.stdout.strip())
    assert _ours(run) != []  # left behind, sshds still running
    leftover = [p for n in ("n1", "n2") for p in _netns_pids(f"bu-{run}-{n}")]
    assert leftover
    with SimCluster(1, tmp_path / "next") as fresh:
        # Swept: the crashed run's sshds are gone (its run id may be taken again).
        assert all(_gone(pid) for pid in leftover)
        assert fresh.pids("node01") != []
    assert _ours(run) == []


def _gone(pid: int) -> bool:
    """True when the process ended (a zombie waiting for a reaper counts as ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _netns_pids(netns: str) -> list[int]:
    from bringup.sim.cluster import netns_pids

    return netns_pids(netns)


def test_available_says_why_not_without_root() -> None:
    script = (
        "import os; from bringup.sim.cluster import SimCluster; "
        "os.setuid(65534); print(SimCluster.available())"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=scaled(30),
        check=False,
        cwd=REPO,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.stdout.strip().startswith("needs root"), done.stderr
