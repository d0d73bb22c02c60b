"""The nccl-tests output parser (real outputs) and the nccl checks."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import structs
from pydantic import TypeAdapter

from bringup.checks import nccl as checks
from bringup.findings import Expected, Finding, Status
from bringup.node.nccl_facts import NcclFacts, NcclRow
from bringup.node.probes import nccl
from bringup.node.probes.nccl import parse_nccl_tests
from bringup.node.result import ParseError
from bringup.profile import Profile
from tests.support.profiles import h100_profile

FIXTURES = Path(__file__).parent.parent / "fixtures" / "nccl"
ALL_FIXTURES = sorted(p.name for p in FIXTURES.glob("*.txt"))

SINGLE = "nccltests-290-h100x8-single-node-nvls.txt"
SRUN = "nccltests-290-h100x16-2node-ib-srun-prefix-validation0.txt"
GCP = "gcp-a3mega-h100x16-allgather-srun-l-prefix-validation-off.txt"
MPIRUN = "mpirun-g8-h100x16-2node-2proc-allreduce.txt"
DGX2 = "dgx2-v100x12-allgather-oldfmt-0e00-failed.txt"
SB_ALLREDUCE = "superbench-a100x8-allreduce.txt"
SB_ALLGATHER = "superbench-a100x8-allgather.txt"
SB_ALLTOALL = "superbench-a100x8-alltoall.txt"
SB_REDUCESCATTER = "superbench-a100x8-reducescatter.txt"
NOMPI = "nccltests-294-h100-2node-nompi-busbw0-excerpt.txt"
MPI_FIXED = "nccltests-294-h100x16-2node-ib-mpi-fixed-excerpt.txt"
INIT_FAILURE = "nccltests-294-h100x16-2node-ncclwarn-init-failure.txt"
GH200 = "nccltests-369-gh200x8-2node-cuda-busy-failure.txt"
# GB200 NVL72, CoreWeave's README: device lists trimmed to the last rank.
NVL72_1RACK = "coreweave-gb200-nvl72-72rank-1rack-trimmed.txt"
NVL72_2RACK = "coreweave-gb200-nvl72-144rank-2rack-trimmed.txt"
NVL72_20RACK = "coreweave-gb200-nvl72-1440rank-20rack-trimmed.txt"
OCI_GB300_4 = "oci-gb300-4rank-1node-allreduce-truncated.txt"
OCI_GB300_8 = "oci-gb300-8rank-2node-1rack-allreduce-trimmed.txt"
OCI_GB300_64 = "oci-gb300-64rank-16node-1rack-allreduce-trimmed.txt"
OCI_GB300_128 = "oci-gb300-128rank-32node-2rack-allreduce-trimmed.txt"
OCI_GB300_A2A = "oci-gb300-128rank-32node-2rack-alltoall-trimmed.txt"
OCI_GB200_4 = "oci-gb200-4rank-1node-graphics-device-allreduce-truncated.txt"


def make_profile(floor_gb_s: float) -> Profile:
    return h100_profile(nccl={"allreduce_busbw_min_gb_s": floor_gb_s})


# 8x H100 NVLS all-reduce: 473-482 GB/s (nccl-tests#212, #290; docs/reference.md#nccl-floors).
H100 = make_profile(473)
# 8x A100 NVLink3: ~235 GB/s (ml-engineering network/README; docs/reference.md#nccl-floors).
A100 = make_profile(235)


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def parse(name: str) -> NcclFacts:
    return parse_nccl_tests(text(name))


def judge(facts: NcclFacts, profile: Profile = H100) -> list[Finding]:
    return checks.judge_allreduce_busbw(facts, profile)


# --- the parser, fixture by fixture -------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "collective", "nranks", "rows", "peak", "largest", "avg", "oob", "complete"),
    [
        (SINGLE, "all_reduce", 8, 6, 476.53e9, 476.53e9, 439.369e9, 0, True),
        (SRUN, "all_reduce", 16, 11, 167.87e9, 155.57e9, 142.735e9, 0, True),
        (GCP, None, None, 11, 188.99e9, 188.99e9, 128.817e9, 0, True),
        (MPIRUN, "all_reduce", 16, 31, 220.61e9, 220.61e9, 50.906e9, 0, True),
        (DGX2, "all_gather", 12, 31, 112.34e9, 112.34e9, 30.2993e9, 4, True),
        (SB_ALLREDUCE, "all_reduce", 8, 34, 235.26e9, 235.26e9, 68.4048e9, 0, True),
        (SB_ALLGATHER, None, 8, 34, 230.07e9, 230.07e9, 58.2651e9, 0, True),
        (SB_ALLTOALL, None, 8, 34, 226.16e9, 226.16e9, 58.6481e9, 0, True),
        (SB_REDUCESCATTER, None, 8, 34, 231.52e9, 231.52e9, 60.168e9, 0, True),
        (NOMPI, None, 1, 24, 0.0, 0.0, 0.0, 0, True),
        (MPI_FIXED, "all_reduce", 16, 5, 444.71e9, 444.25e9, 406.034e9, 0, True),
        (INIT_FAILURE, None, 16, 0, None, None, None, None, False),
        (GH200, "all_reduce", 8, 0, None, None, None, None, False),
        # nranks from the highest rank number shown (+1), not from the one line shown.
        (NVL72_1RACK, "all_reduce", 72, 5, 846.82e9, 846.82e9, 745.53e9, 0, True),
        (NVL72_2RACK, "all_reduce", 144, 6, 820.36e9, 820.36e9, 688.487e9, 0, True),
        (NVL72_20RACK, "all_reduce", 1440, 6, 405.74e9, 405.74e9, 297.808e9, 0, True),
        # OCI's GB300/GB200 quick starts: "# Truncated  smaller message sizes", ranks 0, 1,
        # n-2, n-1 with "..." between; the GB200 excerpt stops before its summary.
        (OCI_GB300_4, "all_reduce", 4, 2, 685.27e9, 685.27e9, 446.673e9, 0, True),
        (OCI_GB300_8, "all_reduce", 8, 2, 842.11e9, 842.11e9, 474.234e9, 0, True),
        (OCI_GB300_64, "all_reduce", 64, 2, 930.6e9, 930.6e9, 455.539e9, 0, True),
        (OCI_GB300_128, "all_reduce", 128, 2, 739.99e9, 739.99e9, 300.755e9, 0, True),
        (OCI_GB300_A2A, "alltoall", 128, 2, 47.67e9, 47.67e9, 28.0844e9, 0, True),
        (OCI_GB200_4, "all_reduce", 4, 2, 663.34e9, 663.34e9, None, None, False),
    ],
)
def test_summary_per_fixture(
    name: str,
    collective: str | None,
    nranks: int | None,
    rows: int,
    peak: float | None,
    largest: float | None,
    avg: float | None,
    oob: int | None,
    complete: bool,
) -> None:
    facts = parse(name)
    assert facts.collective == collective
    assert facts.nranks == nranks
    assert len(facts.rows) == rows
    assert facts.peak_busbw_bytes_per_s == peak
    assert facts.largest_size_busbw_bytes_per_s == largest
    assert facts.avg_busbw_bytes_per_s == avg
    assert facts.out_of_bounds == oob
    assert facts.complete is complete


def test_every_fixture_is_in_the_table() -> None:
    assert len(ALL_FIXTURES) == 22


def test_single_node_rows_and_devices() -> None:
    facts = parse(SINGLE)
    assert facts.devices[0] == "node005 device 0 [0x18] NVIDIA H100 80GB HBM3"
    assert facts.devices[7] == "node005 device 7 [0xc1] NVIDIA H100 80GB HBM3"
    assert facts.rows[0] == NcclRow(
        size_bytes=134217728,
        count=33554432,
        dtype="float",
        redop="sum",
        root=-1,
        oop_time_s=613.3e-6,
        oop_algbw_bytes_per_s=218.85e9,
        oop_busbw_bytes_per_s=382.99e9,
        oop_wrong=0,
        ip_time_s=614.3e-6,
        ip_algbw_bytes_per_s=218.48e9,
        ip_busbw_bytes_per_s=382.34e9,
        ip_wrong=0,
    )
    peak_row = facts.rows[-1]
    assert peak_row.size_bytes == 4294967296
    assert peak_row.ip_busbw_bytes_per_s == 476.53e9  # in-place beats out-of-place 473.60
    assert peak_row.oop_busbw_bytes_per_s == 473.60e9
    assert peak_row.oop_time_s == 15870e-6
    assert facts.errors == [] and facts.version is None and not facts.all_zero_busbw


def test_srun_prefix_and_validation_off() -> None:
    facts = parse(SRUN)
    assert len(facts.devices) == 16
    assert facts.devices[8] == "node007 device 0 [0x18] NVIDIA H100 80GB HBM3"
    peak = max(facts.rows, key=lambda r: r.ip_busbw_bytes_per_s)
    assert (peak.size_bytes, peak.ip_busbw_bytes_per_s) == (268435456, 167.87e9)
    assert all(r.oop_wrong is None and r.ip_wrong is None for r in facts.rows)


def test_gcp_prefix_without_leading_space_and_redop_none() -> None:
    facts = parse(GCP)
    assert facts.rows[0].size_bytes == 8388608
    assert (facts.rows[0].redop, facts.rows[0].root) == ("none", -1)
    assert facts.rows[-1].size_bytes == 8589934592


def test_mpirun_tag_output_prefix_gives_the_same_facts() -> None:
    """Open MPI --tag-output prefixes every line with [job,rank]<stdout>:."""
    tagged = "".join(f"[1,0]<stdout>:{line}\n" for line in text(SINGLE).splitlines())
    assert parse_nccl_tests(tagged) == parse(SINGLE)


def test_superbench_info_line_ignored_and_old_error_column() -> None:
    facts = parse(SB_ALLREDUCE)
    assert facts.rows[0].size_bytes == 0 and facts.rows[-1].size_bytes == 8589934592
    assert facts.errors == []
    assert all(r.redop == "sum" and r.root is None and r.oop_wrong is None for r in facts.rows)
    assert facts.devices[0] == "localhost device 0 [0x00] A100-SXM4-40GB"


def test_alltoall_blank_redop_and_allgather_without_redop() -> None:
    assert {(r.redop, r.root) for r in parse(SB_ALLTOALL).rows} == {(None, None)}
    assert {(r.redop, r.root) for r in parse(SB_ALLGATHER).rows} == {(None, None)}
    assert parse(SB_ALLTOALL).rows[5].size_bytes == 32


def test_old_format_max_error_and_out_of_bounds() -> None:
    facts = parse(DGX2)
    assert [r.size_bytes for r in facts.rows][:4] == [0, 0, 0, 48]
    errors = [(r.size_bytes, r.oop_max_error, r.ip_max_error) for r in facts.rows]
    assert errors[-2:] == [(4294967280, 1.0, 1.0), (8589934560, 1.0, 1.0)]
    assert all(e[1:] == (0.0, 0.0) for e in errors[:-2])
    assert all(r.oop_wrong is None for r in facts.rows)


def test_nompi_run_has_all_zero_busbw() -> None:
    facts = parse(NOMPI)
    assert facts.all_zero_busbw
    assert facts.rows[-1].ip_algbw_bytes_per_s == 7017920.42e9
    assert [r.size_bytes for r in facts.rows][:3] == [134217728, 134217728, 536870912]


def test_mpi_fixed_nranks_from_info_lines() -> None:
    facts = parse(MPI_FIXED)
    assert facts.devices == []
    assert not facts.all_zero_busbw


def test_init_failure_keeps_the_nccl_warn_text() -> None:
    facts = parse(INIT_FAILURE)
    assert facts.version == "2.18.3+cuda12.2"
    assert len(facts.errors) == 16
    warns = [e for e in facts.errors if "NCCL WARN" in e]
    assert len(warns) == 8
    assert warns[0] == (
        "h100-4:739790:739878 [4] misc/socket.cc:397 NCCL WARN Net : connecting to address  "
        "with family 33621 is neither AF_INET(2) nor AF_INET6(10)"
    )
    assert facts.errors[3] == "h100-4: Test NCCL failure common.cu:1057 'internal error / '"


def test_gh200_cuda_busy_failure() -> None:
    facts = parse(GH200)
    assert facts.version == "2.26.6"  # nccl-library=22606
    assert facts.devices[4] == "gpu-1-7 device 0 [0009:01:00] NVIDIA GH200 120GB"
    assert len(facts.errors) == 6
    assert all("'CUDA-capable device(s) is/are busy or unavailable'" in e for e in facts.errors)


@pytest.mark.parametrize("garbage", ["", "hello\nworld\n", "# just a comment\n", "1 2 3\n"])
def test_garbage_is_a_parse_error(garbage: str) -> None:
    with pytest.raises(ParseError, match="no nccl-tests result rows or errors found"):
        parse_nccl_tests(garbage)


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_detect_every_fixture(name: str) -> None:
    assert nccl.detect(text(name))


def test_detect_rejects_a_kernel_log() -> None:
    xid_log = (
        Path(__file__).parent.parent / "fixtures" / "xid" / "gpud-xid13-xid109-dmesg-ctime.txt"
    )
    assert not nccl.detect(xid_log.read_text())


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_facts_round_trip_through_pydantic(name: str) -> None:
    facts = parse(name)
    assert TypeAdapter(NcclFacts).validate_python(dataclasses.asdict(facts)) == facts


# --- robustness ------------------------------------------------------------------------------

FIXTURE_LINES = sorted({line for name in ALL_FIXTURES for line in text(name).splitlines()})
# Pieces of real lines glued to random text reach deeper than random text alone.
MIXED = st.lists(
    st.one_of(
        st.sampled_from(FIXTURE_LINES),
        st.text(),
        st.sampled_from(FIXTURE_LINES).map(lambda line: line[: len(line) // 2]),
    ),
    max_size=8,
).map("\n".join)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parser_only_raises_parse_error_on_any_text(data: str) -> None:
    with contextlib.suppress(ParseError):
        parse_nccl_tests(data)


@settings(max_examples=300, deadline=None)
@given(MIXED)
def test_parser_only_raises_parse_error_on_mixed_lines(data: str) -> None:
    with contextlib.suppress(ParseError):
        facts = parse_nccl_tests(data)
        checks.judge_allreduce_busbw(facts, H100)  # the check copes with whatever parses


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(ALL_FIXTURES), st.floats(min_value=0, max_value=1))
def test_parser_survives_truncated_fixtures(name: str, cut: float) -> None:
    whole = text(name)
    with contextlib.suppress(ParseError):
        facts = parse_nccl_tests(whole[: int(len(whole) * cut)])
        assert len(facts.rows) <= len(parse(name).rows)


# --- the check -------------------------------------------------------------------------------


def test_single_node_h100_passes_the_floor() -> None:
    (found,) = judge(parse(SINGLE))
    assert found.check == "nccl.allreduce_busbw"
    assert (found.status, found.value, found.expected, found.unit) == (
        Status.PASS,
        476.53,
        Expected(op=">=", value=473, unit="GB/s"),
        "GB/s",
    )
    assert "476.53 GB/s at 4 GiB" in found.message
    assert "Avg bus bandwidth 439.37 GB/s" in found.message and "not judged" in found.message


def test_below_the_floor_fails() -> None:
    (found,) = judge(parse(SINGLE), make_profile(480))
    assert found.status == Status.FAIL and found.value == 476.53
    assert found.action and "nvlink" in found.action


# 2x8 H100 over 8x400G IB: ~470-477 GB/s (NVIDIA/nccl-tests#309; docs/reference.md#nccl-floors).
H100_TWO_NODES = structs.replace(
    H100, nccl=structs.replace(H100.nccl, allreduce_busbw_multinode_min_gb_s=470.0)
)


def test_the_nodes_a_run_spanned_are_read_from_its_rank_lines() -> None:
    assert parse(SINGLE).nodes == 1
    assert parse(SRUN).nodes == 2
    assert parse("mpirun-g8-h100x16-2node-2proc-allreduce.txt").nodes == 2
    assert parse(NOMPI).nodes is None  # the excerpt has no rank lines


def test_two_node_srun_judged_on_large_messages_not_the_peak() -> None:
    (found,) = judge(parse(SRUN), H100_TWO_NODES)
    # The 167.87 peak is at 256 MiB; messages >= 1 GiB reach at most 155.57.
    assert (found.status, found.value) == (Status.FAIL, 155.57)
    assert "155.57 GB/s at 8 GiB" in found.message
    assert "2-node floor 470 GB/s" in found.message


def test_a_multi_node_run_is_not_held_to_the_nvlink_floor() -> None:
    (found,) = judge(parse(SRUN))  # the profile has no multi-node floor
    assert found.status == Status.SKIP
    assert found.message.startswith("2-node job over 16 ranks: the profile has no multi-node floor")


def test_a100_allreduce_inferred_from_the_bus_factor() -> None:
    (found,) = judge(parse(SB_ALLREDUCE), A100)
    assert (found.status, found.value) == (Status.PASS, 235.26)


def test_small_messages_only_warn() -> None:
    facts = parse(SINGLE)
    facts.rows = facts.rows[:3]  # up to 512 MiB
    (found,) = judge(facts)
    assert found.status == Status.WARN
    assert "512 MiB is too small to judge the bus" in found.message


def test_all_zero_busbw_is_an_error_not_a_failure() -> None:
    (found,) = judge(parse(NOMPI))
    assert found.status == Status.ERROR
    assert found.action and "MPI=1" in found.action and "-g N" in found.action


def test_init_failure_is_an_error_with_the_warn_text() -> None:
    (found,) = judge(parse(INIT_FAILURE))
    assert found.status == Status.ERROR
    assert "Net : connecting to address with family 33621" in found.message
    assert "(and 15 more error lines)" in found.message


def test_cuda_busy_is_an_error() -> None:
    (found,) = judge(parse(GH200))
    assert found.status == Status.ERROR
    assert "is/are busy or unavailable" in found.message


def test_output_cut_before_the_summary_is_an_error() -> None:
    facts = parse(SINGLE)
    facts.complete = False
    (found,) = judge(facts)
    assert found.status == Status.ERROR and "before its summary" in found.message


def test_wrong_values_fail_even_when_fast() -> None:
    facts = parse(SINGLE)
    facts.rows[2] = dataclasses.replace(facts.rows[2], ip_wrong=5)
    validation, bandwidth = judge(facts)
    assert (validation.status, validation.value) == (Status.FAIL, 1)
    assert "at sizes: 512 MiB" in validation.message
    assert bandwidth.status == Status.PASS


def test_old_format_out_of_bounds_fails_and_allgather_has_no_floor() -> None:
    validation, bandwidth = judge(parse(DGX2))
    assert (validation.status, validation.value) == (Status.FAIL, 4)
    assert "4 out of bounds" in validation.message
    assert "4294967280 B, 8589934560 B" in validation.message
    assert bandwidth.status == Status.SKIP
    assert bandwidth.message.startswith("no floor for all_gather in the profile")


def test_unnamed_collective_is_skipped() -> None:
    (found,) = judge(parse(SB_REDUCESCATTER))
    assert found.status == Status.SKIP and "does not name" in found.message


def test_check_is_registered() -> None:
    assert [(c.name, c.probe) for c in checks.CHECKS] == [("nccl.allreduce_busbw", "nccl")]


def test_a_gloo_collective_under_a_gpu_profile_is_not_an_nccl_measurement() -> None:
    """A gloo/CPU all-reduce forced under `-p h100` was ACCEPTED (its 2 ranks have no floor
    on an 8-GPU board: SKIP). Gloo is no NCCL measurement: the bandwidth the profile
    requires was never measured, so it is an ERROR that says so, whatever the rank count.
    The facts are the H100 run of SINGLE as the torch engine on gloo would record them."""
    measured = parse(SINGLE)
    assert [f.status for f in judge(measured)] == [Status.PASS]  # nccl-tests: judged
    for ranks in (8, 2):
        gloo = dataclasses.replace(measured, engine="torch", backend="gloo", nranks=ranks)
        [found] = judge(gloo)
        assert (found.check, found.status) == ("nccl.allreduce_busbw", Status.ERROR)
        assert found.message == (
            f"ran on gloo/CPU, not NCCL: the torch engine's all_reduce over {ranks} ranks "
            "measured the CPU and its sockets (peak busbw 476.53 GB/s), not the GPUs' bus; "
            "the h100-test profile's NCCL bandwidth is not measured"
        )
        assert found.action is not None and "--backend nccl" in found.action
    # The torch engine on NCCL is judged as nccl-tests is.
    on_nccl = dataclasses.replace(measured, engine="torch", backend="nccl")
    assert [f.status for f in judge(on_nccl)] == [Status.PASS]
