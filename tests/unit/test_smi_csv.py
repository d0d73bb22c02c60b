"""`nvidia-smi --query-gpu --format=csv`: exact values pinned from real outputs (SOURCES.md)."""

from __future__ import annotations

import pytest

from bringup.node.gpu_facts import Gpu, RemappedRows
from bringup.node.parsers.smi_csv import parse_query_csv
from bringup.node.result import ParseError
from tests.support.smi_fixtures import MIB, only_gpu, read


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
        pcie_link_gen_max=5,  # pcie.link.gen.max: the link's, the host's side too
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
        fabric_clique_id=0,  # fabric.cliqueId
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
