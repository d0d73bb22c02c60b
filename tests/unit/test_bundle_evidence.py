"""A handover bundle is evidence as a whole, each part judged as the run it is; comparisons
with a baseline fail closed; --limit narrows what a report shows, not what it judges.

Every run here is written by the project's own code (the CLI, RunDir), then broken the way
a crash or a hostile provider breaks it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from bringup import baseline as baselines
from tests.support.cli import invoke
from tests.support.report_runs import clean_run, demo_run, serial_changed, write_run
from tests.unit.test_since_handover import power_limit


def edit_json(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2) + "\n")


def crash(run: Path) -> Path:
    """The run as a crash leaves it: status running, no hashes, findings.jsonl cut."""
    edit_json(
        run / "manifest.json",
        lambda m: m.update(status="running", exit_code=None, ended_at=None, files_sha256=None),
    )
    (run / "findings.jsonl").write_bytes((run / "findings.jsonl").read_bytes()[:200])
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """good: a run that is ACCEPTED on its own; crashed: a copy of it, crashed; other: a
    good run of other nodes."""
    base = tmp_path_factory.mktemp("runs")
    good = clean_run(base / "good")
    clean_run(base / "other", names=("gpu-a", "gpu-b"))
    crash(Path(shutil.copytree(good, base / "crashed")))
    return base


@pytest.fixture(scope="module")
def handover(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_run(tmp_path_factory.mktemp("handover") / "run")


def report_json(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "report.json").read_text())


def bad_lines(result: Any) -> list[str]:
    """The pieces the console says a run or bundle lacks, but for what a handover must
    hold (its coverage: tests/unit/test_handover_coverage.py)."""
    lines = [line.strip() for line in result.stdout.splitlines() if line.startswith("  ")]
    return [
        line
        for line in lines
        if line.split(" ")[0] in ("ERROR", "FAIL", "WARN") and "report.coverage" not in line
    ]


# What a bundle of the demo probes' check alone lacks to be a handover (checks/coverage.py).
PARTIAL = (
    "partial handover: no acceptance suite, no NCCL multi-node/pairwise, no burn-in MFU baseline"
)


# --- a part is judged as a run ----------------------------------------------------------


def test_a_bundle_of_good_runs_lacks_only_what_a_handover_needs(runs: Path, tmp_path: Path) -> None:
    """The rule below does not refuse a good part: the good run alone is ACCEPTED as a
    check; as a bundle it lacks only the parts a handover needs (checks/coverage.py)."""
    assert invoke("report", runs / "good", "--out", tmp_path / "alone").exit_code == 0
    result = invoke("handover", "--from", runs / "good", "--out", tmp_path / "b")
    assert result.exit_code == 1, result.output
    assert result.stdout.startswith(f"NOT ACCEPTED ({PARTIAL}): 54 PASS, 3 ERROR\n")
    bad = [f for f in report_json(tmp_path / "b")["findings"] if f["status"] != "PASS"]
    assert {f["check"] for f in bad} == {"report.coverage"}


def test_a_crashed_part_makes_the_bundle_not_accepted(runs: Path, tmp_path: Path) -> None:
    """The issue's case: --from good --from crashed printed ACCEPTED and exited 0."""
    assert invoke("report", runs / "crashed", "--out", tmp_path / "alone").exit_code == 1
    out = tmp_path / "b"
    result = invoke("handover", "--from", runs / "good", "--from", runs / "crashed", "--out", out)
    assert result.exit_code == 1, result.output
    assert result.stdout.startswith(f"NOT ACCEPTED ({PARTIAL}): 54 PASS, 7 ERROR\n")
    assert bad_lines(result) == [
        "ERROR report.findings: part check-2: findings.jsonl line 1 does not parse "
        "(cut short or edited): its verdict is unknown",
        "ERROR report.run: part check-2: the run did not complete (status 'running'): probes "
        "after the last recorded one did not run; what was measured before it stopped is shown",
        "ERROR report.missing (b300-node01): part check-2: no findings for this node: its "
        "facts were never judged",
        "ERROR report.missing (b300-node07): part check-2: no findings for this node: its "
        "facts were never judged",
    ]
    assert report_json(out)["verdict"]["accepted"] is False
    assert baselines.load_bundle(out).exit_code == 1


def test_a_part_gone_from_the_bundle_is_an_error_naming_it(runs: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    assert invoke("handover", "--from", runs / "good", "--out", bundle).exit_code == 1
    shutil.rmtree(bundle / "check")
    result = invoke("report", bundle, "--out", tmp_path / "r")
    assert result.exit_code == 1
    assert result.stdout.startswith("NOT ACCEPTED")
    assert "ERROR report.bundle: the bundle is not what its manifest.json records: missing: " in (
        result.stdout
    )
    assert "check/manifest.json (part check: cannot read" in result.stdout


def test_a_failing_part_taken_out_of_the_manifest_is_seen(runs: Path, tmp_path: Path) -> None:
    """Its entry deleted and the exit code set to 0: the directory is still there, unlisted."""
    bundle = tmp_path / "b"
    invoke("handover", "--from", runs / "good", "--from", runs / "crashed", "--out", bundle)

    def drop(m: dict[str, Any]) -> None:
        m["parts"] = m["parts"][:1]
        m["exit_code"] = 0

    edit_json(bundle / "manifest.json", drop)
    result = invoke("report", bundle, "--out", tmp_path / "r")
    assert result.exit_code == 1
    assert bad_lines(result) == [
        "ERROR report.bundle: the bundle is not what its manifest.json records: added: "
        "check-2/ (not listed in the bundle's manifest.json)"
    ]


def test_a_parts_exit_code_edited_in_the_manifest_is_seen(runs: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    invoke("handover", "--from", runs / "good", "--out", bundle)
    edit_json(bundle / "check" / "manifest.json", lambda m: m.update(exit_code=1))
    result = invoke("report", bundle, "--out", tmp_path / "r")
    assert result.exit_code == 1
    lines = bad_lines(result)
    assert lines[0].startswith(
        "ERROR report.bundle: the bundle is not what its manifest.json records: modified: "
        "check/manifest.json (the bundle's manifest.json records sha256 "
    )
    assert lines[1] == (
        "ERROR report.bundle: the bundle is not what its manifest.json records: modified: "
        "manifest.json (part check: exit code 0 there, 1 in check/manifest.json)"
    )


def test_report_does_not_write_over_a_bundles_reports(runs: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    invoke("handover", "--from", runs / "good", "--out", bundle)
    before = (bundle / "report.md").read_bytes()
    result = invoke("report", bundle)
    assert result.exit_code == 2
    assert "is a handover bundle: its reports are recorded in its manifest.json" in result.stderr
    assert (bundle / "report.md").read_bytes() == before


# --- comparisons fail closed ------------------------------------------------------------


@pytest.fixture(scope="module")
def later(handover: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fleet later: a GPU swapped on node06 and a power limit lowered on node03."""
    return write_run(
        handover,
        tmp_path_factory.mktemp("later") / "run",
        serial_changed("b300-node06", 4, "1654922007777"),
        power_limit("b300-node03", 1, 700.0),
    )


def compared(later: Path, baseline: Path, out: Path) -> tuple[dict[str, Any], str]:
    result = invoke("report", later, "--baseline", baseline, "--format", "json,md", "--out", out)
    assert result.exit_code == 1, result.output
    return report_json(out)["baseline"], (out / "report.md").read_text()


def test_an_intact_baseline_shows_the_changes(handover: Path, later: Path, tmp_path: Path) -> None:
    found, _ = compared(later, handover, tmp_path / "r")
    assert [(c["node"], c["what"]) for c in found["changed"]] == [
        ("b300-node03", "GPU 1 power limit"),
        ("b300-node06", "GPU 4 serial"),
    ]
    assert found["not_compared"] == []


def test_truncated_baseline_facts_are_an_error_per_node(
    handover: Path, later: Path, tmp_path: Path
) -> None:
    """The issue's case: "0 changed since. Nothing: every node as at handover." printed."""
    cut = Path(shutil.copytree(handover, tmp_path / "cut"))
    for facts in (cut / "facts").glob("*.json"):
        facts.write_bytes(facts.read_bytes()[:100])
    found, md = compared(later, cut, tmp_path / "r")
    nodes = [f"b300-node0{i}" for i in range(1, 7)]
    assert [n["node"] for n in found["not_compared"]] == nodes
    errors = [
        f for f in report_json(tmp_path / "r")["findings"] if f["check"] == "baseline.compare"
    ]
    assert [(f["node"], f["status"]) for f in errors] == [(n, "ERROR") for n in nodes]
    assert errors[0]["message"] == (
        "cannot compare b300-node01: facts unreadable in the baseline cut "
        "(facts/b300-node01.json unreadable (at the top: Input data was truncated): its probes "
        "are not shown): what changed on it since handover is unknown"
    )
    assert "Nothing: every node as at handover." not in md
    assert "**6 not compared**" in md


def test_a_bundle_whose_facts_are_gone_is_no_nothing_changed(
    handover: Path, later: Path, tmp_path: Path
) -> None:
    bundle = tmp_path / "b"
    assert invoke("handover", "--from", handover, "--out", bundle).exit_code == 1
    shutil.rmtree(bundle / "check" / "facts")
    found, md = compared(later, bundle, tmp_path / "r")
    assert [n["why"] for n in found["not_compared"]][:1] == [
        "cannot compare b300-node01: the baseline b records no facts of it: what changed on "
        "it since handover is unknown"
    ]
    assert len(found["not_compared"]) == 6
    assert "Nothing: every node as at handover." not in md


def test_a_baseline_of_other_nodes_is_one_error(runs: Path, later: Path, tmp_path: Path) -> None:
    found, md = compared(later, runs / "other", tmp_path / "r")
    (only,) = found["not_compared"]
    assert only == {
        "node": "",
        "why": "the baseline other has no node in common with this run: nothing was compared "
        "(there: gpu-a, gpu-b; here: b300-node01, b300-node02, b300-node03, b300-node04, "
        "b300-node05 and 1 more)",
    }
    errors = [
        f for f in report_json(tmp_path / "r")["findings"] if f["check"].startswith("baseline.")
    ]
    assert [(f["check"], f["status"]) for f in errors] == [("baseline.compare", "ERROR")]
    assert "Nothing: every node as at handover." not in md


# --- --limit narrows what is shown, not what is judged ----------------------------------


def test_limit_keeps_the_lost_verdicts_of_the_whole_run(runs: Path, tmp_path: Path) -> None:
    """The issue's case: a FAIL line deleted under an exit code of 1 was ACCEPTED with --limit."""
    run = Path(shutil.copytree(runs / "good", tmp_path / "run"))
    # The run wrote one FAIL (its manifest counts it, issue 24) whose line is gone.
    edit_json(run / "manifest.json", lambda m: m.update(exit_code=1, findings_bad=1))
    lost = (
        "ERROR report.findings: the run wrote 1 FAIL, ERROR or UNREACHABLE findings but "
        "findings.jsonl holds 0: verdicts are missing from it"
    )
    whole = invoke("report", run, "--out", tmp_path / "whole")
    assert whole.exit_code == 1 and bad_lines(whole) == [lost]
    limited = invoke("report", run, "--limit", "b300-node0*", "--out", tmp_path / "limited")
    assert limited.exit_code == 1, limited.output
    assert limited.stdout.startswith("NOT ACCEPTED: ")
    assert bad_lines(limited) == [lost]


def test_limit_keeps_its_nodes_gaps_and_leaves_out_the_others(runs: Path, tmp_path: Path) -> None:
    run = Path(shutil.copytree(runs / "good", tmp_path / "run"))

    def drop_xid(facts: dict[str, Any]) -> None:
        del facts["probes"]["xid"]

    edit_json(run / "facts" / "b300-node07.json", drop_xid)
    gap = "ERROR report.missing (b300-node07): not measured: probe 'xid' has no record on"
    shown = invoke("report", run, "--limit", "b300-node07", "--out", tmp_path / "seven")
    assert shown.exit_code == 1
    assert [line[: len(gap)] for line in bad_lines(shown)] == [gap]
    other = invoke("report", run, "--limit", "b300-node01", "--out", tmp_path / "one")
    assert other.exit_code == 0, other.output
