"""No data, no pass: a burn-in whose trainer never trained (torch will not import) gives
ERRORs naming the cause and no baseline.json; a baseline with missing figures is refused.

Real processes: `bringup burnin --local` in a child process whose PYTHONPATH puts a
`torch` first that raises ImportError, as a node without a working torch would.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.support.cli import run_cli

CAUSE = "ImportError: torch is broken on this node (planted by the test)"


def _no_torch(tmp_path: Path) -> dict[str, str]:
    shadow = tmp_path / "shadow" / "torch"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        'raise ImportError("torch is broken on this node (planted by the test)")\n'
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(shadow.parent), env.get("PYTHONPATH")]))
    return env


def test_a_burnin_without_torch_errors_every_derived_check_and_writes_no_baseline(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    argv = ["burnin", "--local", "--recipe", "tiny", "--steps", "2", "--out", out, "--json"]
    proc = run_cli(*argv, env=_no_torch(tmp_path), timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["verdict"] == "NOT ACCEPTED"
    found = {f["check"]: f for f in doc["findings"] if f["check"].startswith("burnin.")}
    for check in ("burnin.straggler", "burnin.mfu", "burnin.throttle", "burnin.loss"):
        assert found[check]["status"] == "ERROR", found[check]
        message = found[check]["message"]
        assert message.startswith("no data: the burn-in produced no steps (trainer exited"), message
        assert CAUSE in message, message
    assert found["burnin.run"]["status"] == "ERROR"
    assert CAUSE in found["burnin.run"]["message"]
    assert not (out / "baseline.json").exists()
    assert doc["data"]["baseline"] is None
    # The report on the run says the same.
    report = run_cli("report", out, "--out", tmp_path / "r", "--json")
    assert report.returncode == 1
    again = {f["check"]: f["status"] for f in json.loads(report.stdout)["findings"]}
    assert {c: again[c] for c in found} == {c: f["status"] for c, f in found.items()}


def _null_baseline(path: Path) -> Path:
    """The baseline.json a trainer that never trained left behind before this was fixed."""
    path.mkdir()
    node = {
        "node": "n01",
        "recipe": "tiny",
        "device_kind": "cpu",
        "device_name": None,
        "world_size": 1,
        "steps_measured": 0,
        **dict.fromkeys(
            [
                "step_time_median_s",
                "step_time_p99_s",
                "step_time_rank_spread",
                "tokens_per_s_per_gpu",
                "model_flops_per_token",
                "hardware_flops_per_token",
                "model_flops_per_s_per_gpu",
                "hardware_flops_per_s_per_gpu",
                "peak_flops_per_s",
                "peak_source",
                "mfu",
                "hfu",
                "ceiling_flops_per_s",
                "ceiling_source",
                "mfu_vs_ceiling",
                "loss_first",
                "loss_last",
                "memory_kind",
                "checkpoint_save_s",
                "checkpoint_restore_s",
                "checkpoint_bit_identical",
            ]
        ),
        "loss_curve": [],
        "peak_memory_bytes": [],
    }
    base = {
        "schema_version": 1,
        "kind": "bringup.node.burnin.baseline",
        "bringup_version": "0.1.0",
        "created_at": "2026-01-01T00:00:00+00:00",
        "recipe": "tiny",
        "profile": None,
        "nodes": [node],
        "step_time_node_spread": None,
        "metrics": {},
    }
    (path / "baseline.json").write_text(json.dumps(base))
    (path / "findings.jsonl").write_text("")  # a run directory, as the burn-in left it
    return path


def test_a_baseline_with_missing_figures_is_refused_by_plan_and_report(tmp_path: Path) -> None:
    nulls = _null_baseline(tmp_path / "burnin")
    said = (
        "the baseline lacks figures (n01: no steps measured, step time, model FLOP/s): "
        "it is not of a completed burn-in"
    )
    plan = run_cli("plan", "--model", "tiny", "--method", "lora", "--baseline", nulls)
    assert plan.returncode == 2, plan.stdout + plan.stderr
    assert said in plan.stderr and len(plan.stderr.strip().splitlines()) == 1, plan.stderr
    demo = tmp_path / "demo"
    run_cli("check", "--demo", "--out", demo)
    report = run_cli("report", demo, "--baseline", nulls, "--out", tmp_path / "r")
    assert report.returncode == 2, report.stdout + report.stderr
    assert said in report.stderr and len(report.stderr.strip().splitlines()) == 1, report.stderr
