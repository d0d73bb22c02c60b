"""The provisioning tests' fixtures: simulated nodes with their own root filesystem, the
local NVIDIA apt repositories served to them, and the guard that this machine itself is
left as it was (its packages, holds, apt sources and kernel module settings).

Roles run for real only on rootfs nodes (bringup.sim.rootfs): every change lands in a
node's overlay. What the nodes need from Debian is in their image (no mirror is
reachable from them); what they need from NVIDIA comes from the local repositories.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bringup.sim import rootfs
from bringup.sim.cluster import SimCluster
from bringup.sim.netns import BRIDGE_HOST, SUBNET
from tests.integration.provision import aptrepo

# Everything the roles install from Debian (node_tools' tools, the build tools of the cuda
# role, dkms for the driver, lshw for DCGM), the modules Ansible's apt and deb822 need,
# systemd's systemctl (units are enabled offline: no systemd runs in a node), and cJSON,
# which the simulated NVML library reads its state with.
PROVISION_IMAGE = rootfs.Image(
    (
        *rootfs.BASE_PACKAGES,
        "python3-apt",
        "python3-debian",
        "python3-venv",
        "systemd",
        "kmod",
        "mawk",
        "lshw",
        "dkms",
        "build-essential",
        "git",
        "fio",
        "nvme-cli",
        "numactl",
        "pciutils",
        "infiniband-diags",
        "ibverbs-utils",
        "perftest",
        "linux-cpupower",
        "libcjson1",
    )
)

WHY_NOT_ROOTFS = SimCluster.available() or rootfs.available()
needs_rootfs = pytest.mark.skipif(
    WHY_NOT_ROOTFS is not None, reason=f"rootfs nodes: {WHY_NOT_ROOTFS}"
)

# --- this machine stays as it was ------------------------------------------------------

WATCHED = [
    Path("/etc/apt/sources.list"),
    Path("/etc/apt/sources.list.d"),
    Path("/etc/apt/preferences.d"),
    Path("/etc/apt/apt.conf.d"),
    Path("/etc/apt/keyrings"),
    Path("/usr/share/keyrings"),
    Path("/etc/modprobe.d"),
    Path("/etc/modules-load.d"),
    Path("/etc/systemd/system"),
]


def host_state() -> dict[str, Any]:
    """This machine's package list with holds (dpkg's selection state), and the files
    of its apt, modprobe and systemd configuration (name -> sha256)."""
    packages = subprocess.run(
        ["dpkg-query", "-W", "-f", "${db:Status-Abbrev} ${Package}:${Architecture} ${Version}\n"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    files: dict[str, str] = {}
    for top in WATCHED:
        paths = [top] if top.is_file() else sorted(top.rglob("*")) if top.is_dir() else []
        for path in paths:
            if path.is_symlink():
                files[str(path)] = f"-> {path.readlink()}"
            elif path.is_file():
                files[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return {"packages": sorted(packages), "files": files}


@pytest.fixture(scope="session", autouse=True)
def this_machine_is_left_as_it_was() -> Iterator[None]:
    """After all provisioning tests: the same packages, holds, apt sources, apt settings,
    modprobe settings and units as before them."""
    before = host_state()
    yield
    after = host_state()
    gone = sorted(set(before["packages"]) - set(after["packages"]))
    new = sorted(set(after["packages"]) - set(before["packages"]))
    assert (gone, new) == ([], []), "this machine's packages or holds changed"
    changed = {
        path: (before["files"].get(path), after["files"].get(path))
        for path in set(before["files"]) | set(after["files"])
        if before["files"].get(path) != after["files"].get(path)
    }
    assert changed == {}, "this machine's apt, modprobe or systemd configuration changed"


# --- rootfs clusters and the repositories ----------------------------------------------


@pytest.fixture
def make_rootfs_cluster(tmp_path: Path) -> Iterator[Callable[..., SimCluster]]:
    """Start clusters of rootfs nodes under tmp_path; every one is stopped (its nodes'
    processes, mounts and overlays go with it), whatever the test did."""
    started: list[SimCluster] = []

    def make(nodes: int, **kwargs: Any) -> SimCluster:
        kwargs.setdefault("nvml", False)
        cluster = SimCluster(
            nodes, tmp_path / f"cluster{len(started)}", rootfs=PROVISION_IMAGE, **kwargs
        )
        started.append(cluster)
        return cluster.start()

    yield make
    for cluster in started:
        cluster.stop()


def bridge_address(cluster: SimCluster) -> str:
    """This machine's address on the cluster's bridge: what the nodes can reach."""
    return f"{SUBNET}.{cluster.run}.{BRIDGE_HOST}"


@pytest.fixture
def serve_repos(tmp_path: Path) -> Iterator[Callable[[SimCluster], aptrepo.Repos]]:
    """Build the local NVIDIA repositories and serve them on a cluster's bridge address
    (the server stops at the end of the test)."""
    servers: list[Any] = []

    def serve(cluster: SimCluster) -> aptrepo.Repos:
        root = tmp_path / f"repo{len(servers)}"
        root.mkdir()
        server = aptrepo.serve(root, bridge_address(cluster))
        url = server.__enter__()
        servers.append(server)
        return aptrepo.build(root, url)

    yield serve
    for server in reversed(servers):
        server.__exit__(None, None, None)
