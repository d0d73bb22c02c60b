"""Timelines from captures someone sent: `nvidia-smi dmon`, a series of `nvidia-smi -q`, and
a timestamped `nvidia-smi --query-gpu=timestamp,... --format=csv -l 1` series.

All become the `Timeline` the NVML sampler records (telemetry.py), so `bringup inspect`
of a capture gives the same diagnosis as a live `bringup diagnose`.

`nvidia-smi dmon` prints a header (`# gpu pwr gtemp mtemp sm mem enc dec mclk pclk ...`),
a units line, then one row per GPU per interval, "-" where a metric is not supported;
`-o DT` adds Date/Time columns, `-s v` adds pviol (% of the interval under a power
violation) and tviol (thermal violation). dmon does not print clocks event reasons: pviol
becomes SW power cap time, tviol a "thermal_violation" (dmon does not tell SW from HW).

Pure functions of the text; ParseError (one line) on text they cannot read.
"""

from __future__ import annotations

import calendar
import csv
import datetime
import itertools
import re
import statistics
import time
from dataclasses import dataclass

from bringup.node.parsers.smi_csv import parse_query_csv
from bringup.node.parsers.smi_text import parse_q_text
from bringup.node.result import ParseError
from bringup.node.timeline import Sample, Timeline

MHZ = 1_000_000
DMON_DEFAULT_INTERVAL_S = 1.0  # dmon's default delay (-d 1)

_DMON_HEADER = re.compile(r"^#\s*(?:Date\s+)?(?:Time\s+)?gpu\s+\S", re.M)
_Q_BLOCK = "==============NVSMI LOG=============="


def detect(text: str) -> bool:
    """An `nvidia-smi dmon` capture: its `# gpu ...` header and an `Idx` units line."""
    return bool(_DMON_HEADER.search(text)) and bool(re.search(r"^#.*\bIdx\b", text, re.M))


def detect_q_series(text: str) -> bool:
    """Several `nvidia-smi -q` outputs one after another (`nvidia-smi -q -l 1`)."""
    return text.count(_Q_BLOCK) >= 2


# --- nvidia-smi dmon ---------------------------------------------------------------------


@dataclass
class _Row:
    cells: dict[str, str]
    clock_s: float | None  # seconds of the day (+ days) from the Date/Time columns


def parse_dmon(text: str, interval_s: float | None = None) -> Timeline:
    """The timeline of a dmon capture; the interval from its Time column, else `interval_s`."""
    rows = _dmon_rows(text)
    if not rows:
        raise ParseError("no dmon rows under a '# gpu ...' header")
    ticks = _dmon_ticks(rows)
    stamps = [tick[0].clock_s for tick in ticks]
    timed = all(s is not None for s in stamps) and len(ticks) > 1
    if interval_s is None:
        steps = [b - a for a, b in itertools.pairwise(stamps) if timed and b > a]  # type: ignore[operator]
        interval_s = statistics.median(steps) if steps else DMON_DEFAULT_INTERVAL_S
    timeline = Timeline(interval_s=interval_s, gpus=0)
    gpus: set[int] = set()
    power_s: dict[str, float] = {}
    for number, tick in enumerate(ticks):
        t_s = stamps[number] - stamps[0] if timed else number * interval_s  # type: ignore[operator]
        for row in tick:
            sample, pviol = _dmon_sample(row, round(t_s, 3))
            gpus.add(sample.gpu)
            timeline.samples.append(sample)
            if pviol is not None:
                key = str(sample.gpu)
                power_s[key] = power_s.get(key, 0.0) + pviol / 100.0 * interval_s
    timeline.gpus = len(gpus)
    if power_s:
        timeline.throttle_time_s = {
            gpu: {"sw_power_cap": round(seconds, 6)} for gpu, seconds in power_s.items()
        }
    return timeline


def _dmon_rows(text: str) -> list[_Row]:
    names: list[str] | None = None
    rows: list[_Row] = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            words = stripped.lstrip("#").split()
            if "gpu" in words and "Idx" not in words:
                names = [w.lower() for w in words]  # a new header (dmon repeats it)
            continue
        if names is None:
            continue  # text before the first header (a prompt, a banner)
        cells = stripped.split()
        if len(cells) > len(names):
            raise ParseError(
                f"line {number}: {len(cells)} cells under a {len(names)}-column header"
            )
        row = dict(zip(names, cells, strict=False))  # a cut last line keeps its first cells
        rows.append(_Row(row, _clock(row, number)))
    return rows


def _clock(row: dict[str, str], number: int) -> float | None:
    stamp = row.get("time")
    if stamp is None:
        return None
    match = re.fullmatch(r"(\d{1,2}):(\d{2}):(\d{2})", stamp)
    if match is None:
        raise ParseError(f"line {number}: time {stamp[:20]!r} is not HH:MM:SS")
    h, m, s = (int(g) for g in match.groups())
    day = 0.0
    if "date" in row:
        try:
            day = calendar.timegm(time.strptime(row["date"], "%Y%m%d")) // 86400 * 86400
        except ValueError:
            raise ParseError(f"line {number}: date {row['date'][:20]!r} is not YYYYMMDD") from None
    return day + h * 3600 + m * 60 + s


def _dmon_ticks(rows: list[_Row]) -> list[list[_Row]]:
    """Rows grouped into ticks: a tick ends where a GPU index repeats."""
    ticks: list[list[_Row]] = []
    seen: set[str] = set()
    for row in rows:
        gpu = row.cells.get("gpu", "")
        if not ticks or gpu in seen:
            ticks.append([])
            seen = set()
        ticks[-1].append(row)
        seen.add(gpu)
    return ticks


def _dmon_sample(row: _Row, t_s: float) -> tuple[Sample, float | None]:
    cells = row.cells
    gpu = _number(cells, "gpu")
    if gpu is None:
        raise ParseError(f"dmon row without a GPU index: {' '.join(cells.values())[:40]!r}")
    tviol = _number(cells, "tviol")
    mclk, pclk = _number(cells, "mclk"), _number(cells, "pclk")
    sample = Sample(
        t_s=t_s,
        gpu=int(gpu),
        sm_clock_hz=int(pclk * MHZ) if pclk is not None else None,
        memory_clock_hz=int(mclk * MHZ) if mclk is not None else None,
        temperature_c=_number(cells, "gtemp", "temp"),
        memory_temperature_c=_number(cells, "mtemp"),
        power_w=_number(cells, "pwr"),
        utilization_pct=_number(cells, "sm"),
        clock_event_reasons=["thermal_violation"] if tviol else [],
    )
    return sample, _number(cells, "pviol")


def _number(cells: dict[str, str], *names: str) -> float | None:
    for name in names:
        value = cells.get(name)
        if value is None or value == "-":
            continue
        try:
            return float(value)
        except ValueError:
            raise ParseError(f"{name} {value[:20]!r} is not a number") from None
    return None


# --- a series of nvidia-smi -q -----------------------------------------------------------


def parse_q_series(text: str) -> Timeline:
    """The timeline of `nvidia-smi -q` outputs in a row, stamped by their Timestamp lines."""
    blocks = [b for b in text.split(_Q_BLOCK)[1:] if b.strip()]
    if not blocks:
        raise ParseError("no '==============NVSMI LOG==============' block")
    stamps = [_q_timestamp(block) for block in blocks]
    timed = all(s is not None for s in stamps)
    steps = [b - a for a, b in itertools.pairwise(stamps) if timed and b > a]  # type: ignore[operator]
    interval = statistics.median(steps) if steps else 1.0
    timeline = Timeline(interval_s=interval, gpus=0)
    if len(blocks) >= 2:  # one capture's counters run from driver load, not over the capture
        timeline.throttle_time_s = _counter_difference(
            q_throttle_counters_s(blocks[0]), q_throttle_counters_s(blocks[-1])
        )
    for number, block in enumerate(blocks):
        facts = parse_q_text(_Q_BLOCK + block)
        t_s = stamps[number] - stamps[0] if timed else number * interval  # type: ignore[operator]
        timeline.gpus = max(timeline.gpus, len(facts.gpus))
        for gpu in facts.gpus:
            key = str(gpu.index)
            if gpu.power_default_limit_w:
                timeline.power_default_limit_w[key] = gpu.power_default_limit_w
            if gpu.memory_max_temperature_c:
                timeline.memory_max_temperature_c[key] = gpu.memory_max_temperature_c
            if gpu.name:
                timeline.gpu_names[key] = gpu.name
            timeline.samples.append(
                Sample(
                    t_s=round(t_s, 3),
                    gpu=gpu.index,
                    sm_clock_hz=gpu.sm_clock_hz,
                    memory_clock_hz=gpu.memory_clock_hz,
                    temperature_c=gpu.temperature_c,
                    memory_temperature_c=gpu.memory_temperature_c,
                    power_w=gpu.power_draw_w,
                    power_limit_w=gpu.power_limit_w,
                    clock_event_reasons=list(gpu.clock_event_reasons or []),
                )
            )
    return timeline


def _q_timestamp(block: str) -> float | None:
    match = re.search(r"^Timestamp\s*:\s*(.+?)\s*$", block, re.M)
    if match is None:
        return None
    try:
        return calendar.timegm(
            time.strptime(" ".join(match.group(1).split()), "%a %b %d %H:%M:%S %Y")
        )
    except ValueError:
        return None


# The "Clocks Event Reasons Counters" section of `nvidia-smi -q` (driver 535 and later):
# cumulative time in each reason since the driver loaded, the counters NVML keeps
# (telemetry.throttle_counter_fields). Only the difference between two captures tells
# the time spent during the capture; one capture alone says nothing about it.
_Q_COUNTER_SECTIONS = ("Clocks Event Reasons Counters", "Clocks Throttle Reasons Counters")
_Q_COUNTERS = {
    "SW Power Capping": "sw_power_cap",
    "Sync Boost": "sync_boost",
    "SW Thermal Slowdown": "sw_thermal_slowdown",
    "HW Thermal Slowdown": "hw_thermal_slowdown",
    "HW Power Braking": "hw_power_brake_slowdown",
}
_Q_GPU_LINE = re.compile(r"GPU [0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f]+")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ns|us|ms|s)")
_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def q_throttle_counters_s(block: str) -> dict[str, dict[str, float]]:
    """Cumulative seconds per GPU (by position, as parse_q_text numbers them) and reason."""
    counters: dict[str, dict[str, float]] = {}
    gpu = -1
    section_indent: int | None = None  # inside a counters section: its indentation
    for raw in block.expandtabs(8).splitlines():
        stripped = raw.strip()
        if not stripped:
            continue
        indent = len(raw) - len(raw.lstrip())
        if _Q_GPU_LINE.fullmatch(stripped):
            gpu, section_indent = gpu + 1, None
            continue
        if section_indent is not None and indent <= section_indent:
            section_indent = None
        if stripped in _Q_COUNTER_SECTIONS:
            section_indent = indent
            continue
        if section_indent is None:
            continue
        name, _, value = (part.strip() for part in stripped.partition(":"))
        match = _DURATION.fullmatch(value)
        if name in _Q_COUNTERS and match:  # "N/A" on GPUs without the counter: left out
            seconds = float(match.group(1)) * _SECONDS[match.group(2)]
            counters.setdefault(str(max(gpu, 0)), {})[_Q_COUNTERS[name]] = round(seconds, 6)
    return counters


def _counter_difference(
    first: dict[str, dict[str, float]], last: dict[str, dict[str, float]]
) -> dict[str, dict[str, float]]:
    """Seconds per GPU and reason between two readings (a driver reload counts as none)."""
    result: dict[str, dict[str, float]] = {}
    for gpu, reasons in last.items():
        before = first.get(gpu, {})
        spent = {
            reason: round(max(0.0, seconds - before[reason]), 6)
            for reason, seconds in reasons.items()
            if reason in before
        }
        if spent:
            result[gpu] = spent
    return result


# --- nvidia-smi --query-gpu=timestamp,... --format=csv -l N ----------------------------------

_CSV_TIMESTAMP_FORMATS = ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S")
# Columns that name the GPU of a row, best first (without any, each row is one tick of one GPU).
_CSV_GPU_COLUMNS = ("index", "pci.bus_id", "gpu_bus_id", "uuid", "gpu_uuid")


@dataclass
class _CsvRow:
    number: int  # line number in the capture
    line: str
    gpu: str  # the row's GPU, as its identity column says
    stamp: float  # seconds (POSIX time of the timestamp, read as UTC)


def detect_csv_series(text: str) -> bool:
    """A `--query-gpu` CSV with a timestamp column whose GPUs answer more than once."""
    try:
        _, rows = _csv_series_rows(text)
    except ParseError:
        return False
    return len(_csv_ticks(rows)) >= 2


def parse_csv_series(text: str) -> Timeline:
    """The timeline of `nvidia-smi --query-gpu=timestamp,... --format=csv -l N` output.

    Each row is read by the single-capture parser (smi_csv.parse_query_csv) under the header,
    so the columns mean the same in both; the timestamp column places it in time.
    """
    header, rows = _csv_series_rows(text)
    if not rows:
        raise ParseError("nvidia-smi --query-gpu: no data row under the header")
    ticks = _csv_ticks(rows)
    starts = [tick[0].stamp for tick in ticks]
    steps = [b - a for a, b in itertools.pairwise(starts) if b > a]
    timeline = Timeline(interval_s=round(statistics.median(steps), 3) if steps else 1.0, gpus=0)
    numbers: dict[str, int] = {}  # GPU identity -> index (first seen order without `index`)
    names = [cell.split(" [")[0] for cell in _cells(header)]
    utilization = names.index("utilization.gpu") if "utilization.gpu" in names else None
    for tick, start in zip(ticks, starts, strict=True):
        for row in tick:
            try:
                (gpu,) = parse_query_csv(header + "\n" + row.line).gpus
            except ParseError as exc:
                raise ParseError(f"line {row.number}: {exc}") from None
            index = gpu.index if row.gpu.isdigit() else numbers.setdefault(row.gpu, len(numbers))
            key = str(index)
            if gpu.power_default_limit_w:
                timeline.power_default_limit_w[key] = gpu.power_default_limit_w
            if gpu.memory_max_temperature_c:
                timeline.memory_max_temperature_c[key] = gpu.memory_max_temperature_c
            if gpu.name:
                timeline.gpu_names[key] = gpu.name
            timeline.samples.append(
                Sample(
                    t_s=round(start - starts[0], 3),
                    gpu=index,
                    sm_clock_hz=gpu.sm_clock_hz,
                    memory_clock_hz=gpu.memory_clock_hz,
                    temperature_c=gpu.temperature_c,
                    memory_temperature_c=gpu.memory_temperature_c,
                    power_w=gpu.power_draw_w,
                    power_limit_w=gpu.power_limit_w,
                    utilization_pct=_csv_utilization(row.line, utilization),
                    clock_event_reasons=list(gpu.clock_event_reasons or []),
                )
            )
    timeline.gpus = len({s.gpu for s in timeline.samples})
    return timeline


def _csv_series_rows(text: str) -> tuple[str, list[_CsvRow]]:
    """The header line and the data rows (prompts, repeated headers and cut lines left out)."""
    lines = [
        (number, line)
        for number, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.lstrip().startswith(("$", "#")) and "nvidia-smi " not in line
    ]
    if not lines:
        raise ParseError("nvidia-smi --query-gpu: empty output")
    header = lines[0][1]
    names = [cell.split(" [")[0] for cell in _cells(header)]
    if "timestamp" not in names:
        raise ParseError(
            "nvidia-smi --query-gpu: no timestamp column (query timestamp first for a series)"
        )
    where = names.index("timestamp")
    identity = next((names.index(c) for c in _CSV_GPU_COLUMNS if c in names), None)
    rows = []
    for number, line in lines[1:]:
        cells = _cells(line)
        if len(cells) != len(names) or line.strip() == header.strip():
            continue  # dmon-style repeated header, or a line cut when the capture stopped
        gpu = cells[identity] if identity is not None else "0"
        rows.append(_CsvRow(number, line, gpu, _csv_stamp(cells[where], number)))
    return header, rows


def _cells(line: str) -> list[str]:
    try:
        return [c.strip() for c in next(csv.reader([line], skipinitialspace=True), [])]
    except csv.Error as exc:
        raise ParseError(f"nvidia-smi --query-gpu: unreadable CSV line: {exc}") from None


def _csv_stamp(value: str, number: int) -> float:
    for layout in _CSV_TIMESTAMP_FORMATS:
        try:
            moment = datetime.datetime.strptime(value, layout)
        except ValueError:
            continue
        return moment.replace(tzinfo=datetime.UTC).timestamp()
    raise ParseError(f"line {number}: timestamp {value[:30]!r} is not YYYY/MM/DD HH:MM:SS.mmm")


def _csv_ticks(rows: list[_CsvRow]) -> list[list[_CsvRow]]:
    """Rows grouped into ticks: a tick ends where a GPU answers again.

    Not by equal timestamps: nvidia-smi stamps each GPU's row as it reads it, a few
    milliseconds apart within one tick.
    """
    ticks: list[list[_CsvRow]] = []
    seen: set[str] = set()
    for row in rows:
        if not ticks or row.gpu in seen:
            ticks.append([])
            seen = set()
        ticks[-1].append(row)
        seen.add(row.gpu)
    return ticks


def _csv_utilization(line: str, column: int | None) -> float | None:
    """utilization.gpu ("97 %", or "97" with nounits); the Gpu facts have no place for it."""
    if column is None:
        return None
    value = _cells(line)[column].removesuffix("%").strip()
    try:
        return float(value)
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"
