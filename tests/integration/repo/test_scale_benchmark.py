"""benchmarks/scale.py keeps working: at 20 nodes it reads its inventory, runs every node
through the recorded transport, writes a run directory the report reads, and prints each
figure against its target."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support import REPO
from tests.support.timing import scaled


def scale_py(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "benchmarks/scale.py", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=scaled(240),
        check=False,
        env=env,
    )


def test_the_scale_benchmark_runs_at_twenty_nodes(tmp_path: Path) -> None:
    done = scale_py("--nodes", "20", "--latency-ms", "0", "--keep", str(tmp_path))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("20 nodes, ")
    labels = ("inventory", "run + record", "report", "controller/node", "peak memory")
    for label in (*labels, "this machine"):
        assert re.search(rf"^  {re.escape(label)} +[0-9.]+ (s|ms|MB)", out, re.M), label
    assert re.search(r"^the check's targets: (all met|OVER)", out, re.M)
    run = tmp_path / "run"
    assert len(list((run / "facts").glob("*.json"))) == 20
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete" and len(manifest["nodes"]) == 20
    findings = [json.loads(line) for line in (run / "findings.jsonl").read_text().splitlines()]
    # The six demo nodes in turn: node0004 answers as the demo's pending row remap.
    assert any(
        f["node"] == "node0004" and f["check"] == "gpu.remapped_rows" and f["status"] == "FAIL"
        for f in findings
    )
    assert all(f["status"] != "ERROR" for f in findings if f["node"] == "node0001")
    assert (run / "report.md").exists() and (run / "report.junit.xml").exists()


def test_several_sizes_share_one_temporary_folder_removed_at_the_end(tmp_path: Path) -> None:
    """Without --keep, every size's run directory goes in one temporary folder, removed
    once the last size is measured (not each size's as it ends: the next size would pay
    for the removal in its own figures), and nothing is left behind."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    argv = ["--nodes", "3", "4", "--latency-ms", "0", "--no-report"]
    done = scale_py(*argv, env={**os.environ, "TMPDIR": str(temporary)})
    assert done.returncode == 0, done.stderr
    assert re.findall(r"^(\d+) nodes, ", done.stdout, re.M) == ["3", "4"]
    assert list(temporary.iterdir()) == []


def test_the_sizes_folder_outlives_every_size_and_only_then_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = importlib.util.spec_from_file_location("scale", REPO / "benchmarks" / "scale.py")
    assert spec is not None and spec.loader is not None
    scale = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "scale", scale)  # its dataclasses look themselves up
    spec.loader.exec_module(scale)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    args = argparse.Namespace(nodes=[1000, 10000], keep=None)
    with scale.scratch(args):
        folder = args.keep
        assert folder is not None and folder.parent == tmp_path
        (folder / "1000" / "run").mkdir(parents=True)  # the first size's, as it ended
        assert folder.is_dir()
    assert not folder.exists() and args.keep is None
    for given in (
        argparse.Namespace(nodes=[1000], keep=None),
        argparse.Namespace(nodes=[1, 2], keep=tmp_path),
    ):
        before = given.keep
        with scale.scratch(given):
            assert given.keep == before  # one size: its own folder; --keep: the caller's
