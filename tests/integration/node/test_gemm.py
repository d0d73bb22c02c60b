"""The gemm probe run for real on the CPU (torch, small shapes), and `bringup diagnose --local`
measuring this machine (in-process CLI).

The GPU path (CUDA events, FP8, 8 GPUs at once) waits for a real GPU machine; here the
same code runs on the CPU with wall-clock timing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bringup.node.probes.gemm import Params, collect
from tests.support.cli import invoke

torch = pytest.importorskip("torch", reason="torch not installed (pip install torch==2.13.0)")


def test_cpu_sweep_measures_every_shape_and_keeps_the_best() -> None:
    params = Params(m_sizes=[32, 64], nk=64, warmup=1, iterations=3, sustain_s=0.2)
    facts = collect(params).facts
    assert (facts.device, facts.timing, facts.timeline) == ("cpu", "wall-clock", None)
    (cpu,) = facts.gpus
    assert [(r.dtype, r.m, r.n, r.k) for r in cpu.sweep] == [
        ("bf16", 32, 64, 64),
        ("bf16", 64, 64, 64),
    ]
    best = max(cpu.sweep, key=lambda r: r.flops_per_s)
    assert cpu.bf16_flops_per_s == best.flops_per_s and cpu.bf16_best == f"{best.m}x64x64"
    for result in cpu.sweep:
        assert result.flops_per_s == pytest.approx(2 * result.m * 64 * 64 / result.seconds)
    assert cpu.fp8_flops_per_s is None  # no FP8 on the CPU path
    assert cpu.hbm_bytes_per_s and cpu.hbm_bytes_per_s > 0
    assert cpu.sustained_s and cpu.sustained_s >= 0.2 and cpu.sustained_bf16_flops_per_s
    assert cpu.error is None


def test_sampling_without_a_driver_keeps_the_gemm_figures() -> None:
    params = Params(
        m_sizes=[32], nk=32, warmup=1, iterations=2, sustain_s=0.1, sample_interval_s=0.05
    )
    facts = collect(params).facts
    assert facts.timeline is not None
    assert facts.timeline.error and facts.timeline.error.startswith("no NVIDIA driver found")
    assert facts.gpus[0].bf16_flops_per_s


def test_a_bad_device_is_a_probe_error() -> None:
    from bringup.node.result import ProbeError

    with pytest.raises(ProbeError, match="device must be auto, cuda or cpu"):
        collect(Params(device="tpu"))
    with pytest.raises(ProbeError, match="device cuda asked for, but torch sees no CUDA GPU"):
        collect(Params(device="cuda"))


def test_diagnose_local_on_cpu_measures_and_says_no_driver(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = invoke(
        "diagnose", "--local", "--seconds", "0.5", "--profile", "h200", "--out", str(out), "--json"
    )
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    checks = {(f["check"], f["status"]) for f in doc["findings"]}
    assert checks == {
        ("gemm.tflops", "SKIP"),
        ("gemm.hbm", "SKIP"),
        ("diagnose.telemetry", "ERROR"),
    }
    telemetry = next(f for f in doc["findings"] if f["check"] == "diagnose.telemetry")
    assert telemetry["message"].startswith("no telemetry: no NVIDIA driver found (")
    facts = json.loads(next((out / "facts").glob("*.json")).read_text())
    assert facts["probes"]["gemm"]["ok"] is True
    assert facts["probes"]["gemm"]["facts"]["gpus"][0]["sustained_bf16_flops_per_s"] > 0


def test_diagnose_watch_on_cpu_is_an_error_finding(tmp_path: Path) -> None:
    result = invoke(
        *("diagnose", "--local", "--watch", "--seconds", "0.2", "-p", "b300"),
        *("--out", str(tmp_path / "w"), "--json"),
    )
    assert result.exit_code == 1
    (f,) = json.loads(result.stdout)["findings"]
    assert (f["check"], f["status"]) == ("telemetry.diagnosis", "ERROR")
    assert f["message"].startswith("no NVIDIA driver found (")


def test_an_fp8_failure_keeps_the_bf16_figures_and_the_sustained_phase(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A torch build without the FP8 kernels: _scaled_mm raises. Before, the exception
    replaced the GPU's whole result and aborted the barrier of the sustained phase."""
    from bringup.node.probes import gemm

    def no_fp8_kernels(*args: object, **kwargs: object) -> None:
        raise RuntimeError("_scaled_mm is not supported on this build")

    monkeypatch.setattr(gemm, "_has_fp8", lambda torch, device, index: True)
    monkeypatch.setattr(torch, "_scaled_mm", no_fp8_kernels)
    params = Params(m_sizes=[32], nk=64, warmup=1, iterations=2, sustain_s=0.2)
    (cpu,) = collect(params).facts.gpus
    assert cpu.error is None
    assert cpu.fp8_error == "RuntimeError: _scaled_mm is not supported on this build"
    assert cpu.bf16_flops_per_s and cpu.sustained_bf16_flops_per_s
    assert (cpu.fp8_flops_per_s, cpu.fp8_accumulation) == (None, None)


def test_fp8_is_timed_with_fast_accumulation_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """FP8 figures are compared with datasheet-style ones, reached with fast accumulation:
    the probe asks for it where torch._scaled_mm takes it, and records which it timed."""
    from bringup.node.probes import gemm

    seen: list[dict[str, object]] = []
    real = torch._scaled_mm

    def recording(*args: object, **kwargs: object) -> object:
        seen.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(gemm, "_has_fp8", lambda torch, device, index: True)
    monkeypatch.setattr(torch, "_scaled_mm", recording)
    (cpu,) = collect(Params(m_sizes=[32], nk=64, warmup=1, iterations=2, sustain_s=0)).facts.gpus
    assert cpu.fp8_error is None and cpu.fp8_flops_per_s
    assert all(call.get("use_fast_accum") is True for call in seen) and seen
    assert cpu.fp8_accumulation == "fast"
