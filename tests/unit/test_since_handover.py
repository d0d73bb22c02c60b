"""What changed since handover: the demo fleet's handover, then a later run of the same
fleet with three planted changes. Exactly those three are listed as changed, each with the
check that went bad with it; the handover's own failures are listed apart, as already there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bringup import profile
from bringup.commands.report import build_report
from bringup.facts import NodeFacts
from bringup.findings import Status
from bringup.report.model import Report
from bringup.report.rundata import load
from tests.support.report_runs import (
    Mutation,
    busbw_down,
    demo_run,
    new_xid,
    serial_changed,
    with_measurements,
    write_run,
)

B300 = profile.load("b300")


def uncorrected_ecc(node: str, gpu: int, count: int) -> Mutation:
    def mutate(nodes: dict[str, NodeFacts]) -> None:
        facts = nodes[node].probes["gpu"].facts
        assert facts is not None
        facts["gpus"][gpu]["ecc_uncorrected_volatile"] = count
        facts["gpus"][gpu]["ecc_uncorrected_aggregate"] = count

    return mutate


def power_limit(node: str, gpu: int, watts: float) -> Mutation:
    def mutate(nodes: dict[str, NodeFacts]) -> None:
        facts = nodes[node].probes["gpu"].facts
        assert facts is not None
        facts["gpus"][gpu]["power_limit_w"] = watts

    return mutate


@pytest.fixture(scope="module")
def handover(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_run(tmp_path_factory.mktemp("handover") / "run")


@pytest.fixture(scope="module")
def later(handover: Path, tmp_path_factory: pytest.TempPathFactory) -> Report:
    run = write_run(
        handover,
        tmp_path_factory.mktemp("later") / "run",
        uncorrected_ecc("b300-node01", 2, 3),
        power_limit("b300-node03", 1, 700.0),
        serial_changed("b300-node06", 4, "1654922007777"),
    )
    return build_report(load(run), B300, load(handover), generated_at="T")


def test_exactly_the_three_planted_changes(later: Report) -> None:
    assert later.baseline is not None
    changed = [(c.node, c.kind, c.what, c.baseline, c.current) for c in later.baseline.changed]
    assert changed == [
        (
            "b300-node01",
            "counter",
            "GPU 2 ECC uncorrected",
            "volatile 0, aggregate 0",
            "volatile 3, aggregate 3",
        ),
        ("b300-node03", "setting", "GPU 1 power limit", "1100 W", "700 W"),
        ("b300-node06", "identity", "GPU 4 serial", "DEMO00060004", "1654922007777"),
    ]


def test_each_change_names_the_check_that_went_bad_with_it(later: Report) -> None:
    assert later.baseline is not None
    checks = {c.what: c.checks for c in later.baseline.changed}
    assert checks == {
        "GPU 2 ECC uncorrected": ["gpu.ecc FAIL"],
        "GPU 1 power limit": ["gpu.power WARN"],
        "GPU 4 serial": [],
    }


def test_the_handovers_failures_are_apart_not_changed(later: Report) -> None:
    assert later.baseline is not None
    already = {(r.node, r.check) for r in later.baseline.already}
    # The demo's planted faults were there at handover: not changes.
    assert {
        ("b300-node02", "gpu.count"),
        ("b300-node03", "topology.nvlink"),
        ("b300-node04", "gpu.remapped_rows"),
        ("b300-node05", "xid.events"),
        ("b300-node06", "gpu.clock_events"),
    } <= already
    changed_nodes_checks = {(c.node, c.what) for c in later.baseline.changed}
    assert not {(n, c) for n, c in already} & changed_nodes_checks


def test_the_changes_are_findings_too(later: Report) -> None:
    judged = {
        (f.node, f.check, f.status) for f in later.findings if f.check.startswith("baseline.")
    }
    assert judged == {
        ("b300-node01", "baseline.counter", Status.FAIL),
        ("b300-node03", "baseline.setting", Status.WARN),
        ("b300-node06", "baseline.identity", Status.WARN),
    }


def test_a_slower_link_and_a_new_xid_with_their_checks(
    handover: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Measured runs (recorded nccl-tests on every node): node03's busbw down 10% and a new
    Xid 48 on node01 are one row each, with the straggler and Xid checks they brought."""
    base = tmp_path_factory.mktemp("measured")
    then = write_run(handover, base / "then", with_measurements)
    now = write_run(
        handover,
        base / "now",
        with_measurements,
        busbw_down("b300-node03", 0.9),
        new_xid("b300-node01"),
    )
    report = build_report(load(now), B300, load(then), generated_at="T")
    assert report.baseline is not None
    rows = [(c.node, c.kind, c.what, c.checks) for c in report.baseline.changed]
    assert rows == [
        ("b300-node01", "xid", "Xid 48", ["xid.events FAIL"]),
        ("b300-node03", "metric", "NCCL all_reduce busbw (>= 1 GiB)", ["fleet.nccl.busbw WARN"]),
    ]
    assert report.baseline.changed[1].current == "428.88 GB/s (-10.0%)"
