"""Parsers of telemetry captures: `nvidia-smi dmon` and a series of `nvidia-smi -q`."""

from __future__ import annotations

from pathlib import Path

import pytest

from bringup.node.parsers.dmon import (
    detect,
    detect_csv_series,
    detect_q_series,
    parse_csv_series,
    parse_dmon,
    parse_q_series,
    q_throttle_counters_s,
)
from bringup.node.result import ParseError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DEEPSPEECH = (FIXTURES / "dmon" / "deepspeech-178-4gpu-pucvmet-load.txt").read_text()
A100 = (FIXTURES / "dmon" / "pytorch-97459-a100-dmon-appclocks.txt").read_text()
H200_Q = (FIXTURES / "smi" / "ugpuexp-h200-q-load.txt").read_text()
H100_Q_IDLE = (FIXTURES / "smi" / "ugpuexp-h100-q-idle.txt").read_text()
H100_Q_LOAD = (FIXTURES / "smi" / "ugpuexp-h100-q-load.txt").read_text()
L40S_Q = (FIXTURES / "smi" / "ugpuexp-l40s-q-idle.txt").read_text()
H100_CSV = (FIXTURES / "smi" / "ugpuexp-h100-query-gpu-load.csv.txt").read_text()


def test_four_gpus_with_violation_columns() -> None:
    timeline = parse_dmon(DEEPSPEECH)
    assert timeline.gpus == 4 and timeline.interval_s == 1.0
    assert [s.gpu for s in timeline.samples] == [0, 1, 2, 3]
    first = timeline.samples[0]
    assert (first.power_w, first.temperature_c, first.utilization_pct) == (111.0, 83.0, 25.0)
    assert (first.sm_clock_hz, first.memory_clock_hz) == (1_683_000_000, 4_513_000_000)
    assert first.memory_temperature_c is None  # old header: no mtemp column
    assert [s.clock_event_reasons for s in timeline.samples] == [[]] * 4  # tviol 0
    assert timeline.throttle_time_s == {str(g): {"sw_power_cap": 0.0} for g in range(4)}


def test_a100_with_hbm_temperature_and_eleven_ticks() -> None:
    timeline = parse_dmon(A100)
    assert timeline.gpus == 1 and len(timeline.samples) == 11
    assert [s.t_s for s in timeline.samples] == [float(t) for t in range(11)]
    assert timeline.samples[0].memory_temperature_c == 34.0
    assert timeline.samples[1].temperature_c == 34.0
    assert timeline.samples[0].sm_clock_hz == 1_410_000_000
    assert timeline.duration_s() == 11.0
    assert timeline.throttle_time_s == {}  # no pviol column


def test_time_column_sets_the_interval_and_a_cut_last_row_keeps_its_cells() -> None:
    # The `-o DT` layout: the first two rows as a public nvidia-smi guide prints them
    # (`dmon -s pucet -o DT -d 2`, columns trimmed here); the third row is cut short on
    # purpose, the way a capture ends when the GPU falls over.
    text = (
        "#Date       Time        gpu   pwr gtemp mtemp    sm   mem   enc   dec  mclk  pclk\n"
        "#YYYYMMDD   HH:MM:SS    Idx     W     C     C     %     %     %     %   MHz   MHz\n"
        " 20210102   19:12:31      0    37    19     -     0     0     0     0  4006   582\n"
        " 20210102   19:12:33      0    39    19     -     0     0     0     0  4006  1582\n"
        " 20210102   19:12:35      0     -\n"
    )
    timeline = parse_dmon(text)
    assert timeline.interval_s == 2.0
    assert [s.t_s for s in timeline.samples] == [0.0, 2.0, 4.0]
    assert timeline.samples[2].power_w is None and timeline.samples[2].sm_clock_hz is None


def test_q_series_from_one_real_capture() -> None:
    timeline = parse_q_series(H200_Q)
    assert timeline.gpus == 1 and len(timeline.samples) == 1
    sample = timeline.samples[0]
    assert (sample.power_w, sample.power_limit_w) == (627.32, 700.0)
    assert (sample.temperature_c, sample.memory_temperature_c) == (52.0, 41.0)
    assert sample.sm_clock_hz == 1_980_000_000
    assert sample.clock_event_reasons == []
    assert timeline.power_default_limit_w == {"0": 700.0}


def test_q_series_of_two_captures_is_timed_by_their_timestamps() -> None:
    second = H200_Q.replace("Fri Jul  3 22:11:09 2026", "Fri Jul  3 22:11:11 2026")
    timeline = parse_q_series(H200_Q + second)
    assert [s.t_s for s in timeline.samples] == [0.0, 2.0]
    assert timeline.interval_s == 2.0
    assert detect_q_series(H200_Q + second) and not detect_q_series(H200_Q)


def test_detect() -> None:
    assert detect(DEEPSPEECH) and detect(A100)
    assert not detect(H200_Q)
    assert not detect("# gpu is a word in a comment\nhello\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no dmon rows"),
        ("hello world\n", "no dmon rows"),
        ("# gpu pwr\n# Idx W\n 0 1 2 3\n", "line 3: 4 cells under a 2-column header"),
        ("# gpu pwr\n# Idx W\n 0 lots\n", "pwr 'lots' is not a number"),
    ],
)
def test_garbage_is_a_one_line_parse_error(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_dmon(text)


def test_q_series_without_a_block_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match=r"no '=+NVSMI LOG=+' block"):
        parse_q_series("Timestamp : now\n")


def test_a_capture_is_judged_by_the_telemetry_checks_as_inspect_does() -> None:
    from bringup.checks.catalog import judge_probe
    from bringup.profile import load

    findings = judge_probe("telemetry", parse_dmon(A100), None, load("a100"))
    assert [(f.check, f.status.value) for f in findings] == [("diagnose.throttle", "PASS")]
    assert findings[0].message == (
        "1 GPU, 11 samples over 11 s: no throttle reason, no straggler, HBM below its limit"
    )


# --- the throttle counters of a -q series ---------------------------------------------------


def test_q_counters_of_one_capture_are_since_the_driver_loaded() -> None:
    # The real L40S capture: 200.74 s of SW power capping since its driver loaded.
    assert q_throttle_counters_s(L40S_Q) == {
        "0": {
            "sw_power_cap": 200.740215,
            "sync_boost": 0.0,
            "sw_thermal_slowdown": 0.0,
            "hw_thermal_slowdown": 0.0,
            "hw_power_brake_slowdown": 0.0,
        }
    }
    # One capture cannot say how much of that fell in it: no throttle time.
    assert parse_q_series(L40S_Q).throttle_time_s == {}


def test_q_series_of_two_real_captures_counts_throttle_time_between_them() -> None:
    # The same H100 captured idle (08:12:38) then under load (08:12:53): real counters, 0 us.
    timeline = parse_q_series(H100_Q_IDLE + H100_Q_LOAD)
    assert (timeline.interval_s, len(timeline.samples)) == (15, 2)
    reasons = ["sw_power_cap", "sync_boost", "sw_thermal_slowdown", "hw_thermal_slowdown"]
    assert timeline.throttle_time_s == {
        "0": dict.fromkeys([*reasons, "hw_power_brake_slowdown"], 0.0)
    }


def test_q_series_counters_drive_the_diagnosis() -> None:
    from bringup.checks.catalog import judge_probe
    from bringup.profile import load

    # Edit: a second L40S capture 10 s later whose HW Thermal Slowdown counter moved by 3 s.
    counter = "        HW Thermal Slowdown                            : "
    later = L40S_Q.replace("Fri Jul  3 08:33:38 2026", "Fri Jul  3 08:33:48 2026")
    later = later.replace(counter + "0 us", counter + "3000000 us")
    timeline = parse_q_series(L40S_Q + later)
    assert timeline.throttle_time_s["0"]["hw_thermal_slowdown"] == 3.0
    assert timeline.throttle_time_s["0"]["sw_power_cap"] == 0.0  # 200.74 s before and after
    findings = judge_probe("telemetry", timeline, None, load("h100"))
    assert [(f.check, f.status.value, f.message) for f in findings] == [
        (
            "diagnose.hw_thermal_slowdown",
            "FAIL",
            "GPU 0: HW thermal slowdown 15% of the time, GPU at 64 °C",
        )
    ]


# --- nvidia-smi --query-gpu=timestamp,... --format=csv -l 1 ---------------------------------
# No public capture of such a series with clocks and reasons was found; the series here are
# built from the real single-sample H100 capture (212 columns, timestamp first): its row
# repeated with the timestamp (and for a second GPU the index) edited.

H100_HEADER, H100_ROW = H100_CSV.splitlines()[:2]
H100_STAMP = "2026/07/14 08:12:53.353"
ACTIVE_MASK = ", 0x0000000000000000, "  # clocks_event_reasons.active (after .supported)


def csv_series(ticks: int, gpus: int = 1, edits: dict[tuple[int, int], str] | None = None) -> str:
    """The real row as `ticks` ticks of `gpus` GPUs, 1 s apart (GPU rows 5 ms apart)."""
    lines = [H100_HEADER]
    for tick in range(ticks):
        for gpu in range(gpus):
            stamp = f"2026/07/14 08:12:{53 + tick:02d}.{353 + 5 * gpu:03d}"
            row = H100_ROW.replace(H100_STAMP, stamp)
            cells = row.split(", ")
            cells[28] = str(gpu)  # the index column
            row = ", ".join(cells)
            mask = (edits or {}).get((tick, gpu))
            if mask:
                row = row.replace(ACTIVE_MASK, f", {mask}, ", 1)
            lines.append(row)
    return "\n".join(lines) + "\n"


def test_the_real_row_reads_the_same_as_the_single_capture() -> None:
    timeline = parse_csv_series(csv_series(3, gpus=2))
    assert (timeline.gpus, timeline.interval_s, len(timeline.samples)) == (2, 1.0, 6)
    assert [(s.t_s, s.gpu) for s in timeline.samples] == [
        (0.0, 0),
        (0.0, 1),
        (1.0, 0),
        (1.0, 1),
        (2.0, 0),
        (2.0, 1),
    ]
    first = timeline.samples[0]
    assert (first.sm_clock_hz, first.memory_clock_hz) == (1_980_000_000, 2_619_000_000)
    assert (first.temperature_c, first.memory_temperature_c) == (59.0, 54.0)
    assert (first.power_w, first.power_limit_w, first.utilization_pct) == (631.95, 700.0, 100.0)
    assert first.clock_event_reasons == []
    assert timeline.power_default_limit_w == {"0": 700.0, "1": 700.0}


def test_csv_series_is_diagnosed_like_a_live_timeline() -> None:
    from bringup.checks.catalog import judge_probe
    from bringup.profile import load

    # Edit: GPU 1 reports HW slowdown + HW thermal slowdown (0x48) in 2 of 4 ticks.
    hot = "0x0000000000000048"
    text = csv_series(4, gpus=2, edits={(1, 1): hot, (2, 1): hot})
    findings = judge_probe("telemetry", parse_csv_series(text), None, load("h100"))
    assert [(f.check, f.status.value, f.message) for f in findings] == [
        (
            "diagnose.hw_thermal_slowdown",
            "FAIL",
            "GPU 1: HW thermal slowdown 50% of the time, GPU at 59 °C, HBM at 54 °C",
        )
    ]
    healthy = judge_probe("telemetry", parse_csv_series(csv_series(4, 2)), None, load("h100"))
    assert [(f.check, f.status.value) for f in healthy] == [("diagnose.throttle", "PASS")]


def test_csv_series_detection() -> None:
    assert detect_csv_series(csv_series(2)) and detect_csv_series(csv_series(2, gpus=8))
    # One capture of one GPU, or of several GPUs stamped ms apart, is not a series.
    assert not detect_csv_series(H100_CSV) and not detect_csv_series(csv_series(1, gpus=8))
    assert not detect_csv_series(DEEPSPEECH) and not detect_csv_series(H200_Q)
    no_time = (FIXTURES / "smi" / "netdata-tesla-p100-query-gpu.csv.txt").read_text()
    assert not detect_csv_series(no_time + no_time.splitlines()[1] + "\n")


def test_csv_series_skips_prompts_repeated_headers_and_a_cut_last_line() -> None:
    lines = csv_series(2).splitlines()
    text = "\n".join(["$ nvidia-smi --query-gpu=... --format=csv -l 1", *lines, lines[0]])
    text += "\n" + lines[1][:60] + "\n"  # the capture stopped mid-line
    timeline = parse_csv_series(text)
    assert [s.t_s for s in timeline.samples] == [0.0, 1.0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty output"),
        ("index, clocks.sm [MHz]\n0, 1980 MHz\n", "no timestamp column"),
        ("timestamp, index\n", "no data row under the header"),
        (
            "timestamp, index\n2026/07/14 08:12:53.353, 0\nyesterday, 0\n",
            "line 3: timestamp 'yesterday' is not YYYY/MM/DD HH:MM:SS.mmm",
        ),
        (
            "timestamp, index, power.draw [W]\n2026/07/14 08:12:53.353, 0, lots\n",
            "line 2: .*power.draw",
        ),
    ],
)
def test_csv_series_garbage_is_a_one_line_parse_error(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_csv_series(text)
