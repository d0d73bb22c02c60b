"""The simulated cluster under a real Slurm: srun reaches every node's namespace, each
task gets its own node's environment, and nothing is left behind (not even by a crash)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bringup.sim.cluster import NETNS_DIR, SimCluster
from bringup.sim.netns import STATE_DIR
from tests.support import REPO
from tests.support.cluster import needs_slurm
from tests.support.timing import scaled

pytestmark = [pytest.mark.cluster, pytest.mark.slurm, needs_slurm]


def _srun(cluster: SimCluster, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["srun", *argv],
        env={**os.environ, **cluster.slurm_env()},
        capture_output=True,
        text=True,
        timeout=scaled(60),
        check=False,
    )


def test_srun_runs_one_task_in_each_node(make_slurm_cluster: Callable[..., SimCluster]) -> None:
    cluster = make_slurm_cluster(3, nvml=False)
    sinfo = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N %P %t"],
        env={**os.environ, **cluster.slurm_env()},
        capture_output=True,
        text=True,
        check=True,
    )
    assert sinfo.stdout.split("\n")[:3] == [
        "node01 sim* idle",
        "node02 sim* idle",
        "node03 sim* idle",
    ]
    done = _srun(cluster, "-N2", "-w", "node01,node03", "-l", "printenv", "SLURMD_NODENAME")
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split("\n")) == ["", "0: node01", "1: node03"]
    # One task per node, each in its own namespace: its own address on eth0.
    done = _srun(
        cluster, "-N3", "--ntasks-per-node=1", "-l", "ip", "-4", "-o", "addr", "show", "eth0"
    )
    assert done.returncode == 0, done.stderr
    addresses = {line.split(":")[0]: line.split()[4] for line in done.stdout.splitlines()}
    assert sorted(addresses.values()) == sorted(
        f"{cluster.node(n).address}/24" for n in cluster.names
    )


def test_each_task_gets_its_own_nodes_environment(
    make_slurm_cluster: Callable[..., SimCluster],
) -> None:
    shared = {"TORCH_EXTENSIONS_DIR": "/the/clusters/build/cache"}  # SimCluster's env
    cluster = make_slurm_cluster(2, nvml=False, env=shared)
    # A tool installed on node02 only: found there first on PATH, as over SSH.
    cluster.install_tool("node02", "whoami-node", "#!/bin/sh\necho the tool of node02\n")
    done = _srun(cluster, "-N1", "-w", "node02", "whoami-node")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "the tool of node02\n"
    done = _srun(cluster, "-N1", "-w", "node01", "printenv", "XDG_CACHE_HOME")
    assert done.stdout.strip() == str(cluster.node("node01").cache_dir)
    # And the environment the cluster gives all its nodes (SimCluster's env).
    done = _srun(cluster, "-N1", "-w", "node02", "printenv", "TORCH_EXTENSIONS_DIR")
    assert done.stdout.strip() == shared["TORCH_EXTENSIONS_DIR"]


def test_srun_launches_however_deep_the_clusters_work_directory_is(tmp_path: Path) -> None:
    """A step's slurmstepd listens on a Unix socket in slurmd's spool folder, and such a
    path holds at most 107 bytes: below a deep work directory (pytest-xdist adds a
    `popen-gwN` folder to every test's) each launch failed ("Task launch for StepId=1.0
    failed on node node01: Unspecified error"). The sockets are in a short folder of the
    cluster's own, removed with it."""
    deep = tmp_path / ("d" * max(1, 80 - len(str(tmp_path)) - 1))
    assert len(f"{deep}/slurm/spool/node01/node01_1.0") > 107  # where it was
    cluster = SimCluster(1, deep, nvml=False, slurm=True).start()
    try:
        done = _srun(cluster, "-N1", "-w", "node01", "printenv", "SLURMD_NODENAME")
        assert done.returncode == 0, done.stderr
        assert done.stdout == "node01\n"
        short = STATE_DIR / f"{cluster.run}.slurm"
        assert short.is_dir()
    finally:
        cluster.stop()
    assert not short.exists()


def test_stop_removes_slurm_and_its_files(tmp_path: Path) -> None:
    cluster = SimCluster(2, tmp_path / "c", nvml=False, slurm=True).start()
    run = cluster.run
    conf = str(cluster.slurm.conf) if cluster.slurm else ""
    assert _daemons(conf)
    cluster.stop()
    assert _daemons(conf) == []
    assert not (NETNS_DIR / f"bu-{run}-c").exists()
    assert list((tmp_path / "c").iterdir()) == []


CRASHING_OWNER = """
import os, sys
from pathlib import Path
from bringup.sim.cluster import SimCluster
cluster = SimCluster(2, Path(sys.argv[1]), nvml=False, slurm=True).start()
print(cluster.slurm.conf, flush=True)
os.kill(os.getpid(), 9)  # a test run killed hard: no stop(), no atexit
"""


def test_a_crashed_runs_slurm_is_swept_at_the_next_start(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CRASHING_OWNER, str(tmp_path / "crashed")],
        capture_output=True,
        text=True,
        timeout=scaled(90),
        check=False,
        cwd=REPO,
    )
    conf = done.stdout.strip()
    assert conf, done.stderr
    assert len(_daemons(conf)) >= 4  # munged, slurmctld, two slurmd: left running
    with SimCluster(1, tmp_path / "next", nvml=False):
        assert _daemons(conf) == []


def _daemons(conf: str) -> list[int]:
    """Live munged/slurmctld/slurmd processes of the Slurm whose slurm.conf is conf."""
    munge_dir = str(Path(conf).parent / "munge")
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and (conf in cmd or munge_dir in cmd) and "ip netns" not in cmd:
            found.append(int(entry.name))
    return found
