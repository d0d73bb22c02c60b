"""benchmarks/gpu_check.sh, rehearsed end to end on the CPU as the lent GPU machine runs it
(tests/support/gpu_rehearsal.py, `make gpu-rehearsal`, docs/gpu-run.md).

The GPU run is the project's one chance to record real CUDA, NCCL and burn-in figures: every
step must run (no exit 127, no empty JSON), everything must come back in at most 8 files no
deeper than 2 folders under $OUT, the summary must hold every headline figure (null with a
reason where the CPU cannot measure), and nothing may be left running. Minutes: the tiny
burn-in trains for real, DeepSpeed compiles its CPU op first.
"""

from __future__ import annotations

import pytest

from tests.support.gpu_rehearsal import (
    HEADLINE,
    WALL_CAP_S,
    Rehearsal,
    RehearsalError,
    problems,
    rehearse,
)

pytestmark = pytest.mark.burnin


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory: pytest.TempPathFactory) -> Rehearsal:
    pytest.importorskip("deepspeed")
    try:
        return rehearse(tmp_path_factory.mktemp("gpu-rehearsal"))
    except RehearsalError as exc:
        pytest.skip(str(exc))


def test_the_gpu_run_would_return_every_step_and_leave_nothing_running(
    rehearsal: Rehearsal,
) -> None:
    assert problems(rehearsal) == [], rehearsal.output[-4000:]
    assert rehearsal.wall_s < WALL_CAP_S
    assert sorted(rehearsal.files) == ["gpu-check.tar.gz", "summary.json"]


def test_the_summary_says_what_the_cpu_measured_and_why_the_rest_is_missing(
    rehearsal: Rehearsal,
) -> None:
    summary = rehearsal.summary
    assert summary is not None
    assert (summary["profile"], summary["finished"], summary["failed_steps"]) == ("h200", True, [])
    figures = summary["figures"]
    assert set(HEADLINE) <= set(figures)
    # What the stand-ins answered: the recorded H200 (tests/fixtures/smi/ugpuexp-h200-q-load.txt)
    # through nvidia-smi -q and, under the diagnose load, through the simulated NVML.
    values = {name: figures[name]["value"] for name in figures}
    assert values["gpu_name"] == "NVIDIA H200"
    assert values["driver_version"] == "590.48.01"
    assert values["cuda_driver_version"] == "13.1"
    assert values["telemetry_max_sm_clock_mhz"] == 1980.0
    assert values["telemetry_max_power_w"] == 627.3
    assert values["telemetry_max_temperature_c"] == 52.0
    assert values["telemetry_max_memory_temperature_c"] == 41.0
    import torch

    assert values["torch_version"] == torch.__version__
    # What a CPU cannot measure: null, and the reason.
    for name in ("gemm_bf16_tflops", "gemm_fp8_pct_of_peak", "hbm_gb_s"):
        assert figures[name]["reason"].startswith("measured on the cpu, not a GPU"), name
    assert figures["nccl_busbw_gb_s"]["reason"].startswith("ran on gloo")
    assert figures["burnin_mfu_pct"]["reason"].startswith("trained tiny on the cpu")
    assert figures["p2p_gb_s"]["reason"].startswith("the p2p probe needs 2 GPUs")
