"""Simulated nodes with their own root filesystem (bringup.sim.rootfs): what the
provisioning tests rely on to never change this machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from bringup.sim.rootfs import KERNEL_LOG, KERNEL_ROOT
from tests.integration.provision.conftest import needs_rootfs
from tests.integration.provision.hgx import ssh

pytestmark = [pytest.mark.provision, needs_rootfs]


def test_each_node_has_its_own_hostname_files_and_packages(make_rootfs_cluster) -> None:
    cluster = make_rootfs_cluster(2)
    assert ssh(cluster, "node01", "hostname").strip() == "node01"
    assert ssh(cluster, "node02", "hostname").strip() == "node02"
    # A file a node writes lands in its overlay only: not on node02, not on this machine.
    marker = "/etc/bringup-rootfs-test"
    ssh(cluster, "node01", f"echo written-by-node01 > {marker}")
    assert (cluster.root("node01") / marker.lstrip("/")).read_text() == "written-by-node01\n"
    assert not Path(marker).exists()
    assert ssh(cluster, "node02", f"cat {marker} 2>/dev/null || echo absent").strip() == "absent"
    # dpkg's database is the image's: installing there does not touch this machine's.
    assert ssh(cluster, "node01", "dpkg-query -W -f '${Version}' python3-apt").startswith("2.6")
    assert "Debian GNU/Linux 12" in ssh(cluster, "node01", "cat /etc/os-release")
    # The image reaches no mirror: it has no apt sources of its own.
    assert (
        ssh(cluster, "node01", "ls -A /etc/apt/sources.list.d/; ls /etc/apt/sources.list || true")
        == ""
    )


def test_the_kernel_is_simulated_and_out_of_reach(make_rootfs_cluster) -> None:
    """Reboots and module loads are recorded, never done; the node cannot do them."""
    cluster = make_rootfs_cluster(1)
    status = ssh(cluster, "node01", "grep CapBnd /proc/self/status").split()[1]
    bounding = int(status, 16)
    assert not bounding & (1 << 16), "CAP_SYS_MODULE must be dropped"
    assert not bounding & (1 << 22), "CAP_SYS_BOOT must be dropped"
    boot_id = ssh(cluster, "node01", "cat /proc/sys/kernel/random/boot_id").strip()
    ssh(
        cluster,
        "node01",
        "mkdir -p /etc/modules-load.d && echo ib_umad > /etc/modules-load.d/x.conf",
    )
    ssh(cluster, "node01", "modprobe nouveau && shutdown -r 0 'bringup test'")
    after = ssh(cluster, "node01", "cat /proc/sys/kernel/random/boot_id").strip()
    assert after != boot_id  # what Ansible's reboot module waits for
    log = ssh(cluster, "node01", f"cat {KERNEL_LOG}").splitlines()
    assert [line.split(" ", 1)[1] for line in log] == [
        "modprobe nouveau",
        "shutdown -r 0 bringup test",
        "booted",
    ]
    # The reboot unloaded nouveau and loaded what modules-load.d lists.
    assert ssh(cluster, "node01", f"ls {KERNEL_ROOT}/sys/module").split() == ["ib_umad"]
    # The node's /proc/sys is read-only: this machine's kernel settings are out of reach.
    out = ssh(cluster, "node01", "echo 1 > /proc/sys/vm/drop_caches 2>&1 || echo refused")
    assert "refused" in out


def _alive(pid: int) -> bool:
    """A process that still runs (a zombie waiting for its reaper does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_stopping_leaves_no_mount_process_or_file(make_rootfs_cluster, tmp_path: Path) -> None:
    cluster = make_rootfs_cluster(2)
    pids = cluster.pids("node01") + cluster.pids("node02")
    assert pids
    workdir = cluster.workdir
    cluster.stop()
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(tmp_path) not in mounts
    assert [p for p in pids if _alive(p)] == []
    assert not (workdir / ".rootfs").exists()
