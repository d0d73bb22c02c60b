"""`bringup report` as a CI gate runs it: a run directory missing a piece exits 1, says NOT
ACCEPTED and names the piece, whatever else the directory holds.
"""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from bringup.rundir import RunDir
from tests.integration.cli.conftest import Result
from tests.support.report_runs import clean_run


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return clean_run(tmp_path_factory.mktemp("clean") / "run")


def empty_findings_only(clean: Path, run: Path) -> None:
    run.mkdir()
    (run / "findings.jsonl").write_text("")


def findings_cut_mid_line(clean: Path, run: Path) -> None:
    shutil.copytree(clean, run)
    text = (run / "findings.jsonl").read_text()
    (run / "findings.jsonl").write_text(text[: text.index("\n", len(text) // 2) + 20])


def findings_emptied(clean: Path, run: Path) -> None:
    shutil.copytree(clean, run)
    (run / "findings.jsonl").write_text("")


def no_nodes(clean: Path, run: Path) -> None:
    empty = RunDir.create(run, "check", "b300", "quick")
    empty.add_findings([])
    empty.finish("complete", 0)


def manifest_missing(clean: Path, run: Path) -> None:
    shutil.copytree(clean, run)
    (run / "manifest.json").unlink()


@pytest.mark.parametrize(
    ("plant", "reason"),
    [
        (empty_findings_only, "ERROR report.manifest: manifest.json is missing"),
        (empty_findings_only, "ERROR report.nodes: the run has no node"),
        (findings_cut_mid_line, "ERROR report.findings: findings.jsonl line "),
        (findings_emptied, "ERROR report.missing (b300-node01): no findings for this node"),
        (no_nodes, "ERROR report.nodes: the run has no node"),
        (manifest_missing, "ERROR report.manifest: manifest.json is missing"),
    ],
)
def test_a_missing_piece_exits_1_and_says_why(
    plant: Callable[[Path, Path], None],
    reason: str,
    clean: Path,
    tmp_path: Path,
    cli: Callable[..., Result],
) -> None:
    plant(clean, tmp_path / "run")
    result = cli("report", tmp_path / "run", "--format", "all", "--out", tmp_path / "out")
    assert result.code == 1, result.stderr
    assert result.stdout.startswith("NOT ACCEPTED: ")
    assert reason in result.stdout
    assert result.stderr == ""
    gate = ET.parse(tmp_path / "out" / "report.junit.xml").getroot()
    assert int(gate.get("failures", "0")) >= 1  # a CI gate on JUnit fails too


def test_the_clean_run_exits_0(clean: Path, tmp_path: Path, cli: Callable[..., Result]) -> None:
    result = cli("report", clean, "--out", tmp_path / "out")
    assert result.code == 0, result.stdout + result.stderr
    assert result.stdout.startswith("ACCEPTED: ")
