"""Timelines from captures someone sent: `nvidia-smi dmon`, and a series of `nvidia-smi -q`.

Both become the `Timeline` the NVML sampler records (telemetry.py), so `bringup inspect`
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
import itertools
import re
import statistics
import time
from dataclasses import dataclass

from bringup.probes.result import ParseError
from bringup.probes.smi import parse_q_text
from bringup.probes.telemetry import Sample, Timeline

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
