"""One judge: `check` at the end of its run and `report` afterwards reach the same findings
over the same run directory (bringup/checks/whole_run.py), and count them alike."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bringup.commands.common import finish_run
from bringup.commands.report import make_report
from bringup.findings import Finding, Status, exit_code, finding_line
from bringup.fleet import run as fleet
from bringup.fleet.inventory import Host
from bringup.fleet.plan import plan_node
from bringup.profile import load as load_profile
from bringup.rundir import RunDir
from bringup.suite import load as load_suite
from tests.support.cli import invoke


def _misnamed(
    request: dict[str, Any], deadline: float, stop: threading.Event, on_stage: fleet.Stage
) -> Iterator[dict[str, Any]]:
    """A node side that answers the planned xid probe with a record named dcgm."""
    on_stage("running")
    facts = {"events": [], "lines_read": 3, "source": "dmesg", "window_s": 60}
    yield {"probe": "dcgm", "ok": True, "facts": facts, "params": {}, "error": None}


def test_a_probe_answered_under_another_name_is_the_same_error_in_check_and_report(
    tmp_path: Path,
) -> None:
    from bringup.commands.report import judge_whole

    suite = load_suite("quick")
    plan = plan_node(Host("n01", "127.0.0.1"), _misnamed, suite, load_profile("b300"), remote=False)
    plan.request = {"probes": [s for s in plan.request["probes"] if s["name"] == "xid"]}
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick", probes=["xid"])
    findings = [f for o in fleet.run([plan], run) for f in o.findings]
    # What check does at its end: the whole run judged, then closed with that exit code.
    findings += judge_whole(run)
    code = finish_run(run, findings)
    # The planned xid probe was not measured (the record under another name is refused
    # while storing, or else is a report.missing gap): ERROR for it, never ACCEPTED.
    unmeasured = [f for f in findings if f.check.startswith("xid.") or f.check == "report.missing"]
    assert unmeasured and {f.status for f in unmeasured} == {Status.ERROR}
    assert code == 1
    report, _ = make_report(run.path, None, None)
    assert _said(report.findings) == _said(findings)
    assert report.verdict.line.startswith("NOT ACCEPTED")


def _said(findings: list[Finding]) -> Counter[tuple[str, str, str, str]]:
    return Counter((f.node, f.check, f.status.value, f.message) for f in findings)


def test_check_and_report_count_alike_on_a_gpu_less_node(tmp_path: Path) -> None:
    """--profile auto on this GPU-less machine: the console's counts are the report's, and
    the host probe's figures are shown (ERROR, measured, not judged), never dropped."""
    checked = invoke("check", "--local", "--suite", "quick", "--out", tmp_path / "run", "--json")
    assert checked.exit_code == 1, checked.stderr
    doc = json.loads(checked.stdout)
    reported = invoke("report", tmp_path / "run", "--out", tmp_path / "r", "--json")
    assert reported.exit_code == 1, reported.stderr
    again = json.loads(reported.stdout)
    assert Counter(f["status"] for f in doc["findings"]) == Counter(
        f["status"] for f in again["findings"]
    )
    assert _keys(doc["findings"]) == _keys(again["findings"])
    assert not [f for f in again["findings"] if f["check"].startswith("report.")]
    host = [f for f in doc["findings"] if f["check"].startswith("host.")]
    assert host and {f["status"] for f in host} == {"ERROR"}
    assert all(
        "measured, not judged: no profile fits this node's GPU" in f["message"] for f in host
    )
    # The console says the same counts on its last line.
    shown = invoke("check", "--local", "--suite", "quick", "--out", tmp_path / "again")
    counts = Counter(f["status"] for f in doc["findings"])
    line = ", ".join(f"{counts[s.value]} {s.value}" for s in Status if counts[s.value])
    assert f"NOT ACCEPTED: {line};" in shown.stdout.splitlines()[-1]


def _keys(findings: list[dict[str, Any]]) -> Counter[tuple[str, str, str]]:
    return Counter((f["node"], f["check"], f["status"]) for f in findings)


def test_report_judges_again_what_check_recorded_of_the_whole_run(tmp_path: Path) -> None:
    """A report.* line in findings.jsonl is not taken on trust: it is judged again (an
    edited line neither adds a finding nor removes the real one)."""
    invoke("check", "--local", "--suite", "quick", "--out", tmp_path / "run")
    lines = (tmp_path / "run" / "findings.jsonl").read_text().splitlines()
    planted = finding_line(
        Finding(node="", check="report.run", status=Status.ERROR, message="planted")
    )
    (tmp_path / "run" / "findings.jsonl").write_text("\n".join([*lines, planted]) + "\n")
    report, _ = make_report(tmp_path / "run", None, None)
    assert not [f for f in report.findings if f.message == "planted"]
    assert exit_code(report.findings) == 1


def test_handover_demo_counts_what_check_demo_counts(tmp_path: Path) -> None:
    """The same fleet, the same findings: handover judges each node by its own GPU's
    profile (--profile auto, as check does), so no profile.auto verdict goes missing."""
    checked = json.loads(invoke("check", "--demo", "--out", tmp_path / "c", "--json").stdout)
    handed = json.loads(invoke("handover", "--demo", "--out", tmp_path / "h", "--json").stdout)
    # Beside the check's findings, the bundle's own: what a handover lacks (the acceptance
    # suite, NCCL across nodes, a burn-in: bringup/checks/coverage.py).
    lacks = [f for f in handed["findings"] if f["check"] == "report.coverage"]
    assert [f["status"] for f in lacks] == ["ERROR"] * 3
    handed["findings"] = [f for f in handed["findings"] if f["check"] != "report.coverage"]
    assert _keys(handed["findings"]) == _keys(checked["findings"])
    assert Counter(f["status"] for f in handed["findings"]) == Counter(
        f["status"] for f in checked["findings"]
    )


def test_the_whole_run_is_judged_by_the_manifest_the_run_will_close_with(
    tmp_path: Path,
) -> None:
    """A burn-in chooses its profile while judging (in memory, saved when it closes): the
    console must not say report.profile where the report on the closed run will not."""
    from bringup.commands.report import judge_whole

    run = RunDir.create(tmp_path / "run", "burnin", None, "burnin", probes=["xid"])
    facts = {"events": [], "lines_read": 3, "source": "dmesg", "window_s": 60}
    run.add_nodes(["n01"])
    run.add_record("n01", {"probe": "xid", "ok": True, "facts": facts, "params": {}})
    run.add_findings([Finding(node="n01", check="xid.events", status=Status.PASS, message="ok")])
    run.manifest.profile = "h200"  # chosen by the judge, not yet on disk
    found = judge_whole(run)
    assert not [f for f in found if f.check == "report.profile"], found
    finish_run(run, [*found])
    report, _ = make_report(run.path, None, None)
    assert not [f for f in report.findings if f.check == "report.profile"]
