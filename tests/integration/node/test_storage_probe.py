"""The storage probe on real directories, real mounts and this machine's /sys, and its checks.

As root the tests mount what they need (a tmpfs, an ext4 file system on a loop device)
under their own temporary directory and unmount it after; without root they use
/dev/shm and skip what needs a mount. The /sys walk from a partition or a device-mapper
volume to its disks is tested on a copy of the layout (no such device here).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bringup.checks.storage import judge_durable, judge_separate, judge_writable
from bringup.findings import Status
from bringup.node.probes import storage
from bringup.node.probes.storage import Mount, block_devices
from tests.support.profiles import h100_profile

PROFILE = h100_profile()
ROOT = os.geteuid() == 0


def probe(dataset: Path | str, checkpoint: Path | str, user: str = "") -> storage.StorageFacts:
    params = storage.Params(dataset_dir=str(dataset), checkpoint_dir=str(checkpoint), user=user)
    return storage.collect(params).facts


def judged(facts: storage.StorageFacts) -> list[tuple[str, Status, str]]:
    found = []
    for judge in (judge_separate, judge_durable, judge_writable):
        found += [(f.check, f.status, f.message) for f in judge(facts, PROFILE)]
    return found


@contextlib.contextmanager
def mounted(argv: list[str], where: Path) -> Iterator[Path]:
    where.mkdir()
    done = subprocess.run([*argv, str(where)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def test_dataset_and_checkpoint_on_one_file_system_fail(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "ckpt").mkdir()
    facts = probe(tmp_path / "data", tmp_path / "ckpt")
    data, ckpt = facts.paths
    assert data.st_dev == ckpt.st_dev and data.mount == ckpt.mount
    (separate,) = judge_separate(facts, PROFILE)
    assert separate.status is Status.FAIL
    assert separate.message.startswith(
        f"dataset {tmp_path}/data and checkpoint {tmp_path}/ckpt are on the same file system ("
    )
    assert ckpt.writable is True and ckpt.write_method == "as the user"
    assert not list((tmp_path / "ckpt").iterdir())  # the write test leaves nothing behind


def test_a_checkpoint_on_tmpfs_fails_durability(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    if ROOT:
        context = mounted(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs"], tmp_path / "shm")
    else:
        context = contextlib.nullcontext(Path("/dev/shm"))
    with context as shm:
        facts = probe(tmp_path / "data", shm)
    ckpt = facts.paths[1]
    assert ckpt.mount is not None and ckpt.mount.fs_type == "tmpfs"
    assert ckpt.block_devices == [] and ckpt.st_dev and ckpt.st_dev.startswith("0:")
    found = judged(facts)
    assert found[0][:2] == ("storage.separate_devices", Status.PASS)
    assert found[1] == (
        "storage.checkpoint_durable",
        Status.FAIL,
        f"checkpoint path {shm} is on tmpfs (memory): checkpoints are lost at the next reboot "
        "and take the node's RAM",
    )
    assert found[2][:2] == ("storage.checkpoint_writable", Status.PASS)


@pytest.mark.skipif(not ROOT, reason="a loop device and a mount need root")
def test_a_checkpoint_on_its_own_disk_passes_and_names_it(tmp_path: Path) -> None:
    if not (shutil.which("losetup") and shutil.which("mkfs.ext4")):
        pytest.skip("losetup or mkfs.ext4 missing")
    image = tmp_path / "disk.img"
    with image.open("wb") as f:
        f.truncate(32 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
    made = subprocess.run(["losetup", "-f", "--show", str(image)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"no loop device: {made.stderr.strip()}")
    loop = made.stdout.strip()
    try:
        with mounted(["mount", loop], tmp_path / "ckpt") as ckpt:
            (tmp_path / "data").mkdir()
            facts = probe(tmp_path / "data", ckpt)
    finally:
        subprocess.run(["losetup", "-d", loop], check=True)
    name = Path(loop).name
    assert facts.paths[1].block_devices == [name]
    assert facts.paths[1].mount is not None and facts.paths[1].mount.fs_type == "ext4"
    (separate,) = judge_separate(facts, PROFILE)
    assert separate.status is Status.PASS
    assert separate.message.endswith(
        f"and checkpoint {ckpt} (ext4 on {name}) are on separate devices"
    )
    (durable,) = judge_durable(facts, PROFILE)
    assert (durable.status, durable.message) == (
        Status.PASS,
        f"checkpoint path {ckpt} is on ext4 on {name}: durable",
    )


@pytest.mark.skipif(not ROOT, reason="writing as another user needs root")
def test_a_checkpoint_the_training_user_cannot_write_fails() -> None:
    # Under /tmp, not pytest's tmp_path: every folder above must let the user through.
    with tempfile.TemporaryDirectory(dir="/tmp") as top:
        os.chmod(top, 0o755)
        ckpt = Path(top) / "ckpt"
        ckpt.mkdir()
        os.chmod(ckpt, 0o755)  # root's, not writable by others whatever the umask
        (Path(top) / "data").mkdir()
        facts = probe(Path(top) / "data", ckpt, user="nobody")
        (writable,) = judge_writable(facts, PROFILE)
        assert (writable.status, writable.message) == (
            Status.FAIL,
            f"user nobody cannot write to {ckpt} (written as the user): Permission denied",
        )
        os.chmod(ckpt, 0o777)
        (writable,) = judge_writable(probe(Path(top) / "data", ckpt, user="nobody"), PROFILE)
        assert (writable.status, writable.message) == (
            Status.PASS,
            f"user nobody can write to {ckpt} (written as the user)",
        )
        assert not list(ckpt.iterdir())


def test_a_missing_path_is_an_error_and_no_path_is_a_skip(tmp_path: Path) -> None:
    facts = probe(tmp_path / "absent", tmp_path)
    assert facts.paths[0].error == "No such file or directory"
    assert judged(facts)[0] == (
        "storage.separate_devices",
        Status.ERROR,
        f"dataset path {tmp_path}/absent: No such file or directory",
    )
    unset = storage.collect(storage.Params()).facts
    assert unset.paths == []
    assert judged(unset) == [
        (
            "storage.separate_devices",
            Status.SKIP,
            "dataset and checkpoint path not set (--dataset-dir PATH or the host variable "
            "bringup_dataset_dir; --checkpoint-dir PATH or the host variable "
            "bringup_checkpoint_dir)",
        ),
        (
            "storage.checkpoint_durable",
            Status.SKIP,
            "checkpoint path not set (--checkpoint-dir PATH or the host variable "
            "bringup_checkpoint_dir)",
        ),
        (
            "storage.checkpoint_writable",
            Status.SKIP,
            "checkpoint path not set (--checkpoint-dir PATH or the host variable "
            "bringup_checkpoint_dir)",
        ),
    ]


# --- /sys: partitions and device-mapper volumes to their disks (the kernel's layout) ------


def sys_tree(root: Path) -> Path:
    """/sys/devices/... with nvme0n1 (partitions p1, p2), nvme1n1, and dm-0 over
    nvme1n1 and nvme2n1 (an LVM stripe); /sys/dev/block/MAJ:MIN links to each."""
    devices = root / "devices" / "pci0000:00"
    disks = {"nvme0n1": "259:0", "nvme1n1": "259:3", "nvme2n1": "259:4"}
    for disk in disks:
        (devices / disk).mkdir(parents=True)
    for number, dev in ((1, "259:1"), (2, "259:2")):
        part = devices / "nvme0n1" / f"nvme0n1p{number}"
        part.mkdir()
        (part / "partition").write_text(f"{number}\n")
        disks[part.name] = dev
    dm = root / "devices" / "virtual" / "block" / "dm-0"
    (dm / "slaves").mkdir(parents=True)
    for member in ("nvme1n1", "nvme2n1"):
        (dm / "slaves" / member).symlink_to(devices / member)
    links = root / "dev" / "block"
    links.mkdir(parents=True)
    for name, dev in disks.items():
        target = devices / "nvme0n1" / name if name.startswith("nvme0n1p") else devices / name
        (links / dev).symlink_to(target)
    (links / "253:0").symlink_to(dm)
    return links


def test_partitions_and_dm_volumes_resolve_to_their_disks(tmp_path: Path) -> None:
    links = sys_tree(tmp_path)
    assert block_devices("259:1", None, links) == ["nvme0n1"]
    assert block_devices("259:2", None, links) == ["nvme0n1"]
    assert block_devices("253:0", None, links) == ["nvme1n1", "nvme2n1"]
    assert block_devices("259:3", None, links) == ["nvme1n1"]
    assert block_devices("0:45", Mount("/", "tmpfs", "tmpfs", "0:45", "rw"), links) == []


def test_two_file_systems_on_one_disk_fail(tmp_path: Path) -> None:
    ext4 = Mount("/data", "ext4", "/dev/nvme0n1p1", "259:1", "rw")
    xfs = Mount("/ckpt", "xfs", "/dev/nvme0n1p2", "259:2", "rw")
    facts = storage.StorageFacts(
        [
            storage.StoragePath(
                "dataset", "/data", st_dev="259:1", mount=ext4, block_devices=["nvme0n1"]
            ),
            storage.StoragePath(
                "checkpoint",
                "/ckpt",
                st_dev="259:2",
                mount=xfs,
                block_devices=["nvme0n1"],
                user="train",
                writable=True,
                write_method="as the user",
            ),
        ]
    )
    (separate,) = judge_separate(facts, PROFILE)
    assert (separate.status, separate.message) == (
        Status.FAIL,
        "dataset /data (ext4 on nvme0n1) and checkpoint /ckpt (xfs on nvme0n1) are on different "
        "file systems but the same disk nvme0n1",
    )
