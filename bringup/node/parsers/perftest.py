"""perftest's `ib_write_bw` and `ib_write_lat` output (linux-rdma/perftest).

Both print a banner (test name, device, link type, MTU), then one table: a bandwidth test
a row per message size of "#bytes #iterations BW peak BW average MsgRate", a latency test
"#bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%" in microseconds. The
bandwidth unit is in the header: "MB/sec" (older releases) or "MiB/sec", both 2^20 bytes,
and "Gb/sec" with --report_gbits, 10^9 bits (perftest_parameters.c, `format_factor`:
0x100000 for MBS, 125000000 otherwise). Lines perftest interleaves ("Conflicting CPU
frequency values detected ...") are skipped.
"""

from __future__ import annotations

import re

from bringup.node.fabric_facts import BwRow, LatRow, PerftestFacts
from bringup.node.result import ParseError

# Bytes per second of one unit of each bandwidth header.
BW_UNITS = {"MB/sec": float(1 << 20), "MiB/sec": float(1 << 20), "Gb/sec": 1e9 / 8}

_BW_HEADER = re.compile(r"#bytes\s+#iterations\s+BW peak\[(?P<unit>[A-Za-z/]+)\]")
_LAT_HEADER = re.compile(r"#bytes\s+#iterations\s+t_min\[usec\]")
_BANNER = re.compile(r"^\s*(?P<name>\S.*(?:BW|Latency) Test)\s*$")
_FIELD = re.compile(r"(?P<key>[A-Za-z][A-Za-z0-9 .*_-]*?)\s*:\s*(?P<value>[^\t]*?)(?=\t|\s{2,}|$)")
_NUMBER = r"[0-9]+(?:\.[0-9]+)?"
_BW_ROW = re.compile(
    rf"^\s*(?P<size>[0-9]+)\s+(?P<iters>[0-9]+)\s+(?P<nums>{_NUMBER}(?:\s+{_NUMBER})*)\s*$"
)


def detect(text: str) -> bool:
    """True for the output of a perftest write test (bandwidth or latency table)."""
    return bool(_BW_HEADER.search(text) or _LAT_HEADER.search(text)) and "Test" in text


def parse(text: str) -> PerftestFacts:
    """The banner fields and the table of one ib_write_bw / ib_write_lat output."""
    lines = text.splitlines()
    header_at, unit, kind = _header(lines)
    fields = _banner_fields(lines[:header_at])
    banner = next((m.group("name") for line in lines if (m := _BANNER.match(line))), None)
    facts = PerftestFacts(
        test=banner or ("BW Test" if kind == "bw" else "Latency Test"),
        kind=kind,
        device=fields.get("Device"),
        link_type=fields.get("Link type"),
        mtu=fields.get("Mtu"),
        unit=unit,
        use_cuda=any("cuMemAlloc" in line or "CUDA device" in line for line in lines),
    )
    for line in lines[header_at + 1 :]:
        match = _BW_ROW.match(line)
        if match is None:
            continue  # a separator, a warning perftest interleaves, a trailing prompt
        numbers = [float(n) for n in match.group("nums").split()]
        size, iterations = int(match.group("size")), int(match.group("iters"))
        if kind == "bw":
            facts.bw.append(_bw_row(size, iterations, numbers, unit or "MB/sec"))
        else:
            facts.lat.append(_lat_row(size, iterations, numbers))
    if not facts.bw and not facts.lat:
        raise ParseError("perftest output without a result row (the run did not finish?)")
    return facts


def _header(lines: list[str]) -> tuple[int, str | None, str]:
    """Index of the table header, its bandwidth unit and the test kind."""
    for index, line in enumerate(lines):
        if match := _BW_HEADER.search(line):
            unit = match.group("unit")
            if unit not in BW_UNITS:
                raise ParseError(f"unknown perftest bandwidth unit {unit[:20]!r}")
            return index, unit, "bw"
        if _LAT_HEADER.search(line):
            return index, None, "lat"
    raise ParseError("no perftest result header ('#bytes #iterations ...')")


def _banner_fields(lines: list[str]) -> dict[str, str]:
    """ "Key : value" pairs of the banner; two pairs can share a line ("Dual-port : OFF
    Device : mlx5_0"), separated by tabs or a run of spaces."""
    found: dict[str, str] = {}
    for line in lines:
        for match in _FIELD.finditer(line):
            key = " ".join(match.group("key").split())
            found.setdefault(key, match.group("value").strip())
    return found


def _bw_row(size: int, iterations: int, numbers: list[float], unit: str) -> BwRow:
    if len(numbers) < 2:
        raise ParseError(f"bandwidth row for {size} bytes has {len(numbers)} numbers, not 3")
    scale = BW_UNITS[unit]
    return BwRow(
        size_bytes=size,
        iterations=iterations,
        peak_bytes_per_s=numbers[0] * scale,
        average_bytes_per_s=numbers[1] * scale,
        msg_rate_mpps=numbers[2] if len(numbers) > 2 else None,
    )


def _lat_row(size: int, iterations: int, numbers: list[float]) -> LatRow:
    if len(numbers) == 7:  # t_min t_max t_typical t_avg t_stdev 99% 99.9%
        t_min, t_max, typical, avg, stdev, p99, p999 = numbers
        return LatRow(size, iterations, t_min, t_max, typical, avg, stdev, p99, p999)
    if len(numbers) == 2:  # t_avg and t_stdev only
        return LatRow(size, iterations, None, None, None, numbers[0], numbers[1], None, None)
    if len(numbers) == 1:  # a duration (-D) run reports t_avg alone (perftest issue #80)
        return LatRow(size, iterations, None, None, None, numbers[0], None, None, None)
    raise ParseError(f"latency row for {size} bytes has {len(numbers)} numbers, not 7")
