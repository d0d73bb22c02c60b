"""Issue 25, parser hardening: Blackwell outputs as people really paste them, read as a
careful operator reads them (real captures in tests/fixtures/**, SOURCES.md there)."""

from __future__ import annotations

from bringup.findings import Finding, Status
from bringup.node.gpu_facts import RemappedRows
from bringup.node.parsers import smi_text
from bringup.node.probes import topology
from bringup.profile import load
from bringup.recognize import inspect_text, read_text
from tests.support import FIXTURES

NVLINK_7_OF_8 = FIXTURES / "smi" / "xe9780-b300x7-of-8-nvlink-status.txt"
DMON_4 = FIXTURES / "dmon" / "deepspeech-178-4gpu-pucvmet-load.txt"
DCGM_B200 = FIXTURES / "dcgm" / "dcgm-253-dcgm4.4.1-r2-b200x8-pcie-internal-error-fail.txt"


def by_check(findings: list[Finding], check: str) -> list[Finding]:
    return [f for f in findings if f.check == check]


# --- per-GPU listings judge the GPU count --------------------------------------------------


def test_a_7_gpu_nvlink_status_of_an_8_gpu_b300_board_fails_gpu_count() -> None:
    # On main: ACCEPTED (profile.auto PASS, gpu.nvlink PASS): the count was never judged.
    seen = inspect_text(read_text(NVLINK_7_OF_8), "auto")
    assert (seen.kind, seen.profile) == ("nvlink", "b300")
    assert [(f.check, f.status) for f in seen.findings] == [
        ("profile.auto", Status.PASS),
        ("gpu.count", Status.FAIL),
        ("gpu.nvlink", Status.PASS),
    ]
    (count,) = by_check(seen.findings, "gpu.count")
    assert (count.message, count.value) == ("7 GPUs, expected 8", 7)
    (links,) = by_check(seen.findings, "gpu.nvlink")
    assert links.message == "7/7 GPUs: 18/18 NVLink 5 links active"
    assert [g.index for g in seen.facts.gpus] == list(range(7))
    assert {g.name for g in seen.facts.gpus} == {"NVIDIA B300 SXM6 AC"}


def test_a_dmon_series_judges_the_gpu_count_of_the_profile_given() -> None:
    seen = inspect_text(read_text(DMON_4), load("a100"))
    (count,) = by_check(seen.findings, "gpu.count")
    assert (count.status, count.message) == (Status.FAIL, "4 GPUs, expected 8")


# --- the driver floor is judged by the driver version --------------------------------------

CSV_7_OF_8 = FIXTURES / "smi" / "xe9780-b300x7-of-8-driver-name-cc.csv.txt"


def test_a_driver_name_cc_csv_is_judged_by_its_driver_version() -> None:
    # On main: gpu.driver ERROR "CUDA version not reported".
    seen = inspect_text(read_text(CSV_7_OF_8), "auto")
    assert seen.profile == "b300"
    (driver,) = by_check(seen.findings, "gpu.driver")
    assert (driver.status, driver.value) == (Status.PASS, "610.57.04")
    assert driver.message == (
        "driver 610.57.04: >= 580.65.06 (the output names no CUDA version; a driver >= "
        "580.65.06 supports CUDA >= 12.9)"
    )
    (count,) = by_check(seen.findings, "gpu.count")
    assert (count.status, count.message) == (Status.FAIL, "7 GPUs, expected 8")
    assert [(g.name, g.compute_capability) for g in seen.facts.gpus] == [
        ("NVIDIA B300 SXM6 AC", "10.3")
    ] * 7


def test_an_old_driver_alone_still_fails_the_floor() -> None:
    # The same real CSV with an older driver in every row (derived here, not a fixture).
    text = read_text(CSV_7_OF_8).replace("610.57.04", "575.57.08")
    (driver,) = by_check(inspect_text(text, "auto").findings, "gpu.driver")
    assert (driver.status, driver.message) == (
        Status.FAIL,
        "driver 575.57.08, expected >= 580.65.06",
    )


# --- -q pastes: human annotations, Unknown Error, a bus-id selection ------------------------

ANNOTATED_Q = FIXTURES / "smi" / "gpu-uncorrectable-runbook-q-ecc-rowremap-i-52-annotated.txt"


def test_an_annotated_q_paste_with_a_pending_remap_fails_remapped_rows() -> None:
    # On main: ERROR "could not parse ... got 'Yes <==='" (advice: install the driver).
    seen = inspect_text(read_text(ANNOTATED_Q), load("h100"))
    (gpu,) = seen.facts.gpus
    assert (gpu.pci_bus_id, gpu.by_bus_id, gpu.remapped_rows) == (
        "00000000:52:00.0",
        True,
        RemappedRows(correctable=0, uncorrectable=1, pending=True, failure=False),
    )
    rows = by_check(seen.findings, "gpu.remapped_rows")
    assert [(f.status, f.message) for f in rows] == [
        (Status.FAIL, "GPU 00000000:52:00.0: row remap pending"),
        (Status.WARN, "GPU 00000000:52:00.0: 1 row remapped for uncorrectable errors"),
    ]
    assert "`nvidia-smi -r -i 00000000:52:00.0`" in rows[0].action


def test_ecc_mode_unknown_error_is_flagged_not_skipped() -> None:
    # On main (arrow removed): SKIP "ECC not reported".
    seen = inspect_text(read_text(ANNOTATED_Q), load("h100"))
    (gpu,) = seen.facts.gpus
    assert gpu.ecc_mode is None
    assert gpu.unreadable == ["ECC Mode Current", "ECC Mode Pending"]
    (ecc,) = by_check(seen.findings, "gpu.ecc")
    assert (ecc.status, ecc.message) == (
        Status.FAIL,
        "GPU 00000000:52:00.0: the GPU cannot report ECC Mode Current, ECC Mode Pending "
        "(Unknown Error)",
    )
    assert ecc.action.startswith("reset GPU 00000000:52:00.0 (`nvidia-smi -r -i 00000000:52:00.0`)")


def test_any_unknown_error_is_its_check_s_fail_not_a_skip() -> None:
    # The same real paste with its Remapped Rows answered "Unknown Error" (derived here, not
    # a fixture): gpu.remapped_rows FAILs instead of "not reported".
    text = read_text(ANNOTATED_Q).replace(
        "Uncorrectable Error               : 1", "Uncorrectable Error               : Unknown Error"
    )
    (rows,) = by_check(inspect_text(text, load("h100")).findings, "gpu.remapped_rows")
    assert (rows.status, rows.message) == (
        Status.FAIL,
        "GPU 00000000:52:00.0: the GPU cannot report Remapped Rows Uncorrectable Error "
        "(Unknown Error)",
    )


def test_a_bus_id_selection_is_not_called_gpu_0() -> None:
    seen = inspect_text(read_text(ANNOTATED_Q), load("h100"))
    named = [f.message for f in seen.findings if f.message.startswith("GPU ")]
    assert named and all(m.startswith("GPU 00000000:52:00.0") for m in named)
    (count,) = by_check(seen.findings, "gpu.count")
    assert (count.status, count.message) == (
        Status.WARN,
        "8 GPUs as expected (8 attached, only 1 listed: the others were not judged)",
    )


def test_a_whole_q_listing_keeps_its_indices() -> None:
    # Every attached GPU shown: the place of a section is nvidia-smi's index, as before.
    facts = smi_text.parse_q_text(read_text(FIXTURES / "smi" / "ugpuexp-h100-q-idle.txt"))
    assert [(g.index, g.by_bus_id, g.unreadable) for g in facts.gpus] == [(0, False, [])]


# --- topo -m as environment dumps paste it --------------------------------------------------

SGLANG_B300_TOPO = (
    FIXTURES / "topo" / "sglang-26039-b300x8-check-env-tabs-esc-less-ansi-9nic-bond.txt"
)


def test_a_check_env_topo_with_esc_less_ansi_is_read_whole() -> None:
    # On main: no header found (the header row starts "[4mGPU0"), 0 NICs, no legend, and
    # one profile.auto ERROR "topo -m names no GPU model".
    facts = topology.parse_topo(read_text(SGLANG_B300_TOPO))
    assert (facts.gpu_count, facts.min_nvlinks, facts.complete) == (8, 18, True)
    assert facts.gpu_models == ["NVIDIA B300 SXM6 AC"]
    assert facts.nics == [*(f"mlx5_{n}" for n in range(10, 18)), "mlx5_bond_0"]
    rails = facts.nic_details[:8]
    assert [
        (n.column, n.nearest_gpus, n.links[f"GPU{i}"], n.bonded) for i, n in enumerate(rails)
    ] == [(f"NIC{i}", [i], "PXB", False) for i in range(8)]
    bond = facts.nic_details[8]
    assert (bond.column, bond.name, bond.nearest_gpus, bond.bonded) == (
        "NIC8",
        "mlx5_bond_0",
        [],
        True,
    )
    assert set(bond.links.values()) == {"SYS", "NODE"}
    assert [(g.cpu_affinity, g.numa_affinity, g.gpu_numa_id) for g in facts.gpus] == [
        ("0-63,128-191", "0", None)
    ] * 4 + [("64-127,192-255", "1", None)] * 4
    assert facts.notes == []


def test_the_gpu_names_above_the_matrix_pick_the_profile() -> None:
    seen = inspect_text(read_text(SGLANG_B300_TOPO), "auto")
    assert (seen.kind, seen.profile) == ("topo", "b300")
    assert [(f.check, f.status) for f in seen.findings] == [
        ("profile.auto", Status.PASS),
        ("topology.gpu_count", Status.PASS),
        ("topology.nvlink", Status.PASS),
        ("topology.nic_affinity", Status.PASS),
    ]
    (nics,) = by_check(seen.findings, "topology.nic_affinity")
    assert nics.message == "8/8 GPUs have a NIC at PIX/PXB"


# --- inspect says what it read ------------------------------------------------------------


def test_inspect_reads_back_model_count_nics_and_tests() -> None:
    # On main, inspect printed only the kind ("file: nvlink").
    read = {
        path.name: inspect_text(read_text(path), "auto").read
        for path in (NVLINK_7_OF_8, CSV_7_OF_8, ANNOTATED_Q, SGLANG_B300_TOPO, DCGM_B200)
    }
    assert read == {
        NVLINK_7_OF_8.name: "7 GPUs (NVIDIA B300 SXM6 AC)",
        CSV_7_OF_8.name: "7 GPUs (NVIDIA B300 SXM6 AC), driver 610.57.04",
        ANNOTATED_Q.name: "1 of 8 GPUs at 00000000:52:00.0, driver 550.90.07",
        SGLANG_B300_TOPO.name: "8 GPUs (NVIDIA B300 SXM6 AC), 9 NICs (1 bonded)",
        DCGM_B200.name: "DCGM 4.4.1, 8 GPUs (2901), tests: software, memory, pcie",
    }
    assert inspect_text(read_text(DMON_4), load("a100")).read == "4 GPUs, 4 samples"


def test_one_gpu_per_line_above_the_matrix_names_the_model_too() -> None:
    # vLLM's collect_env prints "GPU 0: NVIDIA B200" one line per GPU; the real sglang
    # paste with its "GPU 0,1,...,7:" line in that form (derived here, not a fixture).
    lines = read_text(SGLANG_B300_TOPO).replace(
        "GPU 0,1,2,3,4,5,6,7: NVIDIA B300 SXM6 AC\n",
        "".join(f"GPU {i}: NVIDIA B300 SXM6 AC\n" for i in range(8)),
    )
    facts = topology.parse_topo(lines)
    assert facts.gpu_models == ["NVIDIA B300 SXM6 AC"]
    assert topology.parse_topo(lines.replace("NVIDIA B300 SXM6 AC", "x", 8)).gpu_models == ["x"]
