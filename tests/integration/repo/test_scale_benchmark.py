"""benchmarks/scale.py keeps working: at 20 nodes it reads its inventory, runs every node
through the recorded transport, writes a run directory the report reads, and prints each
figure against its target."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.support import REPO
from tests.support.timing import scaled


def test_the_scale_benchmark_runs_at_twenty_nodes(tmp_path: Path) -> None:
    argv = ["--nodes", "20", "--latency-ms", "0", "--keep", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, "benchmarks/scale.py", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=scaled(240),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("20 nodes, ")
    for label in ("inventory", "run + record", "report", "controller/node", "peak memory"):
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
