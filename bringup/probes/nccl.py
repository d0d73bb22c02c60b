"""nccl-tests output (`all_reduce_perf` and friends): the result table, summary and errors.

Only the parser lives here for now; running nccl-tests on the nodes is another probe's job.
Units follow nccl-tests (PERFORMANCE.md): time in microseconds, algbw and busbw in GB/s
with GB = 1e9 bytes. Facts are in SI: seconds and bytes per second.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal, DecimalException

from bringup.probes.result import ParseError

GB = "1e9"  # nccl-tests prints GB/s with GB = 1e9 bytes (PERFORMANCE.md)
US = "1e-6"  # and times in microseconds

COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "alltoall",
    "broadcast",
    "reduce_scatter",
    "reduce",
    "sendrecv",
    "scatter",
    "gather",
    "hypercube",
)


@dataclass
class NcclRow:
    """One row of the result table: one message size, out-of-place then in-place."""

    size_bytes: int
    count: int
    dtype: str
    redop: str | None  # None when the column is absent or blank (alltoall)
    root: int | None  # -1 for collectives without a root; None when the column is absent
    oop_time_s: float
    oop_algbw_bytes_per_s: float
    oop_busbw_bytes_per_s: float
    oop_wrong: int | None  # wrong elements; None when not validated (N/A) or the old format
    ip_time_s: float
    ip_algbw_bytes_per_s: float
    ip_busbw_bytes_per_s: float
    ip_wrong: int | None
    # The old `error` column is the largest difference seen (a float), not a count; whether
    # it is out of bounds is in the "Out of bounds values" summary, so it is kept apart.
    oop_max_error: float | None = None
    ip_max_error: float | None = None


@dataclass
class NcclFacts:
    """What one nccl-tests run printed."""

    collective: str | None  # "all_reduce", ... None when the output does not say
    nranks: int | None
    devices: list[str] = field(default_factory=list)  # "node005 device 0 [0x18] NVIDIA H100 ..."
    version: str | None = None  # NCCL library version, "2.18.3+cuda12.2"
    rows: list[NcclRow] = field(default_factory=list)
    avg_busbw_bytes_per_s: float | None = None  # "# Avg bus bandwidth": every size, small too
    out_of_bounds: int | None = None  # "# Out of bounds values : N OK|FAILED"
    peak_busbw_bytes_per_s: float | None = None  # best row, max of in-place and out-of-place
    largest_size_busbw_bytes_per_s: float | None = None  # at the largest size measured
    errors: list[str] = field(default_factory=list)  # NCCL WARN and "Test ... failure" lines
    complete: bool = False  # the summary lines were reached
    all_zero_busbw: bool = False  # busbw 0 everywhere although data moved: 1-rank runs


FACTS = NcclFacts

# Launcher prefixes: `srun -l` (" 0: ") and Open MPI --tag-output ("[1,0]<stdout>:").
_PREFIX = re.compile(r"^(?:\s*[0-9]+:(?=\s|$)|\[[0-9]+,[0-9]+\]<std(?:out|err)>:)\s?", re.ASCII)
_NUMBER = r"[0-9]+(?:\.[0-9]*)?"
# size count type [redop] [root] then 2 x (time algbw busbw wrong|error).
_ROW = re.compile(
    rf"^(?P<size>[0-9]+)\s+(?P<count>[0-9]+)\s+(?P<dtype>[A-Za-z][A-Za-z0-9_]*)"
    rf"(?P<middle>(?:\s+\S+){{0,2}}?)"
    rf"\s+(?P<ot>{_NUMBER})\s+(?P<oa>{_NUMBER})\s+(?P<ob>{_NUMBER})\s+(?P<ow>\S+)"
    rf"\s+(?P<it>{_NUMBER})\s+(?P<ia>{_NUMBER})\s+(?P<ib>{_NUMBER})\s+(?P<iw>\S+)$",
    re.ASCII,
)
_WRONG_COUNT = re.compile(r"^[0-9]+$", re.ASCII)
_MAX_ERROR = re.compile(r"^[0-9]+(?:\.[0-9]*)?[eE][+-]?[0-9]+\*?$", re.ASCII)
_RANK = re.compile(
    r"^#\s*Rank\s+[0-9]+\s+(?:Group\s+[0-9]+\s+)?Pid\s+[0-9]+\s+on\s+(?P<host>\S+)\s+"
    r"device\s+(?P<device>[0-9]+)\s+\[(?P<bus>[^\]]*)\]\s+(?P<name>.+)$",
    re.ASCII,
)
_AVG = re.compile(
    rf"^#\s*Avg bus bandwidth\s*:\s*(?P<value>{_NUMBER}(?:[eE][+-]?[0-9]+)?)", re.ASCII
)
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(?P<count>[0-9]+)", re.ASCII)
_ERROR = re.compile(r"NCCL WARN|Test (?:NCCL|CUDA) failure")
_BINARY = re.compile(r"\b(?P<name>[a-z_]+)_perf(?:_mpi)?\b", re.ASCII)
_NCCL_VERSION = re.compile(r"NCCL version (?P<version>\S+)")
_LIBRARY_CODE = re.compile(r"nccl-library=(?P<code>[0-9]+)", re.ASCII)
_NRANKS = re.compile(r"\bnranks (?P<n>[0-9]+)", re.ASCII)
_HEADER = re.compile(r"^#\s*(?:nThread|Using devices|Collective test starting|nccl-tests version)")


def detect(text: str) -> bool:
    """True when the text looks like nccl-tests output."""
    return any(
        _HEADER.match(line) or _AVG.match(line) or _ROW.match(line)
        for line in (_strip_prefix(raw).strip() for raw in text.splitlines())
    )


def parse_nccl_tests(text: str) -> NcclFacts:
    """The facts of one nccl-tests run, from its stdout (and stderr, if it was merged)."""
    facts = NcclFacts(collective=None, nranks=None)
    seen_header = False
    ranks_reported: list[int] = []
    for raw in text.splitlines():
        line = _strip_prefix(raw).strip()
        if not line:
            continue
        if _ERROR.search(line):
            facts.errors.append(line)
            continue
        if row := _parse_row(line):
            facts.rows.append(row)
            continue
        seen_header = seen_header or bool(_HEADER.match(line))
        _read_other_line(line, facts, ranks_reported)
    if not facts.rows and not facts.errors and not seen_header:
        raise ParseError("no nccl-tests result rows or errors found")
    if facts.nranks is None and ranks_reported:
        facts.nranks = max(ranks_reported)
    if facts.collective is None:
        facts.collective = infer_collective(facts.rows, facts.nranks)
    _summarise(facts)
    return facts


def _strip_prefix(line: str) -> str:
    """The line without a launcher's rank prefix."""
    return _PREFIX.sub("", line, count=1)


def _read_other_line(line: str, facts: NcclFacts, ranks_reported: list[int]) -> None:
    """Take what a non-row line says: devices, summary, version, collective name."""
    if match := _RANK.match(line):
        facts.devices.append(
            f"{match['host']} device {match['device']} [{match['bus']}] {match['name'].strip()}"
        )
        facts.nranks = len(facts.devices)
    elif match := _AVG.match(line):
        facts.avg_busbw_bytes_per_s = _scaled(match["value"], GB)
        facts.complete = True
    elif match := _OUT_OF_BOUNDS.match(line):
        facts.out_of_bounds = int(match["count"])
    elif match := _NCCL_VERSION.search(line):
        facts.version = match["version"]
    elif (match := _LIBRARY_CODE.search(line)) and facts.version is None:
        facts.version = _version_from_code(int(match["code"]))
    if match := _NRANKS.search(line):
        ranks_reported.append(int(match["n"]))
    match = _BINARY.search(line)
    if facts.collective is None and match and match["name"] in COLLECTIVES:
        facts.collective = match["name"]


def _parse_row(line: str) -> NcclRow | None:
    """One result row, or None when the line is not one."""
    match = _ROW.match(line)
    if match is None:
        return None
    redop, root = _redop_root(match["middle"].split())
    oop_wrong, oop_error = _wrong(match["ow"])
    ip_wrong, ip_error = _wrong(match["iw"])
    return NcclRow(
        size_bytes=int(match["size"]),
        count=int(match["count"]),
        dtype=match["dtype"],
        redop=redop,
        root=root,
        oop_time_s=_scaled(match["ot"], US),
        oop_algbw_bytes_per_s=_scaled(match["oa"], GB),
        oop_busbw_bytes_per_s=_scaled(match["ob"], GB),
        oop_wrong=oop_wrong,
        ip_time_s=_scaled(match["it"], US),
        ip_algbw_bytes_per_s=_scaled(match["ia"], GB),
        ip_busbw_bytes_per_s=_scaled(match["ib"], GB),
        ip_wrong=ip_wrong,
        oop_max_error=oop_error,
        ip_max_error=ip_error,
    )


def _redop_root(middle: list[str]) -> tuple[str | None, int | None]:
    """The optional redop and root columns (absent in old output, redop blank for alltoall)."""
    redop: str | None = None
    root: int | None = None
    for token in middle:
        if re.fullmatch(r"-?[0-9]+", token, re.ASCII):
            root = int(token)
        else:
            redop = token
    return redop, root


def _wrong(token: str) -> tuple[int | None, float | None]:
    """(wrong-element count, old-format max error) from the #wrong/error cell."""
    if _WRONG_COUNT.match(token):
        return int(token), None
    if _MAX_ERROR.match(token):
        # A trailing "*" is how some old versions flagged an out-of-bounds row.
        return (1 if token.endswith("*") else None), _scaled(token.rstrip("*"), "1")
    return None, None  # "N/A": validation was off (-c 0)


def _scaled(text: str, unit: str) -> float:
    """A printed number times its unit, computed in decimal so 68.4048 GB/s is 68404800000.0."""
    try:
        return float(Decimal(text) * Decimal(unit))
    except DecimalException:
        raise ParseError(f"not a number: {text!r}") from None


def _version_from_code(code: int) -> str:
    """NCCL_VERSION_CODE (major*10000 + minor*100 + patch since 2.9) as "2.26.6"."""
    return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"


def infer_collective(rows: list[NcclRow], nranks: int | None) -> str | None:
    """ "all_reduce" when busbw/algbw equals all-reduce's 2(n-1)/n, else None.

    Old output does not name the test. Only all-reduce has that bus factor; all-gather,
    reduce-scatter and alltoall share (n-1)/n and cannot be told apart (PERFORMANCE.md).
    With 2 ranks 2(n-1)/n = 1 is also broadcast's factor, so it takes n > 2.
    """
    if nranks is None or nranks <= 2:
        return None
    big = [r for r in rows if r.oop_algbw_bytes_per_s >= 1e9]
    if not big:
        return None
    row = max(big, key=lambda r: r.size_bytes)
    factor = row.oop_busbw_bytes_per_s / row.oop_algbw_bytes_per_s
    expected = 2 * (nranks - 1) / nranks
    # 2% covers the 2-decimal rounding of the printed GB/s values.
    return "all_reduce" if abs(factor - expected) <= 0.02 * expected else None


def _summarise(facts: NcclFacts) -> None:
    """Peak, largest-size and all-zero busbw from the rows."""
    if not facts.rows:
        return
    best = [max(r.oop_busbw_bytes_per_s, r.ip_busbw_bytes_per_s) for r in facts.rows]
    facts.peak_busbw_bytes_per_s = max(best)
    largest = max(r.size_bytes for r in facts.rows)
    facts.largest_size_busbw_bytes_per_s = max(
        b for r, b in zip(facts.rows, best, strict=True) if r.size_bytes == largest
    )
    moved = any(max(r.oop_algbw_bytes_per_s, r.ip_algbw_bytes_per_s) > 0 for r in facts.rows)
    facts.all_zero_busbw = moved and max(best) == 0
