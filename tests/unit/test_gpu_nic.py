"""Each GPU's own compute NIC, from real `nvidia-smi topo -m` captures (tests/fixtures/topo/),
and topology.nic_affinity under profiles with one NIC per GPU."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from bringup.checks.topology import judge_nic_affinity
from bringup.findings import Status
from bringup.node.gpu_nic import GpuNic, gpu_nic_map, rail_gpus
from bringup.node.probes.topology import TopoGpu, TopologyFacts, TopoNic, parse_topo
from bringup.profile import load

FIXTURES = Path(__file__).parent.parent / "fixtures" / "topo"
B300 = "sglang-26039-b300x8-check-env-tabs-esc-less-ansi-9nic-bond.txt"
H100 = "sglang-30401-h100x8-8nic-spaces.txt"
HPC_A100 = "hpcdoc-hgx-a100x8-mlx5col-drv495.txt"
RTX4090 = "gpuallocator-17-rtx4090x8-pcie-sys-nolegend.txt"
B200_NO_NIC = "simllm-vastai-b200x8-no-nic.txt"


def parse(name: str) -> TopologyFacts:
    return parse_topo((FIXTURES / name).read_text())


def test_the_b300_map_is_one_pxb_nic_per_gpu_and_leaves_the_bond_out() -> None:
    facts = parse(B300)
    assert gpu_nic_map(facts) == [GpuNic(i, f"mlx5_{10 + i}", "PXB") for i in range(8)]
    assert rail_gpus(facts) == {f"mlx5_{10 + i}": i for i in range(8)}
    assert "mlx5_bond_0" not in rail_gpus(facts)


def test_the_h100_map_is_one_pix_nic_per_gpu() -> None:
    facts = parse(H100)
    assert gpu_nic_map(facts) == [GpuNic(i, f"mlx5_{i}", "PIX") for i in range(8)]
    assert rail_gpus(facts) == {f"mlx5_{i}": i for i in range(8)}


def test_one_nic_behind_two_gpus_and_six_gpus_far_from_it() -> None:
    """The HPC A100 capture: one mlx5_0, PXB to GPU2 and GPU3, SYS to the rest."""
    facts = parse(HPC_A100)
    mapping = gpu_nic_map(facts)
    assert [(e.gpu, e.nic, e.link, e.shared_with) for e in mapping] == [
        (0, "mlx5_0", "SYS", []),
        (1, "mlx5_0", "SYS", []),
        (2, "mlx5_0", "PXB", [3]),
        (3, "mlx5_0", "PXB", [2]),
        (4, "mlx5_0", "SYS", []),
        (5, "mlx5_0", "SYS", []),
        (6, "mlx5_0", "SYS", []),
        (7, "mlx5_0", "SYS", []),
    ]
    # --use_cuda for mlx5_0's rail: the lower of the two GPUs equally near it.
    assert rail_gpus(facts) == {"mlx5_0": 2}


def test_nics_with_no_gpu_near_have_no_rail_gpu() -> None:
    facts = parse(RTX4090)  # two NICs, PHB/SYS to every GPU
    assert rail_gpus(facts) == {}
    assert gpu_nic_map(facts)[6] == GpuNic(6, "NIC0", "PHB")
    assert gpu_nic_map(parse(B200_NO_NIC))[0] == GpuNic(0, None, None)


def test_one_nic_per_gpu_profiles_warn_on_a_shared_nic_and_name_gpu_nic_and_path() -> None:
    findings = judge_nic_affinity(parse(HPC_A100), load("a100"))
    assert [(f.status, f.message) for f in findings] == [
        *[
            (Status.WARN, f"GPU{i}: no NIC at PIX/PXB (closest: mlx5_0 at SYS)")
            for i in (0, 1, 4, 5, 6, 7)
        ],
        (
            Status.WARN,
            "GPU2, GPU3 share mlx5_0 (PXB) as their nearest NIC: the a100 profile has one "
            "compute NIC per GPU",
        ),
    ]
    shared = findings[-1]
    assert (shared.value, shared.unit) == (2, "GPUs per NIC")
    assert "mlx5_0" in (shared.action or "")


def test_the_healthy_hgx_captures_pass_with_the_same_words() -> None:
    (b300,) = judge_nic_affinity(parse(B300), load("b300"))
    (h100,) = judge_nic_affinity(parse(H100), load("h100"))
    assert (b300.status, b300.message) == (Status.PASS, "8/8 GPUs have a NIC at PIX/PXB")
    assert (h100.status, h100.message) == (Status.PASS, "8/8 GPUs have a NIC at PIX/PXB")


def test_a_gpu_whose_only_near_nic_is_the_bond_warns_under_one_nic_per_gpu() -> None:
    """The bond is the front-end network: it is no GPU's rail (the b300 capture with GPU7's
    own NIC column turned to NODE and the bond's to PXB, as a miscabled node would print)."""
    text = (FIXTURES / B300).read_text()
    lines = text.splitlines(keepends=True)
    edited = []
    for line in lines:
        cells = line.split("\t")
        if cells[0] == "GPU7":
            # columns: label, GPU0..7, NIC0..8: NIC7 is cells[16], NIC8 (the bond) cells[17]
            cells[16], cells[17] = "NODE", "PXB"
        elif cells[0] == "NIC7":
            cells[8] = "NODE"
        elif cells[0] == "NIC8":
            cells[8] = "PXB"
        edited.append("\t".join(cells))
    facts = parse_topo("".join(edited))
    assert [n.nearest_gpus for n in facts.nic_details][-2:] == [[], [7]]
    findings = judge_nic_affinity(facts, load("b300"))
    assert [(f.status, f.message) for f in findings] == [
        (Status.WARN, "GPU7: no NIC at PIX/PXB (closest: mlx5_17 at NODE)")
    ]


def _plain_map(facts: TopologyFacts) -> list[tuple[int, str | None, str | None]]:
    """gpu_nic_map's rule read as its docstring says it, one pair at a time: each GPU's
    nearest compute NIC; of equally near ones the first that no other GPU is nearer to,
    else the first."""
    order = ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC")

    def distance(nic: TopoNic, gpu: int) -> int:
        link = nic.links.get(f"GPU{gpu}")
        return order.index(link) if link in order else len(order)

    nics = [n for n in facts.nic_details if not n.bonded]
    found: list[tuple[int, str | None, str | None]] = []
    for gpu in facts.gpus:
        if not nics:
            found.append((gpu.index, None, None))
            continue
        best = min(distance(n, gpu.index) for n in nics)
        tied = [n for n in nics if distance(n, gpu.index) == best]
        others = [g.index for g in facts.gpus if g.index != gpu.index]
        own = [n for n in tied if all(distance(n, o) >= best for o in others)]
        nic = (own or tied)[0]
        found.append((gpu.index, nic.name, nic.links.get(f"GPU{gpu.index}")))
    return found


_LINKS = st.sampled_from(["X", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC", "NV18", "N/A", ""])


@st.composite
def _topologies(draw: st.DrawFn) -> TopologyFacts:
    """Matrices of up to eight GPUs (an index repeated now and then, as a broken capture
    can) and up to six NICs, any link between them or none, some NICs bonded."""
    indices = draw(st.lists(st.integers(0, 7), max_size=8))
    nics = []
    for n in range(draw(st.integers(0, 6))):
        links = {f"GPU{i}": draw(_LINKS) for i in indices if draw(st.booleans()) or n % 2}
        nics.append(TopoNic(f"mlx5_{n}", f"NIC{n}", links=links, bonded=draw(st.booleans())))
    gpus = [TopoGpu(index=i) for i in indices]
    return TopologyFacts(len(gpus), 0, [n.name for n in nics], gpus=gpus, nic_details=nics)


@settings(max_examples=300, deadline=None)
@given(_topologies())
def test_the_map_is_its_rule_read_pair_by_pair(facts: TopologyFacts) -> None:
    """The map reads each NIC's distance to each GPU once (judging every node computes it);
    its answer is the rule's, read one pair at a time."""
    found = [(e.gpu, e.nic, e.link) for e in gpu_nic_map(facts)]
    assert found == _plain_map(facts)


def test_the_captures_map_as_the_rule_reads_them() -> None:
    for capture in sorted(FIXTURES.glob("*.txt")):
        facts = parse(capture.name)
        assert [(e.gpu, e.nic, e.link) for e in gpu_nic_map(facts)] == _plain_map(facts)
