"""A report fails closed: a run is ACCEPTED only when nothing it needs is missing.

Every case starts from a run that is accepted (clean_run: the demo's healthy node judged
under two names) and plants one gap; that gap alone must turn the verdict, as an ERROR
finding naming it, in every output: the console, HTML, Markdown, JSON, JUnit and the
exporter's `bringup_run_accepted`.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from markupsafe import escape
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from bringup import profile
from bringup.commands.report import build_report
from bringup.facts import ProbeRecord, record_json
from bringup.findings import Finding, Status, finding_line
from bringup.report import junit, render
from bringup.report.model import Report
from bringup.report.prometheus import RunCollector
from bringup.report.rundata import load
from bringup.rundir import RunDir
from tests.support import FIXTURES
from tests.support.cli import invoke
from tests.support.report_runs import clean_run, demo_run

B300 = profile.load("b300")
SCHEMA = xmlschema.XMLSchema(FIXTURES / "junit" / "junit-10.xsd")
NODES = ("b300-node01", "b300-node07")


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return clean_run(tmp_path_factory.mktemp("clean") / "run")


@pytest.fixture
def run(clean: Path, tmp_path: Path) -> Path:
    """A copy of the clean run, to plant one gap in."""
    return Path(shutil.copytree(clean, tmp_path / "run"))


def report_of(path: Path) -> Report:
    return build_report(load(path), B300, generated_at="T")


def gaps(report: Report) -> set[tuple[str, str, Status]]:
    """(node, check, status) of the report's own findings: what the run lacks."""
    return {(f.node, f.check, f.status) for f in report.findings if f.check.startswith("report.")}


def message(report: Report, check: str, node: str = "") -> str:
    return next(f.message for f in report.findings if f.check == check and f.node == node)


def lines(path: Path) -> list[str]:
    return (path / "findings.jsonl").read_text().splitlines()


def exported(report: Report) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RunCollector(lambda: Path("run"), lambda _: report))
    text = generate_latest(registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def assert_rejected_everywhere(report: Report, check: str, words: str, node: str = "") -> None:
    """NOT ACCEPTED, and the ERROR that says why in HTML, Markdown, JSON, JUnit, exporter."""
    assert not report.verdict.accepted
    assert (node, check, Status.ERROR) in gaps(report)
    md = render.markdown(report)
    assert "## Verdict: NOT ACCEPTED" in md
    assert words in md
    html = render.html(report, render.make_plots(report, B300))
    assert "NOT ACCEPTED" in html and escape(words) in html
    summary = json.loads(render.summary_json(report))
    assert summary["verdict"]["accepted"] is False
    assert any(f["check"] == check and words in f["message"] for f in summary["findings"])
    text = junit.to_junit(report)
    SCHEMA.validate(text)
    suite = next(s for s in ET.fromstring(text) if s.get("name") == (node or junit.RUN_SUITE))
    case = next(c for c in suite if (c.get("name") or "").split(" #")[0] == check)
    failure = case.find("failure")
    assert failure is not None and failure.get("type") == "ERROR"
    assert words in (failure.text or "")
    metrics = exported(report)
    assert metrics[("bringup_run_accepted", frozenset())] == 0.0
    labels = frozenset({"node": node or "run", "check": check, "finding": "1"}.items())
    assert metrics[("bringup_check_status", labels)] == Status.ERROR.rank


# --- the clean run: accepted, so each gap below is the only reason it is not -----------------


def test_the_clean_run_is_accepted(clean: Path, tmp_path: Path) -> None:
    report = report_of(clean)
    assert report.verdict.accepted
    assert gaps(report) == set()
    assert report.verdict.missing == []
    result = invoke("report", clean, "--out", tmp_path)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ACCEPTED: ")


# --- findings.jsonl -------------------------------------------------------------------------


def test_an_empty_findings_file_alone_is_not_accepted(tmp_path: Path) -> None:
    """The issue's case: nothing but an empty findings.jsonl printed ACCEPTED, exit 0."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "findings.jsonl").write_text("")
    report = report_of(tmp_path / "run")
    assert gaps(report) == {
        ("", "report.manifest", Status.ERROR),
        ("", "report.nodes", Status.ERROR),
    }
    assert message(report, "report.manifest").startswith("manifest.json is missing")
    assert_rejected_everywhere(report, "report.nodes", "the run has no node")
    result = invoke("report", tmp_path / "run", "--out", tmp_path / "out", "--format", "all")
    assert result.exit_code == 1
    assert result.stdout.startswith("NOT ACCEPTED: 2 ERROR")
    assert "ERROR report.manifest: manifest.json is missing" in result.stdout
    assert "ERROR report.nodes: the run has no node" in result.stdout
    cases = ET.parse(tmp_path / "out" / "report.junit.xml").getroot()
    assert cases.get("tests") == "2" and cases.get("failures") == "2"


def test_a_findings_file_emptied_leaves_every_node_unjudged(run: Path) -> None:
    (run / "findings.jsonl").write_text("")
    report = report_of(run)
    assert gaps(report) == {(n, "report.missing", Status.ERROR) for n in NODES}
    words = "no findings for this node: its facts were never judged"
    assert_rejected_everywhere(report, "report.missing", words, node="b300-node01")


def test_a_findings_file_cut_mid_line_is_an_error(run: Path) -> None:
    text = (run / "findings.jsonl").read_text()
    (run / "findings.jsonl").write_text(text[: len(text) - 40])
    count = len(text.splitlines())
    report = report_of(run)
    assert gaps(report) == {("", "report.findings", Status.ERROR)}
    words = f"findings.jsonl line {count} does not parse"
    assert message(report, "report.findings").startswith(words)
    assert_rejected_everywhere(report, "report.findings", words)


def test_unreadable_lines_are_one_error_naming_each_line(run: Path) -> None:
    kept = lines(run)
    kept[1] = kept[1][:20]
    kept[4] = "\x00\x01 not json"
    kept.insert(6, '{"check": "gpu.count", "status": "PASSED", "message": "x"}')  # no such status
    (run / "findings.jsonl").write_text("\n".join(kept) + "\n")
    report = report_of(run)
    assert gaps(report) == {("", "report.findings", Status.ERROR)}
    assert message(report, "report.findings").startswith(
        "findings.jsonl lines 2, 5, 7 do not parse"
    )


def test_findings_that_lost_their_failures_are_not_accepted(tmp_path: Path) -> None:
    """The issue's case: the demo's FAIL lines cut from findings.jsonl read as ACCEPTED."""
    demo = demo_run(tmp_path / "demo")
    kept = [line for line in lines(demo) if json.loads(line)["status"] not in ("FAIL", "ERROR")]
    (demo / "findings.jsonl").write_text("\n".join(kept) + "\n")
    report = report_of(demo)
    # The run recorded how many bad findings it wrote: demo data exits 1 whatever its
    # findings, so the exit code alone could no longer tell that verdicts were lost.
    words = "the run wrote 4 FAIL, ERROR or UNREACHABLE findings but findings.jsonl holds 0"
    assert message(report, "report.findings").startswith(words)
    assert_rejected_everywhere(report, "report.findings", words)
    result = invoke("report", demo, "--out", tmp_path / "out")
    assert result.exit_code == 1
    assert result.stdout.startswith("NOT ACCEPTED (demo data): ")


def test_a_live_run_from_before_the_count_still_reads_its_exit_code(tmp_path: Path) -> None:
    """A manifest without findings_bad (an older run): a live run's exit code 1 over
    findings that all pass still says verdicts were lost."""
    run = clean_run(tmp_path / "run")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest.update(findings_bad=None, exit_code=1)
    (run / "manifest.json").write_text(json.dumps(manifest))
    words = (
        "the run ended with exit code 1 but findings.jsonl holds no FAIL, ERROR or "
        "UNREACHABLE finding"
    )
    assert_rejected_everywhere(report_of(run), "report.findings", words)


def test_a_failed_probe_whose_errors_were_cut_is_missing(tmp_path: Path) -> None:
    """A probe that failed gives every check of it an ERROR; none may go missing."""
    run = clean_run(tmp_path / "run")
    facts = json.loads((run / "facts" / "b300-node07.json").read_text())
    failed = ProbeRecord(probe="xid", ok=False, error="journalctl: permission denied")
    facts["probes"]["xid"] = record_json(failed)
    (run / "facts" / "b300-node07.json").write_text(json.dumps(facts))
    # Its findings as they were (PASS), the ERRORs a failed probe gives nowhere.
    report = report_of(run)
    assert gaps(report) == {("b300-node07", "report.missing", Status.ERROR)}
    words = (
        "probe 'xid' failed but the ERRORs of its checks xid.events, xid.sxid are missing "
        "from findings.jsonl"
    )
    assert message(report, "report.missing", "b300-node07") == words


def test_findings_jsonl_that_is_a_directory_is_an_error(run: Path) -> None:
    (run / "findings.jsonl").unlink()
    (run / "findings.jsonl").mkdir()
    report = report_of(run)
    assert ("", "report.findings", Status.ERROR) in gaps(report)
    assert message(report, "report.findings").startswith("findings.jsonl unreadable")


# --- manifest.json and the plan -------------------------------------------------------------


def test_a_missing_manifest_is_not_accepted(run: Path, tmp_path: Path) -> None:
    (run / "manifest.json").unlink()
    report = report_of(run)
    assert gaps(report) == {("", "report.manifest", Status.ERROR)}
    words = "manifest.json is missing"
    assert_rejected_everywhere(report, "report.manifest", words)
    result = invoke("report", run, "--out", tmp_path / "out")
    assert result.exit_code == 1
    assert "ERROR report.manifest: manifest.json is missing" in result.stdout


def test_an_unreadable_manifest_is_not_accepted(run: Path) -> None:
    (run / "manifest.json").write_bytes(b"\xff\xfe\x00garbage")
    report = report_of(run)
    assert gaps(report) == {("", "report.manifest", Status.ERROR)}
    assert message(report, "report.manifest").startswith("manifest.json unreadable (")


def test_a_run_with_no_node_is_not_accepted(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    run.add_findings([])
    run.finish("complete", 0)
    report = report_of(run.path)
    assert gaps(report) == {("", "report.nodes", Status.ERROR)}
    assert_rejected_everywhere(report, "report.nodes", "the run has no node")
    result = invoke("report", run.path, "--out", tmp_path / "out")
    assert result.exit_code == 1
    assert "ERROR report.nodes: the run has no node" in result.stdout


def test_a_planned_probe_never_recorded_is_missing(run: Path) -> None:
    facts = json.loads((run / "facts" / "b300-node01.json").read_text())
    del facts["probes"]["xid"]
    (run / "facts" / "b300-node01.json").write_text(json.dumps(facts))
    report = report_of(run)
    assert gaps(report) == {("b300-node01", "report.missing", Status.ERROR)}
    words = (
        "not measured: probe 'xid' has no record on b300-node01 (it did not run or did not finish)"
    )
    assert_rejected_everywhere(report, "report.missing", words, node="b300-node01")


def test_a_probe_with_its_explicit_error_is_not_missing_twice(run: Path) -> None:
    """A node that died mid-run records ERRORs for the probes it did not run: enough."""
    facts = json.loads((run / "facts" / "b300-node01.json").read_text())
    del facts["probes"]["xid"]
    (run / "facts" / "b300-node01.json").write_text(json.dumps(facts))
    kept = [line for line in lines(run) if '"xid.events"' not in line or "node01" not in line]
    died = Finding(
        node="b300-node01",
        check="xid.events",
        status=Status.ERROR,
        message="not measured: connection lost",
    )
    (run / "findings.jsonl").write_text("\n".join([*kept, finding_line(died)]) + "\n")
    report = report_of(run)
    assert gaps(report) == set()
    assert not report.verdict.accepted  # the node's own ERROR stands


def test_an_unknown_suite_is_not_accepted(tmp_path: Path) -> None:
    """Without its suite a run cannot show that every planned probe was measured."""
    report = report_of(clean_run(tmp_path / "run", suite=None))
    text = message(report, "report.suite")
    assert text.startswith("the run records no suite: completeness against a suite cannot")
    assert_rejected_everywhere(report, "report.suite", text)
    assert gaps(report) == {("", "report.suite", Status.ERROR)}
    assert text in report.verdict.missing


def test_a_suite_that_no_longer_loads_is_said(run: Path) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["suite"] = "nosuch"
    (run / "manifest.json").write_text(json.dumps(manifest))
    report = report_of(run)
    assert gaps(report) == {("", "report.suite", Status.ERROR)}
    assert message(report, "report.suite").startswith("the run's suite 'nosuch' cannot be loaded")
    assert not report.verdict.accepted


def test_a_run_that_did_not_complete_is_not_accepted(run: Path) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    manifest.update(status="running", ended_at=None, exit_code=None)
    (run / "manifest.json").write_text(json.dumps(manifest))
    report = report_of(run)
    assert gaps(report) == {("", "report.run", Status.ERROR)}
    assert_rejected_everywhere(report, "report.run", "the run did not complete")


def test_a_line_separator_in_node_text_splits_no_findings_line(run: Path) -> None:
    """JSON writes U+2028, U+2029 and U+0085 as they are (it escapes only C0 controls):
    findings.jsonl is split on newlines alone, not on every line boundary Python knows,
    or a node's odd character would read as a line cut short."""
    odd = Finding(
        node="b300-node01", check="gpu.name", status=Status.PASS, message="a\u2028b\x85c\u2029d"
    )
    with (run / "findings.jsonl").open("a") as out:
        out.write(finding_line(odd) + "\n")
    report = report_of(run)
    assert gaps(report) == set()
    assert any(f.message == odd.message for f in report.findings)
