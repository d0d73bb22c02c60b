"""The storage probe's pure parts: /proc/self/mountinfo lines and the mount a path is on.

Real mounts, /sys and the checks: tests/integration/node/test_storage_probe.py.
"""

from __future__ import annotations

from bringup.node.probes.storage import Mount, mount_of, parse_mountinfo

# proc(5)'s example line, then lines as a container shows them (overlay root, a tmpfs, a
# bind mount whose mount point has a space, an NFS mount, and a second mount over /data).
MOUNTINFO = """\
36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
600 550 0:52 / / rw,relatime - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w
601 600 0:55 / /dev/shm rw,nosuid,nodev - tmpfs shm rw,size=65536k
602 600 259:2 /srv/my\\040data /my\\040data rw,relatime - xfs /dev/nvme1n1p2 rw,attr2
603 600 0:60 / /data rw,relatime shared:5 - nfs4 fs01:/export rw,vers=4.2
604 603 259:3 / /data rw,relatime - ext4 /dev/nvme2n1 rw
"""


def test_mountinfo_lines() -> None:
    mounts = parse_mountinfo(MOUNTINFO + "garbage line\n")
    assert mounts[0] == Mount("/mnt2", "ext3", "/dev/root", "98:0", "rw,noatime")
    assert [(m.mount_point, m.fs_type, m.source) for m in mounts[1:]] == [
        ("/", "overlay", "overlay"),
        ("/dev/shm", "tmpfs", "shm"),
        ("/my data", "xfs", "/dev/nvme1n1p2"),
        ("/data", "nfs4", "fs01:/export"),
        ("/data", "ext4", "/dev/nvme2n1"),
    ]


def test_a_path_is_on_the_deepest_mount_the_one_on_top() -> None:
    mounts = parse_mountinfo(MOUNTINFO)
    assert mount_of("/dev/shm/ckpt", mounts).fs_type == "tmpfs"
    assert mount_of("/dev/shmx", mounts).fs_type == "overlay"  # not a prefix by name alone
    assert mount_of("/my data/set", mounts).fs_type == "xfs"
    assert mount_of("/data/run1", mounts).fs_type == "ext4"  # mounted over the NFS export
    assert mount_of("/home/train", mounts).fs_type == "overlay"
