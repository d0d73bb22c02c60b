"""`nvidia-smi -q -x` (XML): exact values pinned from real outputs (fixtures/smi/SOURCES.md)."""

from __future__ import annotations

import pytest

from bringup.node.gpu_facts import Gpu
from bringup.node.parsers.smi_xml import parse_q_xml
from bringup.node.result import ParseError
from tests.support.smi_fixtures import MIB, only_gpu, read


def test_q_xml_telegraf_a100_trimmed_mig() -> None:
    facts = parse_q_xml(read("telegraf-a100-sxm4-x4-mig-535-q-x.xml"))
    assert facts.source == "nvidia-smi -q -x"
    assert (facts.driver_version, facts.cuda_driver_version) == ("535.54.03", "12.2")
    assert facts.attached_gpus == 4
    assert facts.gpus == [
        Gpu(
            index=0,
            name="NVIDIA A100-SXM4-80GB",
            uuid="GPU-513536b6-7d19-9063-b049-1e69664bb298",
            serial="1650522003820",
            pci_bus_id="00000000:01:00.0",
            pci_device_id="0x20b2",
            vbios_version="92.00.36.00.02",
            memory_total_bytes=81920 * MIB,
            persistence_mode=False,
            mig_mode=True,
            ecc_mode=True,
            ecc_uncorrected_volatile=0,
            ecc_uncorrected_aggregate=0,
            ecc_corrected_volatile=0,
            remapped_rows=None,  # <remapped_rows>N/A</remapped_rows>
            pcie_gen_current=4,
            pcie_gen_max=4,
            pcie_link_gen_max=4,  # <max_link_gen>: the link's maximum, the host's side too
            pcie_width_current=16,
            pcie_width_max=16,
            power_draw_w=67.03,
            power_limit_w=500.0,
            power_default_limit_w=500.0,
            temperature_c=27.0,
            memory_temperature_c=44.0,
            slowdown_temperature_c=89.0,
            shutdown_temperature_c=92.0,
            memory_max_temperature_c=95.0,
            gpu_max_operating_temperature_c=85.0,
            sm_clock_hz=1_275_000_000,
            sm_clock_max_hz=1_410_000_000,
            memory_clock_hz=1_593_000_000,
            memory_clock_max_hz=1_593_000_000,
            clock_event_reasons=[],
            fabric_state=None,
            fabric_status=None,
            not_available=["Remapped Rows"],  # MIG on: gpu.remapped_rows SKIPs it
        )
    ]


def test_q_xml_netdata_a100_throttle_reasons_and_na_volatile() -> None:
    facts = parse_q_xml(read("netdata-a100-sxm4-40gb-mig-510-q-x.xml"))
    gpu = only_gpu(facts)
    assert (facts.driver_version, facts.attached_gpus) == ("510.47.03", 1)
    assert gpu.name == "NVIDIA A100-SXM4-40GB"
    assert gpu.pci_device_id == "0x20b0"
    assert gpu.memory_total_bytes == 40960 * MIB
    assert gpu.mig_mode is True
    assert gpu.clock_event_reasons == []  # <clocks_throttle_reasons>, all Not Active
    assert gpu.ecc_uncorrected_volatile is None  # every volatile counter is N/A
    assert gpu.ecc_corrected_volatile is None
    assert gpu.ecc_uncorrected_aggregate == 0
    assert (gpu.power_draw_w, gpu.power_limit_w) == (66.92, 400.0)  # enforced_power_limit
    assert (gpu.temperature_c, gpu.shutdown_temperature_c) == (36.0, 92.0)


def test_q_xml_tesla_t4_pcie_and_no_hbm() -> None:
    gpu = only_gpu(parse_q_xml(read("telegraf-tesla-t4-q-x.xml")))
    assert gpu.name == "Tesla T4"
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max) == (3, 3)
    assert (gpu.pcie_width_current, gpu.pcie_width_max) == (8, 16)
    assert (gpu.power_draw_w, gpu.power_limit_w) == (26.78, 70.0)
    assert (gpu.slowdown_temperature_c, gpu.shutdown_temperature_c) == (93.0, 96.0)
    assert gpu.memory_temperature_c is None
    assert gpu.memory_max_temperature_c is None
    assert gpu.mig_mode is None
    assert (gpu.memory_clock_hz, gpu.memory_clock_max_hz) == (5_000_000_000, 5_001_000_000)


def test_q_xml_active_reason() -> None:
    """Editing a real output: an Active element is decoded, in NVML bit order."""
    text = read("telegraf-a100-sxm4-x4-mig-535-q-x.xml")
    for tag in ("sw_power_cap", "gpu_idle"):
        element = f"clocks_event_reason_{tag}"
        text = text.replace(f"<{element}>Not Active<", f"<{element}>Active<")
    gpu = only_gpu(parse_q_xml(text))
    assert gpu.clock_event_reasons == ["gpu_idle", "sw_power_cap"]


def test_q_xml_malformed() -> None:
    text = read("telegraf-tesla-t4-q-x.xml")
    with pytest.raises(ParseError, match="malformed XML"):
        parse_q_xml(text[: len(text) // 2])
