"""`bringup handover`: a bundle of run directories with one manifest and one report, made
from the demo fleet or gathered from existing runs (--from); `--baseline` takes a bundle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bringup import baseline as baselines
from bringup.facts import record_json
from bringup.findings import Status
from bringup.node.probes.nccl import parse_nccl_tests
from bringup.rundir import RunDir
from tests.support.cli import invoke
from tests.support.report_runs import NCCL_LOG, STAMP, demo_run, record, write_run


def nccl_run(out: Path, node: str) -> Path:
    """A run of `bringup nccl` on one node: the recorded nccl-tests output, no findings."""
    run = RunDir.create(out, "nccl", "b300", None)
    run.manifest.started_at = STAMP
    run.add_node(node)
    run.add_record(node, record_json(record("nccl", parse_nccl_tests(NCCL_LOG.read_text()))))
    run.finish("complete", 0)
    return out


@pytest.fixture(scope="module")
def demo_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "handover"
    result = invoke("handover", "--demo", "--out", out)
    assert result.exit_code == 1, result.output  # the demo's planted faults
    return out


def test_demo_bundle_lists_its_part_and_reports(demo_bundle: Path) -> None:
    bundle = baselines.load_bundle(demo_bundle)
    assert (bundle.mode, bundle.exit_code) == ("demo", 1)
    assert [(p.kind, p.path, p.exit_code) for p in bundle.parts] == [("check", "check", 1)]
    assert bundle.nodes == [f"b300-node0{i}" for i in range(1, 7)]
    assert (demo_bundle / "check" / "findings.jsonl").is_file()
    summary = json.loads((demo_bundle / "report.json").read_text())
    assert summary["verdict"]["accepted"] is False
    assert summary["run"]["command"] == "handover"
    assert (demo_bundle / "report.html").is_file() and (demo_bundle / "report.md").is_file()


def test_from_gathers_runs_and_merges_their_facts(tmp_path: Path) -> None:
    check = demo_run(tmp_path / "check-run")
    nccl = nccl_run(tmp_path / "nccl-run", "b300-node01")
    out = tmp_path / "bundle"
    result = invoke("handover", "--from", check, "--from", nccl, "--out", out, "--json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)["data"]  # the one document, nothing else
    assert [(p["kind"], p["path"]) for p in doc["parts"]] == [("check", "check"), ("nccl", "nccl")]
    summary = json.loads((out / "report.json").read_text())
    node01 = next(n for n in summary["nodes"] if n["node"] == "b300-node01")
    # The nccl part's record is node01's, beside the acceptance check's probes.
    assert "nccl.busbw" in node01["measurements"]["metrics"]
    assert {p["probe"] for p in node01["measurements"]["probes"]} >= {"gpu", "nccl", "xid"}


def test_from_refuses_what_is_no_run(tmp_path: Path) -> None:
    result = invoke("handover", "--from", tmp_path, "--out", tmp_path / "b")
    assert result.exit_code == 2
    assert "not a run directory" in result.stderr


def test_one_source_of_evidence(tmp_path: Path) -> None:
    result = invoke("handover", "--demo", "--local", "--out", tmp_path / "b")
    assert result.exit_code == 2
    assert "--nodes FILE, --local, --demo or --from" in result.stderr


def test_baseline_takes_a_bundle(demo_bundle: Path, tmp_path: Path) -> None:
    later = write_run(demo_bundle / "check", tmp_path / "later")
    result = invoke(
        "report", later, "--baseline", demo_bundle, "--format", "json", "--out", tmp_path / "r"
    )
    assert result.exit_code == 1, result.output
    summary = json.loads((tmp_path / "r" / "report.json").read_text())
    # The same facts as at handover: nothing changed, the planted faults were there then.
    assert summary["baseline"]["changed"] == []
    already = {(r["node"], r["check"], r["current"]) for r in summary["baseline"]["already"]}
    assert ("b300-node02", "gpu.count", Status.FAIL.value) in already


def test_burnin_baseline_of_a_bundle_without_burnin_says_so(demo_bundle: Path) -> None:
    with pytest.raises(baselines.BaselineError, match="holds no burn-in run"):
        baselines.load(demo_bundle)


def test_from_refuses_options_of_a_run(tmp_path: Path) -> None:
    check = demo_run(tmp_path / "check-run")
    result = invoke("handover", "--from", check, "--profile", "h100", "--out", tmp_path / "b")
    assert result.exit_code == 2
    assert "--profile does not apply to --from" in result.stderr


def test_a_manifest_nested_too_deeply_is_no_bundle_and_no_traceback(tmp_path: Path) -> None:
    # Found by the hostile-input property test: json.loads raised RecursionError.
    (tmp_path / "manifest.json").write_text("[" * 5000 + "]" * 5000)
    assert baselines.is_bundle(tmp_path) is False
    result = invoke("report", tmp_path)
    assert result.exit_code in (1, 2)
    assert isinstance(result.exception, SystemExit)  # an exit, not a RecursionError
