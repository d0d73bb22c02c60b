"""Progress on long work: a probe's progress lines go from the probe child through the
request loop to the controller's progress display, never into the run's records; without
a terminal the display prints plain lines and no bar; the burn-in's step watch."""

from __future__ import annotations

import io
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from bringup.fleet import progress as fleet_progress
from bringup.fleet import run as fleet
from bringup.fleet.inventory import Host
from bringup.fleet.plan import plan_node
from bringup.fleet.progress import FleetProgress, describe
from bringup.node import progress, protocol
from bringup.node.catalog import PROBES
from bringup.node.probes.burnin import StepWatch
from bringup.node.result import ProbeOutput
from bringup.profile import load as load_profile
from bringup.rundir import RunDir
from bringup.suite import load as load_suite


def test_describe_a_phase_a_step_and_a_heartbeat() -> None:
    assert describe("nvme", {"phase": "/data rand read", "index": 3, "of": 5}) == (
        "nvme: /data rand read (3/5)"
    )
    assert describe("dcgm", {"phase": "dcgmi diag -r 1"}) == "dcgm: dcgmi diag -r 1"
    step = {"step": 3, "of": 12, "loss": 6.31849, "tokens_per_s": 5711.4, "step_s": 0.717}
    assert describe("burnin", {**step, "eta_s": 6}) == (
        "burnin: step 3/12 loss 6.318 5,711 tok/s 0.72 s/step ETA 6 s"
    )
    assert describe("burnin", {**step, "eta_s": 1325}).endswith("ETA 22 min 05 s")
    assert describe("burnin", {"step": 7, "of": None, "since_step_s": 95}) == (
        "burnin: step 7, no step for 95 s"
    )
    # What a node sent cannot move the cursor.
    assert describe("nvme", {"phase": "x\x1b[2Jy"}) == "nvme: x?[2Jy"


def _probe_that_reports() -> SimpleNamespace:
    @dataclass
    class Params:
        phases: int = 3

    @dataclass
    class Facts:
        done: int

    def collect(params: Params) -> ProbeOutput:
        for index in range(1, params.phases + 1):
            progress.report(phase=f"part {index}", index=index, of=params.phases)
        return ProbeOutput(facts=Facts(done=params.phases))

    return SimpleNamespace(Params=Params, collect=collect)


def test_the_request_loop_forwards_a_probes_progress_and_keeps_its_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(PROBES, "xid", _probe_that_reports())  # the forked child sees it
    seen: list[dict[str, Any]] = []
    request = {"probes": [{"name": "xid", "params": {"phases": 3}, "timeout_s": 30}]}
    (record,) = protocol.run_all(request, on_progress=seen.append)
    assert record["ok"] is True and record["facts"] == {"done": 3}
    assert seen == [
        {"probe": "xid", "progress": {"phase": f"part {i}", "index": i, "of": 3}} for i in (1, 2, 3)
    ]


def test_without_a_listener_report_does_nothing() -> None:
    progress.attach(None)
    progress.report(phase="nobody listens")  # no channel: no error, nothing written


def _fleet(tmp_path: Path, nodes: int) -> tuple[list[Any], RunDir]:
    def runner(
        request: dict[str, Any], deadline: float, stop: threading.Event, on_stage: fleet.Stage
    ) -> Iterator[dict[str, Any]]:
        on_stage("running")
        for step in (1, 2):
            yield {"probe": "xid", "progress": {"step": step, "of": 2, "loss": 1.5}}
        yield {"probe": "xid", "ok": False, "error": "not here", "params": {}}

    suite, profile = load_suite("quick"), load_profile("b300")
    plans = [
        plan_node(Host(f"n{i}", "127.0.0.1"), runner, suite, profile, remote=False)
        for i in range(nodes)
    ]
    for plan in plans:
        plan.request = {"probes": [s for s in plan.request["probes"] if s["name"] == "xid"]}
    return plans, RunDir.create(tmp_path / "run", "check", "b300", "quick")


def test_progress_lines_are_shown_and_never_recorded_and_no_bar_without_a_terminal(
    tmp_path: Path,
) -> None:
    plans, run = _fleet(tmp_path, 2)
    out = io.StringIO()
    fleet.run(plans, run, forks=2, console=Console(file=out, width=80))
    text = out.getvalue()
    lines = text.splitlines()
    for node in ("n0", "n1"):
        assert f"{node}  xid: step 1/2 loss 1.5" in lines
        assert f"{node}  xid: step 2/2 loss 1.5" in lines
        facts = json.loads((run.path / "facts" / f"{node}.json").read_text())
        assert list(facts["probes"]) == ["xid"] and facts["probes"]["xid"]["ok"] is False
    assert lines[-1].startswith("2 nodes in ")  # the summary ends it, on its own line
    assert "━" not in text and "\x1b" not in text  # no bar, no cursor movement


def test_a_large_run_prints_no_line_per_node_step(tmp_path: Path) -> None:
    plans, run = _fleet(tmp_path, fleet_progress.STEP_LINES_UP_TO + 1)
    out = io.StringIO()
    fleet.run(plans, run, forks=4, console=Console(file=out, width=80))
    assert out.getvalue().splitlines() == [out.getvalue().splitlines()[-1]]


def test_without_a_terminal_the_state_line_comes_at_a_modest_rate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(fleet_progress.time, "monotonic", lambda: clock[0])
    out = io.StringIO()
    shown = FleetProgress(3, Console(file=out, width=200))
    assert shown.live is False
    with shown:
        shown.doing("n1", "running gpu")
        clock[0] += fleet_progress.STATUS_EVERY_S - 1
        shown.doing("n2", "running gpu")
        assert out.getvalue() == ""  # not yet
        clock[0] += 1
        shown.reported("n1", "nvme", {"phase": "/data seq read", "index": 1, "of": 5})
    assert out.getvalue() == (
        "nodes 0/3 done, 2 running, 0 failed, 30 s; slowest: n1 nvme: /data seq read (1/5) (30 s)\n"
    )


def test_the_step_watch_reports_each_step_once_then_a_heartbeat(tmp_path: Path) -> None:
    read, write = os.pipe()
    progress.attach(write)
    try:
        recipe = {"train": {"steps": 4, "seq_len": 128, "micro_batch": 2, "grad_accum": 2}}
        watch = StepWatch(tmp_path, recipe, world=2, started=100.0)
        (tmp_path / "rank0.jsonl").write_text('{"step": 1, "time_s": 0.5}\n{"step": 2, "ti')
        (tmp_path / "steps.jsonl").write_text('{"step": 1, "loss": 6.5}\n')
        watch.poll(101.0)
        watch.poll(102.0)  # nothing new, too early for a heartbeat
        watch.poll(101.0 + 15.0)  # no step for HEARTBEAT_S
    finally:
        progress.attach(None)
        os.close(write)
    with os.fdopen(read) as pipe:
        sent = [json.loads(line) for line in pipe.read().splitlines()]
    assert sent == [
        # 128 * 2 * 2 tokens per GPU, 2 GPUs, in 0.5 s; 3 steps left at 0.5 s each.
        {"step": 1, "of": 4, "loss": 6.5, "step_s": 0.5, "tokens_per_s": 2048.0, "eta_s": 2},
        {"step": 1, "of": 4, "since_step_s": 15},
    ]
    assert watch.heartbeat(400.0) == (1.0, 299.0)
    assert watch.stall(400.0) == "; no step for 299 s after step 1"
    assert StepWatch(tmp_path / "none", recipe, 1, 0.0).stall(60.0) == ("; no step ended in 60 s")


def test_a_node_without_rank_0_reports_its_own_ranks_steps_without_a_loss(
    tmp_path: Path,
) -> None:
    """In a job across nodes the second node holds ranks 8-15: rank8.jsonl times its
    steps; the loss (averaged over every rank) is written on rank 0's node only."""
    read, write = os.pipe()
    progress.attach(write)
    try:
        recipe = {"train": {"minutes": 1, "seq_len": 10, "micro_batch": 1, "grad_accum": 1}}
        watch = StepWatch(tmp_path, recipe, world=16, started=0.0, first_rank=8)
        (tmp_path / "rank8.jsonl").write_text('{"step": 1, "time_s": 2.0}\n')
        watch.poll(5.0)
    finally:
        progress.attach(None)
        os.close(write)
    with os.fdopen(read) as pipe:
        sent = [json.loads(line) for line in pipe.read().splitlines()]
    assert sent == [{"step": 1, "of": None, "step_s": 2.0, "tokens_per_s": 80.0, "eta_s": 58}]


def test_the_sweep_reports_the_size_rank_0_printed_last(tmp_path: Path) -> None:
    from bringup.node.collective.launcher import SweepProgress
    from bringup.node.collective.measure import Plan

    sizes = [1 << 10, 1 << 20, 1 << 30]
    plan = Plan(["all_reduce", "broadcast"], sizes, 3, 1, False, "gloo", 60.0)
    out = tmp_path / "0.out"
    out.write_text(
        '{"event": "start", "nranks": 2}\nNCCL INFO a line of its own\n'
        '{"event": "row", "collective": "all_reduce", "size_bytes": 1024}\n'
        '{"event": "row", "collective": "all_reduce", "size_bytes": 1048576}\n'
    )
    read, write = os.pipe()
    progress.attach(write)
    try:
        sweep = SweepProgress(plan, out)
        sweep.tick(10.0)
        sweep.tick(10.5)  # within a second of the last look: not read again
        sweep.tick(11.0)  # read, nothing new: nothing said
    finally:
        progress.attach(None)
        os.close(write)
    with os.fdopen(read) as pipe:
        sent = [json.loads(line) for line in pipe.read().splitlines()]
    assert sent == [{"phase": "all_reduce 1 MiB", "index": 2, "of": 6}]
