"""Checks of nccl-tests results: did the run work, were the values right, is the bus fast.

Bus bandwidth is judged on large messages only (>= 1 GiB): small ones measure latency, and
nccl-tests' own "Avg bus bandwidth" averages every size, small ones included (REFERENCE.md
"NCCL all-reduce bus bandwidth"), so it is shown but never judged.
"""

from __future__ import annotations

from bringup.checks import Check, finding
from bringup.findings import Finding, Status
from bringup.probes.nccl import NcclFacts, NcclRow
from bringup.profile import Profile

CHECK = "nccl.allreduce_busbw"
GB = 1e9  # GB/s as nccl-tests prints it
LARGE_BYTES = 1 << 30  # "large messages": where busbw reaches its plateau


def judge_allreduce_busbw(facts: NcclFacts, profile: Profile) -> list[Finding]:
    """nccl.allreduce_busbw: the run worked, its values were right, its busbw meets the floor."""
    if not facts.complete or not facts.rows:
        return [_died(facts)]
    if facts.all_zero_busbw:
        return [_all_zero()]
    findings = _validation(facts)
    findings.append(_bandwidth(facts, profile))
    return findings


def _died(facts: NcclFacts) -> Finding:
    """ERROR: the run never reached its summary (or had no rows); say why in NCCL's words."""
    if facts.errors:
        reason = _first_error(facts.errors)
        more = f" (and {len(facts.errors) - 1} more error lines)" if len(facts.errors) > 1 else ""
        message = f"nccl-tests died after {len(facts.rows)} result rows: {reason}{more}"
        action = "fix the error above (rerun with NCCL_DEBUG=INFO for details), then rerun"
    elif facts.complete:
        message = "nccl-tests printed its summary but no result rows"
        action = "read the raw output: the size range or the launch was wrong; rerun"
    else:
        message = f"nccl-tests output ends after {len(facts.rows)} rows, before its summary"
        action = "the run was killed or timed out: read its raw output, then rerun"
    return finding(CHECK, Status.ERROR, message, action=action)


def _first_error(errors: list[str]) -> str:
    """The most telling error line: an NCCL WARN's text beats a "Test failure" line."""
    for line in errors:
        if "NCCL WARN" in line:
            return " ".join(line.split("NCCL WARN", 1)[1].split())
    return " ".join(errors[0].split())


def _all_zero() -> Finding:
    """ERROR: every rank ran alone (busbw factor 0), so the bus was never measured."""
    return finding(
        CHECK,
        Status.ERROR,
        "busbw is 0 at every size although data moved: each process ran as its own 1-rank "
        "job (nccl-tests built without MPI but launched under mpirun)",
        action="rebuild nccl-tests with `make MPI=1`, or launch one process with -g N",
    )


def _validation(facts: NcclFacts) -> list[Finding]:
    """FAIL when nccl-tests found wrong values; nothing when it found none or did not check."""
    wrong_rows = [r for r in facts.rows if (r.oop_wrong or 0) > 0 or (r.ip_wrong or 0) > 0]
    out_of_bounds = facts.out_of_bounds or 0
    if not wrong_rows and out_of_bounds == 0:
        return []
    # Old output has no count per row, only the largest error: name the rows where it is > 0.
    suspect = wrong_rows or [
        r for r in facts.rows if (r.oop_max_error or 0) > 0 or (r.ip_max_error or 0) > 0
    ]
    sizes = ", ".join(_size(r.size_bytes) for r in suspect) or "not shown"
    return [
        finding(
            CHECK,
            Status.FAIL,
            f"{facts.collective or 'the collective'} returned wrong values: "
            f"{out_of_bounds} out of bounds, {len(wrong_rows)} rows with #wrong > 0 "
            f"(at sizes: {sizes})",
            value=max(out_of_bounds, len(wrong_rows)),
            expected="0",
            unit="wrong values",
            action="data corruption: run `dcgmi diag -r 3`, look for Xid/ECC/row-remap errors "
            "on every GPU of the run, and rerun before trusting these nodes",
        )
    ]


def _bandwidth(facts: NcclFacts, profile: Profile) -> Finding:
    """Judge all-reduce busbw on large messages against the profile's floor."""
    if facts.collective != "all_reduce":
        what = facts.collective or "a collective the output does not name"
        return finding(
            CHECK,
            Status.SKIP,
            f"no floor for {what} in the profile; peak busbw "
            f"{_gb(facts.peak_busbw_bytes_per_s)} GB/s",
        )
    floor_gb_s = profile.nccl.allreduce_busbw_min_gb_s
    expected = f">= {floor_gb_s:g} GB/s"
    largest = max(facts.rows, key=lambda r: r.size_bytes)
    large = [r for r in facts.rows if r.size_bytes >= LARGE_BYTES]
    avg = f"nccl-tests Avg bus bandwidth {_gb(facts.avg_busbw_bytes_per_s)} GB/s (all sizes)"
    if not large:
        best = max(facts.rows, key=_busbw)
        return finding(
            CHECK,
            Status.WARN,
            f"largest message {_size(largest.size_bytes)} is too small to judge the bus "
            f"(needs >= 1 GiB); peak busbw {_gb(_busbw(best))} GB/s at {_size(best.size_bytes)}; "
            f"{avg}",
            value=round(_busbw(best) / GB, 2),
            expected=expected,
            unit="GB/s",
            action="rerun all_reduce_perf with -e 8G (or larger) to reach the bandwidth plateau",
        )
    best = max(large, key=_busbw)
    busbw_gb_s = _busbw(best) / GB
    message = (
        f"all_reduce busbw {busbw_gb_s:.2f} GB/s at {_size(best.size_bytes)} "
        f"(best of messages >= 1 GiB; {_gb(_busbw(largest))} GB/s at the largest, "
        f"{_size(largest.size_bytes)}), floor {floor_gb_s:g} GB/s"
        f"{f' over {facts.nranks} ranks' if facts.nranks else ''}; {avg}, not judged"
    )
    ok = busbw_gb_s >= floor_gb_s
    return finding(
        CHECK,
        Status.PASS if ok else Status.FAIL,
        message,
        value=round(busbw_gb_s, 2),
        expected=expected,
        unit="GB/s",
        action=None
        if ok
        else "check NVLink/NVSwitch (`nvidia-smi topo -m`, `nvidia-smi nvlink -s`) and, across "
        "nodes, the NICs (ib_write_bw per NIC, NCCL_ALGO=RING); compare with a one-node run",
    )


def _busbw(row: NcclRow) -> float:
    """A row's bus bandwidth: the better of in-place and out-of-place."""
    return max(row.oop_busbw_bytes_per_s, row.ip_busbw_bytes_per_s)


def _gb(bytes_per_s: float | None) -> str:
    return "n/a" if bytes_per_s is None else f"{bytes_per_s / GB:.2f}"


def _size(size_bytes: int) -> str:
    """A message size as nccl-tests users say it: "4 GiB", "256 MiB", or bytes."""
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if size_bytes >= 1 << shift and size_bytes % (1 << shift) == 0:
            return f"{size_bytes >> shift} {unit}"
    return f"{size_bytes} B"


CHECKS: list[Check] = [
    Check(
        name=CHECK,
        probe="nccl",
        judge=judge_allreduce_busbw,
        description="nccl-tests all_reduce: ran, values correct, large-message busbw >= floor",
    ),
]
