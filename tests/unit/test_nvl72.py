"""Blackwell as it really prints: GB200/GB300 NVL72 compute trays, GPUs named by their PCI
device id, NCCL floors by rank count and scope, and what is judged without a profile.

Every capture is real (tests/fixtures/smi/SOURCES.md, tests/fixtures/nccl/SOURCES.md):
NVIDIA/k8s-test-infra's real-hardware `nvidia-smi -q -x` of a 4x GB200 and a 4x GB300 tray
and an 8x B200 board, and CoreWeave's GB200 NVL72 nccl-tests results.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from bringup.checks.auto import NO_PROFILE, judge_gpu_model, judge_node_model
from bringup.checks.catalog import CHECKS, judge_probe
from bringup.facts import NodeFacts, ProbeRecord
from bringup.findings import Finding, Status
from bringup.node import gpu_ids
from bringup.node.gpu_facts import GpuFacts
from bringup.node.parsers.smi_xml import parse_q_xml
from bringup.node.probes import dcgm as dcgm_probe
from bringup.node.probes.nccl import parse_nccl_tests
from bringup.profile import AUTO, available, for_gpu, load
from bringup.recognize import inspect_text, read_text, what_was_read
from tests.support import FIXTURES

GB200_XML = FIXTURES / "smi" / "k8stestinfra-gb200x4-580-q-x.xml"
GB300_XML = FIXTURES / "smi" / "k8stestinfra-gb300x4-580-q-x.xml"
B200_XML = FIXTURES / "smi" / "k8stestinfra-b200x8-580-q-x.xml"
NVL72_1RACK = FIXTURES / "nccl" / "coreweave-gb200-nvl72-72rank-1rack-trimmed.txt"
NVL72_2RACK = FIXTURES / "nccl" / "coreweave-gb200-nvl72-144rank-2rack-trimmed.txt"
NVL72_20RACK = FIXTURES / "nccl" / "coreweave-gb200-nvl72-1440rank-20rack-trimmed.txt"
DGX2 = FIXTURES / "nccl" / "dgx2-v100x12-allgather-oldfmt-0e00-failed.txt"
MIB = 1 << 20


def xml(path: object) -> GpuFacts:
    return parse_q_xml(read_text(path))  # type: ignore[arg-type]


def summary(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.check, f.status.value) for f in findings]


# --- the captures, as parsed ---------------------------------------------------------------


def test_gb200_tray_capture_pins_what_an_operator_reads() -> None:
    facts = xml(GB200_XML)
    assert (facts.driver_version, facts.cuda_driver_version, facts.attached_gpus) == (
        "580.173.02",
        "13.0",
        4,
    )
    assert [g.pci_bus_id for g in facts.gpus] == [
        "00000000:29:00.0",
        "00000000:3F:00.0",
        "00000000:9C:00.0",
        "00000000:B2:00.0",
    ]
    for gpu in facts.gpus:
        assert (gpu.name, gpu.pci_device_id, gpu.memory_total_bytes) == (
            "NVIDIA GB200",
            "0x2941",
            189471 * MIB,
        )
        assert (gpu.power_default_limit_w, gpu.power_limit_w) == (1200.0, 1200.0)
        # The GPU is Gen6, the Grace host's root port Gen5: the link's maximum is 5.
        assert (gpu.pcie_gen_max, gpu.pcie_link_gen_max, gpu.pcie_gen_current) == (6, 5, 5)
        assert (gpu.fabric_state, gpu.fabric_status, gpu.fabric_clique_id) == (
            "completed",
            "success",
            2,
        )
        assert (gpu.slowdown_tlimit_c, gpu.memory_max_tlimit_c) == (-2.0, 0.0)
    assert [g.tlimit_margin_c for g in facts.gpus] == [60.0, 59.0, 60.0, 61.0]


def test_gb300_tray_capture_pins_what_an_operator_reads() -> None:
    facts = xml(GB300_XML)
    assert (facts.driver_version, facts.attached_gpus) == ("580.173.02", 4)
    for gpu in facts.gpus:
        assert (gpu.name, gpu.pci_device_id, gpu.memory_total_bytes) == (
            "NVIDIA GB300",
            "0x31c2",
            284208 * MIB,
        )
        assert gpu.power_default_limit_w == 1400.0
        assert (gpu.pcie_gen_max, gpu.pcie_link_gen_max, gpu.pcie_gen_current) == (6, 6, 6)
        assert (gpu.fabric_state, gpu.fabric_status, gpu.fabric_clique_id) == (
            "completed",
            "success",
            32766,
        )


# --- a healthy tray is judged by its own profile, with no FAIL ------------------------------

TRAY = [
    ("profile.auto", "PASS"),
    ("gpu.count", "PASS"),
    ("gpu.model", "PASS"),
    ("gpu.driver", "PASS"),
    ("gpu.persistence", "PASS"),
    ("gpu.ecc", "PASS"),
    ("gpu.remapped_rows", "PASS"),
    ("gpu.pcie", "PASS"),
    ("gpu.power", "PASS"),
    ("gpu.thermal", "PASS"),
    ("gpu.clock_events", "PASS"),
    ("gpu.nvlink", "SKIP"),  # -q -x has no link states
    ("gpu.fabric", "PASS"),
    ("gpu.imex", "SKIP"),  # -q -x does not show IMEX: judged on the node (tests/unit/test_imex.py)
]


def test_a_healthy_gb200_tray_is_judged_by_gb200_with_no_fail() -> None:
    result = inspect_text(read_text(GB200_XML), AUTO)
    assert result.profile == "gb200"
    assert summary(result.findings) == TRAY
    by = {f.check: f for f in result.findings}
    assert by["profile.auto"].message == "judged by profile gb200: the GPU is 'NVIDIA GB200'"
    assert by["gpu.count"].message == "4 GPUs, as expected"
    assert by["gpu.model"].message == "4/4 GPUs: NVIDIA GB200, >= 187576 MiB"
    assert by["gpu.power"].message == "4/4 GPUs: power limit >= 1200 W, not lowered"
    # Gen5 is the Grace host link's maximum: full speed, not "not judged at idle (max Gen6)".
    assert by["gpu.pcie"].message == "4/4 GPUs: PCIe x16, Gen6 capable (Gen5 host link)"
    assert by["gpu.fabric"].message == "4/4 GPUs: fabric registration completed (clique 2)"
    # The HBM limit is read: given on the T.Limit scale, said so, not "not reported".
    assert by["gpu.thermal"].message == (
        "4/4 GPUs: hottest GPU 1 at 28 C, >= 10 C below the slowdown limit (HBM limit given "
        "on the T.Limit scale only (0 C): not comparable with an HBM temperature)"
    )


def test_a_healthy_gb300_tray_is_judged_by_gb300_with_no_fail() -> None:
    result = inspect_text(read_text(GB300_XML), AUTO)
    assert result.profile == "gb300"
    assert summary(result.findings) == TRAY
    by = {f.check: f for f in result.findings}
    assert by["gpu.model"].message == "4/4 GPUs: NVIDIA GB300, >= 281365 MiB"
    assert by["gpu.power"].message == "4/4 GPUs: power limit >= 1400 W, not lowered"
    assert by["gpu.pcie"].message == "4/4 GPUs: PCIe x16, Gen6 capable"
    assert by["gpu.driver"].message == "driver 580.173.02 (CUDA 13.0): >= 580.65.06 (CUDA 12.9)"


def test_an_hgx_b200_board_is_still_judged_by_b200() -> None:
    result = inspect_text(read_text(B200_XML), AUTO)
    assert result.profile == "b200"
    statuses = Counter((f.check, f.status) for f in result.findings)
    # Persistence mode is off on all 8 (what the capture shows); nothing fails.
    assert statuses[("gpu.persistence", Status.WARN)] == 8
    assert not [f for f in result.findings if f.status in (Status.FAIL, Status.ERROR)]


# --- Grace host link, fabric clique ---------------------------------------------------------


def _busy(facts: GpuFacts, **changes: object) -> GpuFacts:
    """The capture's GPUs as if under load (no idle reason), with `changes` laid on GPU 0."""
    gpus = [dataclasses.replace(g, clock_event_reasons=[]) for g in facts.gpus]
    gpus[0] = dataclasses.replace(gpus[0], **changes)
    return dataclasses.replace(facts, gpus=gpus)


def test_grace_host_link_gen5_is_full_speed_under_load() -> None:
    gb200 = load("gb200")
    busy = judge_probe("gpu", _busy(xml(GB200_XML)), None, gb200)
    assert [f.status for f in busy if f.check == "gpu.pcie"] == [Status.PASS]
    # Below the host link's Gen5 while busy: the FAIL names Gen5, not the device's Gen6.
    slow = judge_probe("gpu", _busy(xml(GB200_XML), pcie_gen_current=4), None, gb200)
    (fail,) = [f for f in slow if f.check == "gpu.pcie" and f.status is Status.FAIL]
    assert fail.message.endswith("PCIe Gen4 while busy, expected Gen5")


def test_a_host_link_below_the_platform_s_generation_warns() -> None:
    # A B200 whose slot caps the link at Gen4: the host side, named.
    facts = _busy(xml(B200_XML), pcie_link_gen_max=4, pcie_gen_current=4)
    found = [f for f in judge_probe("gpu", facts, None, load("b200")) if f.check == "gpu.pcie"]
    assert [(f.status, f.value) for f in found if f.status is not Status.PASS] == [(Status.WARN, 4)]
    assert "PCIe link max Gen4 (the host side), expected Gen5" in found[0].message


def test_a_tray_outside_any_clique_fails_gpu_fabric_but_an_hgx_board_does_not() -> None:
    tray = _busy(xml(GB200_XML), fabric_clique_id=0)
    (fail,) = [
        f
        for f in judge_probe("gpu", tray, None, load("gb200"))
        if f.check == "gpu.fabric" and f.status is Status.FAIL
    ]
    assert fail.message.endswith("fabric registration completed but clique 0")
    assert "nvidia-imex" in (fail.action or "")
    # HGX B200 reports clique 0 (no multi-node NVLink): that is its normal state.
    board = [f for f in judge_probe("gpu", xml(B200_XML), None, load("b200"))]
    assert [f.status for f in board if f.check == "gpu.fabric"] == [Status.PASS]


# --- GPUs named by their PCI device id ------------------------------------------------------


def test_every_profile_s_device_id_is_in_the_pci_ids_table_and_maps_to_it() -> None:
    for name in available():
        profile = load(name)
        assert gpu_ids.profile_name(profile.gpu.pci_device_id) == name, name
    # Names as pci.ids has them (pciutils/pciids @c1c12547).
    assert {i: gpu_ids.pci_name(i) for i in ("0x2941", "0x31c2", "0x3182", "0x2901")} == {
        "0x2941": "GB100 [HGX GB200]",
        "0x31c2": "GB110 [GB300]",
        "0x3182": "GB110 [B300 SXM6 AC]",
        "0x2901": "GB100 [B200]",
    }
    assert gpu_ids.normal("0x294110DE") == gpu_ids.normal("2941") == "0x2941"
    assert gpu_ids.normal("290") is None  # DCGM's header cut at its cell width
    assert all(p is None or p in available() for _, p in gpu_ids.DEVICE_IDS.values())


def test_a_graphics_device_gets_its_profile_from_its_device_id() -> None:
    """A driver older than the GPU prints "NVIDIA Graphics Device"; the id names it."""
    facts = xml(GB200_XML)
    generic = dataclasses.replace(
        facts,
        gpus=[dataclasses.replace(g, name="NVIDIA Graphics Device") for g in facts.gpus],
    )
    chosen, said = judge_gpu_model("NVIDIA Graphics Device", device_id="0x2941")
    assert chosen is not None and chosen.name == "gb200"
    assert said.message == (
        "judged by profile gb200: the GPU is 'NVIDIA Graphics Device', PCI device id 0x2941 "
        "(pci.ids: GB100 [HGX GB200])"
    )
    model = [f for f in judge_probe("gpu", generic, None, chosen) if f.check == "gpu.model"]
    assert summary(model) == [("gpu.model", "PASS")]
    # A name of its own is the driver's word: never overruled by the id.
    assert for_gpu("NVIDIA L40S", "0x2941") is None


def test_a_graphics_device_no_profile_knows_is_an_error_naming_its_id() -> None:
    chosen, said = judge_gpu_model("NVIDIA Graphics Device", device_id="0x307F10DE")
    assert chosen is None and said.status is Status.ERROR
    assert said.message.startswith(
        "GPU model 'NVIDIA Graphics Device', PCI device id 0x307f (not in bringup's table of "
        "data-center GPUs) matches no profile"
    )


def test_a_graphics_device_without_an_id_says_so() -> None:
    # CoreWeave's 72-rank run: nccl-tests names the GPU, not its PCI id.
    result = inspect_text(read_text(NVL72_1RACK), AUTO)
    said, busbw = result.findings
    assert (said.check, said.status) == ("profile.auto", Status.ERROR)
    assert said.message.startswith(
        "GPU model 'NVIDIA Graphics Device' is how a driver older than the GPU names it, and "
        "the output carries no PCI device id to tell which GPU it is"
    )
    # Its values were still checked (no #wrong): what needs a profile is not judged.
    assert (busbw.check, busbw.status) == ("nccl.allreduce_busbw", Status.SKIP)
    assert busbw.message.startswith("no profile fits these GPUs: busbw not judged")


# --- NCCL: ranks and nodes of trimmed lists, floors by rank count and scope -----------------


@pytest.mark.parametrize(
    ("path", "nranks", "nodes"),
    [(NVL72_1RACK, 72, 18), (NVL72_2RACK, 144, 36), (NVL72_20RACK, 1440, 360)],
)
def test_a_trimmed_device_list_counts_ranks_from_the_highest_rank(
    path: object, nranks: int, nodes: int
) -> None:
    facts = parse_nccl_tests(read_text(path))  # type: ignore[arg-type]
    # One line shown: `#  Rank 71 ... device  3`: 72 ranks, 4 GPUs a tray, 18 trays.
    assert (facts.nranks, facts.nodes, facts.devices_trimmed, len(facts.devices)) == (
        nranks,
        nodes,
        True,
        1,
    )
    assert facts.collective == "all_reduce"  # its bus factor 2(n-1)/n, with the right n


def test_72_ranks_in_one_rack_pass_the_nvl72_floor() -> None:
    result = inspect_text(read_text(NVL72_1RACK), load("gb200"))
    (found,) = result.findings
    assert (found.status, found.value) == (Status.PASS, 846.82)
    assert (
        "floor 800 GB/s over 72 ranks on 18 nodes, inside one NVLink domain of 72 GPUs "
        "(device list trimmed: 1 of 72 ranks shown, nodes estimated from its device numbers)"
    ) in found.message


def test_jobs_across_racks_are_not_held_to_the_nvlink_floor() -> None:
    for path in (NVL72_2RACK, NVL72_20RACK):
        result = inspect_text(read_text(path), load("gb200"))
        (found,) = result.findings
        assert found.status is Status.SKIP, found.message
        assert ", across NVLink domains" in found.message
        assert "nccl.allreduce_busbw_multinode_min_gb_s" in found.message
    # The 20-rack run names its GPUs: auto finds gb200 by name.
    auto = inspect_text(read_text(NVL72_20RACK), AUTO)
    assert auto.profile == "gb200"
    assert summary(auto.findings) == [("profile.auto", "PASS"), ("nccl.allreduce_busbw", "SKIP")]


OCI = FIXTURES / "nccl"
GB300_4 = OCI / "oci-gb300-4rank-1node-allreduce-truncated.txt"
GB300_8 = OCI / "oci-gb300-8rank-2node-1rack-allreduce-trimmed.txt"
GB300_64 = OCI / "oci-gb300-64rank-16node-1rack-allreduce-trimmed.txt"
GB300_128 = OCI / "oci-gb300-128rank-32node-2rack-allreduce-trimmed.txt"
GB300_A2A = OCI / "oci-gb300-128rank-32node-2rack-alltoall-trimmed.txt"
GB200_4 = OCI / "oci-gb200-4rank-1node-graphics-device-allreduce-truncated.txt"


@pytest.mark.parametrize(
    ("path", "collective", "nranks", "nodes", "trimmed", "peak"),
    [
        (GB300_4, "all_reduce", 4, 1, False, 685.27e9),
        # Ranks 0, 1, 6, 7 shown with "..." between: 8 ranks on 2 trays.
        (GB300_8, "all_reduce", 8, 2, True, 842.11e9),
        (GB300_64, "all_reduce", 64, 16, True, 930.60e9),
        (GB300_128, "all_reduce", 128, 32, True, 739.99e9),
        (GB300_A2A, "alltoall", 128, 32, True, 47.67e9),
        (GB200_4, "all_reduce", 4, 1, False, 663.34e9),
    ],
)
def test_oci_runs_give_their_rank_and_node_counts(
    path: object, collective: str, nranks: int, nodes: int, trimmed: bool, peak: float
) -> None:
    facts = parse_nccl_tests(read_text(path))  # type: ignore[arg-type]
    assert (facts.collective, facts.nranks, facts.nodes, facts.devices_trimmed) == (
        collective,
        nranks,
        nodes,
        trimmed,
    )
    assert facts.peak_busbw_bytes_per_s == peak


def test_a_healthy_four_gpu_gb300_all_reduce_passes_its_tray_floor() -> None:
    """685.27 GB/s over the 4 GPUs of one tray: not "< 800 GB/s" (the 8-GPU board's floor)."""
    result = inspect_text(read_text(GB300_4), AUTO)
    assert result.profile == "gb300"
    _, found = result.findings
    assert (found.status, found.value) == (Status.PASS, 685.27)
    assert (
        "4-rank floor 650 GB/s over 4 ranks on 1 node, inside one NVLink domain of 72 GPUs"
    ) in found.message


def test_a_rack_s_trays_together_are_held_to_the_rack_floor() -> None:
    for path, busbw in ((GB300_8, 842.11), (GB300_64, 930.6)):
        (_, found) = inspect_text(read_text(path), AUTO).findings
        assert (found.status, found.value) == (Status.PASS, busbw)
        assert "8-rank floor 800 GB/s over " in found.message
        assert "inside one NVLink domain of 72 GPUs (device list trimmed: 4 of " in found.message


def test_two_racks_cross_domains_and_alltoall_is_never_held_to_all_reduce() -> None:
    (_, all_reduce) = inspect_text(read_text(GB300_128), AUTO).findings
    assert all_reduce.status is Status.SKIP
    assert all_reduce.message.startswith(
        "32-node job over 128 ranks on 32 nodes, across NVLink domains (device list trimmed: "
        "4 of 128 ranks shown, nodes estimated from its device numbers): the profile has no "
        "multi-node floor"
    )
    (_, alltoall) = inspect_text(read_text(GB300_A2A), AUTO).findings
    assert alltoall.status is Status.SKIP
    assert alltoall.message.startswith("no floor for alltoall in the profile")


def test_an_hgx_job_smaller_than_its_board_has_no_published_floor() -> None:
    # The issue's case: b300 forced on the 4-GPU GB300 run FAILed "< 800 GB/s" (8 ranks').
    (found,) = inspect_text(read_text(GB300_4), load("b300")).findings
    assert found.status is Status.SKIP
    assert found.message.startswith("4-rank job over 4 ranks: the profile has no floor for 4")


# --- judged without a profile ---------------------------------------------------------------


def test_wrong_values_fail_on_hardware_no_profile_knows() -> None:
    # 12x Tesla V100 (DGX-2), "# Out of bounds values : 4 FAILED": no profile fits a V100.
    result = inspect_text(read_text(DGX2), AUTO)
    assert summary(result.findings) == [
        ("profile.auto", "ERROR"),
        ("nccl.allreduce_busbw", "FAIL"),
        ("nccl.allreduce_busbw", "SKIP"),
    ]
    assert "returned wrong values: 4 out of bounds" in result.findings[1].message


def test_the_profile_free_checks_read_no_profile() -> None:
    """NO_PROFILE raises on any use: a profile-free check that read one would crash."""
    gpu = xml(GB200_XML)
    pending = dataclasses.replace(
        gpu.gpus[1],
        remapped_rows=dataclasses.replace(gpu.gpus[1].remapped_rows, pending=True),  # type: ignore[type-var]
    )
    broken = dataclasses.replace(gpu, gpus=[gpu.gpus[0], pending, *gpu.gpus[2:]])
    found = judge_probe("gpu", broken, None, NO_PROFILE, profile_free_only=True)
    # gpu.imex has nothing to say without an IMEX domain (a -q -x shows none).
    assert {f.check for f in found} == {
        c.name for c in CHECKS if c.probe == "gpu" and c.profile_free and c.name != "gpu.imex"
    }
    assert not [f for f in found if f.message.startswith("check crashed")]
    assert [f.check for f in found if f.status is Status.FAIL] == ["gpu.remapped_rows"]
    nccl = parse_nccl_tests(read_text(NVL72_1RACK))
    judged = judge_probe("nccl", nccl, None, NO_PROFILE, profile_free_only=True)
    assert summary(judged) == [("nccl.allreduce_busbw", "SKIP")]


# --- inspect says what it read ----------------------------------------------------------------


def test_inspect_says_what_it_read() -> None:
    facts = xml(GB200_XML)
    assert what_was_read(facts) == "4 GPUs (NVIDIA GB200), driver 580.173.02"
    generic = dataclasses.replace(
        facts, gpus=[dataclasses.replace(g, name="NVIDIA Graphics Device") for g in facts.gpus]
    )
    assert what_was_read(generic) == (
        "4 GPUs (NVIDIA Graphics Device), PCI device id 0x2941, driver 580.173.02"
    )
    assert what_was_read(parse_nccl_tests(read_text(NVL72_1RACK))) == (
        "all_reduce, 72 ranks on 18 nodes, device list trimmed (1 of 72 ranks shown), "
        "NVIDIA Graphics Device"
    )


def _dcgm_only_node(capture: str) -> NodeFacts:
    facts = dcgm_probe.facts_from_output(read_text(FIXTURES / "dcgm" / capture))
    record = ProbeRecord(probe="dcgm", ok=True, facts=dataclasses.asdict(facts))
    return NodeFacts(node="n1", bringup_version="0", collected_at="", probes={"dcgm": record})


def test_dcgm_s_device_id_list_identifies_the_gpu() -> None:
    # "GPU Device IDs Detected | 20b2,20b2,...": eight A100 SXM4 80GB by pci.ids.
    chosen, said = judge_node_model(
        _dcgm_only_node("awsdt-efa-cheatsheet-p4de-a100x8-dcgm3.3.3-r2-pass.txt")
    )
    assert chosen is not None and chosen.name == "a100"
    assert said.message == (
        "judged by profile a100: the GPU is PCI device id 0x20b2 (pci.ids: GA100 [A100 SXM4 80GB])"
    )
    # "2237": an A10G, no data-center profile: the ERROR names the id.
    chosen, said = judge_node_model(
        _dcgm_only_node("dcgm-124-dcgm4.4.2-r2-single-gpu-pass-newfmt.txt")
    )
    assert chosen is None
    assert said.message.startswith(
        "GPU with PCI device id 0x2237 (not in bringup's table of data-center GPUs) matches no "
        "profile"
    )
