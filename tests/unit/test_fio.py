"""The fio JSON parser against real reports (tests/fixtures/fio/SOURCES.md says where from)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from bringup.node.parsers.fio import FioJob, FioResult, detect, parse_fio_json
from bringup.node.result import ParseError

FIXTURES = Path(__file__).parent.parent / "fixtures" / "fio"
SUPERBENCH = "superbench-nvme-randrw-4jobs-group.json"
PKB = "pkb-fio2.1.4-seqwrite-seqread-randwrite-randread-oldfmt.json"
FIOPLOT = "fioplot-intel-d3s4610-sata-randread-4k-qd1-32jobs-group.json"
LOCAL = "local-vm-virtio-ext4-fio3.33-{}.json"
ALL_FIXTURES = sorted(p.name for p in FIXTURES.glob("*.json"))


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def parse(name: str) -> FioResult:
    return parse_fio_json(text(name))


# --- exact values from each fixture --------------------------------------------------------


def test_superbench_fio316_group_reporting_is_one_job_with_bw_bytes() -> None:
    result = parse(SUPERBENCH)
    assert result.fio_version == "fio-3.16"
    assert [job.name for job in result.jobs] == ["rand_read_write"]
    job = result.jobs[0]
    # bw_bytes is used as written, not bw (340570 KiB/s) x 1024 = 348743680.
    assert job.read_bw_bytes == 348743777
    assert job.write_bw_bytes == 348450387
    assert job.read_iops == 85138.890741
    assert job.write_iops == 85066.128925
    # lat_percentiles=1: the percentiles live under lat_ns, in ns.
    assert job.read_clat_p99_s == pytest.approx(2244608e-9)
    assert job.write_clat_p99_s == pytest.approx(2072576e-9)
    # job_runtime is 120004 (4 jobs summed); each direction ran 30002 ms.
    assert job.runtime_s == pytest.approx(30.002)
    assert job.error == 0


def test_pkb_fio214_old_schema_bw_in_kib_and_integer_iops() -> None:
    result = parse(PKB)
    assert result.fio_version == "fio-2.1.4"
    assert [job.name for job in result.jobs] == [
        "sequential_write",
        "sequential_read",
        "random_write_test",
        "random_read_test",
        "random_read_test_parallel",
    ]
    write, read, rand_write, rand_read, rand_parallel = result.jobs
    assert write.write_bw_bytes == 68118 * 1024
    assert write.write_iops == 133
    assert write.read_bw_bytes == 0
    assert write.read_clat_p99_s is None  # no reads: fio's table of zeros is not a latency
    assert write.write_clat_p99_s == pytest.approx(823296e-6)  # fio 2.x: microseconds
    assert write.runtime_s == pytest.approx(5.314)
    assert read.read_bw_bytes == 129836 * 1024
    assert read.read_iops == 253
    assert read.read_clat_p99_s == pytest.approx(473088e-6)
    assert read.runtime_s == pytest.approx(2.788)
    assert rand_write.write_iops == 1610
    assert rand_read.read_iops == 317
    assert rand_parallel.read_iops == 323


def test_fioplot_fio31_bw_without_bw_bytes() -> None:
    result = parse(FIOPLOT)
    assert result.fio_version == "fio-3.1"
    [job] = result.jobs
    assert job.name == "iotest"
    assert job.read_iops == 63862.868952
    assert job.read_bw_bytes == 255451 * 1024
    assert job.write_bw_bytes == 0
    assert job.read_clat_p99_s == pytest.approx(675840e-9)
    assert job.write_clat_p99_s is None
    assert job.runtime_s == pytest.approx(60.001)


def test_local_fio333_reports_of_the_nvme_probe() -> None:
    seq_read = parse(LOCAL.format("seq_read")).jobs
    assert [(j.name, j.read_bw_bytes, j.read_iops) for j in seq_read] == [
        ("seq_read", 1329698359, 1257.85124)
    ]
    assert seq_read[0].read_clat_p99_s == pytest.approx(31064064e-9)
    [seq_write] = parse(LOCAL.format("seq_write")).jobs
    assert (seq_write.write_bw_bytes, seq_write.write_iops) == (2581431293, 2451.55939)
    [rand_read] = parse(LOCAL.format("rand_read")).jobs
    assert rand_read.read_iops == 93301.899367
    assert rand_read.read_clat_p99_s == pytest.approx(2670592e-9)
    [concurrent] = parse(LOCAL.format("concurrent_read")).jobs
    assert concurrent.read_bw_bytes == 2629882363
    [checkpoint] = parse(LOCAL.format("checkpoint")).jobs
    assert checkpoint.write_bw_bytes == 1813753081
    assert checkpoint.runtime_s == pytest.approx(0.296)


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_facts_round_trip_through_pydantic(name: str) -> None:
    """The controller revalidates facts from JSON: the dataclasses must survive it."""
    result = parse(name)
    assert TypeAdapter(FioResult).validate_python(asdict(result)) == result


# --- what fio prints around the JSON ----------------------------------------------------


def test_warning_lines_before_and_after_the_json_are_skipped() -> None:
    # fio prints such notes on stdout before the report (fio's own wording).
    before = (
        "note: both iodepth >= 1 and synchronous I/O engine are selected, "
        "queue depth will be capped at 1\n"
        "fio: { is not a report\n"
    )
    after = "fio: file hash not empty on exit\n"
    assert parse_fio_json(before + text(FIOPLOT) + after) == parse(FIOPLOT)


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "fio: engine libaio not loadable\nfio: failed to load engine\n",
        "{}",
        '{"jobs": {}}',
        '{"jobs": [1]}',
        '{"jobs": [{"jobname": "x"}]}',
        '{"jobs": [{"jobname": "x", "read": {}, "write": {}}]}',
        '{"jobs": [{"jobname": "x", "error": "0", "read": {"bw": 1, "iops": 1}}]}',
        "[" * 100_000,
    ],
)
def test_garbage_is_a_parse_error(garbage: str) -> None:
    with pytest.raises(ParseError):
        parse_fio_json(garbage)


def test_truncated_report_is_a_parse_error() -> None:
    whole = text(SUPERBENCH)
    with pytest.raises(ParseError, match="truncated"):
        parse_fio_json(whole[: len(whole) // 2])


def test_detect() -> None:
    assert all(detect(text(name)) for name in ALL_FIXTURES)
    assert not detect("GPU0\tX\tNV18\n")
    assert not detect("")


# --- never anything but ParseError -----------------------------------------------------


def _parse_or_parse_error(candidate: str) -> None:
    try:
        result = parse_fio_json(candidate)
    except ParseError:
        return
    assert all(isinstance(job, FioJob) for job in result.jobs)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_arbitrary_text_raises_only_parse_error(candidate: str) -> None:
    _parse_or_parse_error(candidate)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(ALL_FIXTURES), st.data())
def test_truncated_or_cut_fixtures_raise_only_parse_error(name: str, data: st.DataObject) -> None:
    whole = text(name)
    end = data.draw(st.integers(0, len(whole)), label="end")
    _parse_or_parse_error(whole[:end])
    # A slice cut out of the middle: the JSON may stay valid with fields missing or odd.
    start = data.draw(st.integers(0, len(whole)), label="start")
    length = data.draw(st.integers(0, 200), label="length")
    _parse_or_parse_error(whole[:start] + whole[start + length :])


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([SUPERBENCH, PKB]), st.data())
def test_values_replaced_raise_only_parse_error(name: str, data: st.DataObject) -> None:
    """A number of a real report replaced by another JSON value."""
    whole = text(name)
    start = data.draw(st.integers(0, len(whole) - 1), label="start")
    colon = whole.find(" : ", start)
    if colon < 0:
        return
    comma = whole.find(",", colon)
    value = data.draw(
        st.sampled_from(["null", "true", '"x"', "[]", "{}", "-1", "1e400", "NaN", "9" * 400])
    )
    _parse_or_parse_error(whole[: colon + 3] + value + whole[comma:])
