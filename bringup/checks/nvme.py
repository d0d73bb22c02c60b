"""NVMe checks: judge what the nvme probe (fio) measured on the data and checkpoint paths.

Every judge is pure: `NvmeFacts + Profile -> list[Finding]`. A problem is one finding that
names the path ("/data: sequential read 1.20 GB/s ..."); when all is well a judge returns
one PASS finding listing every path. A figure from memory instead of the device (O_DIRECT
refused, a tmpfs or overlay path, any path not on a block device) is never a PASS nor a
WARN: it is an ERROR, because the NVMe was not measured at all (`--data-dir /dev/shm`
would otherwise accept a node on the speed of its RAM).
"""

from __future__ import annotations

from collections.abc import Callable

from bringup.checks import Check, finding
from bringup.findings import Finding, Status
from bringup.node.probes.nvme import NOT_A_DEVICE, NvmeFacts, NvmePath
from bringup.profile import Profile
from bringup.words import plural

PROBE = "nvme"
GB = 1e9  # GB/s in messages is 1e9 B/s, as fio prints it (docs/reference.md#units)

SLOW_DISK_ACTION = (
    "check the NVMe is PCIe Gen4/5 x4 and not behind a RAID/HBA; see `nvme list`, `lspci -vv`"
)
MEMORY_ACTION = (
    "give --data-dir on the NVMe array (a directory on its ext4/xfs filesystem), "
    "not tmpfs/ramfs/overlay"
)
# What every figure of a path that is no device says, after why.
NOT_A_DEVICE_TEXT = "measured memory, not a device: give --data-dir on the NVMe array"
UNMEASURED_ACTION = "fix the cause above and rerun the nvme probe; fio's output is in raw/"

# A judge of one path returns a problem finding, or the text that goes into the PASS line.
PathJudge = Callable[[NvmePath], "Finding | str"]


# ---------------------------------------------------------------------------------------
# Small shared helpers


def path_label(path: NvmePath) -> str:
    """'/data', or '/ckpt (same filesystem as /data)' when it was measured once for both."""
    if path.same_mount_as:
        return f"{path.path} (same filesystem as {path.same_mount_as})"
    return path.path


def at_least(floor_gb_s: float | None) -> str | None:
    """'>= 3.0 GB/s', the expected text of a floor (None: informational)."""
    return None if floor_gb_s is None else f">= {floor_gb_s:.1f} GB/s"


def gb_s(bytes_per_s: float) -> float:
    """B/s -> GB/s, rounded as messages show it."""
    return round(bytes_per_s / GB, 2)


def _gb_s_or_none(bytes_per_s: float | None) -> float | None:
    return None if bytes_per_s is None else gb_s(bytes_per_s)


def memory_reason(path: NvmePath) -> str | None:
    """Why a figure is memory rather than the device; None when the device was measured."""
    if not path.direct:
        return f"O_DIRECT refused on {path.path} ({path.filesystem or 'tmpfs?'})"
    if path.filesystem in NOT_A_DEVICE:
        return f"{path.path} is {path.filesystem}"
    if path.on_block_device is False:
        return f"{path.path} is not on a block device ({path.filesystem or 'unknown filesystem'})"
    return None


def _not_a_device(
    check: str,
    path: NvmePath,
    figure: str,
    reason: str,
    *,
    value: float | int,
    unit: str,
    expected: str | None = None,
) -> Finding:
    """The ERROR of a figure that measured memory: never a PASS or a WARN. The figure is
    kept (it was measured), the verdict says it is not the device's."""
    message = f"{path_label(path)}: {figure}, but {reason}: {NOT_A_DEVICE_TEXT}"
    return finding(
        check,
        Status.ERROR,
        message,
        value=value,
        expected=expected,
        unit=unit,
        action=MEMORY_ACTION,
    )


def _unmeasured(check: str, path: NvmePath, test: str) -> Finding | None:
    """The ERROR for a path, or one fio test of it, that could not be measured."""
    reason = path.error or path.test_errors.get(test)
    if reason is None:
        return None
    return finding(check, Status.ERROR, f"{path_label(path)}: {reason}", action=UNMEASURED_ACTION)


def judge_each_path(
    check: str,
    facts: NvmeFacts,
    test: str,
    judge_one: PathJudge,
    *,
    ok: str,
    value_of: Callable[[NvmePath], float | None],
    unit: str,
    expected: str | None = None,
) -> list[Finding]:
    """Judge every path; one PASS "n/N paths: <ok>: ..." when none had a problem.

    The PASS finding's value is the worst (lowest) path's figure, from `value_of`.
    """
    if not facts.paths:
        return [finding(check, Status.SKIP, "no paths were tested (the nvme probe's paths)")]
    problems: list[Finding] = []
    summaries: list[str] = []
    for path in facts.paths:
        error = _unmeasured(check, path, test)
        verdict = error if error is not None else judge_one(path)
        if isinstance(verdict, Finding):
            problems.append(verdict)
        else:
            summaries.append(verdict)
    if problems:
        return problems
    message = f"{len(summaries)}/{len(facts.paths)} paths: {ok}: {'; '.join(summaries)}"
    values = [v for v in map(value_of, facts.paths) if v is not None]
    worst = min(values) if values else None
    return [finding(check, Status.PASS, message, value=worst, expected=expected, unit=unit)]


def judge_floor(
    check: str,
    path: NvmePath,
    what: str,
    bytes_per_s: float | None,
    floor_gb_s: float | None,
    *,
    below: Status = Status.FAIL,
) -> Finding | str:
    """A bandwidth against a floor in GB/s (None: informational)."""
    label = path_label(path)
    if bytes_per_s is None:
        return finding(check, Status.ERROR, f"{label}: no {what} figure in the facts")
    value = gb_s(bytes_per_s)
    expected = at_least(floor_gb_s)
    reason = memory_reason(path)
    if reason is not None:
        figure = f"{what} {value:.2f} GB/s"
        return _not_a_device(
            check, path, figure, reason, value=value, expected=expected, unit="GB/s"
        )
    if floor_gb_s is not None and value < floor_gb_s:
        message = f"{label}: {what} {value:.2f} GB/s, below the {floor_gb_s:.1f} GB/s floor"
        return finding(
            check,
            below,
            message,
            value=value,
            expected=expected,
            unit="GB/s",
            action=SLOW_DISK_ACTION,
        )
    return f"{label} {value:.2f} GB/s"


# ---------------------------------------------------------------------------------------
# The checks


def judge_seq_read(facts: NvmeFacts, profile: Profile) -> list[Finding]:
    """Sequential read of every path at least the profile's floor."""
    floor = profile.nvme.seq_read_min_gb_s
    check = "nvme.seq_read"

    def one(path: NvmePath) -> Finding | str:
        return judge_floor(check, path, "sequential read", path.seq_read_bytes_per_s, floor)

    return judge_each_path(
        check,
        facts,
        "seq_read",
        one,
        ok=f"sequential read {at_least(floor)}",
        value_of=lambda p: _gb_s_or_none(p.seq_read_bytes_per_s),
        unit="GB/s",
        expected=at_least(floor),
    )


def judge_seq_write(facts: NvmeFacts, profile: Profile) -> list[Finding]:
    """Sequential write of every path at least the profile's floor."""
    floor = profile.nvme.seq_write_min_gb_s
    check = "nvme.seq_write"

    def one(path: NvmePath) -> Finding | str:
        return judge_floor(check, path, "sequential write", path.seq_write_bytes_per_s, floor)

    return judge_each_path(
        check,
        facts,
        "seq_write",
        one,
        ok=f"sequential write {at_least(floor)}",
        value_of=lambda p: _gb_s_or_none(p.seq_write_bytes_per_s),
        unit="GB/s",
        expected=at_least(floor),
    )


def judge_checkpoint(facts: NvmeFacts, profile: Profile) -> list[Finding]:
    """Seconds until a checkpoint is durable; against the profile's floor when it has one."""
    floor = profile.nvme.checkpoint_write_min_gb_s
    check = "nvme.checkpoint"

    def one(path: NvmePath) -> Finding | str:
        verdict = judge_floor(check, path, "checkpoint write", path.checkpoint_bytes_per_s, floor)
        if isinstance(verdict, Finding) or path.checkpoint_seconds is None:
            return verdict
        size = f"{(path.checkpoint_bytes or 0) / GB:.1f} GB"
        return f"{verdict} ({size} durable in {path.checkpoint_seconds:.1f} s)"

    ok = "checkpoint written and fsynced"
    ok += f" {at_least(floor)}" if floor is not None else " (no floor in the profile)"
    return judge_each_path(
        check,
        facts,
        "checkpoint",
        one,
        ok=ok,
        value_of=lambda p: _gb_s_or_none(p.checkpoint_bytes_per_s),
        unit="GB/s",
        expected=at_least(floor),
    )


def judge_concurrent_read(facts: NvmeFacts, profile: Profile) -> list[Finding]:
    """All GPUs' readers at once: the aggregate should not fall below one stream's floor.

    A WARN, not a FAIL: nvme.seq_read already fails a slow device; this one shows whether
    the device holds up when every GPU pulls its data at the same time.
    """
    floor = profile.nvme.seq_read_min_gb_s
    check = "nvme.concurrent_read"

    def one(path: NvmePath) -> Finding | str:
        readers = path.concurrent_readers or 1
        what = f"{plural(readers, 'reader')} at once, aggregate"
        verdict = judge_floor(
            check, path, what, path.concurrent_read_bytes_per_s, floor, below=Status.WARN
        )
        if isinstance(verdict, Finding):
            return verdict
        each = (path.concurrent_read_bytes_per_s or 0) / readers / GB
        return f"{verdict} with {plural(readers, 'reader')} ({each:.2f} GB/s each)"

    return judge_each_path(
        check,
        facts,
        "concurrent_read",
        one,
        ok=f"concurrent read aggregate {at_least(floor)}",
        value_of=lambda p: _gb_s_or_none(p.concurrent_read_bytes_per_s),
        unit="GB/s",
        expected=at_least(floor),
    )


def judge_rand_read(facts: NvmeFacts, profile: Profile) -> list[Finding]:
    """Random read IOPS and p99 latency: informational, no floor in the profile."""
    check = "nvme.rand_read"

    def one(path: NvmePath) -> Finding | str:
        label = path_label(path)
        if path.rand_read_iops is None:
            return finding(check, Status.ERROR, f"{label}: no random read figure in the facts")
        reason = memory_reason(path)
        iops = round(path.rand_read_iops)
        if reason is not None:
            return _not_a_device(
                check, path, f"random read {iops} IOPS", reason, value=iops, unit="IOPS"
            )
        p99 = "" if path.rand_read_p99_s is None else f", p99 {path.rand_read_p99_s * 1e3:.2f} ms"
        return f"{label} {iops} IOPS{p99}"

    return judge_each_path(
        check,
        facts,
        "rand_read",
        one,
        ok="random read (small blocks, deep queue)",
        value_of=lambda p: None if p.rand_read_iops is None else round(p.rand_read_iops),
        unit="IOPS",
    )


CHECKS: list[Check] = [
    Check("nvme.seq_read", PROBE, judge_seq_read, "sequential read per path vs the floor"),
    Check("nvme.seq_write", PROBE, judge_seq_write, "sequential write per path vs the floor"),
    Check("nvme.checkpoint", PROBE, judge_checkpoint, "checkpoint write + fsync: time to durable"),
    Check(
        "nvme.concurrent_read",
        PROBE,
        judge_concurrent_read,
        "one reader per GPU at once: aggregate read",
    ),
    Check("nvme.rand_read", PROBE, judge_rand_read, "random read IOPS (informational)"),
]
