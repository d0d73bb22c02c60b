"""The `nvme` probe: what the data and checkpoint paths deliver, measured with fio.

For each path (a directory on the NVMe filesystem) it runs five fio tests and keeps each
JSON report in raw: sequential read, sequential write, 4k random read, a concurrent read
(one reader per GPU, as when every GPU pulls its shard at once) and a checkpoint write
(one file written then fsynced: seconds until it is durable).

Non-destructive by default: fio's files go under `<path>/.bringup-fio-<pid>-<random>/`, a
new directory only this user can enter, and are removed afterwards, also on failure. A
path others could change under fio (a symlink, owned by another user, writable by others
without the sticky bit: bringup/node/workdir.py) is refused: fio writes as root through
whatever it finds there. Raw block devices are tested only with
`destructive=True`, because the write tests overwrite them.

Memory is not a device: the probe records whether each path's filesystem sits on a block
device (`on_block_device`), and the default path (/tmp, when no --data-dir is given) is
measured only when it does: fio would otherwise write gigabytes into memory (tmpfs) for
a figure the verdict cannot use (checks/nvme.py makes any such figure an ERROR).

A failure is kept where it happened: a path that cannot be tested records its error and
the other paths are still measured; a failed fio test records its error and the other
tests of that path still run.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import mmap
import os
import shutil
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from bringup.node import progress
from bringup.node import tool as command
from bringup.node.parsers.fio import FioResult, parse_fio_json
from bringup.node.result import ParseError, ProbeError, ProbeOutput
from bringup.node.workdir import UnsafeDirectory, private_dir

GIB = 1024**3
SCRATCH_PREFIX = ".bringup-fio-"
STALE_AFTER_S = 6 * 3600  # a scratch directory this old, of a dead pid, is a killed run's
# Tests whose file the next test reuses (seq.dat is laid out once for three tests).
REUSED_FILES = ("seq_read", "seq_write")
FALLBACK_ENGINE = "psync"  # synchronous, in every fio build; iodepth is then 1
# Filesystems where an O_DIRECT refusal is expected because they live in memory.
MEMORY_FILESYSTEMS = ("tmpfs", "ramfs")
# Filesystems that are never a device of their own: memory, or layers over another one.
NOT_A_DEVICE = (*MEMORY_FILESYSTEMS, "overlay", "squashfs", "fuse.lxcfs", "proc", "sysfs")
# Where fio writes when no path is given (--data-dir, bringup_data_dirs): only if it is
# on a block device.
DEFAULT_PATH = "/tmp"


@dataclass
class Params:
    """What to test and how hard; suites set these by name."""

    # Data and checkpoint directories; each should be its own mount point. Paths on the
    # same filesystem (same st_dev) are measured once and all reported. None: DEFAULT_PATH,
    # measured only when it is on a block device.
    paths: list[str] | None = None
    size_bytes: int = 1 * GIB  # per file of the read/write tests
    runtime_s: int = 20  # per time-based test, after the ramp
    ramp_s: int = 2  # fio ramp_time: not counted, lets queues and caches settle
    seq_block: str = "1M"
    seq_iodepth: int = 32
    rand_block: str = "4k"
    rand_iodepth: int = 64
    readers: int = 0  # concurrent readers; 0 = one per GPU in /dev/nvidia[0-9]* (at least 1)
    checkpoint_bytes: int = 2 * GIB
    destructive: bool = False  # allow `devices` (raw block devices, overwritten)
    devices: list[str] = field(default_factory=list)
    timeout_s: int = 300  # hard limit on each fio run beyond runtime + ramp (layout, fsync)


@dataclass
class NvmePath:
    """What one path (a directory, or a raw device when destructive) delivered."""

    path: str
    mount_point: str | None = None
    mount_device: str | None = None  # as /proc/mounts names it, e.g. /dev/nvme0n1p1
    filesystem: str | None = None  # ext4, xfs, tmpfs, ...
    # Whether the filesystem sits on a block device (None: not known, an older record).
    on_block_device: bool | None = None
    free_bytes: int | None = None
    direct: bool = True  # False: O_DIRECT refused, fio ran buffered (page cache measured)
    engine: str | None = None  # fio ioengine used, libaio or psync
    same_mount_as: str | None = None  # measured once, under this other path
    error: str | None = None  # the path could not be tested at all
    test_errors: dict[str, str] = field(default_factory=dict)  # fio test name -> error
    seq_read_bytes_per_s: float | None = None
    seq_write_bytes_per_s: float | None = None
    rand_read_iops: float | None = None
    rand_read_p99_s: float | None = None
    concurrent_read_bytes_per_s: float | None = None  # all readers together
    concurrent_readers: int | None = None
    checkpoint_bytes: int | None = None
    checkpoint_seconds: float | None = None  # written and fsynced: durable
    checkpoint_bytes_per_s: float | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class NvmeFacts:
    """Every path the nvme probe tested on one node, in the order asked."""

    paths: list[NvmePath] = field(default_factory=list)


FACTS = NvmeFacts


@dataclass
class Mount:
    """One line of /proc/mounts."""

    device: str
    mount_point: str
    filesystem: str


@dataclass
class Target:
    """Where one path's fio runs do their I/O: files in a scratch directory, or a raw device."""

    path: str
    scratch: str | None = None  # directory for fio's files
    device: str | None = None  # raw block device (destructive mode)
    engine: str = "libaio"
    direct: bool = True


def collect(params: Params) -> ProbeOutput:
    """Run the fio tests on every path and raw device asked for."""
    fio = command.which("fio")
    if fio is None:
        raise ProbeError("fio not found: install fio (apt-get install fio)")
    mounts = read_mounts()
    readers = params.readers or count_gpus()
    raw: dict[str, str] = {}
    results: list[NvmePath] = []
    measured: dict[int, NvmePath] = {}  # st_dev -> the path that measured it
    if params.paths is None:
        results.append(_default_path(fio, params, readers, mounts, measured, raw))
    for path in params.paths or []:
        results.append(_measure_path(fio, path, params, readers, mounts, measured, raw))
    for device in params.devices:
        results.append(_measure_device(fio, device, params, readers, mounts, raw))
    return ProbeOutput(facts=NvmeFacts(paths=results), raw=raw)


# --- the node: mounts, GPUs, free space, O_DIRECT --------------------------------------


def read_mounts(text: str | None = None) -> list[Mount]:
    """Mounts from /proc/mounts (or the given text); octal escapes like \\040 decoded."""
    if text is None:
        try:
            with open("/proc/mounts", encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            return []  # not Linux, or /proc hidden: mount details stay None
    mounts = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            mounts.append(Mount(_unescape(parts[0]), _unescape(parts[1]), parts[2]))
    return mounts


def _unescape(field_text: str) -> str:
    # /proc/mounts writes space, tab, newline and backslash as \040 \011 \012 \134.
    for code in ("040", "011", "012", "134"):
        field_text = field_text.replace("\\" + code, chr(int(code, 8)))
    return field_text


def mount_of(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount holding path: the longest mount point that is a prefix of it (last wins)."""
    real = os.path.realpath(path)
    best: Mount | None = None
    for mount in mounts:
        point = mount.mount_point.rstrip("/") + "/"
        if (real + "/").startswith(point) and (
            best is None or len(mount.mount_point) >= len(best.mount_point)
        ):
            best = mount
    return best


def on_block_device(path: str, mount: Mount | None) -> bool | None:
    """Whether the filesystem holding `path` sits on a block device; None: cannot tell.

    The kernel lists every block device under /sys/dev/block/MAJOR:MINOR; tmpfs, overlay
    and other pseudo filesystems have an anonymous device (major 0) that is not there.
    btrfs and ZFS also report an anonymous st_dev, so the mount's source is asked too.
    """
    if mount is not None and mount.filesystem in NOT_A_DEVICE:
        return False
    try:
        st_dev = os.stat(path).st_dev
    except OSError:
        return None
    if os.path.exists(f"/sys/dev/block/{os.major(st_dev)}:{os.minor(st_dev)}"):
        return True
    if mount is not None and mount.device.startswith("/dev/"):
        with contextlib.suppress(OSError):
            return stat.S_ISBLK(os.stat(mount.device).st_mode)
    return False


def count_gpus() -> int:
    """NVIDIA GPUs by their device nodes (no driver call); at least 1 reader."""
    return max(1, len(glob.glob("/dev/nvidia[0-9]*")))


def space_needed(params: Params, readers: int) -> int:
    """Bytes the largest test keeps on disk at once (each test's files go before the next)."""
    return max(params.size_bytes * max(readers, 1), params.checkpoint_bytes)


def accepts_o_direct(directory: str) -> bool:
    """Whether the filesystem takes an O_DIRECT write; EINVAL means it refuses (tmpfs, ramfs).

    Other errors (permission, read-only) are the caller's: they stop the path, not fio mode.
    """
    probe_file = os.path.join(directory, ".odirect-check")
    # O_DIRECT needs an aligned buffer: an anonymous mmap is page aligned.
    buffer = mmap.mmap(-1, 4096)
    try:
        fd = os.open(probe_file, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o600)
        try:
            os.write(fd, buffer)
        finally:
            os.close(fd)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return False
        raise
    finally:
        buffer.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(probe_file)
    return True


def human_bytes(n: float) -> str:
    """'3.2 GB' or '16.8 MB' (decimal units, as df -H and fio print them)."""
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def slug(path: str) -> str:
    """A file-name-safe form of a path for raw output names: /mnt/data -> mnt_data."""
    return path.strip("/").replace("/", "_") or "root"


# --- one path ---------------------------------------------------------------------------


def _measure_path(
    fio: str,
    path: str,
    params: Params,
    readers: int,
    mounts: list[Mount],
    measured: dict[int, NvmePath],
    raw: dict[str, str],
) -> NvmePath:
    """Test one directory, or report it as a copy of the path on the same filesystem."""
    result = _located(path, mounts)
    try:
        st_dev = os.stat(path).st_dev
    except OSError as exc:
        result.error = f"cannot test {path}: {exc.strerror}"
        return result
    if st_dev in measured:
        first = measured[st_dev]
        note = f"same filesystem as {first.path}: measured once, figures are that path's"
        return replace(first, path=path, same_mount_as=first.path, notes=[*first.notes, note])
    measured[st_dev] = result
    error = _check_free_space(path, params, readers, result)
    if error is None:
        error = _run_in_scratch(fio, path, params, readers, result, raw)
    result.error = error
    return result


def _located(path: str, mounts: list[Mount]) -> NvmePath:
    """A path's result so far: its mount, filesystem and whether that is a device."""
    result = NvmePath(path=path)
    mount = mount_of(path, mounts)
    if mount is not None:
        result.mount_point, result.mount_device = mount.mount_point, mount.device
        result.filesystem = mount.filesystem
    result.on_block_device = on_block_device(path, mount)
    return result


def _default_path(
    fio: str,
    params: Params,
    readers: int,
    mounts: list[Mount],
    measured: dict[int, NvmePath],
    raw: dict[str, str],
) -> NvmePath:
    """DEFAULT_PATH when no path was given: measured only on a block device."""
    result = _located(DEFAULT_PATH, mounts)
    if result.on_block_device is False:
        what = result.filesystem or "not a block device"
        result.error = (
            f"no --data-dir given and {DEFAULT_PATH} is {what}, not on a block device: "
            "not measured (it would measure memory, not a device): "
            "give --data-dir on the NVMe array"
        )
        return result
    return _measure_path(fio, DEFAULT_PATH, params, readers, mounts, measured, raw)


def _check_free_space(path: str, params: Params, readers: int, result: NvmePath) -> str | None:
    """An error line when the files of the largest test would not fit."""
    try:
        stats = os.statvfs(path)
    except OSError as exc:
        return f"cannot read the free space of {path}: {exc.strerror}"
    if stats.f_blocks == 0:
        # ramfs and some pseudo filesystems report no size at all: nothing to compare.
        result.notes.append(f"{path} reports no size (ramfs?): free space not checked")
        return None
    result.free_bytes = stats.f_bavail * stats.f_frsize
    need = space_needed(params, readers)
    if result.free_bytes < need:
        return (
            f"not enough free space on {path}: need {human_bytes(need)}, "
            f"{human_bytes(result.free_bytes)} free"
        )
    return None


def _run_in_scratch(
    fio: str, path: str, params: Params, readers: int, result: NvmePath, raw: dict[str, str]
) -> str | None:
    """Make the scratch directory, run the tests in it, and always remove it."""
    _remove_stale_scratch(path)
    try:
        scratch = str(private_dir(Path(path), f"{SCRATCH_PREFIX}{os.getpid()}-"))
    except UnsafeDirectory as exc:
        return f"cannot create a scratch directory in {path}: {exc}"
    try:
        target = Target(path=path, scratch=scratch)
        try:
            target.direct = accepts_o_direct(scratch)
        except OSError as exc:
            return f"cannot write to {path}: {exc.strerror}"
        if not target.direct:
            result.notes.append(
                f"O_DIRECT refused on {path} ({result.filesystem or 'unknown filesystem'}): "
                "fio ran buffered, so the page cache was measured, not the device"
            )
        _run_tests(fio, target, params, readers, result, raw)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if os.path.exists(scratch):
            result.notes.append(f"could not remove {scratch}: remove it by hand")
    return None


def _remove_stale_scratch(path: str) -> None:
    """Remove scratch directories left by an earlier run that was killed.

    Only when their pid is gone and they are old: a probe in another pid namespace (a
    container) sharing this filesystem may be using one right now.
    """
    for stale in glob.glob(os.path.join(path, f"{SCRATCH_PREFIX}*")):
        # .bringup-fio-<pid>-<random> (or .bringup-fio-<pid> from older versions)
        pid = os.path.basename(stale)[len(SCRATCH_PREFIX) :].split("-")[0]
        try:
            st = os.lstat(stale)
        except OSError:
            continue
        ours = stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()  # never a symlink
        age_s = time.time() - st.st_mtime
        gone = pid.isdigit() and not os.path.exists(f"/proc/{pid}")
        if ours and gone and age_s > STALE_AFTER_S:
            shutil.rmtree(stale, ignore_errors=True)


def _measure_device(
    fio: str,
    device: str,
    params: Params,
    readers: int,
    mounts: list[Mount],
    raw: dict[str, str],
) -> NvmePath:
    """Test a raw block device (destructive only, and never a mounted one)."""
    result = NvmePath(path=device, mount_device=device)
    if not params.destructive:
        result.error = (
            f"raw device {device} not tested: set destructive: true to allow it "
            "(the write tests overwrite its data)"
        )
        return result
    in_use = [m for m in mounts if m.device.startswith(device)]
    if in_use:
        result.error = f"refusing to write to {device}: it is mounted at {in_use[0].mount_point}"
        return result
    _run_tests(fio, Target(path=device, device=device), params, readers, result, raw)
    return result


# --- the fio tests ----------------------------------------------------------------------


def _run_tests(
    fio: str,
    target: Target,
    params: Params,
    readers: int,
    result: NvmePath,
    raw: dict[str, str],
) -> None:
    """Run the five tests in order; each failure is recorded and the next test still runs."""
    result.direct = target.direct
    # argv is built just before each run: the engine may change after the first one.
    tests: list[tuple[str, Callable[[], list[str]]]] = [
        ("seq_read", lambda: seq_read_argv(target, params)),
        ("seq_write", lambda: seq_write_argv(target, params)),
        ("rand_read", lambda: rand_read_argv(target, params)),
        ("concurrent_read", lambda: concurrent_read_argv(target, params, readers)),
        ("checkpoint", lambda: checkpoint_argv(target, params)),
    ]
    for index, (name, build_argv) in enumerate(tests, start=1):
        phase = f"{result.path} {name.replace('_', ' ')}"
        progress.report(phase=phase, index=index, of=len(tests))
        report = _run_fio(fio, name, build_argv, target, params, result, raw)
        if report is not None:
            record_test(name, report, readers, params, result)
        if name not in REUSED_FILES and target.scratch:
            _remove_files(target.scratch)  # free the space before the next test lays out its own
    result.engine = target.engine


def common_options(name: str, target: Target) -> list[str]:
    """Options every test shares."""
    return [
        f"--name={name}",
        "--output-format=json",
        f"--ioengine={target.engine}",
        f"--direct={int(target.direct)}",
    ]


def timed_options(params: Params) -> list[str]:
    """A time-based test: loops over its file for runtime_s after a ramp."""
    return ["--time_based", f"--runtime={params.runtime_s}", f"--ramp_time={params.ramp_s}"]


def file_options(target: Target, file_name: str) -> list[str]:
    """One file in the scratch directory, or the raw device."""
    if target.device is not None:
        return [f"--filename={target.device}"]
    return [f"--filename={os.path.join(target.scratch or '', file_name)}"]


def seq_read_argv(target: Target, params: Params) -> list[str]:
    """Sequential read, large blocks, deep queue: the streaming ceiling of the device."""
    return [
        *common_options("seq_read", target),
        f"--size={params.size_bytes}",
        *file_options(target, "seq.dat"),
        "--rw=read",
        f"--bs={params.seq_block}",
        f"--iodepth={params.seq_iodepth}",
        *timed_options(params),
    ]


def seq_write_argv(target: Target, params: Params) -> list[str]:
    """Sequential write over the same file (already laid out by the read test)."""
    return [
        *common_options("seq_write", target),
        f"--size={params.size_bytes}",
        *file_options(target, "seq.dat"),
        "--rw=write",
        f"--bs={params.seq_block}",
        f"--iodepth={params.seq_iodepth}",
        *timed_options(params),
    ]


def rand_read_argv(target: Target, params: Params) -> list[str]:
    """4k random read at a deep queue: IOPS and tail latency (dataloaders, small files)."""
    return [
        *common_options("rand_read", target),
        f"--size={params.size_bytes}",
        *file_options(target, "seq.dat"),
        "--rw=randread",
        f"--bs={params.rand_block}",
        f"--iodepth={params.rand_iodepth}",
        "--norandommap",  # no need to touch every block once: we sample, not verify
        *timed_options(params),
    ]


def concurrent_read_argv(target: Target, params: Params, readers: int) -> list[str]:
    """One reader per GPU, each on its own file, all at once; reported as one aggregate."""
    if target.device is not None:
        # Each reader its own region of the device, as if each read its own file.
        where = [f"--filename={target.device}", f"--offset_increment={params.size_bytes}"]
    else:
        where = [f"--directory={target.scratch}"]  # fio names the files <name>.<job>.0
    return [
        *common_options("concurrent_read", target),
        f"--size={params.size_bytes}",
        *where,
        "--rw=read",
        f"--bs={params.seq_block}",
        f"--iodepth={params.seq_iodepth}",
        f"--numjobs={readers}",
        "--group_reporting",
        *timed_options(params),
    ]


def checkpoint_argv(target: Target, params: Params) -> list[str]:
    """One checkpoint-sized file written once, then fsynced: fio's runtime covers the fsync."""
    return [
        *common_options("checkpoint", target),
        *file_options(target, "checkpoint.dat"),
        f"--size={params.checkpoint_bytes}",
        "--rw=write",
        f"--bs={params.seq_block}",
        f"--iodepth={params.seq_iodepth}",
        "--end_fsync=1",
    ]


def _run_fio(
    fio: str,
    name: str,
    build_argv: Callable[[], list[str]],
    target: Target,
    params: Params,
    result: NvmePath,
    raw: dict[str, str],
) -> FioResult | None:
    """Run one fio test (switching to psync once if libaio is missing); None on failure."""
    timeout = params.runtime_s + params.ramp_s + params.timeout_s
    run = command.run([fio, *build_argv()], timeout_s=timeout)
    if run.returncode != 0 and target.engine != FALLBACK_ENGINE and _engine_missing(run.stderr):
        result.notes.append(
            f"fio ioengine {target.engine} unavailable: using {FALLBACK_ENGINE} "
            "(queue depth 1, lower figures than the device can reach)"
        )
        target.engine = FALLBACK_ENGINE
        run = command.run([fio, *build_argv()], timeout_s=timeout)
    stem = f"fio-{slug(target.path)}-{name}"
    if run.stdout:
        raw[f"{stem}.json"] = run.stdout
    if run.stderr:
        raw[f"{stem}.stderr.txt"] = run.stderr
    if run.timed_out:
        result.test_errors[name] = f"fio {name} on {target.path} killed after {timeout:.0f} s"
        return None
    try:
        report = parse_fio_json(run.stdout)
    except ParseError as exc:
        reason = _last_line(run.stderr) or str(exc)
        result.test_errors[name] = f"fio {name} on {target.path} failed: {reason}"
        return None
    failed = [job for job in report.jobs if job.error]
    if failed or not report.jobs:
        reason = os.strerror(failed[0].error) if failed else "no job in its report"
        result.test_errors[name] = f"fio {name} on {target.path} failed: {reason}"
        return None
    return report


def _engine_missing(stderr: str) -> bool:
    # fio: "fio: engine libaio not loadable" / "fio: failed to load engine"
    return "engine" in stderr and ("not loadable" in stderr or "failed to load" in stderr)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def record_test(
    name: str, report: FioResult, readers: int, params: Params, result: NvmePath
) -> None:
    """Copy the figures of one test into the path's facts (summed over jobs, if several)."""
    read_bw = sum(job.read_bw_bytes for job in report.jobs)
    write_bw = sum(job.write_bw_bytes for job in report.jobs)
    if name == "seq_read":
        result.seq_read_bytes_per_s = read_bw
    elif name == "seq_write":
        result.seq_write_bytes_per_s = write_bw
    elif name == "rand_read":
        result.rand_read_iops = sum(job.read_iops for job in report.jobs)
        result.rand_read_p99_s = report.jobs[0].read_clat_p99_s
    elif name == "concurrent_read":
        result.concurrent_read_bytes_per_s = read_bw
        result.concurrent_readers = readers
    elif name == "checkpoint":
        result.checkpoint_bytes = params.checkpoint_bytes
        result.checkpoint_seconds = max(job.runtime_s for job in report.jobs)
        result.checkpoint_bytes_per_s = write_bw


def _remove_files(directory: str) -> None:
    for entry in os.scandir(directory):
        with contextlib.suppress(OSError):
            os.unlink(entry.path)
