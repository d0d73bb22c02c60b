"""The end of `check` judges the whole run (bringup/commands/report.py judge_whole) reading
its facts as the report does: node by node, each node's figures taken and only its
records' headers kept, so that a check of ten thousand nodes never holds every node's
facts at once (docs/scale.md)."""

from __future__ import annotations

import dataclasses
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest

from bringup import profile
from bringup.checks.catalog import judge_node
from bringup.checks.whole_run import is_whole_run
from bringup.commands.report import judge_whole, make_report
from bringup.findings import Finding, read_finding
from bringup.report import rundata
from bringup.rundir import RunDir, load_facts
from tests.support.report_runs import demo_run

NODES = 120


def demo_fleet_of(tmp_path: Path, nodes: int) -> tuple[RunDir, list[Finding]]:
    """A running check of `nodes` nodes, each one of the demo fleet's recorded nodes in
    turn (the healthy one and the five faults) under a name of its own, judged; and the
    findings written, as the check holds them."""
    demo = load_facts(demo_run(tmp_path / "demo"))
    b300 = profile.load("b300")
    run = RunDir.create(tmp_path / "run", "check", "b300", "demo")
    held: list[Finding] = []
    for i in range(nodes):
        facts = dataclasses.replace(demo[i % len(demo)], node=f"node{i:04d}")
        run.add_recorded(facts)
        judged = judge_node(facts, b300)
        run.add_findings(judged)
        held += judged
        run.release(f"node{i:04d}")  # judged: the check holds its headers alone
    return run, held


def peak_bytes_of(call: object) -> int:
    tracemalloc.start()
    try:
        call()  # type: ignore[operator]
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def said(findings: list[Finding]) -> Counter[tuple[str, str, str, str]]:
    return Counter((f.node, f.check, f.status.value, f.message) for f in findings)


def test_the_whole_run_is_judged_from_each_nodes_figures_never_every_nodes_facts(
    tmp_path: Path,
) -> None:
    run, _ = demo_fleet_of(tmp_path, NODES)
    found: list[Finding] = []
    judged = peak_bytes_of(lambda: found.extend(judge_whole(run)))
    whole = peak_bytes_of(lambda: rundata.load(run.path))  # every node's facts at once
    facts = peak_bytes_of(lambda: load_facts(run.path))  # ... and nothing else
    # A whole read holds the facts of the 120 nodes and the findings; judged here, one
    # node's facts at a time (what is left: the findings, each node's headers and metrics).
    assert judged < whole - facts / 2, (judged, whole, facts)
    # The same findings as the report reaches reading every node's facts afterwards.
    assert any(f.check.startswith("report.") for f in found)
    run.finish("complete", 1)
    report, _ = make_report(run.path, None, None)
    assert said(found) == said([f for f in report.findings if is_whole_run(f.check)])


def test_the_findings_the_check_holds_are_not_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, held = demo_fleet_of(tmp_path, NODES)
    found: list[Finding] = []
    lines: list[str] = []

    def counted(line: str) -> Finding:
        lines.append(line)
        return read_finding(line)

    monkeypatch.setattr(rundata, "read_finding", counted)
    judged = peak_bytes_of(lambda: found.extend(judge_whole(run, held)))
    assert lines == []  # not one line of findings.jsonl read back
    run.finish("complete", 1)
    report, _ = make_report(run.path, None, None)
    assert said(found) == said([f for f in report.findings if is_whole_run(f.check)])
    # Judged again without them, it reads them back, and holds more at its peak (by less
    # than the findings take: the peak of a judge that holds them is its other work, the
    # run's records' headers being plain dataclasses since issue 31).
    lines.clear()
    reread = peak_bytes_of(lambda: judge_whole(run))
    assert len(lines) == len(held) + len(found)
    assert judged < reread, (judged, reread)


def test_findings_held_that_are_not_the_files_are_not_taken_for_them(tmp_path: Path) -> None:
    """A caller's list that is not what findings.jsonl holds (here, one node's findings
    left out of it): the file is read, and the node is not said to have none."""
    run, held = demo_fleet_of(tmp_path, 12)
    found = judge_whole(run, [f for f in held if f.node != "node0003"])
    assert found and not [f for f in found if f.node == "node0003"]
