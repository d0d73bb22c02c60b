"""Checks of a fio report someone sent (`bringup inspect result.json`).

The nvme probe's own runs are judged in nvme.py; a foreign report only says what each
job did, so only jobs that are plainly sequential streaming (rw=read/write with blocks of
128 KiB or more) are held to the profile's NVMe floors. The rest are reported, not judged.
"""

from __future__ import annotations

from bringup.checks import Check, finding
from bringup.checks.nvme import SLOW_DISK_ACTION
from bringup.findings import Finding, Status
from bringup.node.parsers.fio import FioJob, FioResult
from bringup.profile import Profile

STREAMING_BLOCK = 128 * 1024  # below this a "sequential" job measures IOPS, not bandwidth
GB = 1e9


def _summary(job: FioJob) -> str:
    parts = []
    if job.read_iops:
        parts.append(f"read {job.read_bw_bytes / GB:.2f} GB/s, {job.read_iops:,.0f} IOPS")
    if job.write_iops:
        parts.append(f"write {job.write_bw_bytes / GB:.2f} GB/s, {job.write_iops:,.0f} IOPS")
    mode = job.rw or "rw mode not in the report"
    return f"job {job.name!r} ({mode}): " + "; ".join(parts)


def _judge_job(job: FioJob, profile: Profile) -> Finding:
    if job.error:
        return finding("fio.jobs", Status.ERROR, f"job {job.name!r}: fio error {job.error}")
    if job.direct is False:
        message = f"{_summary(job)}: buffered I/O (direct=0), the page cache was measured"
        return finding("fio.jobs", Status.WARN, message, action="rerun fio with --direct=1")
    streaming = job.block_size_bytes is not None and job.block_size_bytes >= STREAMING_BLOCK
    if job.rw in ("read", "write") and streaming:
        is_read = job.rw == "read"
        floor = profile.nvme.seq_read_min_gb_s if is_read else profile.nvme.seq_write_min_gb_s
        measured = (job.read_bw_bytes if is_read else job.write_bw_bytes) / GB
        ok = measured >= floor
        return finding(
            "fio.jobs",
            Status.PASS if ok else Status.FAIL,
            f"{_summary(job)}: sequential {job.rw} {'>=' if ok else 'below'} {floor:g} GB/s",
            value=round(measured, 3),
            expected=f">= {floor:g} GB/s",
            unit="GB/s",
            action=None if ok else SLOW_DISK_ACTION,
        )
    reason = "not sequential streaming: reported, not judged against the floors"
    return finding("fio.jobs", Status.SKIP, f"{_summary(job)}: {reason}")


def judge_jobs(facts: FioResult, profile: Profile) -> list[Finding]:
    """One finding per job: sequential streaming jobs against the floors, others reported."""
    if not facts.jobs:
        return [finding("fio.jobs", Status.ERROR, "the fio report has no jobs")]
    return [_judge_job(job, profile) for job in facts.jobs]


CHECKS: list[Check] = [
    Check("fio.jobs", "fio", judge_jobs, "each job of a fio report; sequential ones vs floors"),
]
