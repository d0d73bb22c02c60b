"""Parsers of telemetry captures: `nvidia-smi dmon` and a series of `nvidia-smi -q`."""

from __future__ import annotations

from pathlib import Path

import pytest

from bringup.probes.dmon import detect, detect_q_series, parse_dmon, parse_q_series
from bringup.probes.result import ParseError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DEEPSPEECH = (FIXTURES / "dmon" / "deepspeech-178-4gpu-pucvmet-load.txt").read_text()
A100 = (FIXTURES / "dmon" / "pytorch-97459-a100-dmon-appclocks.txt").read_text()
H200_Q = (FIXTURES / "smi" / "ugpuexp-h200-q-load.txt").read_text()


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
        "1 GPUs, 11 samples over 11 s: no throttle reason, no straggler, HBM below its limit"
    )
