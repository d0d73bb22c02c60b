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
from bringup.commands.report import WholeRunDigest, judge_whole, make_report
from bringup.findings import Finding, read_finding
from bringup.fleet.tally import Tally
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


# --- the end of a check: every node taken as it was judged, no facts file read again -------


def taken_run(tmp_path: Path, profile_name: str) -> tuple[RunDir, Tally, WholeRunDigest]:
    """A check of twelve nodes through fleet.run, each answering with one demo node's
    records in turn as its node side prints them (its lines read by the transport's
    decode_line): one with its sequential read slowed (a straggler), one whose nvme
    figure is NaN (read as null), one that never answers nvme, one unreachable."""
    import json
    import threading
    from collections.abc import Iterator
    from typing import Any

    from bringup.facts import record_json
    from bringup.fleet import run as fleet
    from bringup.fleet.inventory import Host
    from bringup.fleet.plan import plan_node
    from bringup.fleet.transport import Unreachable, decode_line
    from bringup.sim.demo import demo_nodes
    from bringup.suite import load as load_suite

    demo = demo_nodes()
    suite = load_suite("acceptance")
    chosen = profile.load(profile_name) if profile_name != "auto" else profile.AUTO
    run = RunDir.create(tmp_path / "run", "check", profile_name, "acceptance")
    run.manifest.probes = ["gpu", "topology", "host", "xid", "nvme"]
    plans = []
    for i in range(12):
        lines = []
        for record in (record_json(r) for r in demo[i % len(demo)].probes.values()):
            if record["probe"] == "nvme" and i == 4:
                record["facts"]["paths"][0]["seq_read_bytes_per_s"] /= 4  # a straggler
            text = json.dumps(record)
            if record["probe"] == "nvme" and i == 7:
                text = text.replace(
                    '"seq_write_bytes_per_s": ', '"seq_write_bytes_per_s": NaN, "x": '
                )
            if not (record["probe"] == "nvme" and i == 9):  # node 9 never answers nvme
                lines.append(text.encode())

        def runner(
            request: dict[str, Any],
            deadline: float,
            stop: threading.Event,
            on_stage: fleet.Stage,
            lines: list[bytes] = lines,
            unreachable: bool = i == 11,
        ) -> Iterator[dict[str, Any]]:
            if unreachable:
                raise Unreachable("connection refused")
            on_stage("running")
            asked = {s["name"] for s in request["probes"]}
            for line in lines:
                record = decode_line(line)
                if record["probe"] in asked:
                    yield record

        plan = plan_node(Host(f"node{i:02d}", "127.0.0.1"), runner, suite, chosen)
        plan.request = {
            "probes": [s for s in plan.request["probes"] if s["name"] in run.manifest.probes]
        }
        plans.append(plan)
    tally = Tally()
    taken = WholeRunDigest.of_run(run.manifest)
    fleet.run(plans, run, forks=4, compare=True, tally=tally, digest=taken.take)
    return run, tally, taken


@pytest.mark.parametrize("profile_name", ["b300", "auto"])
def test_what_the_check_took_of_each_node_is_what_its_files_give(
    tmp_path: Path, profile_name: str
) -> None:
    """Taken as each node was judged, against the facts files read as the report reads
    them: the same nodes in the same order, the same records kept, the same spans, the
    same metrics (and GPU profiles under auto)."""
    run, _, taken = taken_run(tmp_path, profile_name)
    given = taken.took(run.manifest)
    assert given is not None
    read = WholeRunDigest.of_run(run.manifest)
    data = rundata.load(run.path, read)
    assert list(given[0]) == list(data.facts) == [f"node{i:02d}" for i in range(12)]
    assert given[0] == data.facts and given[1] == data.measured
    assert taken.metrics == read.metrics and taken.models == read.models
    assert taken.metrics["node04"] != taken.metrics["node10"]
    assert set(taken.metrics["node10"]) - set(taken.metrics["node07"]) == {"nvme.seq_write"}


def test_the_end_of_a_check_reads_no_facts_file_and_judges_as_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, tally, taken = taken_run(tmp_path, "b300")
    read_again = []
    real = rundata.iter_facts

    def counted(path: Path):  # type: ignore[no-untyped-def]
        read_again.append(path)
        return real(path)

    monkeypatch.setattr(rundata, "iter_facts", counted)
    found = judge_whole(run, tally, taken)
    assert read_again == []
    # The straggler (a quarter of the fleet's read) and the node that never answered nvme.
    assert sorted((f.node, f.check) for f in found) == [
        ("node04", "fleet.nvme.seq_read"),
        ("node09", "report.missing"),
    ]
    # The same end judged from the files, as `report` judges it afterwards.
    monkeypatch.setattr(rundata, "iter_facts", real)
    again = judge_whole(run)
    assert said(again) == said(found)
    # A node not taken (a run that did not end every node through fleet.run): the files.
    partial = WholeRunDigest.of_run(run.manifest)
    partial.take(run.facts_of("node00"))
    assert partial.took(run.manifest) is None
