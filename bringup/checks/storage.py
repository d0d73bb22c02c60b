"""Checks of the `storage` probe: the dataset and checkpoint directories of a training job.

- `storage.separate_devices`: the dataset and the checkpoints on different devices, so
  that reading batches and writing checkpoints do not compete for one disk's bandwidth
  (the same file system, or two file systems on one disk, FAIL);
- `storage.checkpoint_durable`: checkpoints written to storage that survives a reboot and
  the container (tmpfs, ramfs and a container's overlay FAIL);
- `storage.checkpoint_writable`: the training user can create files there.

Paths not configured SKIP with how to set them. docs/workflows.md#storage-layout.
"""

from __future__ import annotations

from bringup.checks import Check, finding
from bringup.findings import Finding, Status
from bringup.node.probes.storage import StorageFacts, StoragePath
from bringup.profile import Profile

HOW_TO_SET = {
    "dataset": "--dataset-dir PATH or the host variable bringup_dataset_dir",
    "checkpoint": "--checkpoint-dir PATH or the host variable bringup_checkpoint_dir",
}
# File systems whose contents do not outlive a reboot or the container that wrote them.
IN_MEMORY = {"tmpfs", "ramfs", "devtmpfs"}
CONTAINER_LAYER = {"overlay", "aufs"}


def judge_separate(facts: StorageFacts, profile: Profile) -> list[Finding]:
    check = "storage.separate_devices"
    dataset, checkpoint = _path(facts, "dataset"), _path(facts, "checkpoint")
    missing = [role for role, p in (("dataset", dataset), ("checkpoint", checkpoint)) if not p]
    if missing:
        how = "; ".join(HOW_TO_SET[role] for role in missing)
        return [finding(check, Status.SKIP, f"{' and '.join(missing)} path not set ({how})")]
    assert dataset is not None and checkpoint is not None
    for p in (dataset, checkpoint):
        if p.error:
            return [finding(check, Status.ERROR, f"{p.role} path {p.path}: {p.error}")]
    action = (
        "put the dataset and the checkpoints on different devices (another NVMe drive, or "
        "the dataset on the shared file system): reading one and writing the other compete "
        "for the same bandwidth"
    )
    if dataset.st_dev == checkpoint.st_dev:
        return [
            finding(
                check,
                Status.FAIL,
                f"dataset {dataset.path} and checkpoint {checkpoint.path} are on the same file "
                f"system ({where(dataset)})",
                value=dataset.st_dev,
                action=action,
            )
        ]
    shared = sorted(set(dataset.block_devices or []) & set(checkpoint.block_devices or []))
    if shared:
        return [
            finding(
                check,
                Status.FAIL,
                f"dataset {dataset.path} ({where(dataset)}) and checkpoint {checkpoint.path} "
                f"({where(checkpoint)}) are on different file systems but the same disk "
                f"{', '.join(shared)}",
                value=", ".join(shared),
                action=action,
            )
        ]
    return [
        finding(
            check,
            Status.PASS,
            f"dataset {dataset.path} ({where(dataset)}) and checkpoint {checkpoint.path} "
            f"({where(checkpoint)}) are on separate devices",
        )
    ]


def judge_durable(facts: StorageFacts, profile: Profile) -> list[Finding]:
    check = "storage.checkpoint_durable"
    checkpoint = _path(facts, "checkpoint")
    if checkpoint is None:
        return [
            finding(check, Status.SKIP, f"checkpoint path not set ({HOW_TO_SET['checkpoint']})")
        ]
    if checkpoint.error or checkpoint.mount is None:
        why = checkpoint.error or "its mount is not in /proc/self/mountinfo"
        return [finding(check, Status.ERROR, f"checkpoint path {checkpoint.path}: {why}")]
    fs = checkpoint.mount.fs_type
    if fs in IN_MEMORY:
        return [
            finding(
                check,
                Status.FAIL,
                f"checkpoint path {checkpoint.path} is on {fs} (memory): checkpoints are lost "
                "at the next reboot and take the node's RAM",
                value=fs,
                expected="a disk or network file system",
                action="point the checkpoint directory at a disk (NVMe) or the shared file system",
            )
        ]
    if fs in CONTAINER_LAYER:
        return [
            finding(
                check,
                Status.FAIL,
                f"checkpoint path {checkpoint.path} is on {fs} (a container's writable "
                "layer): checkpoints are lost with the container",
                value=fs,
                expected="a disk or network file system",
                action="mount a host directory or volume at the checkpoint path "
                "(docker -v, a Kubernetes volume)",
            )
        ]
    return [
        finding(
            check,
            Status.PASS,
            f"checkpoint path {checkpoint.path} is on {where(checkpoint)}: durable",
            value=fs,
        )
    ]


def judge_writable(facts: StorageFacts, profile: Profile) -> list[Finding]:
    check = "storage.checkpoint_writable"
    checkpoint = _path(facts, "checkpoint")
    if checkpoint is None:
        return [
            finding(check, Status.SKIP, f"checkpoint path not set ({HOW_TO_SET['checkpoint']})")
        ]
    if checkpoint.error:
        return [
            finding(check, Status.ERROR, f"checkpoint path {checkpoint.path}: {checkpoint.error}")
        ]
    how = (
        "written as the user" if checkpoint.write_method == "as the user" else "from its mode bits"
    )
    if checkpoint.writable:
        return [
            finding(
                check,
                Status.PASS,
                f"user {checkpoint.user} can write to {checkpoint.path} ({how})",
            )
        ]
    return [
        finding(
            check,
            Status.FAIL,
            f"user {checkpoint.user} cannot write to {checkpoint.path} ({how}): "
            f"{checkpoint.write_error}",
            action=f"give {checkpoint.user} write access (chown/chmod the directory, or "
            "remount it read-write), or run the job as a user who has it",
        )
    ]


def where(path: StoragePath) -> str:
    """ "xfs on nvme1n1", "nfs4 from fs01:/export", "tmpfs"."""
    mount = path.mount
    if mount is None:
        return f"device {path.st_dev}"
    if path.block_devices:
        return f"{mount.fs_type} on {', '.join(path.block_devices)}"
    if ":" in mount.source or mount.source.startswith("//"):
        return f"{mount.fs_type} from {mount.source}"
    return mount.fs_type


def _path(facts: StorageFacts, role: str) -> StoragePath | None:
    return next((p for p in facts.paths if p.role == role), None)


CHECKS = [
    Check(
        "storage.separate_devices",
        "storage",
        judge_separate,
        "dataset and checkpoints on different devices",
    ),
    Check(
        "storage.checkpoint_durable",
        "storage",
        judge_durable,
        "checkpoints on storage that survives a reboot",
    ),
    Check(
        "storage.checkpoint_writable",
        "storage",
        judge_writable,
        "the training user can write checkpoints",
    ),
]
