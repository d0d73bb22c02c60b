"""`bringup nccl`: planning a job and pairs, the pairwise verdicts, and `bringup inspect` on
every nccl-tests fixture (tests/integration/cli runs the command end to end)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bringup.checks import nccl as checks
from bringup.checks.nccl import PairResult, judge_pairwise, split_pairs
from bringup.commands import nccl as nccl_run
from bringup.findings import Expected, Status
from bringup.fleet import job
from bringup.fleet.inventory import Host
from bringup.node.nccl_facts import NcclFacts
from bringup.node.probes.nccl import parse_nccl_tests
from bringup.profile import load as load_profile
from bringup.recognize import inspect_text

FIXTURES = Path(__file__).parent.parent / "fixtures" / "nccl"
SINGLE = FIXTURES / "nccltests-290-h100x8-single-node-nvls.txt"
GB = 1e9

# --- planning (pure) --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "size"),
    [("8M", 8 << 20), ("8G", 8 << 30), ("1k", 1024), ("4096", 4096), ("16MiB", 16 << 20)],
)
def test_parse_size(text: str, size: int) -> None:
    assert nccl_run.parse_size(text) == size


@pytest.mark.parametrize("text", ["", "8X", "-1M", "1.5G", "M"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a size"):
        nccl_run.parse_size(text)


def test_parse_env() -> None:
    assert nccl_run.parse_env(["NCCL_ALGO=RING", "X="]) == {"NCCL_ALGO": "RING", "X": ""}
    with pytest.raises(ValueError, match="expected NAME=VALUE"):
        nccl_run.parse_env(["NCCL_ALGO"])


def test_job_params_give_each_node_its_rank_and_environment() -> None:
    hosts = [
        Host("node01", "10.0.0.1", vars={"bringup_nccl_env": {"NCCL_SOCKET_IFNAME": "ib0"}}),
        Host("node02", "10.0.0.2"),
    ]
    base = {"backend": "gloo", "env": {"NCCL_ALGO": "RING"}}
    first, second = job.job_params(base, hosts, 29517)
    assert first == {
        "backend": "gloo",
        "env": {"NCCL_ALGO": "RING", "NCCL_SOCKET_IFNAME": "ib0"},
        "nnodes": 2,
        "node_rank": 0,
        "master_addr": "10.0.0.1",
        "master_port": 29517,
    }
    assert (second["node_rank"], second["master_addr"], second["env"]) == (
        1,
        "10.0.0.1",
        {"NCCL_ALGO": "RING"},
    )
    assert job.job_params(base, hosts, 1, "192.168.0.9")[1]["master_addr"] == "192.168.0.9"


def test_host_env_must_be_a_mapping() -> None:
    with pytest.raises(ValueError, match="host n1: bringup_nccl_env must be a mapping"):
        job.host_env(Host("n1", "10.0.0.1", vars={"bringup_nccl_env": "NCCL_ALGO=RING"}))


def test_pairs_and_rounds() -> None:
    nodes = ["n1", "n2", "n3", "n4", "n5"]
    pairs = job.pair_up(nodes)
    assert pairs == [("n1", "n2"), ("n3", "n4"), ("n5", "n1")]
    # n1 cannot be in two jobs at once: its second pair waits for the next round.
    assert job.rounds(pairs) == [[("n1", "n2"), ("n3", "n4")], [("n5", "n1")]]
    assert job.retest_pairs(["n3", "n4", "n5"], ["n1", "n2"]) == [
        ("n3", "n1"),
        ("n4", "n2"),
        ("n5", "n1"),
    ]
    assert job.retest_pairs(["n3"], []) == []


# --- pairwise verdicts --------------------------------------------------------------------------

# 2x8 H100 over 8x400G IB reach ~470-477 GB/s all-reduce busbw (NVIDIA/nccl-tests#309); the
# slow pairs below are what one 400G NIC alone would give (46-48 GB/s, NVIDIA/nccl-tests#290;
# docs/reference.md#nccl-floors).
FAST, SLOW = 470e9, 47e9


def test_a_slow_node_is_named_and_its_partner_cleared() -> None:
    first = [PairResult(("n1", "n2"), FAST), PairResult(("n3", "n4"), SLOW)]
    assert split_pairs(first, 0.8) == (["n1", "n2"], ["n3", "n4"])
    retests = [PairResult(("n3", "n1"), SLOW), PairResult(("n4", "n2"), 468e9)]
    findings = {f.node: f for f in judge_pairwise(["n1", "n2", "n3", "n4"], first, retests, 0.8)}
    assert {n: f.status for n, f in findings.items()} == {
        "n1": Status.PASS,
        "n2": Status.PASS,
        "n3": Status.FAIL,
        "n4": Status.PASS,
    }
    bad = findings["n3"]
    assert bad.check == "nccl.pairwise" and bad.value == 47.0 and bad.unit == "GB/s"
    assert bad.expected == Expected(op=">=", value=376.0, unit="GB/s", note="(0.8 x best pair)")
    assert str(bad.expected) == ">= 376 GB/s (0.8 x best pair)"
    assert bad.message == (
        "n3 is slow: with n1: 47.00 GB/s (known good), and first round with n4: 47.00 GB/s; "
        "best pair 470.00 GB/s"
    )
    assert bad.action and "n3's network" in bad.action
    assert "the slow one was its first partner" in findings["n4"].message


def test_a_failed_pair_is_retested_and_an_error_stays_an_error() -> None:
    first = [PairResult(("n1", "n2"), FAST), PairResult(("n3", "n4"), None, "n4: timed out")]
    retests = [PairResult(("n3", "n1"), FAST), PairResult(("n4", "n2"), None, "n4: refused")]
    findings = {f.node: f for f in judge_pairwise(["n1", "n2", "n3", "n4"], first, retests, 0.8)}
    assert findings["n3"].status == Status.PASS
    assert findings["n4"].status == Status.ERROR
    assert "with known-good n2 the job failed: n4: refused" in findings["n4"].message


def test_nothing_measured_is_an_error_for_every_node() -> None:
    first = [PairResult(("n1", "n2"), None, "n2: refused")]
    findings = judge_pairwise(["n1", "n2"], first, [], 0.8)
    assert [f.status for f in findings] == [Status.ERROR, Status.ERROR]
    assert "no pair could be measured" in findings[0].message


def test_no_known_good_partner_left_is_a_warning() -> None:
    # n3's first pair is slow and, with 3 nodes, its other pair (n3, n1) failed: n1 and n2
    # are good, but suppose the retest could not be run: the verdict says so.
    first = [PairResult(("n1", "n2"), FAST), PairResult(("n3", "n1"), SLOW)]
    (n3,) = [f for f in judge_pairwise(["n1", "n2", "n3"], first, [], 0.8) if f.node == "n3"]
    assert n3.status == Status.WARN and "no known-good node was left" in n3.message


# --- the check, on facts of the probe -----------------------------------------------------------


def fixture_facts() -> NcclFacts:
    return parse_nccl_tests(SINGLE.read_text())


def test_one_rank_is_skipped_not_called_a_broken_launch() -> None:
    facts = fixture_facts()
    for row in facts.rows:  # what a 1-GPU node measures: busbw factor 0
        row.oop_busbw_bytes_per_s = row.ip_busbw_bytes_per_s = 0.0
    facts.all_zero_busbw, facts.launched_ranks, facts.nranks = True, 1, 1
    (found,) = checks.judge_allreduce_busbw(facts, load_profile("h100"))
    assert found.status == Status.SKIP and found.message.startswith("one rank only")
    facts.launched_ranks = None  # a log someone sent: the broken-launch diagnosis stands
    (found,) = checks.judge_allreduce_busbw(facts, load_profile("h100"))
    assert found.status == Status.ERROR and "MPI" in found.message


def test_other_collectives_are_judged_for_death_and_wrong_values() -> None:
    facts = fixture_facts()
    died = dataclasses.replace(
        fixture_facts(), collective="all_gather", complete=False, errors=["rank 3 exited 1: x"]
    )
    died.engine, died.backend = "torch", "nccl"
    wrong = dataclasses.replace(fixture_facts(), collective="broadcast", out_of_bounds=2)
    facts.others = [died, wrong]
    statuses = [
        (f.status, f.message.split(":")[0])
        for f in checks.judge_allreduce_busbw(facts, load_profile("h100"))
    ]
    assert statuses == [
        (Status.ERROR, "the torch engine (nccl, all_gather) died after 6 result rows"),
        (Status.FAIL, "broadcast returned wrong values"),
        (
            Status.PASS,
            "all_reduce busbw 476.53 GB/s at 4 GiB (best of messages >= 1 GiB; 476.53 GB/s at "
            "the largest, 4 GiB), floor 450 GB/s over 8 ranks; nccl-tests Avg bus bandwidth "
            "439.37 GB/s (all sizes), not judged",
        ),
    ]


# --- bringup inspect on every nccl-tests fixture --------------------------------------------------


@pytest.mark.parametrize(
    ("name", "collective", "peak", "avg", "nranks"),
    [
        ("nccltests-290-h100x8-single-node-nvls.txt", "all_reduce", 476.53e9, 439.369e9, 8),
        (
            "nccltests-290-h100x16-2node-ib-srun-prefix-validation0.txt",
            "all_reduce",
            167.87e9,
            142.735e9,
            16,
        ),
        (
            "gcp-a3mega-h100x16-allgather-srun-l-prefix-validation-off.txt",
            None,
            188.99e9,
            128.817e9,
            None,
        ),
        ("mpirun-g8-h100x16-2node-2proc-allreduce.txt", "all_reduce", 220.61e9, 50.906e9, 16),
        ("dgx2-v100x12-allgather-oldfmt-0e00-failed.txt", "all_gather", 112.34e9, 30.2993e9, 12),
        ("superbench-a100x8-allreduce.txt", "all_reduce", 235.26e9, 68.4048e9, 8),
        ("superbench-a100x8-allgather.txt", None, 230.07e9, 58.2651e9, 8),
        ("superbench-a100x8-alltoall.txt", None, 226.16e9, 58.6481e9, 8),
        ("superbench-a100x8-reducescatter.txt", None, 231.52e9, 60.168e9, 8),
        ("nccltests-294-h100-2node-nompi-busbw0-excerpt.txt", None, 0.0, 0.0, 1),
        (
            "nccltests-294-h100x16-2node-ib-mpi-fixed-excerpt.txt",
            "all_reduce",
            444.71e9,
            406.034e9,
            16,
        ),
        ("nccltests-294-h100x16-2node-ncclwarn-init-failure.txt", None, None, None, 16),
        ("nccltests-369-gh200x8-2node-cuda-busy-failure.txt", "all_reduce", None, None, 8),
    ],
)
def test_inspect_each_fixture(
    name: str, collective: str | None, peak: float | None, avg: float | None, nranks: int | None
) -> None:
    # What `bringup inspect FILE --json` prints as kind and facts (integration/cli runs the CLI).
    inspected = inspect_text((FIXTURES / name).read_text(), load_profile("h100"))
    facts = inspected.facts_json()
    assert inspected.kind == "nccl" and inspected.findings
    assert facts["collective"] == collective
    assert facts["peak_busbw_bytes_per_s"] == peak
    assert facts["avg_busbw_bytes_per_s"] == avg
    assert facts["nranks"] == nranks
    assert facts["engine"] is None  # a log, not our measurement
