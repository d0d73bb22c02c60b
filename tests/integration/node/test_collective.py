"""The torch engine of the nccl probe: its arithmetic, and real runs with gloo on this CPU."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from bringup.checks import nccl as checks
from bringup.checks.catalog import judge_probe
from bringup.facts import decode, read_record
from bringup.findings import Status
from bringup.node.collective import launcher
from bringup.node.collective.measure import Layout, bus_factor, layout, make_row, sweep
from bringup.node.nccl_facts import NcclFacts, Params
from bringup.node.probes.nccl import parse_nccl_tests
from bringup.node.protocol import run_all
from bringup.node.rendezvous import free_port
from bringup.node.result import ProbeError
from bringup.profile import load as load_profile

torch = pytest.importorskip("torch", reason="torch engine tests need torch (pip install torch)")

KIB = 1 << 10
MIB = 1 << 20
ALL = ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast"]


def small(**overrides: object) -> Params:
    """A sweep small enough for 2 shared CPU cores: 4 KiB .. 1 MiB, 3 timed iterations."""
    values: dict[str, object] = {
        "backend": "gloo",
        "ranks": 2,
        "min_bytes": 4 * KIB,
        "max_bytes": 1 * MIB,
        "step_factor": 4,
        "iters": 3,
        "warmup_iters": 1,
        "rendezvous_timeout_s": 60,
        "timeout_s": 120,
    }
    values.update(overrides)
    return Params(**values)  # type: ignore[arg-type]


# --- arithmetic, as nccl-tests PERFORMANCE.md defines it -------------------------------------


@pytest.mark.parametrize(
    ("name", "n", "factor"),
    [
        ("all_reduce", 8, 1.75),  # 2(n-1)/n
        ("all_reduce", 2, 1.0),
        ("all_reduce", 1, 0.0),
        ("all_gather", 8, 0.875),  # (n-1)/n
        ("reduce_scatter", 4, 0.75),
        ("alltoall", 16, 0.9375),
        ("broadcast", 8, 1.0),
    ],
)
def test_bus_factor(name: str, n: int, factor: float) -> None:
    assert bus_factor(name, n) == factor


def test_bus_factor_of_an_unknown_collective() -> None:
    with pytest.raises(ValueError, match="no bus factor for 'hypercube'"):
        bus_factor("hypercube", 8)


def test_sweep_is_nccl_tests_b_e_f() -> None:
    # -b 8M -e 8G -f 2: 11 sizes, as in the acceptance suite.
    sizes = sweep(8 * MIB, 8 << 30, 2)
    assert len(sizes) == 11 and sizes[0] == 8 * MIB and sizes[-1] == 8 << 30
    assert sweep(4 * KIB, 1 * MIB, 4) == [4096, 16384, 65536, 262144, 1048576]
    assert sweep(0, 16, 2) == [4, 8, 16]  # a 0-byte start would never grow


def test_layout_follows_nccl_tests_byte_counts() -> None:
    # all_gather on 12 ranks of 8 GiB (dgx2 fixture): count is the per-rank send count and
    # the size is rounded down to a multiple of ranks x 4 bytes: 8589934560 as printed there.
    assert layout("all_gather", 8 << 30, 12) == Layout(178956970, 8589934560)
    assert layout("all_reduce", 4 << 30, 8) == Layout(1 << 30, 4 << 30)  # the H100 fixture
    assert layout("reduce_scatter", 1000, 8) == Layout(31, 992)
    assert layout("alltoall", 16, 8) == Layout(0, 0)  # too small: skipped by the worker


def test_make_row_busbw_is_algbw_times_factor() -> None:
    # The largest row of the 8x H100 fixture: 4 GiB all_reduce, 15870 us out-of-place.
    row = make_row("all_reduce", Layout(1 << 30, 4 << 30), 8, (15870e-6, 15773e-6), (0, 0))
    assert row.oop_algbw_bytes_per_s == (4 << 30) / 15870e-6
    assert row.oop_busbw_bytes_per_s == row.oop_algbw_bytes_per_s * 1.75
    # nccl-tests printed 270.63 / 473.60 and 272.30 / 476.53 GB/s for this row, from times
    # it printed rounded to 1 us: the figures agree to that rounding (0.01 GB/s here).
    figures = [
        row.oop_algbw_bytes_per_s,
        row.oop_busbw_bytes_per_s,
        row.ip_algbw_bytes_per_s,
        row.ip_busbw_bytes_per_s,
    ]
    assert [round(f / 1e9, 2) for f in figures] == pytest.approx(
        [270.63, 473.60, 272.30, 476.53], abs=0.015
    )
    assert (row.redop, row.root, row.dtype) == ("sum", -1, "float")


def test_events_skip_foreign_lines() -> None:
    stdout = 'NCCL INFO x\n{"event": "start", "nranks": 2}\n{broken\n{"no": "event"}\n'
    assert launcher.events(stdout) == [{"event": "start", "nranks": 2}]


@pytest.mark.parametrize(
    ("stderr", "line"),
    [
        (
            "Traceback...\n  File x\ntorch.distributed.DistStoreError: Timed out\n[W] noise\n",
            "torch.distributed.DistStoreError: Timed out",
        ),
        ("just a line\nlast line\n", "last line"),
        ("", "no output on stderr"),
    ],
)
def test_last_error(stderr: str, line: str) -> None:
    assert launcher.last_error(stderr) == line


# --- real runs with gloo on CPU ---------------------------------------------------------------


def check_rows(facts: NcclFacts, n: int) -> None:
    """busbw = algbw x factor and algbw = size / time, recomputed from the recorded times."""
    factor = bus_factor(facts.collective or "", n)
    assert facts.rows
    for row in facts.rows:
        assert row.oop_time_s > 0
        assert row.oop_algbw_bytes_per_s == row.size_bytes / row.oop_time_s
        assert row.oop_busbw_bytes_per_s == row.oop_algbw_bytes_per_s * factor
        if facts.in_place_measured:
            assert row.ip_algbw_bytes_per_s == row.size_bytes / row.ip_time_s
            assert row.ip_busbw_bytes_per_s == row.ip_algbw_bytes_per_s * factor
            assert row.ip_wrong == 0
        else:
            assert (row.ip_time_s, row.ip_wrong) == (0.0, None)
        assert row.oop_wrong == 0


def test_two_ranks_every_collective() -> None:
    output = launcher.collect(small(collectives=ALL), gpus=0)
    facts: NcclFacts = output.facts
    runs = [facts, *facts.others]
    assert [f.collective for f in runs] == ALL
    for measured in runs:
        assert measured.complete and measured.errors == []
        assert (measured.nranks, measured.launched_ranks) == (2, 2)
        assert (measured.engine, measured.backend) == ("torch", "gloo")
        assert measured.out_of_bounds == 0
        check_rows(measured, 2)
        # The sizes nccl-tests would print for this sweep.
        assert [r.size_bytes for r in measured.rows] == [4096, 16384, 65536, 262144, 1048576]
        assert measured.peak_busbw_bytes_per_s == max(
            max(r.oop_busbw_bytes_per_s, r.ip_busbw_bytes_per_s) for r in measured.rows
        )
        assert measured.largest_size_busbw_bytes_per_s == max(
            facts_busbw(measured, measured.rows[-1])
        )
    assert len(facts.devices) == 2 and "[cpu pid" in facts.devices[0]
    assert facts.version is not None and facts.version.startswith("gloo (torch ")
    assert runs[3].in_place_measured is False  # alltoall has no in-place form in torch
    # The raw table reads back through the nccl-tests parser (2-decimal GB/s, 0.1 us).
    table = output.raw["torch-all_reduce.txt"]
    parsed = parse_nccl_tests(table)
    assert [r.size_bytes for r in parsed.rows] == [r.size_bytes for r in facts.rows]
    assert parsed.complete and parsed.out_of_bounds == 0
    assert "rank0-events.jsonl" in output.raw


def facts_busbw(facts: NcclFacts, row: object) -> list[float]:
    ip = [row.ip_busbw_bytes_per_s] if facts.in_place_measured else []  # type: ignore[attr-defined]
    return [row.oop_busbw_bytes_per_s, *ip]  # type: ignore[attr-defined]


def test_four_ranks_all_reduce_and_alltoall() -> None:
    params = small(ranks=4, collectives=["all_reduce", "alltoall"], max_bytes=256 * KIB)
    facts: NcclFacts = launcher.collect(params, gpus=0).facts
    assert facts.nranks == 4 and facts.complete
    check_rows(facts, 4)
    check_rows(facts.others[0], 4)
    # Factor 2(n-1)/n = 1.5 for all-reduce on 4 ranks, (n-1)/n = 0.75 for alltoall.
    row = facts.rows[-1]
    assert row.oop_busbw_bytes_per_s / row.oop_algbw_bytes_per_s == pytest.approx(1.5)
    other = facts.others[0].rows[-1]
    assert other.oop_busbw_bytes_per_s / other.oop_algbw_bytes_per_s == pytest.approx(0.75)
    # nccl-tests' Avg bus bandwidth: the mean over every size, both placements.
    both = [b for r in facts.rows for b in (r.oop_busbw_bytes_per_s, r.ip_busbw_bytes_per_s)]
    assert facts.avg_busbw_bytes_per_s == pytest.approx(sum(both) / len(both), rel=1e-12)


def test_without_validation_wrong_counts_are_not_given() -> None:
    facts: NcclFacts = launcher.collect(small(check=False, max_bytes=16 * KIB), gpus=0).facts
    assert facts.complete and facts.out_of_bounds is None
    assert all(r.oop_wrong is None and r.ip_wrong is None for r in facts.rows)


def test_ranks_that_cannot_meet_fail_with_the_ranks_own_error(tmp_path: Path) -> None:
    # This node is rank 1 of a 2-node job whose first node never comes: the client cannot
    # reach the rendezvous and says so within rendezvous_timeout_s.
    port = free_port("127.0.0.1")
    params = small(
        ranks=1, nnodes=2, node_rank=1, master_port=port, rendezvous_timeout_s=3, timeout_s=60
    )
    output = launcher.collect(params, gpus=0)
    facts: NcclFacts = output.facts
    assert not facts.complete and facts.rows == []
    (error,) = facts.errors
    assert error.startswith("rank 1 on ") and " exited 1: " in error
    assert "torch.distributed" in error and "127.0.0.1" in error and str(port) in error
    assert "rank1.stderr.txt" in output.raw
    (found,) = checks.judge_allreduce_busbw(facts, load_profile("h100"))
    assert found.status == Status.ERROR
    assert found.message.startswith("the torch engine (gloo, all_reduce) died after 0 result rows")


def test_a_hung_rendezvous_is_stopped_at_the_deadline() -> None:
    # Rank 0 of a 2-node job waits for a node that never comes; our deadline ends it first.
    params = small(ranks=1, nnodes=2, master_port=free_port("127.0.0.1"))
    params.rendezvous_timeout_s, params.timeout_s = 120, 4
    facts: NcclFacts = launcher.collect(params, gpus=0).facts
    assert not facts.complete
    assert facts.errors == ["torch engine timed out after 4 s; ranks were stopped"]


@pytest.mark.parametrize(
    ("params", "gpus", "message"),
    [
        (Params(), 0, "no NVIDIA GPU found on this node"),
        (Params(backend="gloo"), 0, "backend gloo runs on CPU: say how many ranks"),
        (Params(backend="nccl", ranks=2), 0, "backend nccl needs NVIDIA GPUs"),
        (Params(ranks=9), 8, "ranks=9 but this node has 8 GPUs"),
        (Params(collectives=["sendrecv"], ranks=2), 0, "the torch engine measures"),
        (Params(backend="gloo", ranks=1, nnodes=2), 0, "needs a master_port"),
    ],
)
def test_what_cannot_run_is_a_probe_error(params: Params, gpus: int, message: str) -> None:
    with pytest.raises(ProbeError, match=message):
        launcher.collect(params, gpus)


# --- the probe through the node protocol ------------------------------------------------------


def test_probe_end_to_end_through_the_node_side() -> None:
    params = dataclasses.asdict(small(collectives=["all_reduce", "broadcast"]))
    request = {"probes": [{"name": "nccl", "params": params, "timeout_s": 180}]}
    shown: list[dict[str, Any]] = []
    (record,) = list(run_all(request, on_progress=shown.append))
    assert record["ok"], record["error"]
    # What the sweep is at, as it goes: the start, then sizes as rank 0 prints their rows.
    phases = [line["progress"]["phase"] for line in shown]
    sizes = len(sweep(4 * KIB, 1 * MIB, 4))
    assert phases[0] == f"all_reduce, broadcast: {sizes} sizes on 2 ranks (gloo)"
    assert all(p.startswith(("all_reduce ", "broadcast ")) for p in phases[1:])
    assert {"rank0-events.jsonl", "torch-all_reduce.txt", "torch-broadcast.txt"} <= set(
        record["raw"]
    )
    facts = decode(read_record(record))
    assert isinstance(facts, NcclFacts)
    assert facts.engine == "torch" and facts.others[0].collective == "broadcast"
    check_rows(facts, 2)
    findings = judge_probe("nccl", facts, None, load_profile("h100"))
    (found,) = findings
    # A gloo run on the CPU is no NCCL measurement: under a GPU profile the NCCL bandwidth
    # it needs is not measured, an ERROR that says so and gives the figure, never a PASS.
    assert found.status == Status.ERROR
    assert found.message.startswith("ran on gloo/CPU, not NCCL")
    assert "peak busbw" in found.message


def test_probe_on_a_gpu_less_node_without_ranks_is_an_error_finding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU, whatever this machine has
    request = {"probes": [{"name": "nccl", "params": {}, "timeout_s": 60}]}
    (record,) = list(run_all(request))
    assert not record["ok"]
    assert record["error"].startswith("no NVIDIA GPU found on this node")
    (found,) = judge_probe("nccl", None, record["error"], load_profile("b300"))
    assert found.status == Status.ERROR
