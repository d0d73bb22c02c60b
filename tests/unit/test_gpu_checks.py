"""The GPU checks, judged on facts parsed from real nvidia-smi outputs (tests/fixtures/smi/).

A healthy node is a real single-GPU capture replicated to 8 GPUs; each failing case edits
one field of one GPU of that node, so every other field stays what real hardware printed.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bringup.checks import gpu as checks
from bringup.checks.gpu.identity import version_at_least
from bringup.checks.gpu.thermals import REASON_WORDS
from bringup.findings import Expected, Finding, Status
from bringup.node.gpu_facts import Gpu, GpuFacts, NvLink, RemappedRows
from bringup.node.parsers.nvlink_status import nvlink_version_from_speed, parse_nvlink_status
from bringup.node.parsers.smi_text import parse_q_text
from bringup.node.parsers.smi_xml import parse_q_xml
from bringup.node.probes.topology import TopologyFacts, parse_topo
from bringup.profile import Profile
from tests.support.profiles import h100_profile

SMI = Path(__file__).resolve().parents[1] / "fixtures" / "smi"
# vllm-project/vllm#16336: a B200 node whose GPU2 has no NVLink to any other GPU (cut paste).
VLLM_TOPO = SMI.parent / "topo" / "vllm-16336-b200x8-degraded-gpu2-no-nvlink-TRUNCATED.txt"
MIB = 2**20

# The tests pin messages against the numbers of the H100 test profile, so they do not read
# the shipped profile (test_shipped_profile_judges_the_real_node_healthy does).
make_profile = h100_profile
PROFILE = make_profile()


def read(name: str) -> str:
    return (SMI / name).read_text()


def node_of_eight(single: GpuFacts) -> GpuFacts:
    """An 8-GPU node from a one-GPU capture.

    The public captures hold one GPU each, so GPU 0 is replicated with its index, UUID and
    bus id changed (dataclasses.replace); attached_gpus becomes 8 as on a real 8-GPU node.
    """
    (gpu,) = single.gpus
    gpus = [
        dataclasses.replace(
            gpu,
            index=i,
            uuid=f"GPU-00000000-0000-0000-0000-00000000000{i}",
            pci_bus_id=f"00000000:{0x18 + 0x10 * i:02X}:00.0",
            remapped_rows=dataclasses.replace(gpu.remapped_rows) if gpu.remapped_rows else None,
            clock_event_reasons=list(gpu.clock_event_reasons)
            if gpu.clock_event_reasons is not None
            else None,
        )
        for i in range(8)
    ]
    return dataclasses.replace(single, attached_gpus=8, gpus=gpus)


def h100_load() -> GpuFacts:
    return node_of_eight(parse_q_text(read("ugpuexp-h100-q-load.txt")))


def h100_idle() -> GpuFacts:
    return node_of_eight(parse_q_text(read("ugpuexp-h100-q-idle.txt")))


def with_nvlinks(facts: GpuFacts) -> GpuFacts:
    """Every GPU gets the 18 links of the real H100 `nvidia-smi nvlink -s` capture."""
    (listed,) = parse_nvlink_status(read("ugpuexp-h100-nvlink-s.txt")).gpus
    version = nvlink_version_from_speed((listed.links[0].speed_bytes_per_s or 0) / 1e9)
    for gpu in facts.gpus:
        gpu.nvlinks = [dataclasses.replace(link) for link in listed.links]
        gpu.nvlink_version = version
    return facts


def edit(facts: GpuFacts, index: int, **changes: object) -> GpuFacts:
    """The node with GPU `index` changed: the way a failing case is made."""
    facts.gpus[index] = dataclasses.replace(facts.gpus[index], **changes)
    return facts


def judge(
    name: str,
    facts: GpuFacts,
    profile: Profile = PROFILE,
    topology: TopologyFacts | None = None,
) -> list[Finding]:
    """Run one check; `topology` is the context the catalog passes from the same node."""
    (check,) = [c for c in checks.CHECKS if c.name == name]
    if topology is None:
        return check.judge(facts, profile)
    assert check.context == "topology"
    return check.judge(facts, profile, topology)


def summary(findings: list[Finding]) -> list[tuple[str, str, str]]:
    return [(f.check, f.status.value, f.message) for f in findings]


def only(findings: list[Finding]) -> Finding:
    (single,) = findings
    return single


# ---------------------------------------------------------------------------------------
# The fixtures parse to what the tests below assume (so a parser change shows here first).


def test_h100_load_capture_is_a_healthy_gpu() -> None:
    (gpu,) = parse_q_text(read("ugpuexp-h100-q-load.txt")).gpus
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.memory_total_bytes == 81559 * MIB
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.pcie_width_current) == (5, 5, 16)
    assert (gpu.power_limit_w, gpu.power_default_limit_w) == (700.0, 700.0)
    assert (gpu.temperature_c, gpu.memory_temperature_c) == (59.0, 55.0)
    # Driver 590 prints T.Limit values, not absolute thresholds.
    assert gpu.slowdown_temperature_c is None and gpu.memory_max_temperature_c is None
    assert (gpu.tlimit_margin_c, gpu.slowdown_tlimit_c) == (26.0, -2.0)
    assert gpu.clock_event_reasons == []  # gpu_burn at 100 %, yet no reason active
    assert (gpu.fabric_state, gpu.fabric_status) == ("completed", "success")


# ---------------------------------------------------------------------------------------
# Healthy nodes


def test_healthy_h100_node_under_load_pins_every_check() -> None:
    findings = [f for c in checks.CHECKS for f in c.judge(h100_load(), PROFILE)]
    assert summary(findings) == [
        ("gpu.count", "PASS", "8 GPUs, as expected"),
        ("gpu.model", "PASS", "8/8 GPUs: NVIDIA H100 80GB HBM3, >= 81559 MiB"),
        ("gpu.driver", "PASS", "driver 590.48.01 (CUDA 13.1): >= 580.65.06 (CUDA 13.0)"),
        ("gpu.persistence", "PASS", "8/8 GPUs: persistence mode on"),
        ("gpu.ecc", "PASS", "8/8 GPUs: ECC enabled, no uncorrected errors"),
        ("gpu.remapped_rows", "PASS", "8/8 GPUs: no pending or failed row remap"),
        ("gpu.pcie", "PASS", "8/8 GPUs: PCIe x16, Gen5 capable"),
        ("gpu.power", "PASS", "8/8 GPUs: power limit >= 700 W, not lowered"),
        # Driver 590 gives T.Limit 26 C, slowdown at T.Limit -2 C: 28 C of headroom. The
        # profile sets no HBM limit and the driver gives one only on the T.Limit scale
        # ("Memory Max Operating T.Limit Temp : 0 C"), which the PASS says.
        (
            "gpu.thermal",
            "PASS",
            "8/8 GPUs: hottest GPU 0 at 59 C, >= 10 C below the slowdown limit "
            "(HBM limit given on the T.Limit scale only (0 C): not comparable with an HBM "
            "temperature)",
        ),
        (
            "gpu.clock_events",
            "PASS",
            "8/8 GPUs: no clocks event reason active (idle and sync boost aside)",
        ),
        ("gpu.nvlink", "SKIP", "NVLink state not reported"),  # -q has no link states
        ("gpu.fabric", "PASS", "8/8 GPUs: fabric registration completed"),
    ]


def test_healthy_h100_node_with_its_nvlinks_passes_nvlink() -> None:
    finding = only(judge("gpu.nvlink", with_nvlinks(h100_load())))
    assert (finding.status, finding.message) == (
        Status.PASS,
        "8/8 GPUs: 18/18 NVLink 4 links active",
    )


def test_healthy_h200_node_under_load_has_no_warning() -> None:
    facts = node_of_eight(parse_q_text(read("ugpuexp-h200-q-load.txt")))
    profile = make_profile(gpu={"model": "NVIDIA H200", "memory_min_bytes": 143771 * MIB})
    findings = [f for c in checks.CHECKS for f in c.judge(facts, profile)]
    assert [f.check for f in findings if f.status is not Status.PASS] == ["gpu.nvlink"]
    assert {f.status for f in findings} == {Status.PASS, Status.SKIP}
    model = only(judge("gpu.model", facts, profile))
    assert model.message == "8/8 GPUs: NVIDIA H200, >= 143771 MiB"


def test_idle_h100_node_is_healthy_and_idle_is_no_clock_event() -> None:
    facts = h100_idle()
    assert facts.gpus[0].clock_event_reasons == ["gpu_idle"]
    findings = [f for c in checks.CHECKS for f in c.judge(facts, PROFILE)]
    assert not [f for f in findings if f.status in (Status.WARN, Status.FAIL, Status.ERROR)]
    clocks = only(judge("gpu.clock_events", facts))
    assert clocks.status is Status.PASS


@pytest.mark.parametrize(
    ("profile_name", "capture"),
    [
        ("h100", "ugpuexp-h100-q-load.txt"),
        ("h100", "ugpuexp-h100-q-idle.txt"),
        ("h200", "ugpuexp-h200-q-load.txt"),
    ],
)
def test_shipped_profile_judges_the_real_node_healthy(profile_name: str, capture: str) -> None:
    from bringup.profile import load

    facts = node_of_eight(parse_q_text(read(capture)))
    findings = [f for c in checks.CHECKS for f in c.judge(facts, load(profile_name))]
    assert [f.message for f in findings if f.status is not Status.PASS] == [
        "NVLink state not reported"
    ]


# gpu.imex judges the node's IMEX service, not its GPUs, and speaks only where IMEX applies
# (a profile that requires it, or a domain the node shows): an HGX board has none, and says
# nothing of it (tests/unit/test_imex.py holds it to its own rules).
PER_GPU = [c for c in checks.CHECKS if c.name != "gpu.imex"]


def test_no_gpus_is_an_error_for_every_check() -> None:
    empty = GpuFacts(source="nvidia-smi -q", driver_version="590.48.01")
    for check in PER_GPU:
        finding = only(check.judge(empty, PROFILE))
        assert (finding.check, finding.status, finding.message) == (
            check.name,
            Status.ERROR,
            "no GPUs reported",
        )


# ---------------------------------------------------------------------------------------
# gpu.count


def test_count_missing_gpu_fails() -> None:
    facts = h100_load()
    del facts.gpus[5]
    facts.attached_gpus = 7
    finding = only(judge("gpu.count", facts))
    assert (finding.status, finding.message, finding.value) == (
        Status.FAIL,
        "7 GPUs, expected 8",
        7,
    )
    assert finding.action is not None and "XID 79" in finding.action


def test_count_seen_by_the_topology_too_is_one_finding_with_both() -> None:
    facts = h100_load()
    del facts.gpus[5]
    facts.attached_gpus = 7
    matrix = TopologyFacts(gpu_count=7, min_nvlinks=18, nics=[])
    finding = only(judge("gpu.count", facts, topology=matrix))
    assert (finding.status, finding.message) == (
        Status.FAIL,
        "7 GPUs, expected 8 (the topology matrix shows 7 too)",
    )
    # A matrix that disagrees is not quoted: topology.gpu_count judges that one itself.
    six = only(judge("gpu.count", facts, topology=TopologyFacts(6, 18, [])))
    assert six.message == "7 GPUs, expected 8"


def test_count_trimmed_log_says_so() -> None:
    # telegraf's sample: <attached_gpus>4</attached_gpus> but one <gpu> element.
    facts = parse_q_xml(read("telegraf-a100-sxm4-x4-mig-535-q-x.xml"))
    finding = only(judge("gpu.count", facts))
    assert (finding.status, finding.message) == (
        Status.FAIL,
        "4 GPUs, expected 8 (4 attached, only 1 listed: the others were not judged)",
    )
    four = only(judge("gpu.count", facts, make_profile(gpu={"count": 4})))
    assert (four.status, four.message) == (
        Status.WARN,
        "4 GPUs as expected (4 attached, only 1 listed: the others were not judged)",
    )


def test_count_more_gpus_than_the_profile_warns() -> None:
    finding = only(judge("gpu.count", h100_load(), make_profile(gpu={"count": 4})))
    assert (finding.status, finding.message) == (Status.WARN, "8 GPUs, expected 4")


# ---------------------------------------------------------------------------------------
# gpu.model


def test_model_names_the_wrong_gpu() -> None:
    facts = edit(h100_load(), 2, name="NVIDIA H200")
    finding = only(judge("gpu.model", facts))
    assert (finding.status, finding.message) == (
        Status.FAIL,
        "GPU 2: 'NVIDIA H200', expected 'NVIDIA H100 80GB HBM3'",
    )


def test_model_too_little_memory_fails() -> None:
    facts = h100_load()
    edit(facts, 6, memory_total_bytes=facts.gpus[6].memory_total_bytes - 1024 * MIB)
    finding = only(judge("gpu.model", facts))
    assert (finding.status, finding.message, finding.value, finding.unit) == (
        Status.FAIL,
        "GPU 6: 80535 MiB memory, expected >= 81559 MiB",
        80535 * MIB,
        "B",
    )


def test_model_on_log_excerpts() -> None:
    # The A100 excerpt names its GPU but elides the memory; the ECC excerpt has neither.
    a100 = parse_q_text(read("mleng-a100-sxm4-80gb-q-excerpt-remapped-rows-pending.txt"))
    finding = only(judge("gpu.model", a100))
    assert (finding.status, finding.message) == (
        Status.FAIL,
        "GPU 00000000:10:1C.0: 'NVIDIA A100-SXM4-80GB', expected 'NVIDIA H100 80GB HBM3'",
    )
    a100_profile = make_profile(gpu={"model": "NVIDIA A100-SXM4-80GB"})
    named = only(judge("gpu.model", a100, a100_profile))
    assert (named.status, named.message) == (
        Status.PASS,
        "1/1 GPUs: NVIDIA A100-SXM4-80GB, memory size not reported on GPU 00000000:10:1C.0",
    )
    ecc = parse_q_text(read("mleng-ecc-sram-uncorrectable-excerpt.txt"))
    unnamed = only(judge("gpu.model", ecc))
    assert (unnamed.status, unnamed.message) == (
        Status.SKIP,
        "model and memory size not reported",
    )


# ---------------------------------------------------------------------------------------
# gpu.driver


def test_driver_too_old_fails_both_versions() -> None:
    # A real A100 log: driver 535.54.03, CUDA 12.2.
    facts = parse_q_xml(read("telegraf-a100-sxm4-x4-mig-535-q-x.xml"))
    findings = judge("gpu.driver", facts)
    assert summary(findings) == [
        ("gpu.driver", "FAIL", "driver 535.54.03, expected >= 580.65.06"),
        ("gpu.driver", "FAIL", "CUDA 12.2, expected >= 13.0"),
    ]
    assert findings[0].action == "install driver >= 580.65.06 (R580 branch)"


def test_driver_not_reported_is_an_error() -> None:
    facts = h100_load()
    facts.driver_version = None
    finding = only(judge("gpu.driver", facts))
    assert (finding.status, finding.message) == (Status.ERROR, "driver version not reported")


def test_driver_version_compares_numerically_not_as_text() -> None:
    assert version_at_least("590.48.01", "580.65.06") is True
    assert version_at_least("580.9.0", "580.65.06") is False  # "9" > "65" as text
    assert version_at_least("13", "13.0") is True
    assert version_at_least("12.9", "13.0") is False
    assert version_at_least("r580", "580") is None
    facts = h100_load()
    facts.driver_version = "590.48.01-beta"
    finding = only(judge("gpu.driver", facts))
    assert finding.status is Status.ERROR


# ---------------------------------------------------------------------------------------
# gpu.persistence


def test_persistence_off_warns_on_the_real_a100_log() -> None:
    facts = parse_q_xml(read("telegraf-a100-sxm4-x4-mig-535-q-x.xml"))
    finding = only(judge("gpu.persistence", facts))
    assert (finding.status, finding.message, finding.action) == (
        Status.WARN,
        "GPU 0: persistence mode off",
        "enable persistence: `nvidia-smi -pm 1` or nvidia-persistenced",
    )


# ---------------------------------------------------------------------------------------
# gpu.ecc


def test_ecc_uncorrected_volatile_fails_naming_the_gpu() -> None:
    facts = edit(h100_load(), 3, ecc_uncorrected_volatile=2, ecc_uncorrected_aggregate=2)
    finding = only(judge("gpu.ecc", facts))
    assert (finding.status, finding.message, finding.action) == (
        Status.FAIL,
        "GPU 3: 2 uncorrected ECC errors since the last reset",
        "reset GPU 3 (`nvidia-smi -r -i 3`); if it recurs, RMA",
    )


def test_ecc_real_sram_uncorrectable_excerpt_fails() -> None:
    facts = parse_q_text(read("mleng-ecc-sram-uncorrectable-excerpt.txt"))
    finding = only(judge("gpu.ecc", facts))
    assert (finding.status, finding.message, finding.value) == (
        Status.FAIL,
        "GPU 0: 1 uncorrected ECC error since the last reset",
        1,
    )


def test_ecc_disabled_fails_and_aggregate_only_warns() -> None:
    facts = edit(h100_load(), 1, ecc_mode=False)
    edit(facts, 4, ecc_uncorrected_aggregate=5)
    assert summary(judge("gpu.ecc", facts)) == [
        ("gpu.ecc", "FAIL", "GPU 1: ECC disabled"),
        (
            "gpu.ecc",
            "WARN",
            "GPU 4: 5 uncorrected ECC errors in its lifetime, none since the last reset",
        ),
    ]


# ---------------------------------------------------------------------------------------
# gpu.remapped_rows


def test_remapped_rows_pending_on_the_real_a100_excerpt() -> None:
    facts = parse_q_text(read("mleng-a100-sxm4-80gb-q-excerpt-remapped-rows-pending.txt"))
    finding = only(judge("gpu.remapped_rows", facts))
    assert (finding.status, finding.message, finding.action) == (
        Status.FAIL,
        "GPU 00000000:10:1C.0: row remap pending",
        "reset GPU 00000000:10:1C.0 (`nvidia-smi -r -i 00000000:10:1C.0`) to apply the pending "
        "row remap",
    )


def test_remapped_rows_failure_uncorrectable_and_unreported() -> None:
    facts = edit(h100_load(), 3, remapped_rows=RemappedRows(0, 9, pending=False, failure=True))
    edit(facts, 5, remapped_rows=RemappedRows(0, 2, pending=False, failure=False))
    edit(facts, 7, remapped_rows=None)
    findings = judge("gpu.remapped_rows", facts)
    assert summary(findings) == [
        ("gpu.remapped_rows", "FAIL", "GPU 3: row remap failure"),
        ("gpu.remapped_rows", "WARN", "GPU 5: 2 rows remapped for uncorrectable errors"),
        (
            "gpu.remapped_rows",
            "SKIP",
            "remapped rows not reported (GPU older than A100, or MIG active) on GPU 7",
        ),
    ]
    assert findings[0].action == "reseat / RMA GPU 3: row remap failure"


def test_remapped_rows_not_reported_anywhere_is_a_skip() -> None:
    # The A100 XML under MIG says <remapped_rows>N/A</remapped_rows>.
    facts = parse_q_xml(read("telegraf-a100-sxm4-x4-mig-535-q-x.xml"))
    finding = only(judge("gpu.remapped_rows", facts))
    assert finding.status is Status.SKIP


# ---------------------------------------------------------------------------------------
# gpu.pcie


def test_pcie_narrow_link_fails() -> None:
    facts = edit(h100_load(), 3, pcie_width_current=8)
    finding = only(judge("gpu.pcie", facts))
    assert (finding.status, finding.message, finding.value, finding.expected) == (
        Status.FAIL,
        "GPU 3: PCIe x8, expected x16",
        8,
        Expected(op=">=", value=16, unit="lanes"),
    )
    assert finding.action == "reseat GPU 3 / check the riser"


def test_pcie_low_gen_under_load_fails() -> None:
    facts = edit(h100_load(), 6, pcie_gen_current=3)
    finding = only(judge("gpu.pcie", facts))
    assert (finding.status, finding.message) == (
        Status.FAIL,
        "GPU 6: PCIe Gen3 while busy, expected Gen5",
    )


def test_pcie_low_gen_at_idle_is_not_judged() -> None:
    facts = h100_idle()
    for gpu in facts.gpus:
        gpu.pcie_gen_current = 1  # what an idle GPU's link drops to, to save power
    assert summary(judge("gpu.pcie", facts)) == [
        ("gpu.pcie", "PASS", "8/8 GPUs: PCIe x16, Gen5 capable"),
        (
            "gpu.pcie",
            "SKIP",
            "GPU 0, 1, 2, 3, 4, 5, 6, 7: gen not judged at idle (Gen1 now, max Gen5)",
        ),
    ]


def test_pcie_low_gen_with_unknown_idle_state_is_not_judged() -> None:
    facts = edit(h100_load(), 2, pcie_gen_current=2, clock_event_reasons=None)
    findings = judge("gpu.pcie", facts)
    assert summary(findings)[1:] == [
        ("gpu.pcie", "SKIP", "GPU 2: gen not judged (idle state unknown) (Gen2 now, max Gen5)"),
    ]
    assert findings[0].status is Status.PASS


def test_pcie_gen4_part_for_a_gen5_profile_warns() -> None:
    facts = edit(h100_load(), 1, pcie_gen_current=4, pcie_gen_max=4)
    finding = only(judge("gpu.pcie", facts))
    assert (finding.status, finding.message) == (
        Status.WARN,
        "GPU 1: PCIe Gen4 max, expected Gen5",
    )


# ---------------------------------------------------------------------------------------
# gpu.power


def test_power_limit_lowered_warns() -> None:
    facts = edit(h100_load(), 2, power_limit_w=500.0)
    finding = only(judge("gpu.power", facts))
    assert (finding.status, finding.message, finding.action) == (
        Status.WARN,
        "GPU 2: power limit 500 W of 700 W default: someone lowered it",
        "`nvidia-smi -i 2 -pl 700`",
    )


def test_power_limit_below_the_profile_warns() -> None:
    # The real A100 log: 500 W enforced, 500 W default; an H100 profile expects 700 W.
    facts = parse_q_xml(read("telegraf-a100-sxm4-x4-mig-535-q-x.xml"))
    finding = only(judge("gpu.power", facts))
    assert (finding.status, finding.message) == (
        Status.WARN,
        "GPU 0: power limit 500 W, profile expects 700 W",
    )


# ---------------------------------------------------------------------------------------
# gpu.thermal (the A100 XML reports absolute thresholds: slowdown 89 C, HBM max 95 C)


def a100_xml() -> GpuFacts:
    return parse_q_xml(read("telegraf-a100-sxm4-x4-mig-535-q-x.xml"))


def test_thermal_pass_names_the_hottest_gpu() -> None:
    finding = only(judge("gpu.thermal", a100_xml()))
    assert (finding.status, finding.message, finding.value, finding.unit) == (
        Status.PASS,
        "1/1 GPUs: hottest GPU 0 at 27 C, >= 10 C below the slowdown / HBM limits",
        27.0,
        "C",
    )


def test_thermal_close_to_slowdown_warns_and_over_fails() -> None:
    warm = only(judge("gpu.thermal", edit(a100_xml(), 0, temperature_c=83.0)))
    assert (warm.status, warm.message) == (
        Status.WARN,
        "GPU 0: 83 C, 6 C below its 89 C slowdown temperature",
    )
    hot = only(judge("gpu.thermal", edit(a100_xml(), 0, temperature_c=91.0)))
    assert (hot.status, hot.message) == (
        Status.FAIL,
        "GPU 0: 91 C, at/over its 89 C slowdown temperature",
    )


def test_thermal_hbm_over_its_maximum_fails() -> None:
    finding = only(judge("gpu.thermal", edit(a100_xml(), 0, memory_temperature_c=95.0)))
    assert (finding.status, finding.message) == (
        Status.FAIL,
        "GPU 0 HBM: 95 C, at/over its 95 C HBM maximum",
    )


def test_thermal_hbm_limit_from_the_profile_when_the_driver_gives_none() -> None:
    # 95 C: the HBM maximum the real A100 XML log reports (<gpu_temp_max_mem_threshold>).
    profile = make_profile(thermal={"memory_max_c": 95.0})
    facts = edit(h100_load(), 4, memory_temperature_c=88.0)
    findings = judge("gpu.thermal", facts, profile)
    assert summary(findings) == [
        ("gpu.thermal", "WARN", "GPU 4 HBM: 88 C, 7 C below its 95 C HBM maximum"),
    ]
    healthy = only(judge("gpu.thermal", h100_load(), profile))
    assert (healthy.status, healthy.message) == (
        Status.PASS,
        "8/8 GPUs: hottest GPU 0 at 59 C, >= 10 C below the slowdown / HBM limits",
    )


def test_thermal_t_limit_offsets_are_not_read_as_temperatures() -> None:
    # "GPU Slowdown T.Limit Temp : -2 C" is an offset: were it a threshold, 59 C would FAIL.
    facts = edit(h100_load(), 0, slowdown_temperature_c=-2.0)
    finding = only(judge("gpu.thermal", facts))
    assert finding.status is Status.PASS


def test_thermal_headroom_from_t_limit_warns_and_fails() -> None:
    # Headroom = T.Limit margin - slowdown T.Limit: 5 - (-2) = 7 C, under the 10 C margin.
    close = only(judge("gpu.thermal", edit(h100_load(), 3, tlimit_margin_c=5.0)))
    assert (close.status, close.message) == (
        Status.WARN,
        "GPU 3: 59 C, 7 C below its slowdown limit (T.Limit)",
    )
    past = only(judge("gpu.thermal", edit(h100_load(), 3, tlimit_margin_c=-3.0)))
    assert (past.status, past.message) == (
        Status.FAIL,
        "GPU 3: 59 C, at/over its slowdown limit (T.Limit)",
    )


# ---------------------------------------------------------------------------------------
# gpu.clock_events


def test_clock_events_name_the_reason_and_the_gpu() -> None:
    facts = edit(h100_load(), 5, clock_event_reasons=["hw_slowdown", "hw_thermal_slowdown"])
    edit(facts, 1, clock_event_reasons=["sw_power_cap"])
    findings = judge("gpu.clock_events", facts)
    assert summary(findings) == [
        ("gpu.clock_events", "WARN", "GPU 1: SW power cap (normal under full load) active"),
        ("gpu.clock_events", "WARN", "GPU 5: HW slowdown active"),
        ("gpu.clock_events", "WARN", "GPU 5: HW thermal slowdown active"),
    ]
    assert [f.action for f in findings] == [
        "GPU is at its power limit (fine under load; check the limit was not lowered)",
        "HW slowdown: check power supply / temperature; see `nvidia-smi -q -d PERFORMANCE`",
        "check airflow / cold plate",
    ]


def test_clock_events_pinned_clocks_and_power_brake_warn() -> None:
    facts = edit(h100_load(), 0, clock_event_reasons=["applications_clocks_setting"])
    edit(facts, 7, clock_event_reasons=["hw_power_brake_slowdown"])
    findings = judge("gpu.clock_events", facts)
    assert [(f.status, f.message) for f in findings] == [
        (Status.WARN, "GPU 0: applications clocks setting (clocks were pinned) active"),
        (Status.WARN, "GPU 7: HW power brake slowdown active"),
    ]
    assert findings[1].action == "external power brake asserted: check PSU / power delivery"


def test_clock_events_sync_boost_is_informational() -> None:
    facts = edit(h100_load(), 2, clock_event_reasons=["sync_boost"])
    finding = only(judge("gpu.clock_events", facts))
    assert (finding.status, finding.message) == (
        Status.PASS,
        "8/8 GPUs: no clocks event reason active (idle and sync boost aside); "
        "sync boost active on GPU 2 (informational)",
    )


def test_clock_events_not_reported_is_a_skip() -> None:
    facts = parse_q_text(read("mleng-a100-sxm4-80gb-q-excerpt-remapped-rows-pending.txt"))
    finding = only(judge("gpu.clock_events", facts))
    assert (finding.status, finding.message) == (
        Status.SKIP,
        "clocks event reasons not reported",
    )


# ---------------------------------------------------------------------------------------
# gpu.nvlink


def test_nvlink_down_links_named() -> None:
    facts = with_nvlinks(h100_load())
    for link in (3, 7):
        facts.gpus[4].nvlinks[link] = NvLink(link=link, active=False)
    finding = only(judge("gpu.nvlink", facts))
    assert (finding.status, finding.message, finding.value) == (
        Status.FAIL,
        "GPU 4: links 3, 7 down (16/18 active)",
        16,
    )
    assert finding.action == "check fabric manager / reseat the GPU baseboard, RMA if persistent"


def test_nvlink_all_links_down_says_so() -> None:
    facts = with_nvlinks(h100_load())
    facts.gpus[2].nvlinks = [NvLink(link=n, active=False) for n in range(18)]
    finding = only(judge("gpu.nvlink", facts))
    assert (finding.status, finding.message) == (
        Status.FAIL,
        "GPU 2: all 18 links down (0/18 active)",
    )


def test_nvlink_of_a_gpu_the_topology_shows_cut_off_is_the_topology_finding() -> None:
    facts = with_nvlinks(h100_load())
    facts.gpus[2].nvlinks = [NvLink(link=n, active=False) for n in range(18)]
    matrix = parse_topo(VLLM_TOPO.read_text())
    assert summary(judge("gpu.nvlink", facts, topology=matrix)) == [
        ("gpu.nvlink", "PASS", "7/8 GPUs: 18/18 NVLink 4 links active"),
        (
            "gpu.nvlink",
            "SKIP",
            "GPU 2: all 18 links down: judged by topology.nvlink "
            "(no NVLink to any other GPU in the topology matrix)",
        ),
    ]
    # Links down on a GPU the matrix shows NVLinked stay this check's FAIL.
    facts.gpus[4].nvlinks[3] = NvLink(link=3, active=False)
    assert [f.status for f in judge("gpu.nvlink", facts, topology=matrix)] == [
        Status.SKIP,
        Status.FAIL,
    ]


def test_nvlink_real_a100_links_against_an_h100_profile() -> None:
    # Perlmutter's A100s: 12 links at 25 GB/s, where an H100 has 18 at 26.562 GB/s.
    status = parse_nvlink_status(read("simllm-perlmutter-a100x4-nvlink-s.txt"))
    facts = GpuFacts(
        source="nvidia-smi nvlink -s",
        gpus=[Gpu(index=g.index, name=g.name, nvlinks=g.links) for g in status.gpus],
    )
    findings = judge("gpu.nvlink", facts)
    assert summary(findings)[:2] == [
        ("gpu.nvlink", "FAIL", "GPU 0: 12 links reported (12/18 active)"),
        (
            "gpu.nvlink",
            "WARN",
            "GPU 0: all links at 25.000 GB/s, expected 26.562 GB/s",
        ),
    ]
    assert len(findings) == 8  # the same two on each of the 4 GPUs


def test_nvlink_wrong_version_fails() -> None:
    facts = edit(with_nvlinks(h100_load()), 0, nvlink_version=5)
    finding = only(judge("gpu.nvlink", facts))
    assert (finding.status, finding.message) == (
        Status.FAIL,
        "GPU 0: NVLink 5, expected NVLink 4",
    )


def test_nvlink_not_expected_or_not_reported_skips() -> None:
    pcie_only = make_profile(nvlink=None)
    assert only(judge("gpu.nvlink", with_nvlinks(h100_load()), pcie_only)).status is Status.SKIP
    finding = only(judge("gpu.nvlink", h100_load()))
    assert (finding.status, finding.message) == (Status.SKIP, "NVLink state not reported")


# ---------------------------------------------------------------------------------------
# gpu.fabric


def test_fabric_in_progress_fails() -> None:
    facts = edit(h100_load(), 6, fabric_state="in_progress", fabric_status=None)
    finding = only(judge("gpu.fabric", facts))
    assert (finding.status, finding.message) == (
        Status.FAIL,
        "GPU 6: fabric state in_progress",
    )
    assert finding.action is not None
    assert finding.action.startswith("fabric manager has not finished: `systemctl status")


def test_fabric_error_status_fails_and_unreported_skips() -> None:
    facts = edit(h100_load(), 1, fabric_status="NVML_ERROR_INSUFFICIENT_RESOURCES")
    finding = only(judge("gpu.fabric", facts))
    assert (
        finding.message == "GPU 1: fabric state completed, status NVML_ERROR_INSUFFICIENT_RESOURCES"
    )
    skip = only(judge("gpu.fabric", a100_xml()))
    assert (skip.status, skip.message) == (
        Status.SKIP,
        "fabric state not reported (pre-Hopper driver or not an NVSwitch system)",
    )


# ---------------------------------------------------------------------------------------
# Property: whatever the facts (any field missing or odd), a judge returns findings of its
# own name and never raises.

_maybe_int = st.none() | st.integers(min_value=-5, max_value=2**40)
_maybe_float = st.none() | st.floats(allow_nan=False, allow_infinity=False, width=32)
_gpus = st.builds(
    Gpu,
    index=st.integers(min_value=0, max_value=15),
    name=st.sampled_from(["", "NVIDIA H100 80GB HBM3", "NVIDIA H200"]),
    memory_total_bytes=_maybe_int,
    persistence_mode=st.none() | st.booleans(),
    ecc_mode=st.none() | st.booleans(),
    ecc_uncorrected_volatile=_maybe_int,
    ecc_uncorrected_aggregate=_maybe_int,
    remapped_rows=st.none()
    | st.builds(
        RemappedRows, st.integers(0, 600), st.integers(0, 600), st.booleans(), st.booleans()
    ),
    pcie_gen_current=_maybe_int,
    pcie_gen_max=_maybe_int,
    pcie_width_current=_maybe_int,
    pcie_width_max=_maybe_int,
    power_limit_w=_maybe_float,
    power_default_limit_w=_maybe_float,
    temperature_c=_maybe_float,
    memory_temperature_c=_maybe_float,
    slowdown_temperature_c=_maybe_float,
    memory_max_temperature_c=_maybe_float,
    clock_event_reasons=st.none()
    | st.lists(st.sampled_from([*REASON_WORDS, "gpu_idle", "unknown_0x200"])),
    nvlink_version=st.none() | st.integers(1, 6),
    nvlinks=st.lists(
        st.builds(NvLink, st.integers(0, 17), st.booleans(), _maybe_float), max_size=18
    ),
    fabric_state=st.none() | st.sampled_from(["completed", "in_progress", "Not Supported", ""]),
    fabric_status=st.none() | st.text(max_size=10),
)
_facts = st.builds(
    GpuFacts,
    source=st.just("nvidia-smi -q"),
    driver_version=st.none() | st.text(max_size=12),
    cuda_driver_version=st.none() | st.text(max_size=6),
    attached_gpus=st.none() | st.integers(0, 16),
    gpus=st.lists(_gpus, max_size=9),
)


@settings(max_examples=200, deadline=None)
@given(_facts)
def test_judges_never_raise_and_always_answer(facts: GpuFacts) -> None:
    for check in checks.CHECKS:
        findings = check.judge(facts, PROFILE)
        assert findings or check not in PER_GPU, check.name
        assert {f.check for f in findings} <= {check.name}
