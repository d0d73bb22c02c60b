"""Where a report's facts came from, said where a reader looks first, and a replay judged
against the suite of the run it replays (`check --demo`, `check --replay`, `report`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape

from bringup.findings import Finding, Status
from bringup.provenance import manifest_sha256
from bringup.rundir import RunDir
from tests.support.cli import invoke
from tests.support.report_runs import clean_run, demo_run


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return clean_run(tmp_path_factory.mktemp("clean") / "run")


def report(run: Path, out: Path) -> tuple[int, str, str, str, dict[str, Any]]:
    """`bringup report` in all formats: exit code, console, HTML, Markdown, JSON."""
    result = invoke("report", run, "--format", "all", "--out", out)
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    return result.exit_code, result.stdout, html, md, json.loads((out / "report.json").read_text())


def test_a_demo_report_says_demo_data_in_its_verdict_line(tmp_path: Path) -> None:
    demo = demo_run(tmp_path / "demo")
    manifest = json.loads((demo / "manifest.json").read_text())
    assert manifest["provenance"]["mode"] == "demo"
    assert manifest["provenance"]["argv"] == ["check", "--demo", "--out", str(demo)]
    assert manifest["probes"] == ["gpu", "topology", "host", "xid", "nvme"]
    code, console, html, md, doc = report(demo, tmp_path / "out")
    assert code == 1
    assert console.startswith("NOT ACCEPTED (demo data): ")
    assert "<h2>NOT ACCEPTED (demo data)</h2>" in html
    assert "demo data: the embedded demo fleet, not a measurement" in html
    assert "## Verdict: NOT ACCEPTED (demo data)\n" in md
    assert doc["verdict"]["line"] == "NOT ACCEPTED (demo data)"
    assert doc["run"]["mode"] == "demo"
    assert doc["run"]["manifest_sha256"] == manifest_sha256(demo)
    assert manifest_sha256(demo) in html and manifest_sha256(demo) in md


def test_a_replay_report_names_the_run_and_its_manifest_hash(clean: Path, tmp_path: Path) -> None:
    """A replay of a clean live run: every finding passes, and it is NOT ACCEPTED, exit 1:
    its facts were not measured by this run (replayed from the run, whose manifest hash
    each record and the report carry)."""
    replay = tmp_path / "replay"
    judged = invoke("check", "--replay", clean, "--out", replay)
    assert judged.exit_code == 1, judged.output
    original = manifest_sha256(clean)
    # Said in the verdict line, as the report says it.
    said = f"NOT ACCEPTED (replayed from {clean}): 56 PASS on 2 nodes"
    assert judged.stdout.splitlines()[-1] == said
    manifest = json.loads((replay / "manifest.json").read_text())
    made = manifest["provenance"]
    assert made["mode"] == "replay"
    assert made["replay_of"] == str(clean)
    assert made["replay_manifest_sha256"] == original
    assert manifest["probes"] == ["gpu", "topology", "host", "xid", "nvme"]  # the original's
    facts = json.loads((replay / "facts" / "b300-node01.json").read_text())
    chain = facts["probes"]["gpu"]["provenance"]
    assert chain == [{"kind": "replayed", "of": str(clean), "sha256": original}]
    code, console, html, md, doc = report(replay, tmp_path / "out")
    line = f"NOT ACCEPTED (replayed from {clean})"
    assert code == 1, console
    assert console.startswith(f"{line}: ")
    assert f"<h2>{escape(line)}</h2>" in html
    assert f"## Verdict: {line}\n" in md
    assert doc["verdict"]["line"] == line
    assert (doc["verdict"]["mode"], doc["run"]["derived_mode"]) == ("replayed", "replayed")
    assert doc["run"]["replay_manifest_sha256"] == original
    assert f"its manifest sha256 {original}" in doc["run"]["origin"]
    assert doc["run"]["manifest_sha256"] == manifest_sha256(replay)
    assert doc["run"]["command_line"] == f"bringup check --replay {clean} --out {replay}"


def test_a_replay_keeps_when_each_record_was_measured_and_the_raw_outputs(
    tmp_path: Path,
) -> None:
    first = RunDir.create(tmp_path / "first", "snapshot", None, None, probes=["host"])
    host = clean_run(tmp_path / "c" / "run").joinpath("facts", "b300-node01.json")
    record = json.loads(host.read_text())["probes"]["host"]
    record.update(started_at="2026-11-28T14:03:00+00:00", raw={"lscpu.txt": "CPU(s): 224\n"})
    first.add_record("b300-node01", record)
    first.finish("complete", 0)
    collected = json.loads((tmp_path / "first/facts/b300-node01.json").read_text())["collected_at"]
    result = invoke("check", "--replay", tmp_path / "first", "--out", tmp_path / "replay")
    assert result.exit_code in (0, 1), result.output
    facts = json.loads((tmp_path / "replay/facts/b300-node01.json").read_text())
    assert facts["collected_at"] == collected
    assert facts["probes"]["host"]["started_at"] == "2026-11-28T14:03:00+00:00"
    raw = tmp_path / "replay/raw/b300-node01/host/lscpu.txt"
    assert raw.read_text() == "CPU(s): 224\n"
    hashes = json.loads((tmp_path / "replay/manifest.json").read_text())["files_sha256"]
    assert "raw/b300-node01/host/lscpu.txt" in hashes


def test_a_replay_without_a_planned_probe_is_not_accepted(clean: Path, tmp_path: Path) -> None:
    """The issue's case: one node's NVMe record removed; the replay said ACCEPTED."""
    edited = Path(shutil.copytree(clean, tmp_path / "edited"))
    facts = json.loads((edited / "facts" / "b300-node07.json").read_text())
    del facts["probes"]["nvme"]
    (edited / "facts" / "b300-node07.json").write_text(json.dumps(facts))
    replay = tmp_path / "replay"
    judged = invoke("check", "--replay", edited, "--out", replay, "--json")
    assert judged.exit_code == 1
    words = f"not measured: b300-node07 has no record of probe 'nvme' in {edited}"
    unmeasured = [f for f in json.loads(judged.stdout)["findings"] if f["status"] == "ERROR"]
    assert {(f["node"], f["check"], f["message"]) for f in unmeasured} == {
        ("b300-node07", check, words)
        for check in (
            "nvme.seq_read",
            "nvme.seq_write",
            "nvme.checkpoint",
            "nvme.concurrent_read",
            "nvme.rand_read",
        )
    } | {  # and the edit itself: the file is not what the run recorded
        (
            "b300-node07",
            "replay.source",
            f"replayed data differs from what run {edited} recorded: facts/b300-node07.json",
        )
    }
    code, console, html, md, doc = report(replay, tmp_path / "out")
    assert code == 1
    assert console.startswith("NOT ACCEPTED (replayed from ")
    assert doc["verdict"]["nodes_failing"] == ["b300-node07"]
    assert escape(words) in html and "b300-node07" in md


def test_the_suite_of_a_replay_can_be_given(clean: Path, tmp_path: Path) -> None:
    """--suite: judge the replay against another suite (quick asks for dcgm too)."""
    replay = tmp_path / "replay"
    judged = invoke("check", "--replay", clean, "--suite", "quick", "--out", replay, "--json")
    assert judged.exit_code == 1
    errors = {(f["node"], f["check"]) for f in json.loads(judged.stdout)["findings"]}
    assert ("b300-node01", "dcgm.diag") in errors and ("b300-node07", "dcgm.diag") in errors
    manifest = json.loads((replay / "manifest.json").read_text())
    assert manifest["suite"] == "quick"
    assert manifest["probes"] == ["gpu", "topology", "host", "xid", "dcgm"]


def test_a_replay_of_a_facts_file_has_no_plan_and_is_not_accepted(
    clean: Path, tmp_path: Path
) -> None:
    replay = tmp_path / "replay"
    facts = clean / "facts" / "b300-node01.json"
    # One judge: check says at once what the report says (no plan: report.suite ERROR).
    checked = invoke("check", "--replay", facts, "--out", replay)
    assert checked.exit_code == 1
    assert "report.suite" in checked.stdout.splitlines()[-1]
    code, console, _, _, doc = report(replay, tmp_path / "out")
    assert code == 1
    assert console.startswith(f"NOT ACCEPTED (replayed from {facts}): ")
    assert "ERROR report.suite: the run records no suite" in console
    assert doc["run"]["replay_manifest_sha256"] is None


def test_demo_takes_no_suite(tmp_path: Path) -> None:
    result = invoke("check", "--demo", "--suite", "quick", "--out", tmp_path / "d")
    assert result.exit_code == 2
    assert "--suite does not apply to --demo" in result.stderr


def test_a_run_without_a_profile_is_not_accepted(tmp_path: Path) -> None:
    """The issue's case: a burn-in on a GPU no profile knows said ACCEPTED, profile unknown."""
    run = RunDir.create(tmp_path / "run", "burnin", None, "burnin", probes=[])
    run.add_node("n1")
    run.add_findings([Finding(node="n1", check="burnin.run", status=Status.PASS, message="ok")])
    run.finish("complete", 0)
    result = invoke("report", tmp_path / "run", "--out", tmp_path / "out")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[:2] == [
        "NOT ACCEPTED: 1 PASS, 1 ERROR",
        "  ERROR report.profile: the run records no profile: its findings were not judged "
        "against a profile's thresholds, so the run cannot be accepted",
    ]
