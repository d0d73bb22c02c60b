"""`check` holds what its findings come to, not each one (bringup/fleet/tally.py): the
cells, counts, verdict, problems and --json it prints are those of every finding, and
what it holds per node is bounded (docs/scale.md, "What the check holds")."""

from __future__ import annotations

import contextlib
import io
import tracemalloc
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from bringup.commands import common
from bringup.commands.check import judge_fleet, read_back
from bringup.commands.envelope import document
from bringup.commands.invocation import print_envelope, print_json, print_with_findings
from bringup.findings import Expected, Finding, Status, finding_json, matrix_cells
from bringup.fleet import run as fleet
from bringup.fleet.inventory import Host
from bringup.fleet.plan import plan_node
from bringup.fleet.tally import Tally
from bringup.jsondata import to_json
from bringup.profile import load as load_profile
from bringup.rundir import RunDir
from bringup.suite import load as load_suite
from tests.support.runners import answering


def _demo_records() -> list[list[dict[str, Any]]]:
    from bringup.sim.demo import demo_nodes

    return [[to_json(r) for r in n.probes.values()] for n in demo_nodes()]


def _fleet_run(path: Path, nodes: int, tally: Tally | None) -> tuple[RunDir, list[Finding]]:
    """`nodes` nodes answering with the demo fleet's records in turn (the healthy node and
    the five faults), judged by b300, each node's findings tallied or held; then the fleet
    checks. The findings held, in `check`'s order (none with a tally)."""
    demo = _demo_records()
    suite, profile = load_suite("acceptance"), load_profile("b300")
    plans = []
    for i in range(nodes):
        records = demo[i % len(demo)]
        plan = plan_node(Host(f"n{i:03d}", "127.0.0.1"), answering(records), suite, profile)
        recorded = {r["probe"] for r in records}
        plan.request = {"probes": [s for s in plan.request["probes"] if s["name"] in recorded]}
        plans.append(plan)
    run = RunDir.create(path, "check", "b300", "acceptance")
    outcomes = fleet.run(plans, run, forks=4, compare=True, tally=tally)
    findings = [f for o in outcomes for f in o.findings]
    if tally is not None:
        assert findings == []  # every finding on disk, none held by an outcome
        tally.add(judge_fleet(run, tally.noted, None, None, outcomes))
    else:
        findings += judge_fleet(run, findings, None, None, outcomes)
    return run, findings


def _shown(run: RunDir, findings: list[Finding] | Tally, monkeypatch: pytest.MonkeyPatch) -> str:
    """What `check` prints of the run, colours and all."""
    shown = io.StringIO()
    monkeypatch.setattr(common, "out", Console(file=shown, width=100, force_terminal=True))
    common.show_run(run, findings, "profile b300", quiet=False)
    return shown.getvalue().replace(str(run.path), "RUN")


def _printed(findings: Any, capsys: pytest.CaptureFixture[str], **given: Any) -> str:
    print_envelope(findings, **given)
    return capsys.readouterr().out


def test_a_fleet_tallied_shows_and_prints_what_its_every_finding_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same 14 nodes judged twice: each node's findings held (as `check` held them
    before) or tallied. The console (matrix, what to do, counts, verdict), the exit code
    and --json's document are the same bytes; --json's findings, read back from
    findings.jsonl in the plan's order, are every finding held, in the same order."""
    held_run, held = _fleet_run(tmp_path / "held", 14, None)
    tally = Tally()
    run, _ = _fleet_run(tmp_path / "tallied", 14, tally)
    tally.reader = lambda: read_back(run, tally)
    assert tally.total == len(held) > 14 * 20
    assert tally.counts == {s: sum(1 for f in held if f.status is s) for s in Status}
    assert tally.noted == [f for f in held if f.status.rank >= Status.WARN.rank]
    assert [finding_json(f) for f in tally.every()] == [finding_json(f) for f in held]
    assert _shown(run, tally, monkeypatch) == _shown(held_run, held, monkeypatch)
    assert "FAIL" in _shown(run, tally, monkeypatch)
    assert common.finish_run(run, tally) == common.finish_run(held_run, held) == 1
    assert run.manifest.findings_bad == held_run.manifest.findings_bad > 0
    streamed = _printed(tally.every(), capsys, counted=(tally.total, tally.bad), run=run)
    whole = _printed(held, capsys, run=held_run)
    assert streamed.replace(str(run.path), "RUN") == whole.replace(str(held_run.path), "RUN")


def test_findings_read_back_come_in_the_plans_order_and_refuse_a_changed_file(
    tmp_path: Path,
) -> None:
    """Nodes end in any order (findings.jsonl holds them so); read back, each node's
    findings come at its place in the plan, what came after the nodes after them. A file
    that no longer holds what the run wrote (a line fewer, a status changed, a line more)
    is refused, exit 2, before anything is printed."""
    run = RunDir.create(tmp_path / "run", "check", "b300", "acceptance")
    tally = Tally()
    batches = {
        2: [Finding(node="c", check="gpu.count", status=Status.PASS, message="8")],
        0: [
            Finding(node="a", check="gpu.count", status=Status.FAIL, message="7"),
            Finding(node="a", check="host.kernel", status=Status.PASS, message="6.8"),
        ],
        1: [],
    }
    for index, found in batches.items():  # the order the nodes ended in
        run.add_findings(found)
        tally.add(found, index)
    after = [Finding(node="a", check="fleet.identity", status=Status.WARN, message="m")]
    run.add_findings(after)
    tally.add(after)
    read = [(f.node, f.check) for f in read_back(run, tally)]
    assert read == [
        ("a", "gpu.count"),
        ("a", "host.kernel"),
        ("c", "gpu.count"),
        *[("a", "fleet.identity")],
    ]
    lines = (run.path / "findings.jsonl").read_text().splitlines(keepends=True)
    changed = {
        "a line fewer": lines[:-1],
        "a status changed": [lines[0].replace('"PASS"', '"FAIL"'), *lines[1:]],
        "a line more": [*lines, lines[0]],
        "a line that does not parse": [lines[0], "{", *lines[2:]],
    }
    for why, text in changed.items():
        (run.path / "findings.jsonl").write_text("".join(text))
        with pytest.raises(typer.Exit) as refused:
            read_back(run, tally)
        assert refused.value.exit_code == 2, why


def test_the_envelope_written_a_finding_at_a_time_is_the_whole_documents_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--json's findings are written one at a time: the text is json.dumps of the whole
    document, for no finding, one, and several (texts past ASCII, a quote, a newline, a
    number that is no JSON number, typed expectations)."""
    findings = [
        Finding(node="n1", check="gpu.count", status=Status.PASS, message="8", value=8),
        Finding(
            node='n"2\n',
            check="gpu.power",
            status=Status.FAIL,
            message="µ — 電力 \u2028",
            value=float("inf"),
            expected=Expected(op="within", value=[1, 2.5], unit="W", tolerance_pct=5),
            unit="W",
            action="[/] replace",
        ),
    ]
    for some in ([], findings[:1], findings):
        print_json(document("check", 1, some, "NOT ACCEPTED", run_dir="r", data={"x": [1]}))
        whole = capsys.readouterr().out
        empty = document("check", 1, [], "NOT ACCEPTED", run_dir="r", data={"x": [1]})
        print_with_findings(empty, iter(some))
        assert capsys.readouterr().out == whole


_NODES = st.sampled_from(["a", "b", "c", ""])
_CHECKS = st.sampled_from(
    ["gpu.count", "gpu.power", "topology.nvlink", "topology.nic", "host.kernel", "gpu", "node.run"]
)
_MESSAGES = st.sampled_from(
    ["8", "probe failed", "judged by topology.nvlink (GPU 2)", "judged by gpu.power", "x"]
)


@st.composite
def _finding(draw: st.DrawFn) -> Finding:
    return Finding(
        node=draw(_NODES),
        check=draw(_CHECKS),
        status=draw(st.sampled_from(list(Status))),
        message=draw(_MESSAGES),
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_finding(), max_size=8), max_size=6))
def test_the_tallys_cells_counts_and_problems_are_those_of_every_finding(
    batches: list[list[Finding]],
) -> None:
    """Findings tallied batch by batch (nodes' and what comes after: the same node in
    several batches, SKIPs another check judges, a probe's ERRORs folded into one) give
    the cells findings.matrix_cells gives of them all, its subjects in the same order, and
    the same counts, nodes and problems."""
    tally = Tally()
    for index, batch in enumerate(batches):  # nodes' batches (odd) and what comes after
        tally.add(batch, index if index % 2 else None)
    # In the order the command gives them: the nodes' by their place, then the others.
    every = [
        f for i in [*range(1, len(batches), 2), *range(0, len(batches), 2)] for f in batches[i]
    ]
    cells = matrix_cells(every)
    assert tally.cells() == cells
    assert list(tally.subjects) == list(dict.fromkeys(subject for _, subject in cells))
    assert tally.counts == {s: sum(1 for f in every if f.status is s) for s in Status}
    assert tally.bad == sum(1 for f in every if f.status.bad) and tally.total == len(every)
    assert tally.nodes == {f.node for f in every}
    assert tally.noted == [f for f in every if f.status.rank >= Status.WARN.rank]


def _held_bytes(nodes: int, node_findings: list[list[Finding]], tallied: bool) -> int:
    """What holding `nodes` nodes' findings costs (tracemalloc): each node's findings
    made anew (as judging makes them), then tallied or kept in a list."""
    tally, held = Tally(), []
    tracemalloc.start()
    try:
        for i in range(nodes):
            name = f"node{i:05d}"
            found = [replace(f, node=name) for f in node_findings[i % len(node_findings)]]
            if tallied:
                tally.add(found, i)
            else:
                held.extend(found)
            del found
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return size


def test_what_the_check_holds_per_node_is_its_summary_and_its_problems(tmp_path: Path) -> None:
    """The demo fleet's six nodes in turn (one healthy, five with faults: 29 findings a
    node): held as a list, as `check` held every finding to its end, about 3.0 kB a node
    (a hundred bytes a finding, their texts shared); tallied, its matrix row (held once
    for the nodes alike), its name, its place in findings.jsonl and its findings at WARN
    or worse: about 0.5 kB."""
    _, held = _fleet_run(tmp_path / "run", 6, None)
    per_node = [[f for f in held if f.node == f"n{i:03d}"] for i in range(6)]
    small, large = 60, 600

    def per_node_bytes(tallied: bool) -> float:
        _held_bytes(small, per_node, tallied)  # every code path run once
        grown = _held_bytes(large, per_node, tallied) - _held_bytes(small, per_node, tallied)
        return grown / (large - small)

    listed, tallied = per_node_bytes(False), per_node_bytes(True)
    assert listed > 2000, f"{listed:.0f} bytes a node held as a list"
    assert tallied < 1000, f"{tallied:.0f} bytes a node tallied"


def test_one_nodes_check_reads_its_findings_back_for_its_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of one node prints a row per finding: read back from findings.jsonl."""
    held_run, held = _fleet_run(tmp_path / "held", 1, None)
    tally = Tally()
    run, _ = _fleet_run(tmp_path / "tallied", 1, tally)
    with contextlib.suppress(ValueError):
        _shown(run, tally, monkeypatch)  # nothing reads them back yet: refused
        pytest.fail("a tally with no reader printed one node's findings")
    tally.reader = lambda: read_back(run, tally)
    shown = _shown(run, tally, monkeypatch)
    assert shown == _shown(held_run, held, monkeypatch)
    assert "gpu.count" in shown


def test_a_judged_nodes_records_are_each_validated_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its checks, its overrides and its fleet values read the same records: each record
    of a node is validated once (twice before: the checks', then the fleet values')."""
    from bringup import facts

    validated: list[str] = []
    real = facts._decode

    def counted(record: Any) -> Any:
        validated.append(record.probe)
        return real(record)

    monkeypatch.setattr(facts, "_decode", counted)
    _fleet_run(tmp_path / "run", 2, Tally())
    probes = [r["probe"] for r in _demo_records()[0]]
    assert sorted(validated) == sorted(probes * 2)


def test_the_end_of_the_check_keeps_what_the_whole_run_rules_read_of_each_node() -> None:
    """judge_whole reads every node's facts back; of each it keeps what completeness and
    provenance read (equal records held once, as the report keeps them), not a copy of
    every record's headers: about 6 kB a node of the demo's records before (60 MB at
    ten thousand nodes, beside the run directory's own), now well under 2."""
    from bringup.commands.report import WholeRunDigest
    from bringup.sim.demo import demo_nodes

    demo = demo_nodes()
    count = 300
    nodes = [replace(demo[i % len(demo)], node=f"n{i:04d}") for i in range(count)]
    digest = WholeRunDigest(2.25e15, auto=False)
    digest(demo[0])  # every code path run once
    tracemalloc.start()
    try:
        kept = [digest(node) for node in nodes]
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert [k.node for k in kept] == [n.node for n in nodes]
    assert held / count < 2000, f"{held / count:.0f} bytes a node"


def _released_bytes(path: Path, nodes: int) -> tuple[int, RunDir]:
    """What a run directory holds after `nodes` nodes answered with the demo fleet's
    records in turn, each journaled, judged and let go of (tracemalloc), as fleet.run
    does with each node."""
    demo = _demo_records()
    run = RunDir.create(path, "check", "b300", "acceptance")
    names = [f"node{i:05d}" for i in range(nodes)]
    run.add_nodes(names)
    tracemalloc.start()
    try:
        for i, name in enumerate(names):
            run.journal(name)
            for record in demo[i % len(demo)]:
                run.add_record(name, dict(record))
            run.release(name)
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return size, run


def test_a_released_node_leaves_only_its_probe_times_and_provenance_held(
    tmp_path: Path,
) -> None:
    """Once a node is judged the run directory lets go of its facts and keeps what the end
    of the check reads of it: each probe's seconds and its record's provenance, the
    probes and provenance held once for the nodes alike. It kept every record's headers
    (NodeFacts.headers: about 6 kB a node of the demo's records, 60 MB at ten thousand
    nodes); now a few hundred bytes. What the end reads is what the headers gave."""
    from bringup.commands.show import probe_durations
    from bringup.facts import origin
    from bringup.provenance import origin_of

    _released_bytes(tmp_path / "warm", 6)  # every code path run once
    small, large = 20, 120
    grown = _released_bytes(tmp_path / "large", large)[0]
    grown -= _released_bytes(tmp_path / "small", small)[0]
    per_node = grown / (large - small)
    assert per_node < 700, f"{per_node:.0f} bytes a node"

    _, run = _released_bytes(tmp_path / "kept", 12)
    # A record replayed from another run's file: its time is not the run's, and where it
    # came from makes the run's origin.
    gpu = next(r for r in _demo_records()[0] if r["probe"] == "gpu")
    source = {"kind": "file", "of": "/old/facts/node00003.json", "sha256": "ab" * 32}
    run.add_record("node00003", {**gpu, "params": {"replayed": True}, "provenance": [source]})
    run.release("node00003")
    run.journal("node00012")
    run.add_record("node00012", dict(gpu))  # a node still held
    headers = [f.headers() for f in run.recorded()]
    assert run.probe_times() == probe_durations(headers)
    assert list(run.probe_times()) == [f"node{i:05d}" for i in range(13)]
    assert "gpu" not in run.probe_times()["node00003"]
    assert origin_of(run.record_chains()) == origin(headers)
    assert "facts from files on node00003" in origin(headers).reasons
