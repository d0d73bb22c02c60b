"""The end of `check` judges the whole run (bringup/commands/report.py judge_whole) reading
its facts as the report does: node by node, each node's figures taken and only its
records' headers kept, so that a check of ten thousand nodes never holds every node's
facts at once (docs/scale.md)."""

from __future__ import annotations

import tracemalloc
from collections import Counter
from pathlib import Path

from bringup import profile
from bringup.checks.catalog import judge_node
from bringup.checks.whole_run import is_whole_run
from bringup.commands.report import judge_whole, make_report
from bringup.findings import Finding
from bringup.report import rundata
from bringup.rundir import RunDir, load_facts
from tests.support.report_runs import demo_run

NODES = 120


def demo_fleet_of(tmp_path: Path, nodes: int) -> RunDir:
    """A running check of `nodes` nodes, each one of the demo fleet's recorded nodes in
    turn (the healthy one and the five faults) under a name of its own, judged."""
    demo = load_facts(demo_run(tmp_path / "demo"))
    b300 = profile.load("b300")
    run = RunDir.create(tmp_path / "run", "check", "b300", "demo")
    for i in range(nodes):
        facts = demo[i % len(demo)].model_copy(update={"node": f"node{i:04d}"})
        run.add_recorded(facts)
        run.add_findings(judge_node(facts, b300))
        run.release(f"node{i:04d}")  # judged: the check holds its headers alone
    return run


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
    run = demo_fleet_of(tmp_path, NODES)
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
