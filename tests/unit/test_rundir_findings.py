"""findings.jsonl as a run writes it (bringup/rundir.py, RunDir.add_findings): opened once
for the run's appends, each call's lines one write under the file's own lock, and
started afresh by reset_findings (a resumed run judges every node again)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from bringup import rundir
from bringup.findings import Finding, Status, finding_line
from bringup.rundir import RunDir


def findings_of(node: str, count: int) -> list[Finding]:
    return [
        Finding(node=node, check=f"gpu.c{i}", status=Status.PASS, message=f"{node} line {i}")
        for i in range(count)
    ]


def lines_of(run: RunDir) -> list[dict[str, object]]:
    text = (run.path / "findings.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_the_file_is_opened_once_for_every_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[Path] = []
    real = rundir.open_append

    def counted(path: Path) -> int:
        opened.append(path)
        return real(path)

    monkeypatch.setattr(rundir, "open_append", counted)
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    for i in range(40):
        run.add_findings(findings_of(f"node{i:02d}", 3))
    assert opened == [run.path / "findings.jsonl"]
    assert [line["node"] for line in lines_of(run)] == [f"node{i // 3:02d}" for i in range(120)]


def test_no_findings_still_make_the_file(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    run.add_findings([])
    assert (run.path / "findings.jsonl").read_bytes() == b""


def test_findings_after_a_reset_go_to_the_new_file_not_the_old(tmp_path: Path) -> None:
    """reset_findings replaces the file: the descriptor held for the old one is let go
    of, or every later finding would go to a file no longer there."""
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    run.add_findings(findings_of("old", 2))
    run.reset_findings()
    run.add_findings(findings_of("new", 2))
    assert [line["node"] for line in lines_of(run)] == ["new", "new"]
    run.finish("complete", 0)
    run.add_findings(findings_of("after", 1))  # a finding after the close opens it again
    assert [line["node"] for line in lines_of(run)] == ["new", "new", "after"]


def test_nodes_finishing_together_never_interleave_their_lines(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    nodes = [f"node{i:02d}" for i in range(16)]

    def node_thread(node: str) -> None:
        for _ in range(25):
            run.add_findings(findings_of(node, 7))

    threads = [threading.Thread(target=node_thread, args=(n,)) for n in nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    written = (run.path / "findings.jsonl").read_text().splitlines()
    assert len(written) == 16 * 25 * 7
    for start in range(0, len(written), 7):  # each call's seven lines side by side, in order
        block = [json.loads(line) for line in written[start : start + 7]]
        assert len({line["node"] for line in block}) == 1
        assert [line["check"] for line in block] == [f"gpu.c{i}" for i in range(7)]
    assert written[0] == finding_line(findings_of(json.loads(written[0])["node"], 1)[0])


def test_the_lines_a_run_wrote_are_counted_and_a_reopened_runs_are_the_files(
    tmp_path: Path,
) -> None:
    """judge_whole takes the findings `check` holds for the file's when the run wrote as
    many lines: counted as written, not by reading the file back; a reopened run's file
    holds lines of before, so it has no count until it starts the file afresh."""
    run = RunDir.create(tmp_path / "run", "check", "b300", "acceptance")
    assert run.findings_written() == 0
    run.add_findings(findings_of("n1", 3))
    run.add_findings([])
    run.add_findings(findings_of("n2", 4))
    assert run.findings_written() == 7 == len(lines_of(run))
    run.finish("complete", 0)
    again = RunDir.reopen(tmp_path / "run")
    assert again.findings_written() is None  # the 7 lines of before: the file's to count
    again.add_findings(findings_of("n3", 1))
    assert again.findings_written() is None and len(lines_of(again)) == 8
    again.reset_findings()
    again.add_findings(findings_of("n3", 2))
    assert again.findings_written() == 2 == len(lines_of(again))
