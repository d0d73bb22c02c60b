"""nvidia-smi parsers: exact values pinned from real outputs (tests/fixtures/smi/SOURCES.md)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from bringup.node.parsers.smi import (
    NvlinkStatus,
    detect,
    nvlink_version_from_speed,
    parse_nvlink_status,
    parse_q_text,
    parse_q_xml,
    parse_query_csv,
)
from bringup.node.probes.gpu import Gpu, GpuFacts, NvLink, RemappedRows
from bringup.node.result import ParseError

FIXTURES = Path(__file__).parent.parent / "fixtures"
SMI = FIXTURES / "smi"
MIB = 1048576
ALL_SMI = sorted(p.name for p in SMI.iterdir() if p.name != "SOURCES.md")

PARSERS: dict[str, Callable[[str], object]] = {
    "smi-q": parse_q_text,
    "smi-xml": parse_q_xml,
    "smi-csv": parse_query_csv,
    "nvlink-s": parse_nvlink_status,
}

KIND = {
    "ugpuexp-h100-q-idle.txt": "smi-q",
    "ugpuexp-h100-q-load.txt": "smi-q",
    "ugpuexp-h200-q-load.txt": "smi-q",
    "ugpuexp-l40s-q-idle.txt": "smi-q",
    "mleng-a100-sxm4-80gb-q-excerpt-remapped-rows-pending.txt": "smi-q",
    "mleng-ecc-sram-uncorrectable-excerpt.txt": "smi-q",
    "telegraf-a100-sxm4-x4-mig-535-q-x.xml": "smi-xml",
    "netdata-a100-sxm4-40gb-mig-510-q-x.xml": "smi-xml",
    "telegraf-tesla-t4-q-x.xml": "smi-xml",
    "ugpuexp-h100-query-gpu-load.csv.txt": "smi-csv",
    "ugpuexp-l40s-query-gpu-idle.csv.txt": "smi-csv",
    "netdata-tesla-p100-query-gpu.csv.txt": "smi-csv",
    "mleng-h100-query-gpu-vbios-excerpt.csv.txt": "smi-csv",
    "simllm-vastai-b200x8-nvlink-s.txt": "nvlink-s",
    "simllm-vastai-h200x8-nvlink-s.txt": "nvlink-s",
    "simllm-perlmutter-a100x4-nvlink-s.txt": "nvlink-s",
    "awsdt-efa-cheatsheet-p4de-a100-gpu0-nvlink-s.txt": "nvlink-s",
    "ugpuexp-h100-nvlink-s.txt": "nvlink-s",
    "ugpuexp-h100-mig-nvlink-s.txt": "nvlink-s",
    "ugpuexp-l40s-nvlink-s-unsupported.txt": "nvlink-s",
}


def read(name: str) -> str:
    return (SMI / name).read_text()


def only_gpu(facts: GpuFacts) -> Gpu:
    assert len(facts.gpus) == 1
    return facts.gpus[0]


def test_every_fixture_has_a_kind() -> None:
    assert sorted(KIND) == ALL_SMI


# --------------------------------------------------------------------------------------------
# nvidia-smi -q
# --------------------------------------------------------------------------------------------


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
                sm_clock_hz=345_000_000,
                sm_clock_max_hz=1_980_000_000,
                memory_clock_hz=2_619_000_000,
                memory_clock_max_hz=2_619_000_000,
                clock_event_reasons=["gpu_idle"],
                fabric_state="completed",
                fabric_status="success",
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


# --------------------------------------------------------------------------------------------
# nvidia-smi -q -x
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# nvidia-smi --query-gpu
# --------------------------------------------------------------------------------------------


def test_query_csv_h100_212_columns() -> None:
    text = read("ugpuexp-h100-query-gpu-load.csv.txt")
    assert len(text.splitlines()[0].split(", ")) == 212
    facts = parse_query_csv(text)
    assert facts.source == "nvidia-smi --query-gpu"
    assert (facts.driver_version, facts.cuda_driver_version, facts.attached_gpus) == (
        "590.48.01",
        None,
        1,
    )
    gpu = only_gpu(facts)
    assert gpu == Gpu(
        index=0,
        name="NVIDIA H100 80GB HBM3",
        uuid="GPU-00000000-0000-0000-0000-000000000000",
        serial="0000000000000",
        pci_bus_id="00000000:00:09.0",
        pci_device_id="0x2330",
        vbios_version="96.00.A5.00.01",
        compute_capability="9.0",
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
        pcie_width_current=16,
        pcie_width_max=16,
        power_draw_w=631.95,
        power_limit_w=700.0,
        power_default_limit_w=700.0,
        temperature_c=59.0,
        memory_temperature_c=54.0,
        tlimit_margin_c=26.0,  # temperature.gpu.tlimit
        sm_clock_hz=1_980_000_000,
        sm_clock_max_hz=1_980_000_000,
        memory_clock_hz=2_619_000_000,
        memory_clock_max_hz=2_619_000_000,
        clock_event_reasons=[],  # clocks_event_reasons.active = 0x0000000000000000
        fabric_state="completed",
        fabric_status="success",
    )


def test_query_csv_l40s_202_columns() -> None:
    text = read("ugpuexp-l40s-query-gpu-idle.csv.txt")
    assert len(text.splitlines()[0].split(", ")) == 202
    facts = parse_query_csv(text)
    gpu = only_gpu(facts)
    assert facts.driver_version == "595.80"
    assert gpu.name == "NVIDIA L40S"
    assert gpu.compute_capability == "8.9"
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max) == (4, 4)
    assert gpu.power_draw_w == 144.97
    assert gpu.temperature_c == 63.0
    assert gpu.memory_temperature_c is None  # printed as a bare "N/A"
    assert gpu.mig_mode is None  # "[N/A]"
    assert gpu.persistence_mode is False
    assert gpu.fabric_state is None


def test_query_csv_p100_nounits() -> None:
    gpu = only_gpu(parse_query_csv(read("netdata-tesla-p100-query-gpu.csv.txt")))
    assert gpu.name == "Tesla P100-PCIE-16GB"
    assert gpu.uuid == "GPU-ef1b2c9b-38d8-2090-2bd1-f567a3eb42a6"
    assert gpu.power_draw_w == 28.16
    assert gpu.temperature_c == 37.0
    assert (gpu.sm_clock_hz, gpu.memory_clock_hz) == (405_000_000, 715_000_000)
    assert gpu.memory_total_bytes is None  # not queried
    assert gpu.clock_event_reasons is None


def test_query_csv_excerpt_with_prompt_and_elision() -> None:
    facts = parse_query_csv(read("mleng-h100-query-gpu-vbios-excerpt.csv.txt"))
    assert [(g.index, g.name, g.pci_bus_id, g.vbios_version) for g in facts.gpus] == [
        (0, "NVIDIA H100 80GB HBM3", "00000000:04:00.0", "96.00.89.00.01"),
        # No `index` column: the row position stands in (the "[...]" hid GPUs between).
        (1, "NVIDIA H100 80GB HBM3", "00000000:8B:00.0", "96.00.89.00.01"),
    ]
    assert facts.driver_version is None


def test_query_csv_individual_reason_columns() -> None:
    """Without the .active mask, the per-reason Active/Not Active columns are read."""
    header, row = read("ugpuexp-h100-query-gpu-load.csv.txt").splitlines()
    names, cells = header.split(", "), row.split(", ")
    where = names.index("clocks_event_reasons.active")
    del names[where], cells[where]
    cells[names.index("clocks_event_reasons.sw_power_cap")] = "Active"
    gpu = only_gpu(parse_query_csv(", ".join(names) + "\n" + ", ".join(cells) + "\n"))
    assert gpu.clock_event_reasons == ["sw_power_cap"]


def test_query_csv_active_mask_decoded() -> None:
    text = read("ugpuexp-h100-query-gpu-load.csv.txt").replace(
        ", 0x00000000000001FF, 0x0000000000000000,", ", 0x00000000000001FF, 0x0000000000000041,"
    )
    gpu = only_gpu(parse_query_csv(text))
    assert gpu.clock_event_reasons == ["gpu_idle", "hw_thermal_slowdown"]


def test_query_csv_noheader_is_refused() -> None:
    data_only = read("ugpuexp-h100-query-gpu-load.csv.txt").splitlines()[1]
    with pytest.raises(ParseError, match="no header row"):
        parse_query_csv(data_only)


def test_query_csv_header_without_rows_is_refused() -> None:
    header_only = read("netdata-tesla-p100-query-gpu.csv.txt").splitlines()[0]
    with pytest.raises(ParseError, match="no data row"):
        parse_query_csv(header_only)


# --------------------------------------------------------------------------------------------
# nvidia-smi nvlink -s
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "gpus", "links", "gb_s", "version", "model"),
    [
        ("simllm-vastai-b200x8-nvlink-s.txt", 8, 18, 53.125, 5, "NVIDIA B200"),
        ("simllm-vastai-h200x8-nvlink-s.txt", 8, 18, 26.562, 4, "NVIDIA H200"),
        ("ugpuexp-h100-nvlink-s.txt", 1, 18, 26.562, 4, "NVIDIA H100 80GB HBM3"),
        ("simllm-perlmutter-a100x4-nvlink-s.txt", 4, 12, 25.0, 3, "NVIDIA A100-SXM4-40GB"),
        (
            "awsdt-efa-cheatsheet-p4de-a100-gpu0-nvlink-s.txt",
            1,
            12,
            25.0,
            3,
            "NVIDIA A100-SXM4-80GB",
        ),
    ],
)
def test_nvlink_status_all_links_up(
    name: str, gpus: int, links: int, gb_s: float, version: int, model: str
) -> None:
    status = parse_nvlink_status(read(name))
    assert status.supported is True
    assert status.reason is None
    assert [g.index for g in status.gpus] == list(range(gpus))
    for gpu in status.gpus:
        assert gpu.name == model
        assert gpu.links == [
            NvLink(link=i, active=True, speed_bytes_per_s=gb_s * 1e9) for i in range(links)
        ]
    assert nvlink_version_from_speed(gb_s) == version


def test_nvlink_status_b200_uuids() -> None:
    status = parse_nvlink_status(read("simllm-vastai-b200x8-nvlink-s.txt"))
    assert status.gpus[0].uuid == "GPU-7a60931d-6980-e5f3-cae1-ab76693070ef"
    assert status.gpus[7].uuid == "GPU-c2f46995-1b60-06cb-f173-b3dfc59a0824"


def test_nvlink_status_inactive_link() -> None:
    """Editing a real output: a link printed as <inactive> is down, with no speed."""
    text = read("simllm-vastai-b200x8-nvlink-s.txt").replace(
        "\t Link 5: 53.125 GB/s", "\t Link 5: <inactive>", 1
    )
    gpu0 = parse_nvlink_status(text).gpus[0]
    assert gpu0.links[5] == NvLink(link=5, active=False, speed_bytes_per_s=None)
    assert sum(link.active for link in gpu0.links) == 17


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        (
            "ugpuexp-h100-mig-nvlink-s.txt",
            "Nvlink queries are not supported for Devices in MIG mode",
        ),
        ("ugpuexp-l40s-nvlink-s-unsupported.txt", "Device does not have or support Nvlink"),
    ],
)
def test_nvlink_status_unsupported(name: str, reason: str) -> None:
    status = parse_nvlink_status(read(name))
    assert status.supported is False
    assert status.reason == reason
    assert [(g.index, g.links) for g in status.gpus] == [(0, [])]


def test_nvlink_version_unknown_speed() -> None:
    assert nvlink_version_from_speed(0.0) is None
    assert nvlink_version_from_speed(40.0) is None


def test_nvlink_status_rejects_other_output() -> None:
    with pytest.raises(ParseError, match="no 'GPU N"):
        parse_nvlink_status(read("ugpuexp-h100-query-gpu-load.csv.txt"))


# --------------------------------------------------------------------------------------------
# detect, serialisation, robustness
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_SMI)
def test_detect_names_the_parser(name: str) -> None:
    assert detect(read(name)) == KIND[name]


OTHER_FIXTURES = sorted(
    p for p in FIXTURES.glob("*/*") if p.parent.name != "smi" and p.suffix != ".md"
)


@pytest.mark.parametrize("path", OTHER_FIXTURES, ids=[p.name for p in OTHER_FIXTURES])
def test_detect_ignores_other_tools(path: Path) -> None:
    assert detect(path.read_text(errors="replace")) is None


def test_detect_ignores_empty_and_prose() -> None:
    assert detect("") is None
    assert detect("No devices were found\n") is None


@pytest.mark.parametrize("name", ALL_SMI)
def test_facts_round_trip_through_json_and_pydantic(name: str) -> None:
    kind = KIND[name]
    facts = PARSERS[kind](read(name))
    cls = NvlinkStatus if kind == "nvlink-s" else GpuFacts
    data = json.loads(json.dumps(asdict(facts)))  # type: ignore[call-overload]
    assert TypeAdapter(cls).validate_python(data) == facts


def test_q_and_csv_agree_on_the_same_h100() -> None:
    """Two formats of one H100 under load: only compute_cap (CSV only) and readings differ."""
    q = only_gpu(parse_q_text(read("ugpuexp-h100-q-load.txt")))
    csv_gpu = only_gpu(parse_query_csv(read("ugpuexp-h100-query-gpu-load.csv.txt")))
    assert (
        # The CSV has the T.Limit margin but no slowdown T.Limit column.
        replace(
            q,
            compute_capability="9.0",
            power_draw_w=631.95,
            memory_temperature_c=54.0,
            slowdown_tlimit_c=None,
        )
        == csv_gpu
    )


def assert_parse_or_parse_error(parser: Callable[[str], object], text: str) -> None:
    try:
        parser(text)
    except ParseError as exc:
        assert "\n" not in str(exc), "a ParseError message must be one line"


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_parsers_only_raise_parse_error_on_arbitrary_text(text: str) -> None:
    for parser in PARSERS.values():
        assert_parse_or_parse_error(parser, text)
    detect(text)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(ALL_SMI), cut=st.floats(0.0, 1.0))
def test_parsers_only_raise_parse_error_on_truncated_fixtures(name: str, cut: float) -> None:
    text = read(name)
    truncated = text[: int(len(text) * cut)]
    for parser in PARSERS.values():  # every parser, also on the other formats
        assert_parse_or_parse_error(parser, truncated)
    detect(truncated)


@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from(ALL_SMI),
    data=st.data(),
)
def test_parsers_only_raise_parse_error_on_spliced_fixtures(name: str, data: st.DataObject) -> None:
    """A fixture with one line replaced by arbitrary text."""
    lines = read(name).splitlines()
    where = data.draw(st.integers(0, len(lines) - 1))
    lines[where] = data.draw(st.text(alphabet=st.characters(codec="utf-8"), max_size=40))
    text = "\n".join(lines)
    for parser in PARSERS.values():
        assert_parse_or_parse_error(parser, text)
