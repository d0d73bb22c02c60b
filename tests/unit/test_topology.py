"""The topology probe's parser (real `nvidia-smi topo -m` outputs) and the topology checks."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bringup.checks import topology as checks
from bringup.facts import validate_facts
from bringup.findings import Expected, Finding, Status
from bringup.node.gpu_facts import Gpu, GpuFacts, NvLink
from bringup.node.probes.topology import TopologyFacts, TopoPair, parse_topo
from bringup.node.result import ParseError
from bringup.profile import Profile, load
from bringup.profile import parse as parse_profile

FIXTURES = Path(__file__).parent.parent / "fixtures" / "topo"
ALL_FIXTURES = sorted(p.name for p in FIXTURES.glob("*.txt"))

H200 = "simllm-vastai-h200x8-8nic.txt"
B200 = "simllm-vastai-b200x8-no-nic.txt"
A100_NV4 = "simllm-perlmutter-a100x4-nv4.txt"
H100_SPACES = "sglang-30401-h100x8-8nic-spaces.txt"
P4D = "eksdoc-aws-p4d-a100x8-nv12-nonic.txt"
RTX4090 = "gpuallocator-17-rtx4090x8-pcie-sys-nolegend.txt"
HPC_A100 = "hpcdoc-hgx-a100x8-mlx5col-drv495.txt"
DELLA = "princeton-della-a100pcie-x2-sys.txt"
DGX1 = "rsesheffield-dgx1-p100x8-soc-legacy.txt"
ONE_GPU = "ugpuexp-h100-1gpu-vm-ansi-header.txt"
VLLM = "vllm-16336-b200x8-degraded-gpu2-no-nvlink-TRUNCATED.txt"

MLX5_0_TO_7 = [f"mlx5_{i}" for i in range(8)]


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def parse(name: str) -> TopologyFacts:
    return parse_topo(text(name))


def pair(facts: TopologyFacts, a: int, b: int) -> str:
    """The link printed between GPU a and GPU b."""
    (found,) = [p.link for p in facts.pairs if (p.a, p.b) == (min(a, b), max(a, b))]
    return found


# --- the parser, fixture by fixture -------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "gpu_count", "min_nvlinks", "nics", "complete"),
    [
        (H200, 8, 18, MLX5_0_TO_7, True),
        (B200, 8, 18, [], True),
        (A100_NV4, 4, 4, [], True),
        (H100_SPACES, 8, 18, MLX5_0_TO_7, True),
        (P4D, 8, 12, [], True),
        (RTX4090, 8, 0, ["NIC0", "NIC1"], True),
        (HPC_A100, 8, 12, ["mlx5_0"], True),
        (DELLA, 2, 0, ["mlx5_0", "mlx5_1"], True),
        (DGX1, 8, 0, ["mlx5_0", "mlx5_2", "mlx5_1", "mlx5_3"], True),
        (ONE_GPU, 1, 0, [], True),
        (VLLM, 6, 0, [], False),
    ],
)
def test_summary_of_every_fixture(
    name: str, gpu_count: int, min_nvlinks: int, nics: list[str], complete: bool
) -> None:
    facts = parse(name)
    assert facts.gpu_count == gpu_count
    assert facts.min_nvlinks == min_nvlinks
    assert facts.nics == nics
    assert facts.complete is complete
    assert [g.index for g in facts.gpus] == list(range(gpu_count))
    # Every unordered pair once, a < b.
    assert [(p.a, p.b) for p in facts.pairs] == [
        (a, b) for a in range(gpu_count) for b in range(a + 1, gpu_count)
    ]


def test_h200_tab_separated_with_nic_legend() -> None:
    facts = parse(H200)
    assert {p.link for p in facts.pairs} == {"NV18"}
    assert all(p.nvlinks == 18 for p in facts.pairs)
    assert [g.cpu_affinity for g in facts.gpus] == ["0-95"] * 4 + ["96-191"] * 4
    assert [g.numa_affinity for g in facts.gpus] == ["0"] * 4 + ["1"] * 4
    assert [g.gpu_numa_id for g in facts.gpus] == [None] * 8  # N/A
    assert [n.column for n in facts.nic_details] == [f"NIC{i}" for i in range(8)]
    assert [n.nearest_gpus for n in facts.nic_details] == [[i] for i in range(8)]
    nic0 = facts.nic_details[0]
    assert nic0.links == {
        "GPU0": "PIX",
        "GPU1": "NODE",
        "GPU2": "NODE",
        "GPU3": "NODE",
        "GPU4": "SYS",
        "GPU5": "SYS",
        "GPU6": "SYS",
        "GPU7": "SYS",
    }
    assert facts.notes == []


def test_space_aligned_h100_reads_like_the_tab_separated_h200() -> None:
    spaces, tabs = parse(H100_SPACES), parse(H200)
    assert spaces.pairs == tabs.pairs
    assert [n.links for n in spaces.nic_details] == [n.links for n in tabs.nic_details]
    assert [g.cpu_affinity for g in spaces.gpus] == ["0-47,96-143"] * 4 + ["48-95,144-191"] * 4
    assert [g.numa_affinity for g in spaces.gpus] == ["0"] * 4 + ["1"] * 4


def test_b200_without_nics() -> None:
    facts = parse(B200)
    assert {p.link for p in facts.pairs} == {"NV18"}
    assert facts.nic_details == []
    assert [g.cpu_affinity for g in facts.gpus] == ["0-47,96-143"] * 4 + ["48-95,144-191"] * 4


def test_perlmutter_nv4_numa_in_reverse_order() -> None:
    facts = parse(A100_NV4)
    assert {p.link for p in facts.pairs} == {"NV4"}
    assert [g.numa_affinity for g in facts.gpus] == ["3", "2", "1", "0"]
    assert [g.cpu_affinity for g in facts.gpus] == [
        "48-63,112-127",
        "32-47,96-111",
        "16-31,80-95",
        "0-15,64-79",
    ]


def test_p4d_with_prompt_line_all_nv12() -> None:
    facts = parse(P4D)
    assert {p.link for p in facts.pairs} == {"NV12"}
    assert facts.gpus[0].cpu_affinity == "0-23,48-71"
    assert facts.gpus[7].cpu_affinity == "24-47,72-95"
    assert facts.gpus[7].numa_affinity == "1"


def test_rtx4090_pcie_no_legend_nics_named_by_column() -> None:
    facts = parse(RTX4090)
    assert {p.link for p in facts.pairs} == {"SYS"}
    assert [n.column for n in facts.nic_details] == ["NIC0", "NIC1"]
    assert facts.nic_details[0].links["GPU6"] == "PHB"
    assert facts.nic_details[0].links["GPU0"] == "SYS"
    assert [n.nearest_gpus for n in facts.nic_details] == [[], []]
    assert facts.gpus[4].cpu_affinity == "56-111,168-223"
    assert facts.notes == ["no NIC Legend: NICs are named by their column (NIC0, ...)"]


def test_old_format_mlx5_column_without_gpu_numa_id() -> None:
    facts = parse(HPC_A100)
    (nic,) = facts.nic_details
    assert (nic.name, nic.column, nic.nearest_gpus) == ("mlx5_0", "mlx5_0", [2, 3])
    assert [g.numa_affinity for g in facts.gpus] == ["3", "3", "1", "1", "7", "7", "5", "5"]
    assert [g.cpu_affinity for g in facts.gpus][::2] == ["48-63", "16-31", "112-127", "80-95"]
    assert {g.gpu_numa_id for g in facts.gpus} == {None}


def test_della_two_pcie_gpus_after_two_prompt_lines() -> None:
    facts = parse(DELLA)
    assert facts.pairs == [TopoPair(0, 1, "SYS", 0)]
    assert [g.cpu_affinity for g in facts.gpus] == ["0-63", "64-127"]
    assert facts.nic_details[0].links == {"GPU0": "NODE", "GPU1": "SYS"}
    assert facts.nic_details[1].links == {"GPU0": "SYS", "GPU1": "NODE"}


def test_dgx1_mangled_header_soc_and_hybrid_cube_mesh() -> None:
    facts = parse(DGX1)
    assert sum(p.link == "NV1" for p in facts.pairs) == 16  # 4 NV1 per GPU, 8 GPUs
    assert sum(p.link == "SOC" for p in facts.pairs) == 12
    assert (pair(facts, 0, 1), pair(facts, 0, 4), pair(facts, 0, 5)) == ("NV1", "NV1", "SOC")
    assert (pair(facts, 3, 7), pair(facts, 3, 4)) == ("NV1", "SOC")
    assert [n.nearest_gpus for n in facts.nic_details] == [[0, 1], [4, 5], [2, 3], [6, 7]]
    assert {g.cpu_affinity for g in facts.gpus} == {"1-1"}
    assert {g.numa_affinity for g in facts.gpus} == {None}  # no such column then


def test_single_gpu_with_ansi_escapes_in_the_header() -> None:
    facts = parse(ONE_GPU)
    assert facts.pairs == []
    assert (facts.gpus[0].cpu_affinity, facts.gpus[0].numa_affinity) == ("0-19", "0")
    assert facts.notes == ["single GPU: no GPU pairs, min_nvlinks is 0"]


def test_truncated_vllm_without_header_shows_gpu2_cut_off() -> None:
    facts = parse(VLLM)
    assert (pair(facts, 2, 0), pair(facts, 2, 1), pair(facts, 2, 3)) == ("NODE",) * 3
    assert (pair(facts, 2, 4), pair(facts, 2, 5)) == ("SYS", "SYS")
    assert {p.link for p in facts.pairs if 2 not in (p.a, p.b)} == {"NV18"}
    assert len(facts.pairs) == 15
    assert facts.gpus[4].cpu_affinity == "56-111,168-223"
    assert facts.gpus[4].numa_affinity == "1"
    assert facts.nic_details == []
    assert facts.notes == [
        "no header line: 6 GPU rows of a 20-column matrix were read; "
        "the columns without a row are unknown (more GPUs or NICs)"
    ]


@pytest.mark.parametrize("tabsize", [1, 2, 4, 8])
@pytest.mark.parametrize("name", [n for n in ALL_FIXTURES if "\t" in text(n)])
def test_tabs_expanded_to_spaces_read_the_same(name: str, tabsize: int) -> None:
    """A paste with tabs turned into spaces (as the sglang one was) gives the same facts.

    At tab size 1 or 2 some titles are one space from the column before them.
    """
    assert parse_topo(text(name).expandtabs(tabsize)) == parse(name)


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_facts_round_trip_through_the_controller_schema(name: str) -> None:
    facts = parse(name)
    as_json = dataclasses.asdict(facts)
    assert validate_facts("topology", TopologyFacts, as_json) == facts


def drop_gpu7(full: str) -> str:
    """The b200 output with GPU7's row and column removed: what a node with 7 GPUs prints."""
    lines = []
    for line in full.splitlines(keepends=True):
        if line.startswith("GPU7\t"):
            continue
        cells = line.split("\t")
        if len(cells) > 8 and (cells[8] == "GPU7" or line.startswith("GPU")):
            del cells[8]  # column 8 after the row label is GPU7's
        lines.append("\t".join(cells))
    return "".join(lines)


def test_seven_gpus_after_dropping_gpu7_row_and_column() -> None:
    facts = parse_topo(drop_gpu7(text(B200)))
    assert facts.gpu_count == 7
    assert facts.complete
    assert len(facts.pairs) == 21
    assert facts.min_nvlinks == 18


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("", "no GPU header or GPU rows"),
        ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", "no"),
        ("\tGPU0\tGPU1\tCPU Affinity\n", "no matrix rows"),
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV18\t0-9\nGPU0\tNV18\t X \t0-9\n", "twice"),
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \t0-9\n", "1 path cells"),
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\tNV18\t X \t0-9\n", "misaligned"),
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU9\t X \tNV18\t0-9\n", "no column"),
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV18\t0-9\t1\n", "values after the matrix"),
        ("GPU0\t X \tNV4\nGPU1\tNV4\t X \tNV4\n", "different widths"),
    ],
)
def test_garbage_raises_parse_error(bad: str, says: str) -> None:
    with pytest.raises(ParseError, match=says):
        parse_topo(bad)


def test_a_row_with_a_cell_missing_is_refused_not_misread() -> None:
    broken = text(H200).replace("GPU3\tNV18\tNV18\tNV18\t X \tNV18", "GPU3\tNV18\tNV18\t X \tNV18")
    with pytest.raises(ParseError, match="row GPU3"):
        parse_topo(broken)


# --- the parser never raises anything but ParseError --------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_arbitrary_text_only_raises_parse_error(junk: str) -> None:
    with contextlib.suppress(ParseError):
        parse_topo(junk)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(ALL_FIXTURES), st.floats(min_value=0.0, max_value=1.0))
def test_truncated_fixtures_parse_to_a_subset_or_raise_parse_error(name: str, at: float) -> None:
    full_text = text(name)
    cut = full_text[: int(len(full_text) * at)]
    try:
        facts = parse_topo(cut)
    except ParseError:
        return
    # Whatever a cut output yields must be true of the whole: no half-read cell as a value.
    full = parse_topo(full_text)
    assert all(p in full.pairs for p in facts.pairs)
    for gpu in facts.gpus:
        if gpu.cpu_affinity is not None:
            assert gpu.cpu_affinity == full.gpus[gpu.index].cpu_affinity


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(ALL_FIXTURES), st.integers(min_value=0), st.characters())
def test_fixtures_with_a_character_inserted_only_raise_parse_error(
    name: str, where: int, char: str
) -> None:
    full_text = text(name)
    where %= len(full_text) + 1
    with contextlib.suppress(ParseError):
        parse_topo(full_text[:where] + char + full_text[where:])


# --- checks -------------------------------------------------------------------------------


def profile(count: int = 8, per_pair: int | None = 18) -> Profile:
    """An HGX-like profile: H200/B200 NV18, A100 NV12 (docs/reference.md#nvlink)."""
    nvlink = None
    if per_pair is not None:
        nvlink = {
            "version": 5,
            "links_per_gpu": per_pair,
            "per_pair": per_pair,
            "link_speed_gb_s": 53.125,
        }
    return parse_profile(
        {
            "name": "test-hgx",
            "description": "8x GPU HGX for tests",
            "gpu": {
                "model": "NVIDIA B200",
                "count": count,
                "memory_min_bytes": 183359 * 2**20,
                "compute_capability": "10.0",
                "power_limit_w": 1000,
                "bf16_dense_tflops": 2250,
                "pcie_gen": 5,
                "pcie_width": 16,
            },
            "nvlink": nvlink,
            "software": {"min_driver": "570.26", "min_cuda": "12.8"},
            "nccl": {"allreduce_busbw_min_gb_s": 800},
        },
        "test_topology.py",
    )


def judge(
    facts: TopologyFacts, prof: Profile, check: str, gpus: GpuFacts | None = None
) -> list[Finding]:
    """Run one check; `gpus` is the NVML context the catalog passes from the same node."""
    (found,) = [c for c in checks.CHECKS if c.name == check]
    assert found.probe == "topology"
    if gpus is None:
        return found.judge(facts, prof)
    assert found.context == "gpu"
    return found.judge(facts, prof, gpus)


def nvml(count: int, down: dict[int, int] | None = None) -> GpuFacts:
    """NVML's view of `count` GPUs of 18 links each; `down`: GPU -> how many links down."""
    gpus = [
        Gpu(
            index=i,
            name="NVIDIA B200",
            nvlinks=[NvLink(link=n, active=n >= (down or {}).get(i, 0)) for n in range(18)],
        )
        for i in range(count)
    ]
    return GpuFacts(source="nvml", gpus=gpus)


def summary(findings: list[Finding]) -> list[tuple[Status, str]]:
    return [(f.status, f.message) for f in findings]


def test_h200_node_passes_every_topology_check() -> None:
    facts = parse(H200)
    assert summary(judge(facts, profile(), "topology.gpu_count")) == [
        (Status.PASS, "8/8 GPUs in the topology")
    ]
    assert summary(judge(facts, profile(), "topology.nvlink")) == [
        (Status.PASS, "28/28 GPU pairs NV18")
    ]
    assert summary(judge(facts, profile(), "topology.nic_affinity")) == [
        (Status.PASS, "8/8 GPUs have a NIC at PIX/PXB")
    ]


def test_seven_gpus_fail_the_gpu_count() -> None:
    facts = parse_topo(drop_gpu7(text(B200)))
    (f,) = judge(facts, profile(), "topology.gpu_count")
    assert (f.status, f.message, f.value, f.expected) == (
        Status.FAIL,
        "7 GPUs, expected 8",
        7,
        Expected(op="==", value=8, unit="GPUs"),
    )
    assert "nvidia-smi -L" in (f.action or "")
    assert "RMA" in (f.action or "")
    # The 7 that are there are fully NVLinked: only the count is wrong.
    assert summary(judge(facts, profile(), "topology.nvlink")) == [
        (Status.PASS, "21/21 GPU pairs NV18")
    ]


def test_a_count_nvml_agrees_with_is_judged_by_gpu_count() -> None:
    facts = parse_topo(drop_gpu7(text(B200)))
    (f,) = judge(facts, profile(), "topology.gpu_count", nvml(7))
    assert (f.status, f.message) == (
        Status.SKIP,
        "7 GPUs in the topology, as NVML lists: the count is judged by gpu.count",
    )
    # NVML lists 8: the matrix itself is wrong, and this check says so.
    (wrong,) = judge(facts, profile(), "topology.gpu_count", nvml(8))
    assert (wrong.status, wrong.message) == (Status.FAIL, "7 GPUs, expected 8")


def test_gpu_cut_off_carries_what_nvml_says_of_its_links() -> None:
    facts = parse(VLLM)
    findings = judge(facts, profile(), "topology.nvlink", nvml(8, down={2: 18}))
    assert summary(findings)[0] == (
        Status.FAIL,
        "GPU2 has no NVLink to any other GPU (NODE/SYS to all 5 read, topo -m) "
        "and NVML reports all 18 links down",
    )
    assert findings[0].expected == Expected(op="==", value="NV18")
    (up, *_) = judge(facts, profile(), "topology.nvlink", nvml(8))
    assert up.message.endswith(", topo -m), yet NVML reports all 18 links active")
    assert checks.gpus_without_nvlink(facts) == [2]


def test_node_without_nvlink_carries_what_nvml_says() -> None:
    (f,) = judge(
        parse(RTX4090), profile(), "topology.nvlink", nvml(8, down=dict.fromkeys(range(8), 18))
    )
    assert f.message == (
        "no NVLink between any GPUs: all 28 pairs SYS, expected NV18; "
        "NVML reports all links down on 8/8 GPUs"
    )
    assert checks.gpus_without_nvlink(parse(RTX4090)) == list(range(8))


def test_degraded_vllm_node_names_gpu2() -> None:
    facts = parse(VLLM)
    findings = judge(facts, profile(), "topology.nvlink")
    assert summary(findings) == [
        (
            Status.FAIL,
            "GPU2 has no NVLink to any other GPU (NODE/SYS to all 5 read), expected NV18",
        ),
        (Status.WARN, "topology matrix incomplete: judged 15 of 28 GPU pairs"),
    ]
    assert findings[0].action is not None
    assert findings[0].action.startswith("GPU2 NVLink down:")
    assert "RMA GPU2" in findings[0].action
    # 6 GPU rows of a cut paste cannot prove a GPU missing.
    (count,) = judge(facts, profile(), "topology.gpu_count")
    assert count.status is Status.ERROR


def test_p4d_a100_passes_nv12_and_fails_nv18() -> None:
    facts = parse(P4D)
    assert summary(judge(facts, profile(per_pair=12), "topology.nvlink")) == [
        (Status.PASS, "28/28 GPU pairs NV12")
    ]
    (f,) = judge(facts, profile(per_pair=18), "topology.nvlink")
    assert (f.status, f.message, f.value, f.expected, f.unit) == (
        Status.FAIL,
        "all 28 GPU pairs NV12, expected NV18 (12 of 18 links)",
        12,
        Expected(op="==", value=18, unit="NVLinks"),
        "NVLinks",
    )


def with_pair(facts: TopologyFacts, a: int, b: int, link: str, nvlinks: int) -> TopologyFacts:
    """A copy of real facts with one GPU pair's link changed."""
    pairs = [TopoPair(a, b, link, nvlinks) if (p.a, p.b) == (a, b) else p for p in facts.pairs]
    return dataclasses.replace(facts, pairs=pairs)


def test_one_pair_without_nvlink_is_named() -> None:
    facts = with_pair(parse(B200), 2, 5, "NODE", 0)
    (f,) = judge(facts, profile(), "topology.nvlink")
    assert (f.status, f.message, f.value, f.expected) == (
        Status.FAIL,
        "GPU2-GPU5: NODE, expected NV18",
        "NODE",
        Expected(op="==", value="NV18"),
    )
    assert "GPU2 or GPU5" in (f.action or "")


def test_one_pair_with_fewer_links_is_named_with_the_count() -> None:
    facts = with_pair(parse(H200), 0, 1, "NV12", 12)
    (f,) = judge(facts, profile(), "topology.nvlink")
    assert (f.status, f.message, f.value, f.expected, f.unit) == (
        Status.FAIL,
        "GPU0-GPU1: NV12, expected NV18 (12 of 18 links)",
        12,
        Expected(op="==", value=18, unit="NVLinks"),
        "NVLinks",
    )


def test_more_links_than_the_profile_says_is_a_warning() -> None:
    facts = with_pair(parse(P4D), 3, 4, "NV18", 18)
    (f,) = judge(facts, profile(per_pair=12), "topology.nvlink")
    assert (f.status, f.message) == (
        Status.WARN,
        "GPU3-GPU4: NV18, expected NV12 (more links than the profile says)",
    )


def test_missing_nic_row_does_not_hide_a_complete_gpu_matrix() -> None:
    # Without its final newline the last row (NIC1) may be cut, so it is ignored.
    facts = parse_topo(text(RTX4090).rstrip("\n"))
    assert not facts.complete
    assert facts.notes[0] == "the output ends inside row NIC1: that row was ignored"
    assert facts.pairs == parse(RTX4090).pairs
    assert facts.nic_details[1].links == parse(RTX4090).nic_details[1].links  # from GPU rows
    assert judge(facts, profile(), "topology.gpu_count")[0].status is Status.PASS
    assert [f.status for f in judge(facts, profile(), "topology.nvlink")] == [Status.FAIL]


def test_pcie_node_against_an_nvlink_profile_is_one_finding() -> None:
    (f,) = judge(parse(RTX4090), profile(), "topology.nvlink")
    assert (f.status, f.message) == (
        Status.FAIL,
        "no NVLink between any GPUs: all 28 pairs SYS, expected NV18",
    )


def test_nvlink_is_skipped_for_pcie_profiles_and_single_gpus() -> None:
    (pcie,) = judge(parse(RTX4090), profile(per_pair=None), "topology.nvlink")
    assert (pcie.status, pcie.message) == (
        Status.SKIP,
        "profile 'test-hgx' has no NVLink (PCIe-only node)",
    )
    (single,) = judge(parse(ONE_GPU), profile(count=1), "topology.nvlink")
    assert single.status is Status.SKIP


def test_nic_affinity_warns_per_gpu_without_a_near_nic() -> None:
    findings = judge(parse(HPC_A100), profile(per_pair=12), "topology.nic_affinity")
    assert summary(findings) == [
        (Status.WARN, f"GPU{i}: no NIC at PIX/PXB (closest: mlx5_0 at SYS)")
        for i in (0, 1, 4, 5, 6, 7)
    ]
    rtx = judge(parse(RTX4090), profile(per_pair=None), "topology.nic_affinity")
    assert len(rtx) == 8
    assert rtx[6].message == "GPU6: no NIC at PIX/PXB (closest: NIC0 at PHB)"


def test_nic_affinity_is_skipped_without_nics() -> None:
    (f,) = judge(parse(B200), profile(), "topology.nic_affinity")
    assert (f.status, f.message) == (Status.SKIP, "no NIC in the topology matrix")


def test_every_check_is_named_after_its_subject() -> None:
    assert [c.name for c in checks.CHECKS] == [
        "topology.gpu_count",
        "topology.nvlink",
        "topology.nic_affinity",
    ]


@pytest.mark.parametrize(
    ("shipped", "name", "statuses"),
    [
        ("h200", H200, [Status.PASS, Status.PASS, Status.PASS]),
        ("h100", H100_SPACES, [Status.PASS, Status.PASS, Status.PASS]),
        ("b200", B200, [Status.PASS, Status.PASS, Status.SKIP]),
        ("a100", P4D, [Status.PASS, Status.PASS, Status.SKIP]),
        ("b200", VLLM, [Status.ERROR, Status.FAIL, Status.WARN, Status.SKIP]),
    ],
)
def test_fixtures_against_the_shipped_profiles(
    shipped: str, name: str, statuses: list[Status]
) -> None:
    """The shipped profiles judge the real captures as the table says."""
    prof = load(shipped)
    facts = parse(name)
    assert [f.status for c in checks.CHECKS for f in c.judge(facts, prof)] == statuses
