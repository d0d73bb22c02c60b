"""The throttling diagnosis, rule by rule, on timelines edited from a real capture.

The healthy node is the real H200 under load of tests/fixtures/smi/ugpuexp-h200-q-load.txt
(627 W of 700 W, 1980 MHz, 52 °C, HBM 41 °C, no clocks event reason), read as a timeline
and replicated to 8 GPUs x 10 ticks at 5 Hz. Each failing case edits one thing of that
timeline (a reason, a temperature, a power limit) and says which. The gemm figure of a
healthy GPU is the H200 achievable ceiling measured by ml-engineering (794.5 TFLOP/s,
docs/reference.md#achievable-matmul-ceilings); a straggler is that figure scaled down.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from msgspec import structs

from bringup.checks.throttle import judge_gemm_stragglers, judge_throttling
from bringup.commands.diagnose import recorded_gemm
from bringup.facts import NodeFacts, ProbeRecord
from bringup.findings import Expected, Finding, Status
from bringup.node.parsers.dmon import parse_dmon, parse_q_series
from bringup.node.probes.gemm import GemmFacts, GemmGpu
from bringup.node.timeline import Sample, Timeline
from bringup.profile import load

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H200 = load("h200")
ACHIEVABLE = 794.5e12  # H100/H200 BF16, docs/reference.md#achievable-matmul-ceilings
TICKS, GPUS, INTERVAL = 10, 8, 0.2


def healthy() -> Timeline:
    real = parse_q_series((FIXTURES / "smi" / "ugpuexp-h200-q-load.txt").read_text())
    (sample,) = real.samples
    samples = [
        dataclasses.replace(sample, t_s=round(t * INTERVAL, 3), gpu=g, clock_event_reasons=[])
        for t in range(TICKS)
        for g in range(GPUS)
    ]
    return Timeline(
        interval_s=INTERVAL,
        gpus=GPUS,
        samples=samples,
        power_default_limit_w={str(g): 700.0 for g in range(GPUS)},
    )


def edit(timeline: Timeline, gpu: int | None, ticks: int, **changes: object) -> Timeline:
    """Change the samples of one GPU (None: all) in the first `ticks` ticks."""

    def change(s: Sample) -> Sample:
        hit = (gpu is None or s.gpu == gpu) and s.t_s < ticks * INTERVAL - 1e-9
        return dataclasses.replace(s, **changes) if hit else s  # type: ignore[arg-type]

    return dataclasses.replace(timeline, samples=[change(s) for s in timeline.samples])


def gemm(slow: dict[int, float] | None = None) -> GemmFacts:
    slow = slow or {}
    gpus = [
        GemmGpu(
            index=g, name="NVIDIA H200", sustained_bf16_flops_per_s=ACHIEVABLE * slow.get(g, 1.0)
        )
        for g in range(GPUS)
    ]
    return GemmFacts(device="cuda", timing="cuda-events", torch_version="2.13.0", gpus=gpus)


def problems(findings: list[Finding]) -> list[tuple[str, Status, str]]:
    return [(f.check, f.status, f.message) for f in findings if f.status is not Status.PASS]


def test_the_real_healthy_capture_yields_no_warning() -> None:
    real = parse_q_series((FIXTURES / "smi" / "ugpuexp-h200-q-load.txt").read_text())
    findings = judge_throttling(real, None, H200)
    assert [(f.check, f.status) for f in findings] == [("diagnose.throttle", Status.PASS)]
    assert findings[0].message == (
        "1 GPU, 1 sample over 1 s: no throttle reason, no straggler, HBM below its limit"
    )


def test_the_healthy_node_with_gemm_yields_no_warning() -> None:
    findings = judge_throttling(healthy(), gemm(), H200)
    assert problems(findings) == []
    assert findings[0].message == (
        "8 GPUs, 80 samples over 2 s: no throttle reason, no straggler, HBM below its limit"
    )


def test_real_dmon_captures_yield_no_warning() -> None:
    for name in ("deepspeech-178-4gpu-pucvmet-load.txt", "pytorch-97459-a100-dmon-appclocks.txt"):
        timeline = parse_dmon((FIXTURES / "dmon" / name).read_text())
        assert problems(judge_throttling(timeline, None, load("a100"))) == [], name


def test_hw_thermal_slowdown_names_time_temperatures_and_the_median() -> None:
    # Edit: GPU 5 in HW thermal slowdown (with its parent HW slowdown bit, as NVML sets
    # both) 4 of 10 ticks, at 87 °C with HBM at 94 °C; it delivered 12% less.
    hot = edit(
        healthy(),
        5,
        4,
        clock_event_reasons=["hw_slowdown", "hw_thermal_slowdown"],
        temperature_c=87.0,
        memory_temperature_c=94.0,
    )
    findings = judge_throttling(hot, gemm({5: 0.88}), H200)
    assert problems(findings) == [
        (
            "diagnose.hw_thermal_slowdown",
            Status.FAIL,
            "GPU 5: HW thermal slowdown 40% of the time, GPU at 87 °C, HBM at 94 °C, "
            "12% below the node median",
        ),
        (
            "diagnose.hbm_temperature",
            Status.WARN,
            "GPU 5: HBM at 94 °C, max 95 °C, 12% below the node median",
        ),
    ]


def test_power_limit_lowered_on_every_gpu_is_one_finding() -> None:
    # Edit: enforced limit 500 W (someone ran nvidia-smi -pl 500) on all GPUs.
    capped = edit(healthy(), None, TICKS, power_limit_w=500.0, power_w=499.0)
    assert problems(judge_throttling(capped, gemm(), H200)) == [
        (
            "diagnose.power_cap",
            Status.FAIL,
            "all GPUs: SW power cap at 500 W of 700 W default",
        )
    ]


def test_power_limit_lowered_on_one_gpu_names_it() -> None:
    capped = edit(healthy(), 2, TICKS, power_limit_w=600.0)
    assert [m for _, _, m in problems(judge_throttling(capped, gemm(), H200))] == [
        "GPU 2: SW power cap at 600 W of 700 W default"
    ]


def test_draw_pinned_at_the_limit_while_slow_warns() -> None:
    # Edit: GPU 1 in SW power cap the whole time at 700 W of 700 W, 15% slower.
    pinned = edit(healthy(), 1, TICKS, clock_event_reasons=["sw_power_cap"], power_w=700.0)
    assert problems(judge_throttling(pinned, gemm({1: 0.85}), H200)) == [
        (
            "diagnose.power_cap",
            Status.WARN,
            "GPU 1: SW power cap 100% of the time, drawing 700 W of 700 W limit, "
            "675 TFLOP/s of 794.5 achievable, 15% below the node median",
        )
    ]


def test_draw_pinned_at_the_limit_at_full_speed_is_expected() -> None:
    pinned = edit(healthy(), None, TICKS, clock_event_reasons=["sw_power_cap"], power_w=700.0)
    findings = judge_throttling(pinned, gemm(), H200)
    assert problems(findings) == []
    assert findings[0].message == (
        "GPU 0: SW power cap 100% of the time, drawing 700 W of 700 W limit: "
        "at its power limit under full load, as expected"
    )


@pytest.mark.parametrize(
    ("reasons", "check", "status", "message"),
    [
        (
            ["hw_slowdown"],
            "diagnose.hw_slowdown",
            Status.FAIL,
            "GPU 3: HW slowdown 50% of the time, GPU at 52 °C, HBM at 41 °C, drawing 627 W "
            "of 700 W limit: check power supply and temperature; `nvidia-smi -q -d PERFORMANCE`",
        ),
        (
            ["hw_slowdown", "hw_power_brake_slowdown"],
            "diagnose.hw_power_brake",
            Status.FAIL,
            "GPU 3: HW power brake 50% of the time, drawing 627 W of 700 W limit: the board's "
            "power-brake input was asserted: check the PSUs / power delivery",
        ),
        (
            ["sw_thermal_slowdown"],
            "diagnose.sw_thermal_slowdown",
            Status.WARN,
            "GPU 3: SW thermal slowdown 50% of the time, GPU at 52 °C, HBM at 41 °C: "
            "check airflow / cold plate",
        ),
        (
            ["sync_boost"],
            "diagnose.sync_boost",
            Status.WARN,
            "GPU 3: sync boost 50% of the time, SM at 1980 MHz: held to the slowest GPU of "
            "its sync-boost group: look at that GPU",
        ),
        (
            ["applications_clocks_setting"],
            "diagnose.applications_clocks",
            Status.WARN,
            "GPU 3: applications clocks set 50% of the time, SM at 1980 MHz: clocks were "
            "pinned: reset them (`nvidia-smi -rac`, `nvidia-smi -rgc`) unless intended",
        ),
    ],
)
def test_each_reason_rule(reasons: list[str], check: str, status: Status, message: str) -> None:
    # Edit: GPU 3 shows the reason(s) in 5 of 10 ticks; nothing else changes.
    timeline = edit(healthy(), 3, 5, clock_event_reasons=reasons)
    found = [f for f in judge_throttling(timeline, gemm(), H200) if f.status is not Status.PASS]
    # `message` is what the console shows: the finding's message, then its action, each
    # once (issue 27: diagnose printed the action twice).
    assert [(f.check, f.status, f"{f.message}: {f.action}") for f in found] == [
        (check, status, message)
    ]
    assert found[0].action is not None and found[0].action not in found[0].message


def test_a_short_hardware_slowdown_only_warns() -> None:
    # 1 tick of 10 on a GPU = 10% -> FAIL; 1 tick of 20 = 5% -> WARN.
    timeline = edit(healthy(), 3, 1, clock_event_reasons=["hw_slowdown"])
    longer = dataclasses.replace(
        timeline,
        samples=timeline.samples
        + [dataclasses.replace(s, t_s=s.t_s + TICKS * INTERVAL) for s in healthy().samples],
    )
    found = judge_throttling(longer, None, H200)
    assert [f.status for f in found if f.status is not Status.PASS] == [Status.WARN]


def test_nvml_counters_win_over_sample_shares() -> None:
    # Edit: no reason in any sample, but NVML's counter says 1 s of HW thermal slowdown
    # on GPU 6 over the 2 s run (between samples).
    timeline = dataclasses.replace(healthy(), throttle_time_s={"6": {"hw_thermal_slowdown": 1.0}})
    found = [f for f in judge_throttling(timeline, None, H200) if f.status is not Status.PASS]
    assert [(f.message, f.action) for f in found] == [
        (
            "GPU 6: HW thermal slowdown 50% of the time, GPU at 52 °C, HBM at 41 °C",
            "check airflow / cold plate",
        )
    ]


def test_straggler_without_a_throttle_reason() -> None:
    findings = judge_throttling(healthy(), gemm({4: 0.80}), H200)
    assert problems(findings) == [
        (
            "diagnose.straggler",
            Status.FAIL,
            "GPU 4: 636 TFLOP/s, 20% below the node median 794 TFLOP/s, no throttle reason",
        )
    ]


def test_hbm_at_its_maximum_fails() -> None:
    hot = edit(healthy(), 7, 1, memory_temperature_c=95.0)
    assert problems(judge_throttling(hot, gemm(), H200)) == [
        (
            "diagnose.hbm_temperature",
            Status.FAIL,
            "GPU 7: HBM at 95 °C, max 95 °C",
        )
    ]


def test_no_telemetry_is_an_error_and_the_gemm_part_still_counts() -> None:
    empty = Timeline(
        interval_s=0.2, gpus=0, error="no NVIDIA driver found (libnvidia-ml.so not loadable)"
    )
    assert problems(judge_throttling(empty, gemm({4: 0.8}), H200))[0] == (
        "diagnose.telemetry",
        Status.ERROR,
        "no telemetry: no NVIDIA driver found (libnvidia-ml.so not loadable)",
    )
    assert [f.check for f in judge_throttling(empty, gemm({4: 0.8}), H200)] == [
        "diagnose.telemetry",
        "diagnose.straggler",
    ]


def test_profile_without_hbm_limit_skips_the_hbm_rule() -> None:
    cooler = structs.replace(H200.thermal, memory_max_c=None)
    profile = structs.replace(H200, thermal=cooler)
    hot = edit(healthy(), 7, 1, memory_temperature_c=99.0)
    assert problems(judge_throttling(hot, gemm(), profile)) == []


# --- across nodes: the fleet straggler ------------------------------------------------------


def node_gemm(scale: float, slow: dict[int, float] | None = None) -> GemmFacts:
    """A node's gemm facts: the healthy H200 figure scaled (every GPU), GPUs edited apart."""
    facts = gemm(slow)
    for g in facts.gpus:
        g.sustained_bf16_flops_per_s = (g.sustained_bf16_flops_per_s or 0.0) * scale
    return facts


def test_a_node_slow_on_every_gpu_stands_out_of_the_fleet() -> None:
    # Edit: node03's 8 GPUs all deliver 15% less (a limit lowered on all of them): the
    # per-node straggler rule cannot see it, the fleet comparison does.
    fleet = {"node01": node_gemm(1.0), "node02": node_gemm(1.0), "node03": node_gemm(0.85)}
    fleet["node04"] = node_gemm(1.0, {2: 0.8})  # one slow GPU: the node's median is unmoved
    assert problems(judge_throttling(healthy(), fleet["node03"], H200)) == []
    findings = judge_gemm_stragglers(fleet)
    assert [(f.node, f.check, f.status) for f in findings] == [
        ("node01", "diagnose.fleet_straggler", Status.PASS),
        ("node02", "diagnose.fleet_straggler", Status.PASS),
        ("node03", "diagnose.fleet_straggler", Status.FAIL),
        ("node04", "diagnose.fleet_straggler", Status.PASS),
    ]
    slow = findings[2]
    assert slow.message == (
        "15% below the fleet: median GPU 675 TFLOP/s, fleet median 794 TFLOP/s over 4 nodes"
    )
    assert slow.action == (
        "read this node's diagnose.* findings for the cause (power cap, thermal); with none, "
        "check its power limits, BIOS and cooling against a good node"
    )
    assert (slow.value, slow.expected, slow.unit) == (
        675.3,
        Expected(op=">=", value=715, unit="TFLOP/s"),
        "TFLOP/s",
    )
    assert findings[0].message == "median GPU 794 TFLOP/s, fleet median 794 TFLOP/s over 4 nodes"


def test_fleet_comparison_needs_three_gpu_nodes() -> None:
    assert judge_gemm_stragglers({"a": node_gemm(1.0), "b": node_gemm(0.5)}) == []
    cpu = GemmFacts("cpu", "wall-clock", "2.13.0", [GemmGpu(0, "cpu", bf16_flops_per_s=3.3e11)])
    # Nodes measured on a CPU (simulated nodes sharing one machine) are never compared.
    assert judge_gemm_stragglers({"a": node_gemm(1.0), "b": node_gemm(1.0), "c": cpu}) == []


def test_fleet_gemm_is_read_from_the_recorded_facts() -> None:
    def node(name: str, facts: GemmFacts | None) -> NodeFacts:
        record = ProbeRecord(
            probe="gemm",
            ok=facts is not None,
            error=None if facts else "torch not installed",
            facts=dataclasses.asdict(facts) if facts else None,
        )
        return NodeFacts(
            node=name, bringup_version="0", collected_at="now", probes={"gemm": record}
        )

    nodes = [node(f"n{i}", node_gemm(s)) for i, s in enumerate([1.0, 1.0, 0.7])]
    recorded = recorded_gemm([*nodes, node("failed", None)])
    assert sorted(recorded) == ["n0", "n1", "n2"]
    assert [f.status for f in judge_gemm_stragglers(recorded)] == [
        Status.PASS,
        Status.PASS,
        Status.FAIL,
    ]
