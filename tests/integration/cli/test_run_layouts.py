"""Every command that reads a run directory reads both layouts the same: the demo run
written flat and written sharded (the threshold lowered so its six nodes shard) give the
same reports, judgements and figures; an old flat run from before sharding
(tests/fixtures/rundir/flat-2node) still reads and verifies."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from bringup import rundir
from bringup.commands.plan import links_from_run
from bringup.planning import memory
from bringup.profile import load as load_profile
from tests.support.cli import invoke
from tests.support.report_runs import demo_run

FLAT_FIXTURE = Path(__file__).parents[2] / "fixtures" / "rundir" / "flat-2node"
FORMATS = "md,json,junit,html"


@pytest.fixture(scope="module")
def flat(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_run(tmp_path_factory.mktemp("flat") / "run")


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rundir, "SHARD_ABOVE", 0)
        return demo_run(tmp_path_factory.mktemp("sharded") / "run")


def report_json(run: Path, *more: str | Path) -> dict[str, Any]:
    result = invoke("report", run, "--format", "json", *more)
    assert result.exit_code == 1, result.output  # the demo's faults
    return json.loads((run / "report.json").read_text())


def same_report(doc: dict[str, Any]) -> dict[str, Any]:
    """What a report says of the fleet, less where its run is and when it was written."""
    return {
        "verdict": doc["verdict"],
        "nodes": doc["nodes"],
        "findings": doc["findings"],
    }


def test_the_sharded_demo_run_is_sharded(sharded: Path) -> None:
    assert json.loads((sharded / "manifest.json").read_text())["layout"] == "sharded"
    assert not list((sharded / "facts").glob("*.json"))
    assert len(list((sharded / "facts").glob("??/*.json"))) == 6


def test_every_report_format_reads_both_layouts_alike(
    flat: Path, sharded: Path, tmp_path: Path
) -> None:
    docs = []
    for run in (flat, sharded):
        copy = Path(shutil.copytree(run, tmp_path / run.parent.name))
        result = invoke("report", copy, "--format", FORMATS)
        assert result.exit_code == 1, result.output
        for name in ("report.md", "report.junit.xml", "report.html"):
            assert (copy / name).stat().st_size > 0
        docs.append(json.loads((copy / "report.json").read_text()))
        assert "b300-node02" in (copy / "report.md").read_text()
    assert same_report(docs[0]) == same_report(docs[1])
    assert len(docs[1]["nodes"]) == 6


def test_a_replay_of_a_sharded_run_judges_it_alike(
    flat: Path, sharded: Path, tmp_path: Path
) -> None:
    outcomes = []
    for run in (flat, sharded):
        out = tmp_path / f"again-{run.parent.name}"
        result = invoke("check", "--replay", run, "--out", out, "--json")
        assert result.exit_code == 1, result.output
        findings = [json.loads(line) for line in (out / "findings.jsonl").read_text().splitlines()]
        outcomes.append(sorted((f["node"], f["check"], f["status"]) for f in findings))
        assert not [f for f in findings if f["check"] == "replay.source"]
    assert outcomes[0] == outcomes[1]


def test_a_changed_file_in_a_shard_is_a_replay_error_on_its_node(
    sharded: Path, tmp_path: Path
) -> None:
    run = Path(shutil.copytree(sharded, tmp_path / "run"))
    facts = run / "facts" / rundir.shard_of("b300-node04") / "b300-node04.json"
    facts.write_text(facts.read_text().replace("b300-node04", "b300-node04", 1) + " ")
    result = invoke("check", "--replay", run, "--out", tmp_path / "again", "-q")
    assert result.exit_code == 1
    findings = [
        json.loads(line)
        for line in (tmp_path / "again" / "findings.jsonl").read_text().splitlines()
    ]
    changed = [(f["node"], f["status"]) for f in findings if f["check"] == "replay.source"]
    assert changed == [("b300-node04", "ERROR")]


def test_report_baseline_compares_across_layouts(flat: Path, sharded: Path, tmp_path: Path) -> None:
    compared = []
    for run, baseline in ((flat, sharded), (sharded, flat), (flat, flat)):
        copy = Path(shutil.copytree(run, tmp_path / f"{run.parent.name}-{baseline.parent.name}"))
        doc = report_json(copy, "--baseline", baseline)["baseline"]
        assert doc["missing_nodes"] == [] and doc["new_nodes"] == []
        assert len(doc["metrics"]) == 12  # every node's measurements, compared
        compared.append({k: v for k, v in doc.items() if not k.startswith("baseline_")})
    assert compared[0] == compared[1] == compared[2]


def test_learn_reads_a_sharded_run(flat: Path, sharded: Path, tmp_path: Path) -> None:
    golden = []
    for run in (flat, sharded):
        out = tmp_path / f"{run.parent.name}.yaml"
        result = invoke("learn", run, "--out", out, "-q")
        assert result.exit_code == 0, result.output
        golden.append(out.read_text().replace(str(run), "RUN"))
    assert golden[0] == golden[1]


def test_exporter_reads_a_sharded_run(flat: Path, sharded: Path, tmp_path: Path) -> None:
    texts = []
    for run in (flat, sharded):
        target = tmp_path / f"{run.parent.name}.prom"
        result = invoke("exporter", "--run", run, "--textfile", target)
        assert result.exit_code == 0, result.output
        lines = [
            line
            for line in target.read_text().splitlines()
            if "bringup_check_status" in line and "#" not in line
        ]
        texts.append(lines)
    assert texts[0] and texts[0] == texts[1]


def test_plan_from_reads_a_sharded_run(flat: Path, sharded: Path) -> None:
    b300 = memory.device_of(load_profile("b300"))
    said = [repr(links_from_run(run, b300)).replace(str(run), "RUN") for run in (flat, sharded)]
    assert "b300-node01 GPU 0 Gen6 x16 in RUN" in said[0]
    assert said[0] == said[1]


def test_an_old_flat_run_still_reads_verifies_and_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = Path(shutil.copytree(FLAT_FIXTURE, tmp_path / "old"))
    assert invoke("verify", run).stdout.startswith("INTACT: 5 files match manifest.json")
    result = invoke("report", run, "--format", FORMATS)
    assert result.exit_code == 1, result.output
    doc = json.loads((run / "report.json").read_text())
    assert [n["node"] for n in doc["nodes"]] == ["node0001", "node0002"]
    assert doc["verdict"]["line"].startswith("NOT ACCEPTED (demo data")
    # Judged again into a sharded run: the raw outputs land in their shard.
    monkeypatch.setattr(rundir, "SHARD_ABOVE", 1)
    again = tmp_path / "again"
    assert invoke("check", "--replay", run, "--out", again, "-q").exit_code == 1
    shard = rundir.shard_of("node0002")
    assert (again / "raw" / shard / "node0002" / "topology" / "nvidia-smi-topo-m.txt").is_file()
    assert invoke("verify", again).exit_code == 0
