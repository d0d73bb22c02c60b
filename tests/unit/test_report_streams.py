"""The report streams (issue 29): it reads a run's facts one node at a time through
rundir.iter_facts and keeps what the report shows of each (FactsDigest), and writes
report.json, JUnit, Markdown and HTML piece by piece, each byte for byte the text the whole
model gave; its memory grows with the nodes by their summary, not by their facts."""

from __future__ import annotations

import json
import re
import tracemalloc
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bringup import profile
from bringup.commands.report import FactsDigest, build_report, make_report, write
from bringup.findings import Finding, Status, finding_line, read_finding
from bringup.jsondata import dumps as record_line
from bringup.measurements import measure
from bringup.report import escape, junit, nodepass, render
from bringup.report.figures import Figures
from bringup.report.model import NodeSections, Report
from bringup.report.rundata import load
from bringup.rundir import file_name, iter_facts
from tests.support.report_runs import (
    demo_run,
    fleet_run,
    hostile_run,
    scale_run,
    with_measurements,
    write_run,
)

B300 = profile.load("b300")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Report:
    run = fleet_run(tmp_path_factory.mktemp("fleet") / "run", 8)
    return build_report(load(run), B300, generated_at="T")


def test_report_json_in_pieces_is_the_whole_models_text(
    fleet: Report, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = json.dumps(fleet.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
    monkeypatch.setattr(nodepass, "PIECE_BYTES", 256)  # its lists read back in small pieces
    pieces = list(render.json_pieces(fleet))
    assert "".join(pieces) == whole
    assert len(pieces) > len(fleet.findings)  # never one string


def test_an_empty_report_json_in_pieces(fleet: Report) -> None:
    empty = fleet.model_copy(update={"findings": [], "nodes": [], "fleet": [], "matrix": {}})
    whole = json.dumps(empty.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
    assert "".join(render.json_pieces(empty)) == whole


def _testcase(node: str, name: str, f: Finding) -> ET.Element:
    """A finding's <testcase> as an element, as junit.py made it before it wrote the text
    directly (issue 29): the oracle of that text."""
    case = ET.Element("testcase", name=name, classname=f"bringup.{node}", time="0")
    if f.status.bad:
        kind = "FAIL" if f.status == Status.FAIL else f.status.value
        ET.SubElement(case, "failure", type=kind, message=f.message).text = junit._text([f])
    elif f.status == Status.SKIP:
        ET.SubElement(case, "skipped", message=f.message)
    else:
        ET.SubElement(case, "system-out").text = junit._text([f])
    return case


def _whole_tree_junit(report: Report) -> str:
    """The JUnit document as it was made before it streamed: the whole tree, indented."""
    by_node: dict[str, list[Finding]] = defaultdict(list)
    for f in report.findings:
        by_node[f.node or junit.RUN_SUITE].append(f)
    root = ET.Element("testsuites", name=report.title)
    tests = failures = 0
    for node in sorted(by_node, key=lambda n: (n == junit.RUN_SUITE, n)):
        found = by_node[node]
        names = junit.case_names(found)
        cases = [_testcase(node, n, f) for n, f in zip(names, found, strict=True)]
        bad = sum(1 for c in cases if c.find("failure") is not None)
        skipped = sum(1 for c in cases if c.find("skipped") is not None)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=node,
            tests=str(len(cases)),
            failures=str(bad),
            errors="0",
            skipped=str(skipped),
            time="0",
        )
        if report.run.started_at:
            suite.set("timestamp", report.run.started_at)
        suite.extend(cases)
        tests, failures = tests + len(cases), failures + bad
    root.set("tests", str(tests))
    root.set("failures", str(failures))
    root.set("errors", "0")
    for element in root.iter():
        element.text = escape.xml(element.text) if element.text else element.text
        for key, value in list(element.attrib.items()):
            element.set(key, escape.xml(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def test_junit_in_pieces_is_the_whole_trees_text(
    fleet: Report, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert junit.to_junit(fleet) == _whole_tree_junit(fleet)
    monkeypatch.setattr(nodepass, "PIECE_BYTES", 256)  # its suites read back in small pieces
    pieces = list(junit.junit_pieces(fleet))
    assert len(pieces) > 2 * len({f.node for f in fleet.findings})  # never one string
    empty = fleet.model_copy(update={"findings": []})
    assert junit.to_junit(empty) == _whole_tree_junit(empty)


# Every character class a node's text may hold that an escape treats apart: markup, XML's
# and Markdown's specials, quotes, line breaks, a tab, controls, bidi, XML's non-characters,
# text past ASCII (a lone surrogate cannot reach a run's files: the hypothesis test has it).
HOSTILE = "<b>&amp;</b> \"q\" 'a' |x| [l](u) \\ \r\n\t \x00\x07\x1b[31m \u202e \ufffe é 😀"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Report:
    run = hostile_run(tmp_path_factory.mktemp("hostile") / "run", HOSTILE)
    return build_report(load(run), B300, generated_at="T")


def test_junit_written_directly_is_elementtrees_text_whatever_the_node_sent(
    hostile: Report,
) -> None:
    """junit.py writes each <testsuite> as text (issue 29): the same bytes ElementTree
    gave, for a node whose every string is hostile."""
    assert junit.to_junit(hostile) == _whole_tree_junit(hostile)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_junit_escapes_text_as_elementtree_does(text: str) -> None:
    case = ET.Element("testcase", name=escape.xml(text))
    case.text = escape.xml(text)
    written = ET.tostring(case, encoding="unicode")
    empty = not case.text
    assert written == (
        f'<testcase name="{junit._attr(text)}"'
        + (" />" if empty else f">{junit._cdata(text)}</testcase>")
    )


def _whole_model_json(report: Report) -> str:
    return json.dumps(report.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"


def test_report_json_in_one_pass_is_the_whole_models_text(hostile: Report, large_run: Path) -> None:
    """report.json writes its findings and its nodes' sections in one pass over the nodes,
    each section's text made from its findings' (issue 29): the whole model's text still,
    for a node whose every string is hostile, and a large fleet's (with its run's own
    findings, node "")."""
    assert "".join(render.json_pieces(hostile)) == _whole_model_json(hostile)
    large = build_report(load(large_run), B300, generated_at="T")
    assert any(not f.node for f in large.findings)
    assert "".join(render.json_pieces(large)) == _whole_model_json(large)


def _one_template_markdown(report: Report) -> str:
    """report.md as one template made it before each node's section had a template of its
    own, rendered in the one pass over the nodes (issue 29): the loop over the sections
    of the nodes with a problem at the end of report.md.j2."""
    whole = render.environment(autoescape=False).from_string(
        '{% include "report.md.j2" %}{% for node in report.nodes.sections('
        'report.nodes.problems) %}{% include "report-node.md.j2" %}{% endfor %}'
    )
    return whole.render(report=report)


def test_markdown_in_one_pass_is_the_one_templates_text(
    fleet: Report, hostile: Report, large_run: Path, measured_run: Path
) -> None:
    large = build_report(load(large_run), B300, generated_at="T")
    measured = build_report(load(measured_run), B300, generated_at="T")
    for report in (fleet, hostile, large, measured):
        assert report.nodes.problems  # type: ignore[union-attr]
        assert "".join(render.markdown_pieces(report)) == _one_template_markdown(report)


# A node section's rows of findings as report-node.md.j2 wrote them before render.check_rows
# wrote them (issue 29): the oracle of its text.
TEMPLATE_ROWS = (
    "{% for row in node.checks %}{% set f = row.finding %}\n"
    "| `{{ f.check }}` | {{ f.status.value }} | {{ f | value | md }} | "
    '{{ (f.expected or "") | md }} | {% if row.fleet_median is not none %}'
    "{{ row.fleet_median | number }} ({{ row.vs_fleet_pct | pct }}){% endif %} | "
    "{{ f.message | md }}{% if f.action and f.status.value not in "
    '("PASS", "SKIP") %}<br>→ {{ f.action | md }}{% endif %} |\n'
    "{% endfor %}\n"
)


def test_a_sections_rows_are_the_templates_text(
    fleet: Report, hostile: Report, large_run: Path, measured_run: Path
) -> None:
    """Markdown's rows of findings, written in Python (render.check_rows), are the text
    the template wrote, every field escaped alike: for a node whose every string is
    hostile, a fleet's medians beside each value, actions, SKIPs and WARNs."""
    rows = render.environment(autoescape=False).from_string(TEMPLATE_ROWS)
    large = build_report(load(large_run), B300, generated_at="T")
    measured = build_report(load(measured_run), B300, generated_at="T")
    seen: set[str] = set()
    for report in (fleet, hostile, large, measured):
        for section in report.nodes:
            mine = render.check_rows(section)
            assert (mine + "\n" if mine else "") == rows.render(node=section)
            seen.update(row.finding.status.value for row in section.checks)
            seen.update("median" for row in section.checks if row.fleet_median is not None)
    assert seen >= {"PASS", "WARN", "FAIL", "SKIP", "median"}


def test_markdown_and_html_in_pieces(fleet: Report) -> None:
    plots = render.make_plots(fleet, B300)
    assert len(list(render.markdown_pieces(fleet))) > 1
    assert len(list(render.html_pieces(fleet, plots))) > 1


def test_iter_facts_reads_one_node_at_a_time_in_file_order(tmp_path: Path) -> None:
    run = fleet_run(tmp_path / "run", 7)
    (run / "facts" / "b300-node03.json").write_text("{not json")
    entries = iter(iter_facts(run))
    first = next(entries)
    assert (first.name, first.relative) == ("b300-node01", "facts/b300-node01.json")
    assert first.facts is not None and first.facts.node == "b300-node01"
    rest = list(entries)
    assert [e.name for e in rest] == [file_name(f"b300-node0{i}") for i in range(2, 8)]
    broken = rest[1]
    assert broken.facts is None and broken.problem
    assert broken.problem == "at the top: JSON is malformed: object keys must be strings (byte 1)"
    # The report says which file and why, as it did when it globbed facts/ itself.
    assert load(run).facts_problems == {
        "b300-node03": f"facts/b300-node03.json unreadable ({broken.problem}): "
        "its probes are not shown"
    }


def test_the_report_keeps_each_nodes_records_headers_only(tmp_path: Path) -> None:
    """What the report holds of a node once read: its records without their bulk."""
    kept: list[int] = []

    def keep(node):  # type: ignore[no-untyped-def]
        kept.append(len(record_line(node)))
        return node.headers()

    run = load(fleet_run(tmp_path / "run", 6), keep)
    assert len(kept) == 6
    for facts in run.facts.values():
        for record in facts.probes.values():
            assert all(not isinstance(v, dict | list) for v in (record.facts or {}).values())
        assert len(record_line(facts)) < min(kept) / 5


def _peak_mb(run: Path, out: Path) -> float:
    tracemalloc.start()
    try:
        built, prof = make_report(run, None, "auto")
        write(built, prof, ["md", "junit", "json", "html"], out)
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def test_the_reports_memory_grows_by_the_nodes_summary_not_their_facts(tmp_path: Path) -> None:
    """Before it streamed, each node cost the report about 300 kB at its peak here (its
    facts, the whole model as one dict, then as one string); now about 100 kB."""
    small, large = 12, 72
    first = scale_run(tmp_path / "small", small)
    _peak_mb(first, tmp_path / "warm")  # every module the report loads, loaded
    low = _peak_mb(first, tmp_path / "out-small")
    high = _peak_mb(scale_run(tmp_path / "large", large), tmp_path / "out-large")
    per_node_kb = (high - low) * 1000 / (large - small)
    assert per_node_kb < 180, f"{per_node_kb:.0f} kB per node"


@pytest.fixture(scope="module")
def large_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fleet just past FULL_PAGE_NODES: the large fleet's page."""
    return scale_run(tmp_path_factory.mktemp("large") / "run", render.FULL_PAGE_NODES + 2)


def test_a_fleet_past_the_full_page_writes_its_html(large_run: Path) -> None:
    """Past FULL_PAGE_NODES the page counts each subject's cells by status: a cell is the
    console's Cell (status, count, checks), and the merged main raised AttributeError here."""
    size = render.FULL_PAGE_NODES + 2
    report = build_report(load(large_run), B300, generated_at="T")
    layout = render.layout_of(report)
    assert layout.large
    assert sum(layout.subject_counts["gpu"].values()) == size
    page = "".join(render.html_pieces(report, render.make_plots(report, B300)))
    assert 'id="verdict"' in page


def _every_format(report: Report) -> dict[str, str]:
    plots = render.make_plots(report, B300)
    return {
        "json": "".join(render.json_pieces(report)),
        "md": "".join(render.markdown_pieces(report)),
        "junit": junit.to_junit(report),
        "html": "".join(render.html_pieces(report, plots)),
    }


@pytest.fixture(scope="module")
def measured_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo fleet with a recorded NCCL curve on every node and a dmon timeline on
    node01: what the HTML plots."""
    folder = tmp_path_factory.mktemp("measured")
    return write_run(demo_run(folder / "demo"), folder / "run", with_measurements)


@pytest.mark.parametrize("size", [6, render.FULL_PAGE_NODES + 2])
def test_spooled_figures_write_every_format_byte_for_byte_as_held_ones(
    size: int, measured_run: Path, large_run: Path
) -> None:
    """`bringup report` spools each node's figures as it reads the node (FactsDigest) and
    builds each node's section as it writes it; the report of the same run with every
    node's facts and figures held (the exporter's way) is the same text in every format,
    for a page of every node (curves and timelines plotted) and for a large fleet's."""
    run = measured_run if size == 6 else large_run
    held = build_report(load(run), B300, generated_at="T")
    streamed, _ = make_report(run, None, "b300")
    streamed.generated_at = "T"
    assert isinstance(streamed.nodes, NodeSections)
    assert _every_format(streamed) == _every_format(held)


def test_a_nodes_figures_come_back_from_the_spool_as_measured(measured_run: Path) -> None:
    """Timelines included (the JSON form leaves them out; the HTML plots them)."""
    facts = load(measured_run).facts
    whole = measure(facts["b300-node01"], 2.25e15)
    assert whole.timelines and whole.timelines[0].samples  # the recorded dmon timeline
    figures = Figures.spooled()
    figures.add(whole)
    figures.add(measure(facts["b300-node02"], 2.25e15))
    back = figures.get("b300-node01")
    assert back == whole and back is not whole
    assert figures.names == ["b300-node01", "b300-node02"]
    assert figures.get("b300-node09").model_dump() == {
        **Figures().get("b300-node09").model_dump(),
        "node": "b300-node09",
    }
    assert [m.metrics for m in figures.metrics_only()] == [
        whole.metrics,
        figures.get("b300-node02").metrics,
    ]
    assert figures.brief("b300-node01").gpu_count == whole.identity.gpu_count
    assert figures.only(["b300-node02"]).names == ["b300-node02"]


def _held_kb_per_node(small: Path, large: Path, count: tuple[int, int]) -> float:
    """What reading a run holds per node (tracemalloc: the report's Python objects)."""
    held = []
    for run in (small, small, large):  # the first: every module loaded
        tracemalloc.start()
        try:
            digest = FactsDigest(2.25e15, auto=False)
            read = load(run, digest)
            held.append(tracemalloc.get_traced_memory()[0])
        finally:
            tracemalloc.stop()
        del digest, read
    return (held[2] - held[1]) / 1000 / (count[1] - count[0])


def test_reading_a_run_holds_each_nodes_summary_not_its_figures(tmp_path: Path) -> None:
    """Each node's figures (its identity, curves, NVMe rows, Xid lines, probe summaries,
    timelines: about 37 kB a node of the scale benchmark's) go to the spool as the node is
    read; what stays is its findings, its records' headers, its identity marks and its
    metrics. Before: about 89 kB a node here, then about 52; with the findings' and the
    headers' texts and fields sets shared (report/compact.py) about 19; with the findings
    spooled by node (report/findingstore.py), the identity marks spooled and each node's
    records cut to what completeness and provenance read, equal ones held once, about 4
    (of it the findings at WARN or worse that the verdict lists: here every node's
    fleet.identity FAIL)."""
    small, large = 6, 66
    per_node = _held_kb_per_node(
        scale_run(tmp_path / "small", small), scale_run(tmp_path / "large", large), (small, large)
    )
    assert per_node < 8, f"{per_node:.0f} kB per node"


def test_a_large_fleets_problem_nodes_are_laid_out_a_table_at_a_time(
    large_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past FULL_PAGE_NODES the table of nodes with a problem is cut into tables of
    PROBLEM_ROWS rows, each after the first laid out only when scrolled to: at 10,000
    nodes one table took Chromium 3.0 to 3.4 s, the cut ones 0.7 to 0.9 s (docs/scale.md).
    Every node with a problem keeps its one row, in order, under the one header."""
    monkeypatch.setattr(render, "PROBLEM_ROWS", 20)
    report = build_report(load(large_run), B300, generated_at="T")
    page = "".join(render.html_pieces(report, render.make_plots(report, B300)))
    section = page[page.index('<section id="problems">') :]
    section = section[: section.index("</section>")]
    problems = [row.node for row in report.nodes.rows if row.problem]
    assert len(problems) == 85  # every node but the demo's healthy one, of 102
    assert re.findall(r'<tr><td><a href="#node-(node\d+)">', section) == problems
    assert section.count("<th>node</th>") == 1
    assert section.count("<table>") == 5  # 20 + 20 + 20 + 20 + 5
    assert section.count('<div class="more-problems">') == 4
    assert (
        ".more-problems { content-visibility: auto; contain-intrinsic-size: auto 580px; }" in page
    )


def test_findings_read_hold_a_third_of_the_memory_and_the_same_values(tmp_path: Path) -> None:
    """findings.jsonl's findings are validated as ever, spooled by node, and the ones held
    (WARN or worse) share their texts and expectations (report/compact.py): 1.5 kB a
    finding of the scale run as pydantic models, 0.45 kB with pydantic's fields sets
    shared, 0.30 kB spooled, 102 bytes spooled as slotted dataclasses (issue 31). Each is
    the finding its line gives, written back the same; a copy or an assignment changes no
    other."""
    from bringup.report.rundata import _findings

    run = scale_run(tmp_path / "run", 12)
    lines = [line for line in (run / "findings.jsonl").read_text().split("\n") if line]
    older = '{"node": "node0001", "check": "gpu.count", "status": "PASS", "message": "8"}'
    with (run / "findings.jsonl").open("a") as out:
        out.write(older + "\n")  # a line of an older bringup: some fields not given
    lines.append(older)
    read_finding(older)  # the reader built once (its schema), as a class is at its import
    tracemalloc.start()
    try:
        spool, problem, unreadable = _findings(run)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert problem is None and unreadable == [] and spool is not None
    read = list(spool)  # spooled to disk as read (report/findingstore.py), read back
    fresh = [read_finding(line) for line in lines]
    assert read == fresh
    for mine, theirs in zip(read, fresh, strict=True):
        assert finding_line(mine) == finding_line(theirs)
    assert finding_line(read[-1]) == (
        '{"node":"node0001","check":"gpu.count","status":"PASS","message":"8",'
        '"value":null,"expected":null,"unit":null,"action":null}'
    )
    assert held / len(read) < 150, f"{held / len(read):.0f} bytes a finding"

    # One check on two nodes, held (WARN or worse): its texts and expectation held once.
    first, second = [f for f in spool.noted if f.check == "gpu.count"][:2]
    assert first.node != second.node and first.check is second.check
    assert first.action == second.action and first.action is second.action
    assert first.expected == second.expected and first.expected is second.expected
    copy = replace(first, message="changed")
    copy.node = "elsewhere"
    first.action = "act"
    assert second.action != "act" and second.message != "changed" and first.node != "elsewhere"


def test_a_nodes_records_are_validated_once_while_the_report_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report's three readers of a node (its figures, its identity marks, its GPU's
    profile) each decoded the gpu record: within facts.decoded_once each record is
    validated once, every reader gets the same answer (the facts, or the same
    FactsError), and outside it nothing is kept."""
    from bringup import facts as facts_mod

    node = next(iter_facts(scale_run(tmp_path / "run", 1))).facts
    assert node is not None
    calls: list[str] = []
    real = facts_mod._decode

    def counted(record: facts_mod.ProbeRecord) -> object:
        calls.append(record.probe)
        return real(record)

    monkeypatch.setattr(facts_mod, "_decode", counted)
    FactsDigest(None, auto=True)(node)
    assert sorted(calls) == sorted(r.probe for r in node.probes.values() if r.ok)

    gpu = node.probes["gpu"]
    bad = replace(gpu, facts={"gpus": "not a list"})
    calls.clear()
    with facts_mod.decoded_once():
        assert facts_mod.decode(gpu) is facts_mod.decode(gpu)
        for _ in range(2):
            with pytest.raises(facts_mod.FactsError, match="invalid at"):
                facts_mod.decode(bad)
    assert calls == ["gpu", "gpu"]
    facts_mod.decode(gpu)
    assert calls == ["gpu", "gpu", "gpu"]  # outside: validated each time, as before


def _with_findings_of(run: Path, nodes: int, size: int) -> None:
    """The run's manifest naming `nodes` nodes, its findings.jsonl padded past `size`
    bytes with blank lines (each read and passed over) and a last finding after them."""
    from bringup.rundir import manifest_text, parse_manifest

    manifest = parse_manifest((run / "manifest.json").read_text())
    names = [f"node{i:05d}" for i in range(nodes)]
    (run / "manifest.json").write_text(manifest_text(replace(manifest, nodes=names)))
    last = Finding(node="node00001", check="gpu.count", status=Status.PASS, message="the last line")
    blank = " " * (512 << 10) + "\n"
    with (run / "findings.jsonl").open("a") as out:
        for _ in range(size // len(blank) + 1):
            out.write(blank)
        out.write(finding_line(last) + "\n")


def test_findings_past_64_mib_are_read_for_a_run_of_nodes_enough(tmp_path: Path) -> None:
    """findings.jsonl is read a line at a time, its cap 64 KiB a node of the run (the
    manifest's) or the 64 MiB of any file, whichever is more (docs/scale.md): a 12,000-node
    run's 70 MB is read to its last line; the same file in a 1,000-node run is refused
    (every verdict unknown: an ERROR, never ACCEPTED), and so is one line over 1 MiB."""
    from bringup.report import rundata

    big = 70_000_000
    assert rundata.findings_cap(1_000) == 64 << 20 < big < rundata.findings_cap(12_000)
    run = scale_run(tmp_path / "large", 2)
    _with_findings_of(run, 12_000, big)
    assert (run / "findings.jsonl").stat().st_size > big
    read = load(run)
    assert read.findings_problem is None and read.unreadable_lines == []
    assert read.findings is not None and list(read.findings)[-1].message == "the last line"

    run = scale_run(tmp_path / "small", 2)
    _with_findings_of(run, 1_000, big)
    refused = load(run)
    assert refused.findings is None
    assert refused.findings_problem is not None
    assert "over the 64 MiB cap" in refused.findings_problem
    report = build_report(refused, B300, generated_at="T")
    assert not report.verdict.accepted
    assert any(f.check == "report.findings" and f.status.value == "ERROR" for f in report.findings)

    run = scale_run(tmp_path / "line", 2)
    with (run / "findings.jsonl").open("a") as out:
        out.write('{"message": "' + "x" * (1 << 20) + '"}\n')
    one_line = load(run)
    assert one_line.findings is None
    assert "a line over the 1 MiB cap on one line" in (one_line.findings_problem or "")


def _finding(node: str, check: str, status: str, message: str = "m") -> Finding:
    return Finding(node=node, check=check, status=status, message=message)


def test_findings_spooled_by_node_come_back_as_written(tmp_path: Path) -> None:
    """findings.jsonl's findings go to an anonymous temporary file as they are read, a
    node's in chunks (report/findingstore.py): each node's come back in the order written,
    all of them in that order too, equal to what was added; only the WARN-or-worse ones
    and the whole run's own (report.*, fleet.*) stay in memory."""
    from bringup.report import findingstore

    written = [
        _finding("a", "gpu.count", "PASS"),
        _finding("b", "gpu.count", "FAIL"),
        _finding("a", "gpu.ecc", "WARN"),
        *(_finding("c", "gpu.ecc", "PASS", str(i)) for i in range(findingstore.CHUNK + 3)),
        _finding("", "report.run", "ERROR"),
        _finding("a", "fleet.gemm", "PASS"),
        _finding("a,b", "fabric.pair", "SKIP"),
    ]
    spool = findingstore.FindingsSpool.of_findings(written)
    assert list(spool) == written
    assert len(spool) == len(written) and spool.count("c") == findingstore.CHUNK + 3
    assert spool.of("a") == [written[0], written[2], written[-2]]
    assert [f.message for f in spool.of("c")] == [str(i) for i in range(findingstore.CHUNK + 3)]
    assert spool.of("nobody") == []
    assert spool.nodes == {"a", "b", "c", "", "a,b"}
    assert spool.noted == [written[1], written[2], written[-3], written[-2]]

    more = spool.extended([_finding("a", "gpu.count", "ERROR")])
    assert len(more) == len(spool) + 1 and len(spool) == len(written)  # the run's unchanged
    assert more.of("a")[-1].status.value == "ERROR" and spool.of("a") == [
        written[0],
        written[2],
        written[-2],
    ]
    kept = more.filtered(lambda f: f.node != "c")
    assert kept.nodes == {"a", "b", "", "a,b"} and kept.of("c") == []

    ordered = findingstore.ReportFindings(more, ["gpu.ecc", "gpu.count"])
    assert ordered.nodes == ["", "a", "a,b", "b", "c"]
    assert [(f.check, f.status.value) for f in ordered.of("a")] == [
        ("gpu.ecc", "WARN"),
        ("gpu.count", "PASS"),
        ("gpu.count", "ERROR"),
        ("fleet.gemm", "PASS"),
    ]
    assert ordered.bad_count == 3


def _old_report_parts(report: Report, nodes: list[str]) -> dict[str, object]:
    """What build() made of the whole list of findings before they were spooled: the
    verdict's counts and groups, the matrix, the subjects, the nodes' summary rows and the
    checks' medians, by the code of that time (report/model.py, statistics.py at 72cdf2d)."""
    import statistics as stats

    from bringup.findings import Status, matrix_cells, worst
    from bringup.report import model

    findings = list(report.findings)
    tally = {s: sum(1 for f in findings if f.status == s) for s in Status}
    bad = [f for f in findings if f.status.bad]
    subjects = list(dict.fromkeys(f.check.split(".")[0] for f in findings if f.node in nodes))
    cells = matrix_cells(findings)
    by_node: dict[str, list[Finding]] = {}
    for f in findings:
        by_node.setdefault(f.node, []).append(f)
    per_check: dict[str, dict[str, list[float]]] = {}
    for f in findings:
        if f.node and isinstance(f.value, int | float) and not isinstance(f.value, bool):
            per_check.setdefault(f.check, {}).setdefault(f.node, []).append(float(f.value))
    medians = {
        check: stats.median(v[0] for v in values.values())
        for check, values in per_check.items()
        if len(values) >= 2 and all(len(v) == 1 for v in values.values())
    }
    assert isinstance(report.nodes, NodeSections)
    return {
        "counts": {s.value: n for s, n in tally.items() if n},
        "accepted": bool(findings) and not bad and not report.verdict.reasons,
        "nodes_failing": sorted({f.node or "(run)" for f in bad}),
        "actions": model._groups(bad),
        "warnings": model._groups([f for f in findings if f.status == Status.WARN]),
        "subjects": subjects,
        "matrix": {n: {s: cells[(n, s)] for s in subjects if (n, s) in cells} for n in nodes},
        "rows": [
            model._summary(n, by_node.get(n, []), report.nodes._figures.brief(n)) for n in nodes
        ],
        "medians": medians,
        "worst": {n: worst(by_node[n]) for n in nodes if n in by_node},
    }


@pytest.mark.parametrize("size", [6, render.FULL_PAGE_NODES + 2])
def test_what_the_whole_run_needs_is_taken_as_the_findings_pass(
    size: int, measured_run: Path, large_run: Path
) -> None:
    """The verdict's counts and action groups, the matrix, the subjects, each node's
    summary row and the checks' medians are taken in one pass over the spooled findings,
    a node at a time; each is what the whole list of findings gave (the code before)."""
    run = measured_run if size == 6 else large_run
    report, _ = make_report(run, None, "b300")
    nodes = [row.node for row in report.nodes.rows]
    old = _old_report_parts(report, nodes)
    verdict = report.verdict
    assert verdict.counts == old["counts"] and verdict.accepted == old["accepted"]
    assert verdict.nodes_failing == old["nodes_failing"]
    assert verdict.actions == old["actions"] and verdict.warnings == old["warnings"]
    assert report.subjects == old["subjects"] and report.matrix == old["matrix"]
    assert isinstance(report.nodes, NodeSections)
    assert report.nodes.rows == old["rows"] and report.nodes._medians == old["medians"]
    assert verdict.actions and old["medians"]  # something compared
    # In report order: node, then the catalog's check order (a stable sort of the file's).
    from bringup.checks.catalog import CHECKS

    order = {check.name: i for i, check in enumerate(CHECKS)}
    every = list(report.findings)
    assert every == sorted(every, key=lambda f: (f.node, order.get(f.check, len(order)), f.check))
    lines = (run / "findings.jsonl").read_text().split("\n")
    own = [read_finding(line) for line in lines if line.strip()]
    whole = ("report.", "fleet.")
    assert [f for f in every if not f.check.startswith(whole)] == sorted(
        (f for f in own if not f.check.startswith(whole)),
        key=lambda f: (f.node, order.get(f.check, len(order)), f.check),
    )


def test_completeness_from_the_spool_is_completeness_from_the_list(tmp_path: Path) -> None:
    """checks/completeness.py reads of the findings only which nodes have any and the
    bad ones, which the spool holds: a node whose findings were cut, an unreachable node
    and a failed probe whose ERRORs were cut are judged alike from either."""
    import dataclasses

    from bringup.checks.completeness import judge_completeness

    run = scale_run(tmp_path / "run", 12)
    path = run / "findings.jsonl"
    lines = path.read_text().split("\n")
    kept = [line for line in lines if '"node0003"' not in line]  # node0003: never judged
    kept = [line for line in kept if not ('"node0005"' in line and '"ERROR"' in line)]
    path.write_text("\n".join(kept))
    read = load(run)
    assert read.findings is not None and not isinstance(read.findings, list)
    held = dataclasses.replace(read, findings=list(read.findings))
    spooled = judge_completeness(read)
    assert spooled == judge_completeness(held)
    said = [f.message for f in spooled if f.node == "node0003"]
    assert said == ["no findings for this node: its facts were never judged"]


def test_a_temporary_folder_that_cannot_be_written_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The findings and figures are spooled to an anonymous temporary file: a full or
    missing temporary folder is one clear line and exit 2, never a traceback."""
    import tempfile

    from tests.support.cli import invoke

    run = scale_run(tmp_path / "run", 2)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-folder"))
    result = invoke("report", run, "--format", "md")
    assert result.exit_code == 2, result.output
    assert "cannot spool the report's data to a temporary file" in result.output
    assert "Traceback" not in result.output


def test_a_full_temporary_folder_while_the_nodes_parts_are_written_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The nodes' parts of report.md, JUnit and report.json go to temporary files too
    (report/nodepass.py): the folder full by then is one line and exit 2, no file half
    written in the run directory."""
    import errno

    from tests.support.cli import invoke

    run = scale_run(tmp_path / "run", 2)

    def full() -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(nodepass, "TemporaryFile", full)  # its own, not the spools'
    result = invoke("report", run, "--format", "md,junit,json")
    assert result.exit_code == 2, result.output
    assert "cannot spool the report's parts to a temporary file (No space left" in result.output
    assert "Traceback" not in result.output
    assert not list(run.glob("report*"))


def test_identity_marks_on_disk_are_judged_as_the_whole_fleets() -> None:
    """Each node's identity marks are spooled, a hash of each held (SpooledMarks): the
    nodes that share a value are read back and judged, and the findings are judge_marks's
    of every node's marks, for the whole fleet and for a --limit view of it."""
    from bringup.checks.identity import Mark, judge_marks
    from bringup.commands.report import SpooledMarks

    def marks(i: int) -> list[Mark]:
        own = [Mark("GPU serial", f"GPU {g} serial", f"S{i}-{g}") for g in range(8)]
        own.append(Mark("system serial", "system serial", f"SYS{i}"))
        return own

    fleet = {f"node{i:03d}": marks(i) for i in range(40)}
    for i in (3, 17, 29):  # a cloned image: one machine id on three nodes
        fleet[f"node{i:03d}"].append(Mark("machine id", "machine id", "cafe"))
    fleet["node008"].append(Mark("GPU serial", "GPU 7 serial", "S9-7"))  # node009's GPU 7
    fleet["node011"].append(Mark("system serial", "system serial", "SYS11"))  # its own twice
    fleet["node012"].append(Mark("machine id", "machine id", "S12-0"))  # another kind's value
    spooled = SpooledMarks()
    for node, mine in fleet.items():
        spooled.add(node, mine)
    names = list(fleet)
    found = spooled.judge(names)
    assert found == judge_marks(fleet)
    assert sorted(f.node for f in found) == ["node003", "node008", "node009", "node017", "node029"]
    some = names[::2]
    assert spooled.judge(some) == judge_marks({n: fleet[n] for n in some})
    assert spooled.judge(["node003"]) == []
