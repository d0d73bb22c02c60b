"""benchmarks/gpu_pack.py: what the GPU run returns after each step. A step that did not
answer is named with its reason, a figure not measured is null with its reason, and the
tarball stays under what the lent machine returns, dropping the largest files first.
(The rehearsal, tests/integration/repo/test_gpu_rehearsal.py, packs real run directories.)
"""

from __future__ import annotations

import importlib.util
import json
import os
import tarfile
from pathlib import Path
from types import ModuleType

from tests.support import REPO


def load_pack() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_pack", REPO / "benchmarks" / "gpu_pack.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pack = load_pack()


def work_dir(tmp_path: Path, steps: str) -> Path:
    work = tmp_path / "work"
    (work / "runs").mkdir(parents=True)
    (work / "steps.txt").write_text(steps)
    return work


def test_each_way_a_step_can_fail_is_named_with_its_reason(tmp_path: Path) -> None:
    work = work_dir(
        tmp_path,
        "install 0 3 30\ncaptures 0 5 50\ncheck 127 0 60\ndiagnose 124 140 140\n"
        "nccl 1 4 60\nburnin skipped 0 6\n",
    )
    (work / "runs" / "nccl.json").write_text("")  # killed before --json printed anything
    steps = pack.read_steps(work)
    assert {label: (s["status"], s["reason"]) for label, s in steps.items()} == {
        "install": ("ok", None),
        "captures": ("ok", None),
        "check": ("failed", "exit 127: command not found"),
        "diagnose": ("failed", "timed out after 140 s: interrupted, what finished is kept"),
        "nccl": ("failed", "exit 1 and no JSON document"),
        "burnin": ("skipped", "skipped: 6 s left of the call's time"),
    }
    summary = pack.summarize(work, REPO)
    assert summary["failed_steps"] == ["check", "diagnose", "nccl", "burnin"]
    assert summary["finished"] is True


def test_a_verdict_of_1_with_no_answer_from_its_probe_is_a_failed_step(tmp_path: Path) -> None:
    work = work_dir(tmp_path, "diagnose 1 12 140\n")
    (work / "runs" / "diagnose.json").write_text(json.dumps({"exit_code": 1}))
    facts = work / "runs" / "diagnose" / "facts"
    facts.mkdir(parents=True)
    record = {"probe": "gemm", "ok": False, "error": "no torch", "facts": None}
    (facts / "node.json").write_text(json.dumps({"probes": {"gemm": record}}))
    step = pack.read_steps(work)["diagnose"]
    assert (step["status"], step["reason"]) == ("failed", "the gemm probe failed: no torch")


def test_steps_not_run_yet_are_pending_and_the_run_not_finished(tmp_path: Path) -> None:
    summary = pack.summarize(work_dir(tmp_path, "install 0 3 30\n"), REPO)
    assert summary["finished"] is False
    assert summary["steps"]["burnin"]["status"] == "pending"
    assert summary["failed_steps"] == []


def test_with_nothing_measured_every_figure_is_null_with_a_reason(tmp_path: Path) -> None:
    figures = pack.summarize(work_dir(tmp_path, ""), REPO)["figures"]
    assert figures
    for name, entry in figures.items():
        assert entry["value"] is None and entry["reason"], name
    assert figures["gemm_bf16_tflops"]["reason"] == (
        "no gemm record: the diagnose step did not finish"
    )
    assert figures["burnin_mfu_pct"]["reason"] == "no burnin record: the burnin step did not finish"


def test_the_tarball_stays_under_its_cap_dropping_the_largest_first(tmp_path: Path) -> None:
    work = work_dir(tmp_path, "")
    for name, size in (("small.txt", 1000), ("runs/mid.bin", 40_000), ("raw/big.bin", 90_000)):
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_bytes(os.urandom(size))  # incompressible
    for skipped in ("site/pkg.py", "runs/burnin/checkpoints/a.pt", "runs/burnin/work/x"):
        (work / skipped).parent.mkdir(parents=True, exist_ok=True)
        (work / skipped).write_text("not kept")
    dest = tmp_path / "out" / "gpu-check.tar.gz"
    dest.parent.mkdir()
    left_out = pack.write_tarball(work, dest, cap=60_000)
    assert left_out == ["raw/big.bin"]
    assert dest.stat().st_size <= 60_000
    with tarfile.open(dest) as tar:
        assert sorted(tar.getnames()) == ["runs/mid.bin", "small.txt", "steps.txt"]
    assert sorted(p.name for p in dest.parent.iterdir()) == ["gpu-check.tar.gz"]


def test_the_verdict_is_the_scripts_exit_status(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"finished": True, "failed_steps": [], "steps": {}}))
    assert pack.verdict(path) == 0
    path.write_text(
        json.dumps(
            {"finished": True, "failed_steps": ["nccl"], "steps": {"nccl": {"reason": "exit 2"}}}
        )
    )
    assert pack.verdict(path) == 1
    path.write_text(json.dumps({"finished": False, "failed_steps": [], "steps": {}}))
    assert pack.verdict(path) == 1
    assert pack.verdict(tmp_path / "absent.json") == 1
