"""Defects of the GPU path that a read against nvml.h and nvidia-ml-py found, each pinned by
a test that failed before its fix (the NVML-path ones run the real pynvml against the
simulated NVML: tests/integration/nvmlsim/test_gpu_truth.py).

Inputs are recorded real outputs (tests/fixtures/smi/SOURCES.md); where a test edits one,
the edit is named at the test.
"""

from __future__ import annotations

import dataclasses

import pytest
from msgspec import structs

from bringup.checks import gpu as gpu_checks
from bringup.checks.burnin import judge_throttle
from bringup.checks.gemm import judge_tflops
from bringup.checks.throttle import gpu_stats
from bringup.findings import Status
from bringup.node.collective.measure import device_id_safe
from bringup.node.parsers.nvlink_status import gpu_facts_from_nvlink, parse_nvlink_status
from bringup.node.parsers.smi_text import parse_q_text
from bringup.node.parsers.smi_xml import parse_q_xml
from bringup.node.probes.burnin import BurninFacts, StepRecord
from bringup.node.probes.gemm import GemmFacts, GemmGpu
from bringup.node.probes.telemetry import throttle_counter_fields
from bringup.node.timeline import Sample, Timeline
from bringup.profile import load as load_profile
from bringup.sim.nvml import branches
from tests.support.smi_fixtures import read

INACTIVE = "NVML: Unable to retrieve NVLink information as all links are inactive"


def _judge(name: str, facts: object, profile: object) -> list:
    (check,) = [c for c in gpu_checks.CHECKS if c.name == name]
    return check.judge(facts, profile)


# --- 2. throttle-time counter field ids follow the driver branch -------------------------


@pytest.mark.parametrize(
    ("driver", "thermal"),
    [
        ("570.133.20", {}),
        ("575.57.08", {"sw_thermal_slowdown": 251, "hw_thermal_slowdown": 252}),
        ("580.65.06", {"sw_thermal_slowdown": 269, "hw_thermal_slowdown": 270}),
        ("590.48.01", {"sw_thermal_slowdown": 269, "hw_thermal_slowdown": 270}),
        (None, {}),
    ],
)
def test_throttle_counter_ids_follow_the_driver_branch(driver: str | None, thermal: dict) -> None:
    fields = throttle_counter_fields(driver)
    assert fields["sw_power_cap"] == 74 and fields["sync_boost"] == 76
    for reason, field_id in thermal.items():
        assert fields[reason] == field_id
    if not thermal:
        assert "hw_thermal_slowdown" not in fields


@pytest.mark.parametrize("driver", ["570.133.20", "575.57.08", "580.65.06"])
def test_the_probe_and_the_simulator_agree_on_each_branch(driver: str) -> None:
    """The probe's table (production) and the simulator's (read from each nvml.h)."""
    branch = branches.branch_for_major(int(driver.split(".")[0]))
    assert throttle_counter_fields(driver) == dict(branch.throttle_counters)


def test_a_counter_never_lowers_the_share_the_samples_show() -> None:
    # Half of the samples show HW thermal slowdown; the counter read (at the wrong id, or a
    # counter that did not move) says 0 s. The samples stand.
    samples = [
        Sample(t_s=t / 5, gpu=0, clock_event_reasons=["hw_thermal_slowdown"] if t >= 5 else [])
        for t in range(10)
    ]
    timeline = Timeline(
        interval_s=0.2,
        gpus=1,
        samples=samples,
        throttle_time_s={"0": {"hw_thermal_slowdown": 0.0}},
    )
    assert gpu_stats(timeline)[0].share["hw_thermal_slowdown"] == 0.5
    # And a counter that saw more than the samples raises it.
    timeline.throttle_time_s = {"0": {"hw_thermal_slowdown": 1.6}}
    assert gpu_stats(timeline)[0].share["hw_thermal_slowdown"] == 0.8


def test_a_burnin_on_gpus_without_samples_is_not_a_pass() -> None:
    # The sampler thread died (or never ran) on a GPU node: throttling was not measured.
    facts = BurninFacts(
        recipe="llama-1b-lora", world_size=8, nnodes=1, device_kind="cuda",
        device_name="NVIDIA H200", dtype="bf16", zero_stage=3, seq_len=4096, micro_batch=1,
        grad_accum=1, gradient_checkpointing=False, warmup_steps=2,
        telemetry=Timeline(interval_s=0.2, gpus=8),
        # It trained (a burn-in with no step at all is "no data", judged before telemetry).
        steps=[StepRecord(step=1, loss=2.0, time_s=1.0)],
    )  # fmt: skip
    (finding,) = judge_throttle(facts, load_profile("h200"))
    assert finding.status == Status.ERROR
    assert finding.message == "no telemetry samples: no telemetry recorded"


# --- 6. no dense-peak fallback for the matmul floor ----------------------------------------


def test_b300_without_a_measured_ceiling_is_not_held_to_the_dense_peak() -> None:
    # 1745 TFLOP/s: B200's best published torch.mm, 78% of B300's 2250 dense peak
    # (docs/reference.md#achievable-matmul-ceilings). Before: 8 WARNs against the peak.
    gpus = [
        GemmGpu(index=i, name="NVIDIA B300 SXM6 AC", bf16_flops_per_s=1745e12) for i in range(8)
    ]
    facts = GemmFacts(device="cuda", timing="cuda-events", torch_version="2.13.0", gpus=gpus)
    (finding,) = judge_tflops(facts, load_profile("b300"))
    assert finding.status == Status.SKIP
    assert finding.message == (
        "8 GPUs: BF16 median 1745 TFLOP/s (78% of 2250 dense peak); not judged: profile b300 "
        "has no achievable BF16 ceiling (gpu.bf16_achievable_tflops)"
    )


# --- 7. an FP8 failure stands beside the BF16 figures --------------------------------------


def test_an_fp8_failure_is_its_own_finding_beside_bf16() -> None:
    # 794.5 TFLOP/s: H200's published best torch.mm (docs/reference.md).
    gpu = GemmGpu(
        index=0, name="NVIDIA H200", bf16_flops_per_s=794.5e12, fp8_error="RuntimeError: no FP8"
    )
    facts = GemmFacts(device="cuda", timing="cuda-events", torch_version="2.13.0", gpus=[gpu])
    findings = judge_tflops(facts, load_profile("h200"))
    assert [(f.status, f.message) for f in findings] == [
        (Status.ERROR, "GPU 0: FP8 not measured: RuntimeError: no FP8")
    ]


# --- 8. device_id only where torch does not hang with it -----------------------------------


@pytest.mark.parametrize(
    ("version", "safe"),
    [
        ("2.2.2", False),  # no device_id parameter yet
        ("2.5.1+cu124", True),
        ("2.6.0+cu124", False),  # pytorch/pytorch#153960
        ("2.7.0", False),
        ("2.7.1+cu128", True),
        ("2.13.0", True),
    ],
)
def test_device_id_is_left_out_where_torch_hangs_with_it(version: str, safe: bool) -> None:
    assert device_id_safe(version) is safe


# --- 9. -q -x reads the T.Limit thresholds ------------------------------------------------


def test_q_xml_reads_the_tlimit_thresholds() -> None:
    # The real A100 535 capture, its <temperature> block edited to the T.Limit form of
    # drivers 550+ (element names of nvsmi_device_v12.dtd), with the figures of the real
    # H200 -q capture: "GPU T.Limit Temp" and "GPU Slowdown T.Limit Temp".
    h200 = parse_q_text(read("ugpuexp-h200-q-load.txt")).gpus[0]
    xml = read("telegraf-a100-sxm4-x4-mig-535-q-x.xml")
    xml = xml.replace(
        "<gpu_temp_tlimit>N/A</gpu_temp_tlimit>",
        f"<gpu_temp_tlimit>{h200.tlimit_margin_c:g} C</gpu_temp_tlimit>"
        f"<gpu_temp_slow_tlimit_threshold>{h200.slowdown_tlimit_c:g} C"
        "</gpu_temp_slow_tlimit_threshold>",
    )
    for absolute in ("gpu_temp_slow_threshold", "gpu_temp_max_threshold"):
        start, end = xml.index(f"<{absolute}>"), xml.index(f"</{absolute}>")
        xml = xml[:start] + f"<{absolute}>N/A" + xml[end:]
    gpu = parse_q_xml(xml).gpus[0]
    assert (gpu.tlimit_margin_c, gpu.slowdown_tlimit_c) == (35.0, -2.0)
    profile = load_profile("a100")
    findings = _judge("gpu.thermal", parse_q_xml(xml), profile)
    assert [f.status for f in findings] == [Status.PASS], findings


# --- 10. "all links are inactive" is NVLink down, not "no NVLink" ------------------------


def _h200_with_gpu3_inactive() -> str:
    # The real 8x H200 `nvlink -s`, GPU 3's 18 link lines replaced by the driver's message.
    lines = read("simllm-vastai-h200x8-nvlink-s.txt").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("GPU 3:"))
    return "\n".join([*lines[: start + 1], f"\t {INACTIVE}", *lines[start + 19 :]]) + "\n"


def test_all_links_inactive_is_parsed_as_nvlink_down() -> None:
    status = parse_nvlink_status(_h200_with_gpu3_inactive())
    assert status.supported is True and status.reason is None
    assert [g.all_inactive for g in status.gpus] == [False] * 3 + [True] + [False] * 4
    assert status.gpus[3].links == []


def test_all_links_inactive_fails_gpu_nvlink_on_an_nvlink_gpu() -> None:
    facts = gpu_facts_from_nvlink(parse_nvlink_status(_h200_with_gpu3_inactive()))
    findings = _judge("gpu.nvlink", facts, load_profile("h200"))
    failed = [f for f in findings if f.status == Status.FAIL]
    assert [(f.message, f.value) for f in failed] == [
        ("GPU 3: all NVLinks inactive (0/18 active, nvidia-smi nvlink -s)", 0)
    ]


def test_a_gpu_that_has_no_nvlink_still_skips() -> None:
    # The real L40S capture: a PCIe GPU says it has no NVLink at all.
    status = parse_nvlink_status(read("ugpuexp-l40s-nvlink-s-unsupported.txt"))
    assert status.supported is False
    assert not any(g.all_inactive for g in status.gpus)


def test_lost_gpu_is_named_by_gpu_count_alone() -> None:
    facts = parse_q_text(read("ugpuexp-h200-q-load.txt"))
    lost = dataclasses.replace(facts.gpus[0], index=1, name="unknown", error="NVML: GPU is lost")
    facts = dataclasses.replace(facts, attached_gpus=2, gpus=[facts.gpus[0], lost])
    h200 = load_profile("h200")
    profile = structs.replace(h200, gpu=structs.replace(h200.gpu, count=2))
    findings = [f for c in gpu_checks.CHECKS for f in c.judge(facts, profile)]
    bad = [(f.check, f.status, f.message) for f in findings if f.status != Status.PASS]
    assert bad[0] == (
        "gpu.count",
        Status.FAIL,
        "GPU 1: NVML: GPU is lost (1 of 2 GPUs readable, expected 2)",
    )
    assert all("GPU 1" not in message for _, _, message in bad[1:]), bad
