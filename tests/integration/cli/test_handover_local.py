"""`bringup handover --local` on this machine, for real: the acceptance check (the quick
suite, to stay short), NCCL and diagnose each run by its own command's function into the
bundle, then one report of them all. Without a GPU the probes say so (ERROR), so the
handover is NOT ACCEPTED, exit 1, and every part is still there."""

from __future__ import annotations

import json
from pathlib import Path

from bringup import baseline as baselines
from tests.support.cli import run_cli, valid_envelope
from tests.support.timing import scaled


def test_local_handover_runs_each_part_into_one_bundle(tmp_path: Path) -> None:
    out = tmp_path / "handover"
    proc = run_cli(
        *("handover", "--local", "--suite", "quick", "--seconds", "5", "--out", out, "--json"),
        timeout=scaled(400),
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    doc = valid_envelope(json.loads(proc.stdout))
    assert doc["run_dir"] == str(out) and doc["verdict"] == "NOT ACCEPTED"
    bundle = baselines.load_bundle(out)
    assert bundle.mode == "run" and bundle.suite == "quick"
    assert [p.kind for p in bundle.parts] == ["check", "nccl", "diagnose"]
    for part in bundle.parts:
        manifest = json.loads((out / part.path / "manifest.json").read_text())
        assert manifest["status"] == "complete", part
        assert manifest["command"] == part.kind
    assert len(bundle.nodes) == 1
    summary = json.loads((out / "report.json").read_text())
    checks = {f["check"] for f in summary["findings"]}
    # Each part's findings are in the one report.
    assert {"gpu.count", "diagnose.telemetry"} <= checks
    assert any(c.startswith("nccl.") for c in checks)
    # Every part made live, by the handover's command line, and verifiable.
    assert summary["run"]["mode"] == "live"
    assert summary["run"]["command_line"].startswith("bringup handover --local")
    assert sorted(summary["run"]["parts_sha256"]) == ["check", "diagnose", "nccl"]
    verified = run_cli("verify", out, "--json")
    assert verified.returncode == 0, verified.stdout
    assert [p["intact"] for p in json.loads(verified.stdout)["data"]["parts"]] == [True, True, True]
