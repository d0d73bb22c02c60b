"""Parse fio's JSON output (`fio --output-format=json`) into per-job figures in SI units.

fio's schema changed over the years, and the parser accepts each form seen in real logs
(docs/reference.md#nvme-and-fio; tests/fixtures/fio/):

- bandwidth: `bw_bytes` in B/s since fio 3; older versions only have `bw` in KiB/s;
- IOPS: a float, or an int in fio 2.x;
- completion latency percentiles: `clat_ns.percentile` (ns) in fio 3, `lat_ns.percentile`
  when the job ran with `lat_percentiles=1`, `clat.percentile` (microseconds) in fio 2.x;
- runtime: each direction's `runtime` (ms), which includes an `end_fsync`.

fio may print warnings ("fio: ...", "note: ...") before the JSON document, so the parser
looks for the line where the JSON object starts. Standard library only: this runs on nodes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bringup.node.result import ParseError

KIB = 1024  # fio's `bw` is in KiB/s (fio HOWTO, "bw" in the JSON output)

# Where the 99th percentile may live, in order of preference, with the unit in seconds.
_PERCENTILE_SOURCES: tuple[tuple[str, float], ...] = (
    ("clat_ns", 1e-9),
    ("lat_ns", 1e-9),  # fio >= 3 with lat_percentiles=1 puts them here instead
    ("clat", 1e-6),  # fio 2.x: microseconds
    ("lat", 1e-6),
)
_P99 = "99.000000"


@dataclass
class FioJob:
    """One job entry of fio's report (one entry per group with group_reporting)."""

    name: str
    read_bw_bytes: float  # B/s
    write_bw_bytes: float  # B/s
    read_iops: float
    write_iops: float
    read_clat_p99_s: float | None  # None: no reads done, or no percentiles reported
    write_clat_p99_s: float | None
    runtime_s: float
    error: int  # fio's errno for the job, 0 when it ran cleanly
    # From the job's options (or the global ones); None when the report does not carry
    # them (fio 2.x reports omit the job file).
    rw: str | None = None  # "read", "write", "randread", "randrw", ...
    block_size_bytes: int | None = None
    direct: bool | None = None


@dataclass
class FioResult:
    """A whole fio report."""

    fio_version: str | None  # "fio-3.33"
    jobs: list[FioJob]


def detect(text: str) -> bool:
    """True when the text looks like fio's JSON report."""
    return "{" in text and ('"fio version"' in text or '"jobs"' in text)


def parse_fio_json(text: str) -> FioResult:
    """The jobs of a fio JSON report; ParseError when the text is not one."""
    doc = _load_document(text)
    version = doc.get("fio version")
    if version is not None and not isinstance(version, str):
        raise ParseError("fio JSON: 'fio version' is not a string")
    jobs = doc.get("jobs")
    if not isinstance(jobs, list):
        raise ParseError("fio JSON: no 'jobs' list")
    global_options = doc.get("global options")
    if not isinstance(global_options, dict):
        global_options = {}
    return FioResult(
        fio_version=version, jobs=[_job(j, i, global_options) for i, j in enumerate(jobs)]
    )


def _load_document(text: str) -> dict[str, Any]:
    """The JSON object in text, skipping any lines fio printed before it."""
    decoder = json.JSONDecoder()
    offset = 0
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith("{"):
            start = offset + len(line) - len(line.lstrip())
            try:
                doc, _ = decoder.raw_decode(text, start)
            except (ValueError, RecursionError):
                doc = None  # a stray "{" in a warning; the report may start further down
            if isinstance(doc, dict) and "jobs" in doc:
                return doc
        offset += len(line)
    raise ParseError("not fio JSON output: no JSON object with 'jobs' found (truncated?)")


def _job(raw: object, index: int, global_options: dict[str, Any]) -> FioJob:
    if not isinstance(raw, dict):
        raise ParseError(f"fio JSON: job {index} is not an object")
    name = raw.get("jobname")
    if not isinstance(name, str):
        raise ParseError(f"fio JSON: job {index} has no 'jobname'")
    read, write = _section(raw, "read", name), _section(raw, "write", name)
    error = raw.get("error", 0)
    if not isinstance(error, int) or isinstance(error, bool):
        raise ParseError(f"fio JSON: job {name!r}: 'error' is not an integer")
    return FioJob(
        name=name,
        read_bw_bytes=_bandwidth(read, f"{name}.read"),
        write_bw_bytes=_bandwidth(write, f"{name}.write"),
        read_iops=_number(read, "iops", f"{name}.read"),
        write_iops=_number(write, "iops", f"{name}.write"),
        read_clat_p99_s=_p99_seconds(read, f"{name}.read"),
        write_clat_p99_s=_p99_seconds(write, f"{name}.write"),
        runtime_s=_runtime_s(read, write, name),
        error=error,
        rw=_option(raw, global_options, "rw"),
        block_size_bytes=_size(_option(raw, global_options, "bs")),
        direct=_flag(_option(raw, global_options, "direct")),
    )


def _option(job: dict[str, Any], global_options: dict[str, Any], key: str) -> str | None:
    options = job.get("job options")
    value = options.get(key) if isinstance(options, dict) else None
    if value is None:
        value = global_options.get(key)
    return value if isinstance(value, str) else None


_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}  # fio: k = KiB by default


def _size(text: str | None) -> int | None:
    """fio's size syntax ("4k", "1M", "4096") in bytes; None when absent or unusual."""
    if not text:
        return None
    number, unit = text.rstrip("bB").lower()[:-1], text.rstrip("bB").lower()[-1:]
    if unit.isdigit():
        number, unit = number + unit, ""
    # ASCII digits only: str.isdigit() also accepts '²', which int() refuses.
    if not (number.isascii() and number.isdigit()) or unit not in _SIZE_UNITS:
        return None
    return int(number) * _SIZE_UNITS[unit]


def _flag(text: str | None) -> bool | None:
    return None if text is None else text.strip() not in ("0", "false")


def _section(job: dict[str, Any], key: str, name: str) -> dict[str, Any]:
    section = job.get(key)
    if not isinstance(section, dict):
        raise ParseError(f"fio JSON: job {name!r} has no '{key}' section")
    return section


def _bandwidth(section: dict[str, Any], where: str) -> float:
    """B/s: `bw_bytes` when fio wrote it (fio >= 3), else `bw` KiB/s x 1024."""
    if "bw_bytes" in section:
        return _number(section, "bw_bytes", where)
    return _number(section, "bw", where) * KIB


def _p99_seconds(section: dict[str, Any], where: str) -> float | None:
    """The 99th percentile latency in seconds, None when there is none to report."""
    if section.get("io_bytes") == 0:
        return None  # fio still prints a percentile table of zeros for an idle direction
    for key, scale in _PERCENTILE_SOURCES:
        stats = section.get(key)
        if not isinstance(stats, dict) or "percentile" not in stats:
            continue
        percentiles = stats["percentile"]
        if not isinstance(percentiles, dict):
            raise ParseError(f"fio JSON: {where}.{key}.percentile is not an object")
        if _P99 not in percentiles:
            return None
        return _number(percentiles, _P99, f"{where}.{key}.percentile") * scale
    return None


def _runtime_s(read: dict[str, Any], write: dict[str, Any], name: str) -> float:
    """Seconds the job ran: the longer direction (ms in the JSON).

    Not `job_runtime`: with group_reporting it is the sum over the group's jobs.
    """
    return (
        max(_number(read, "runtime", f"{name}.read"), _number(write, "runtime", f"{name}.write"))
        / 1000
    )


def _number(obj: dict[str, Any], key: str, where: str) -> float:
    value = obj.get(key)
    if not _is_number(value):
        raise ParseError(f"fio JSON: {where}.{key} is missing or not a number")
    try:
        return float(value)
    except OverflowError:  # an integer too large for a float
        raise ParseError(f"fio JSON: {where}.{key} is out of range") from None


def _is_number(value: object) -> bool:
    # bool is an int subclass; `true` where fio writes a number is malformed, not 1.
    return isinstance(value, (int, float)) and not isinstance(value, bool)
