"""The `storage` probe: where a training job's dataset and checkpoints live.

For each configured path (the dataset directory, the checkpoint directory): its file
system (st_dev, and the mount's type and source from /proc/self/mountinfo), the block
devices underneath it (/sys/dev/block/MAJ:MIN, partitions to their disk, device-mapper
and md to their members), and for the checkpoint path a real write as the training user.
It never judges: bringup/checks/storage.py says whether the two share a device, whether
checkpoints reach durable storage and whether the user can write them.

The write test is real: a file created and removed in the directory, by the user the
job runs as. As root the probe forks and drops to that user (setgroups, setgid, setuid);
as anyone else it can only write as itself, and for another user it reads the mode bits.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from bringup.node.result import ProbeOutput

MOUNTINFO = Path("/proc/self/mountinfo")
SYS_DEV_BLOCK = Path("/sys/dev/block")


@dataclass
class Params:
    dataset_dir: str = ""  # "" = not configured: the checks say how to set it
    checkpoint_dir: str = ""
    user: str = ""  # the training user; "" = the user this probe runs as
    timeout_s: float = 10.0  # per path: a hung network mount never answers stat()


@dataclass
class Mount:
    """The /proc/self/mountinfo line of the mount a path lives on."""

    mount_point: str
    fs_type: str  # "ext4", "xfs", "nfs4", "tmpfs", "overlay", ...
    source: str  # "/dev/nvme0n1p2", "server:/export", "tmpfs", "overlay"
    device: str  # "major:minor" as mountinfo prints it
    options: str  # the per-mount options: "rw,relatime"


@dataclass
class StoragePath:
    role: str  # "dataset" or "checkpoint"
    path: str
    error: str | None = None  # why it could not be looked at (missing, hung mount)
    st_dev: str | None = None  # "major:minor" of the file system the path is on
    mount: Mount | None = None
    block_devices: list[str] | None = None  # whole disks underneath: ["nvme0n1"]; [] none
    user: str | None = None  # who the write test ran as
    writable: bool | None = None  # checkpoint only: the user could create a file there
    write_error: str | None = None  # what the write test said when it could not write
    write_method: str | None = None  # "as the user", "mode bits" (another user, not root)


@dataclass
class StorageFacts:
    paths: list[StoragePath]


FACTS = StorageFacts


def collect(params: Params) -> ProbeOutput:
    mounts = parse_mountinfo(_read(MOUNTINFO))
    user = params.user or _current_user()
    found = []
    for role, path in (("dataset", params.dataset_dir), ("checkpoint", params.checkpoint_dir)):
        if path:
            found.append(look_at(role, path, mounts, user, params.timeout_s))
    return ProbeOutput(StorageFacts(found), raw={"mountinfo.txt": _read(MOUNTINFO)})


def look_at(role: str, path: str, mounts: list[Mount], user: str, timeout_s: float) -> StoragePath:
    result = StoragePath(role=role, path=path)
    st, error = _stat(path, timeout_s)
    if st is None:
        result.error = error
        return result
    result.st_dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    real = os.path.realpath(path)
    result.mount = mount_of(real, mounts)
    result.block_devices = block_devices(result.st_dev, result.mount)
    if role == "checkpoint":
        result.user = user
        result.writable, result.write_error, result.write_method = can_write(path, user)
    return result


# --- mounts -------------------------------------------------------------------------------


def parse_mountinfo(text: str) -> list[Mount]:
    """Every line of /proc/<pid>/mountinfo (proc(5)): ID PARENT MAJ:MIN ROOT MOUNT_POINT
    OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS; octal escapes (\\040) undone."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        dash = fields.index("-")
        after = fields[dash + 1 :]
        if dash < 6 or not after:
            continue
        mounts.append(
            Mount(
                mount_point=_unescape(fields[4]),
                fs_type=after[0] if after else "",
                source=_unescape(after[1]) if len(after) > 1 else "",
                device=fields[2],
                options=fields[5],
            )
        )
    return mounts


def mount_of(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount a (resolved) path lives on: the longest mount point above it, the last
    one mounted where several share a mount point (the one on top)."""
    best: Mount | None = None
    for mount in mounts:
        point = mount.mount_point.rstrip("/") or "/"
        inside = path == point or path.startswith(point + "/") or point == "/"
        if inside and (best is None or len(point) >= len(best.mount_point.rstrip("/") or "/")):
            best = mount
    return best


def _unescape(text: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


# --- block devices ------------------------------------------------------------------------


def block_devices(st_dev: str, mount: Mount | None, sys_block: Path = SYS_DEV_BLOCK) -> list[str]:
    """The whole disks a file system sits on; [] for one without any (tmpfs, NFS, overlay).

    A file system on an anonymous device (major 0: btrfs, overlay, tmpfs) is looked up by
    its mount source when that is a device node (/dev/nvme0n1p2 for btrfs).
    """
    major = st_dev.split(":")[0]
    if major == "0" and mount is not None and mount.source.startswith("/dev/"):
        try:
            rdev = os.stat(mount.source).st_rdev
        except OSError:
            return []
        st_dev = f"{os.major(rdev)}:{os.minor(rdev)}"
    node = sys_block / st_dev
    if not node.exists():
        return []
    return sorted(set(_disks(node.resolve())))


def _disks(node: Path) -> list[str]:
    """A partition's disk, a dm/md device's members' disks, or the disk itself."""
    slaves = node / "slaves"
    members = sorted(slaves.iterdir()) if slaves.is_dir() else []
    if members:
        return [d for member in members for d in _disks(member.resolve())]
    if (node / "partition").exists():
        return [node.parent.name]
    return [node.name]


# --- writing as the training user ---------------------------------------------------------


def can_write(path: str, user: str) -> tuple[bool, str | None, str]:
    """(writable, what the kernel said, how it was found) for `user` in directory `path`."""
    if user == _current_user():
        ok, error = _try_write(path)
        return ok, error, "as the user"
    if os.geteuid() == 0:
        return (*_write_as(path, user), "as the user")
    return (*_mode_bits(path, user), "mode bits")


def _try_write(path: str) -> tuple[bool, str | None]:
    name = os.path.join(path, f".bringup-write-test-{os.getpid()}")
    try:
        fd = os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except OSError as exc:
        return False, exc.strerror or str(exc)
    try:
        os.write(fd, b"bringup")
        os.fsync(fd)
    except OSError as exc:
        return False, exc.strerror or str(exc)
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name)
    return True, None


def _write_as(path: str, user: str) -> tuple[bool, str | None]:
    """Fork, become the user, try the write; the child's answer comes back on a pipe."""
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return False, f"no user {user!r} on this node"
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.close(read_end)
            os.setgroups(os.getgrouplist(user, entry.pw_gid))
            os.setgid(entry.pw_gid)
            os.setuid(entry.pw_uid)
            ok, error = _try_write(path)
            os.write(write_end, ("ok" if ok else f"no:{error}").encode())
        except BaseException as exc:
            os.write(write_end, f"no:{exc}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        answer = pipe.read().decode(errors="replace")
    os.waitpid(pid, 0)
    return (True, None) if answer == "ok" else (False, answer.removeprefix("no:"))


def _mode_bits(path: str, user: str) -> tuple[bool, str | None]:
    """Whether owner, group or other bits let `user` create files in `path` (no ACLs)."""
    try:
        entry = pwd.getpwnam(user)
        st = os.stat(path)
    except KeyError:
        return False, f"no user {user!r} on this node"
    except OSError as exc:
        return False, exc.strerror or str(exc)
    groups = {g.gr_gid for g in grp.getgrall() if user in g.gr_mem} | {entry.pw_gid}
    if entry.pw_uid == st.st_uid:
        bits = st.st_mode >> 6
    elif st.st_gid in groups:
        bits = st.st_mode >> 3
    else:
        bits = st.st_mode
    if bits & 0o3 == 0o3:  # write and search
        return True, None
    return False, f"mode {st.st_mode & 0o7777:o}, owner uid {st.st_uid} gid {st.st_gid}"


# --- small helpers ------------------------------------------------------------------------


def _stat(path: str, timeout_s: float) -> tuple[os.stat_result | None, str | None]:
    """stat() in a thread: on a hung NFS or Lustre mount it never returns."""
    answer: list[os.stat_result | OSError] = []

    def look() -> None:
        try:
            answer.append(os.stat(path))
        except OSError as exc:
            answer.append(exc)

    worker = threading.Thread(target=look, daemon=True)
    worker.start()
    worker.join(timeout_s)
    if not answer:
        return None, f"stat did not return within {timeout_s:g} s (hung network mount?)"
    got = answer[0]
    if isinstance(got, OSError):
        return None, got.strerror or str(got)
    if not os.path.isdir(path):
        return None, "not a directory"
    return got, None


def _current_user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
