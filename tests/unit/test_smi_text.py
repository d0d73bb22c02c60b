"""`nvidia-smi -q` (text): exact values pinned from real outputs (tests/fixtures/smi/SOURCES.md)."""

from __future__ import annotations

import pytest

from bringup.node.gpu_facts import Gpu, GpuFacts, RemappedRows
from bringup.node.parsers.smi_text import parse_q_text
from bringup.node.result import ParseError
from tests.support.smi_fixtures import MIB, only_gpu, read


def test_q_text_h100_idle_every_field() -> None:
    facts = parse_q_text(read("ugpuexp-h100-q-idle.txt"))
    assert facts == GpuFacts(
        source="nvidia-smi -q",
        driver_version="590.48.01",
        cuda_driver_version="13.1",
        attached_gpus=1,
        gpus=[
            Gpu(
                index=0,
                name="NVIDIA H100 80GB HBM3",
                uuid="GPU-00000000-0000-0000-0000-000000000000",
                serial="0000000000000",
                pci_bus_id="00000000:00:09.0",
                pci_device_id="0x2330",
                vbios_version="96.00.A5.00.01",
                compute_capability=None,  # -q does not print it
                memory_total_bytes=81559 * MIB,
                persistence_mode=True,
                mig_mode=False,
                ecc_mode=True,
                ecc_uncorrected_volatile=0,
                ecc_uncorrected_aggregate=0,
                ecc_corrected_volatile=0,
                remapped_rows=RemappedRows(0, 0, pending=False, failure=False),
                pcie_gen_current=5,
                pcie_gen_max=5,
                pcie_link_gen_max=5,  # "Max : 5": the link's, the host's side too
                pcie_width_current=16,
                pcie_width_max=16,
                power_draw_w=69.85,
                power_limit_w=700.0,
                power_default_limit_w=700.0,
                temperature_c=41.0,
                memory_temperature_c=48.0,
                # 590 prints only relative "T.Limit" thresholds: no absolute ones.
                slowdown_temperature_c=None,
                shutdown_temperature_c=None,
                memory_max_temperature_c=None,
                gpu_max_operating_temperature_c=None,
                tlimit_margin_c=46.0,  # "GPU T.Limit Temp : 46 C"
                slowdown_tlimit_c=-2.0,  # "GPU Slowdown T.Limit Temp : -2 C"
                memory_max_tlimit_c=0.0,  # "Memory Max Operating T.Limit Temp : 0 C"
                sm_clock_hz=345_000_000,
                sm_clock_max_hz=1_980_000_000,
                memory_clock_hz=2_619_000_000,
                memory_clock_max_hz=2_619_000_000,
                clock_event_reasons=["gpu_idle"],
                fabric_state="completed",
                fabric_status="success",
                fabric_clique_id=0,  # "CliqueId : 0": no multi-node NVLink
            )
        ],
    )


def test_q_text_h100_load_differs_from_idle() -> None:
    gpu = only_gpu(parse_q_text(read("ugpuexp-h100-q-load.txt")))
    assert gpu.clock_event_reasons == []  # Idle: Not Active under load
    assert gpu.power_draw_w == 629.45  # Average Power Draw, not the instantaneous 588.39
    assert gpu.temperature_c == 59.0
    assert gpu.memory_temperature_c == 55.0
    assert gpu.sm_clock_hz == 1_980_000_000


def test_q_text_h200_load() -> None:
    facts = parse_q_text(read("ugpuexp-h200-q-load.txt"))
    gpu = only_gpu(facts)
    assert (facts.driver_version, facts.cuda_driver_version) == ("590.48.01", "13.1")
    assert gpu.name == "NVIDIA H200"
    assert gpu.pci_bus_id == "00000000:83:00.0"
    assert gpu.pci_device_id == "0x2335"
    assert gpu.vbios_version == "96.00.A5.00.03"
    assert gpu.memory_total_bytes == 143771 * MIB
    assert gpu.memory_clock_hz == gpu.memory_clock_max_hz == 3_201_000_000
    assert (gpu.power_draw_w, gpu.power_limit_w) == (627.32, 700.0)
    assert (gpu.temperature_c, gpu.memory_temperature_c) == (52.0, 41.0)
    assert gpu.clock_event_reasons == []


def test_q_text_l40s_no_mig_no_hbm_no_fabric() -> None:
    facts = parse_q_text(read("ugpuexp-l40s-q-idle.txt"))
    gpu = only_gpu(facts)
    assert (facts.driver_version, facts.cuda_driver_version) == ("595.80", "13.2")
    assert gpu.name == "NVIDIA L40S"
    assert gpu.pci_device_id == "0x26b9"
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.pcie_width_current) == (4, 4, 16)
    assert gpu.persistence_mode is False
    assert gpu.mig_mode is None  # "N/A", not "Disabled"
    assert gpu.memory_temperature_c is None
    assert gpu.temperature_c == 64.0
    assert gpu.memory_total_bytes == 46068 * MIB
    # The "Inactive ..." counters of newer drivers do not disturb the four we read.
    assert gpu.remapped_rows == RemappedRows(0, 0, pending=False, failure=False)
    assert (gpu.power_draw_w, gpu.power_limit_w, gpu.power_default_limit_w) == (
        183.28,
        350.0,
        350.0,
    )
    assert gpu.sm_clock_hz == 2_520_000_000
    assert gpu.memory_clock_hz == 9_001_000_000
    assert (gpu.fabric_state, gpu.fabric_status) == (None, None)


def test_q_text_a100_excerpt_remap_pending() -> None:
    facts = parse_q_text(read("mleng-a100-sxm4-80gb-q-excerpt-remapped-rows-pending.txt"))
    assert (facts.driver_version, facts.cuda_driver_version) == ("510.73.08", "11.6")
    assert facts.attached_gpus == 8  # the excerpt shows one of eight
    gpu = only_gpu(facts)
    assert gpu.name == "NVIDIA A100-SXM4-80GB"
    assert gpu.pci_bus_id == "00000000:10:1C.0"  # from the section header
    assert gpu.remapped_rows == RemappedRows(1, 0, pending=True, failure=False)
    assert gpu.ecc_corrected_volatile == 177
    assert (gpu.ecc_uncorrected_volatile, gpu.ecc_uncorrected_aggregate) == (0, 0)
    # Elided sections are not reported, not zero.
    assert gpu.temperature_c is None
    assert gpu.memory_total_bytes is None
    assert gpu.clock_event_reasons is None


def test_q_text_sram_excerpt_without_gpu_header() -> None:
    facts = parse_q_text(read("mleng-ecc-sram-uncorrectable-excerpt.txt"))
    gpu = only_gpu(facts)
    assert gpu.ecc_uncorrected_volatile == 1
    assert gpu.ecc_uncorrected_aggregate == 5
    assert gpu.ecc_corrected_volatile == 0
    assert gpu.name == ""
    assert facts.driver_version is None
    assert facts.attached_gpus is None


def test_q_text_active_hw_slowdown_nested_reason() -> None:
    """Editing a real output: the nested "HW Thermal Slowdown" line is read too."""
    text = read("ugpuexp-h100-q-load.txt").replace(
        "            HW Thermal Slowdown                        : Not Active",
        "            HW Thermal Slowdown                        : Active",
    )
    text = text.replace(
        "        HW Slowdown                                    : Not Active",
        "        HW Slowdown                                    : Active",
    )
    gpu = only_gpu(parse_q_text(text))
    assert gpu.clock_event_reasons == ["hw_slowdown", "hw_thermal_slowdown"]


def test_q_text_older_throttle_section_name() -> None:
    """Drivers before 535 call the section "Clocks Throttle Reasons"."""
    text = read("ugpuexp-h100-q-idle.txt").replace(
        "Clocks Event Reasons\n", "Clocks Throttle Reasons\n"
    )
    assert "Clocks Throttle Reasons\n" in text
    assert only_gpu(parse_q_text(text)).clock_event_reasons == ["gpu_idle"]


def test_q_text_rejects_text_without_gpu() -> None:
    with pytest.raises(ParseError, match="no GPU section"):
        parse_q_text(read("ugpuexp-h100-nvlink-s.txt"))


def test_q_text_rejects_a_garbled_value() -> None:
    text = read("ugpuexp-h100-q-idle.txt").replace(": 81559 MiB", ": 81559 GiB")
    with pytest.raises(ParseError, match="FB total"):
        parse_q_text(text)


def test_q_text_rejects_an_absurdly_long_number() -> None:
    """Hundreds of digits overflow a float: a ParseError, not an OverflowError."""
    text = read("ugpuexp-h100-q-idle.txt").replace(": 345 MHz", ": " + "9" * 400 + " MHz")
    with pytest.raises(ParseError, match="out of range"):
        parse_q_text(text)
