"""The nccl probe's nccl-tests engine: command line, engine choice, and runs that die or hang.

There is no GPU here, so `all_reduce_perf` is a script that prints a recorded real output
(tests/fixtures/nccl) and notes the arguments it was given: the probe's side of the run
(argv, environment, parsing, keeping raw output, deadlines, exit codes) is what is tested.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from bringup.checks import nccl as checks
from bringup.findings import Status
from bringup.node.nccl_facts import NcclFacts, Params
from bringup.node.probes import nccl
from bringup.node.probes.nccl import parse_nccl_tests
from bringup.node.result import ProbeError
from bringup.profile import load as load_profile

FIXTURES = Path(__file__).parents[2] / "fixtures" / "nccl"
SINGLE = FIXTURES / "nccltests-290-h100x8-single-node-nvls.txt"
INIT_FAILURE = FIXTURES / "nccltests-294-h100x16-2node-ncclwarn-init-failure.txt"


def fake_binary(folder: Path, name: str, body: str) -> Path:
    """An executable `name` in folder that records its arguments and runs body (sh)."""
    folder.mkdir(exist_ok=True)
    path = folder / name
    args = shlex.quote(str(folder / f"{name}.args"))
    path.write_text(
        f'#!/bin/sh\necho "$@" > {args}\necho "NCCL_DEBUG=$NCCL_DEBUG" >> {args}\n{body}'
    )
    path.chmod(0o755)
    return path


@pytest.fixture
def eight_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process sees 8 GPUs (how the probe counts them when CUDA_VISIBLE_DEVICES is set)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7")


def test_count_gpus_honours_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,3")
    assert nccl.count_gpus() == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert nccl.count_gpus() == 0


def test_argv_is_the_sweep_of_the_acceptance_suite() -> None:
    argv = nccl.nccl_tests_argv("/opt/nccl-tests/all_reduce_perf", Params(), 8)
    assert argv == [
        "/opt/nccl-tests/all_reduce_perf",
        *("-b", "8388608", "-e", "8589934592", "-f", "2"),
        *("-g", "8", "-c", "1", "-n", "20", "-w", "5"),
    ]


def test_a_recorded_run_is_parsed_and_kept(tmp_path: Path, eight_gpus: None) -> None:
    folder = tmp_path / "bin"
    fake_binary(folder, "all_reduce_perf", f"cat {shlex.quote(str(SINGLE))}\n")
    params = Params(nccl_tests_dir=str(folder), env={"NCCL_ALGO": "RING"})
    output = nccl.collect(params)
    facts: NcclFacts = output.facts
    expected = parse_nccl_tests(SINGLE.read_text())
    assert facts.rows == expected.rows
    assert facts.peak_busbw_bytes_per_s == 476.53e9
    assert (facts.engine, facts.launched_ranks, facts.collective) == ("nccl-tests", 8, "all_reduce")
    args = (folder / "all_reduce_perf.args").read_text().splitlines()
    assert args == ["-b 8388608 -e 8589934592 -f 2 -g 8 -c 1 -n 20 -w 5", "NCCL_DEBUG=WARN"]
    assert output.raw["all_reduce_perf.txt"].startswith(f"# command: {folder}/all_reduce_perf -b")
    (found,) = checks.judge_allreduce_busbw(facts, load_profile("h100"))
    assert (found.status, found.value) == (Status.PASS, 476.53)


def test_a_run_that_died_mid_way_keeps_its_rows_and_the_warn(
    tmp_path: Path, eight_gpus: None
) -> None:
    folder = tmp_path / "bin"
    warn = next(line for line in INIT_FAILURE.read_text().splitlines() if "NCCL WARN" in line)
    body = (
        f"head -n 18 {shlex.quote(str(SINGLE))}\n"  # header + the first 3 result rows
        f"echo {shlex.quote(warn)} >&2\nexit 3\n"
    )
    fake_binary(folder, "all_reduce_perf", body)
    facts: NcclFacts = nccl.collect(Params(nccl_tests_dir=str(folder))).facts
    assert [r.size_bytes for r in facts.rows] == [134217728, 268435456, 536870912]
    assert not facts.complete
    assert facts.errors[0].endswith("is neither AF_INET(2) nor AF_INET6(10)")
    assert facts.errors[1] == f"all_reduce_perf exited 3: {warn}"
    (found,) = checks.judge_allreduce_busbw(facts, load_profile("h100"))
    assert found.status == Status.ERROR
    assert found.message.startswith("nccl-tests died after 3 result rows: Net : connecting")


def test_a_hung_binary_is_stopped_at_the_deadline(tmp_path: Path, eight_gpus: None) -> None:
    folder = tmp_path / "bin"
    fake_binary(folder, "all_reduce_perf", f"head -n 16 {shlex.quote(str(SINGLE))}\nsleep 60\n")
    facts: NcclFacts = nccl.collect(Params(nccl_tests_dir=str(folder), timeout_s=1)).facts
    assert len(facts.rows) == 1 and not facts.complete
    assert facts.errors == ["all_reduce_perf timed out after 1 s"]


def test_a_binary_that_prints_nothing_useful_is_a_probe_error(
    tmp_path: Path, eight_gpus: None
) -> None:
    folder = tmp_path / "bin"
    fake_binary(folder, "all_reduce_perf", "echo hello\n")
    with pytest.raises(ProbeError, match="all_reduce_perf printed no result table"):
        nccl.collect(Params(nccl_tests_dir=str(folder)))


def test_several_collectives_each_with_its_binary(tmp_path: Path, eight_gpus: None) -> None:
    folder = tmp_path / "bin"
    for name, fixture in (
        ("all_reduce_perf", "superbench-a100x8-allreduce.txt"),
        ("all_gather_perf", "superbench-a100x8-allgather.txt"),
    ):
        fake_binary(folder, name, f"cat {shlex.quote(str(FIXTURES / fixture))}\n")
    params = Params(nccl_tests_dir=str(folder), collectives=["all_reduce", "all_gather"])
    output = nccl.collect(params)
    facts: NcclFacts = output.facts
    assert facts.collective == "all_reduce" and facts.peak_busbw_bytes_per_s == 235.26e9
    (other,) = facts.others
    # The superbench all_gather output does not name its test: the probe knows which it ran.
    assert other.collective == "all_gather" and other.peak_busbw_bytes_per_s == 230.07e9
    assert sorted(output.raw) == ["all_gather_perf.txt", "all_reduce_perf.txt"]


# --- which engine -----------------------------------------------------------------------------


def test_engine_choice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "bin"
    fake_binary(folder, "all_reduce_perf", "true\n")
    with_binary = Params(nccl_tests_dir=str(folder))
    assert nccl.choose_engine(with_binary, gpus=8) == "nccl-tests"
    # Across nodes, or without GPUs, our torch engine measures.
    monkeypatch.setattr(nccl, "torch_installed", lambda: True)
    assert nccl.choose_engine(Params(nccl_tests_dir=str(folder), nnodes=2), gpus=8) == "torch"
    assert nccl.choose_engine(with_binary, gpus=0) == "torch"
    assert nccl.choose_engine(Params(nccl_tests_dir=str(tmp_path)), gpus=8) == "torch"
    monkeypatch.setattr(nccl, "torch_installed", lambda: False)
    with pytest.raises(ProbeError, match=r"neither nccl-tests .* nor torch"):
        nccl.choose_engine(Params(nccl_tests_dir=str(tmp_path)), gpus=8)
    with pytest.raises(ProbeError, match="nccl-tests binary all_reduce_perf not found"):
        nccl.choose_engine(Params(engine="nccl-tests", nccl_tests_dir=str(tmp_path)), gpus=8)
    with pytest.raises(ProbeError, match="engine nccl-tests runs on one node"):
        nccl.choose_engine(Params(engine="nccl-tests", nnodes=2), gpus=8)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (Params(engine="mpi"), "engine 'mpi' is not one of"),
        (Params(backend="mpi"), "backend 'mpi' is not one of"),
        (Params(collectives=[]), "collectives is empty"),
        (Params(collectives=["allreduce"]), "unknown collective \\['allreduce'\\]"),
        (Params(min_bytes=2, max_bytes=1), "need 0 <= min <= max"),
        (Params(step_factor=1), "step_factor must be >= 2"),
        (Params(iters=0), "need iters >= 1"),
        (Params(ranks=0), "ranks must be >= 1"),
        (Params(nnodes=2, node_rank=2), "bad node_rank"),
    ],
)
def test_bad_parameters_are_one_line_probe_errors(params: Params, message: str) -> None:
    with pytest.raises(ProbeError, match=message):
        nccl.validate(params)
