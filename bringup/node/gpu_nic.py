"""Which RDMA NIC is each GPU's own, from the `nvidia-smi topo -m` matrix.

An HGX node has one compute NIC per GPU, on the GPU's own PCIe switch (PIX or PXB in the
matrix): GPUDirect RDMA moves that GPU's data through that NIC without crossing the CPU.
Two consumers read the same map, so it is worked out once, here:

- topology.nic_affinity (bringup.checks.topology) judges it: a GPU whose nearest NIC is
  PHB/NODE/SYS away, or two GPUs sharing one NIC on a profile with one NIC per GPU;
- the per-rail ib_write_bw job passes `--use_cuda=<GPU>` for each rail: `rail_gpus`.

Pure functions over TopologyFacts, standard library only (they run on the node too).
A bonded RDMA device (`mlx5_bond_0`: two ports as one, the front-end or storage network) is
never a GPU's rail.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bringup.node.probes.topology import TopologyFacts, TopoNic

# PCIe paths from the closest to the farthest (the Legend of `nvidia-smi topo -m`).
PCIE_ORDER = ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC")
NEAR = ("PIX", "PXB")  # at most PCIe switches between: GPUDirect RDMA stays off the CPU


@dataclass
class GpuNic:
    """One GPU, its nearest compute NIC and the path between them."""

    gpu: int
    nic: str | None  # None: no NIC column in the matrix (or only bonded ones)
    link: str | None  # "PIX", "PXB", "PHB", "NODE", "SYS", as printed
    shared_with: list[int] = field(default_factory=list)  # other GPUs whose nearest NIC it is

    @property
    def near(self) -> bool:
        return self.link in NEAR


# Each link's rank in PCIE_ORDER; anything else (no column, "X", "NV#", "N/A") is farther.
_RANK = {link: rank for rank, link in enumerate(PCIE_ORDER)}
_FARTHEST = len(PCIE_ORDER)


def _distance(link: str | None) -> int:
    return _RANK.get(link or "", _FARTHEST)


def compute_nics(facts: TopologyFacts) -> list[TopoNic]:
    """The NICs that can be a GPU's rail: every NIC column but bonded devices."""
    return [nic for nic in facts.nic_details if not nic.bonded]


def gpu_nic_map(facts: TopologyFacts) -> list[GpuNic]:
    """Each GPU's nearest compute NIC (ties: the NIC no other GPU is nearer to, then the
    first in column order), and which other GPUs have that same NIC as their nearest."""
    nics = compute_nics(facts)
    labels = [f"GPU{gpu.index}" for gpu in facts.gpus]
    # Every NIC's distance to every GPU, read once: judging a node looked each pair up
    # again for every GPU it compared, the largest part of its topology check.
    distances = [[_distance(nic.links.get(label)) for label in labels] for nic in nics]
    # A NIC is nearer to another GPU than to this one exactly when its nearest GPU is
    # nearer than this one (GPUs of the same index share a label, so a distance).
    nearest = [min(row, default=_FARTHEST) for row in distances]
    found: list[GpuNic] = []
    for column, gpu in enumerate(facts.gpus):
        if not nics:
            found.append(GpuNic(gpu.index, None, None))
            continue
        mine = [row[column] for row in distances]
        best = min(mine)
        tied = [i for i, d in enumerate(mine) if d == best]
        own = [i for i in tied if not nearest[i] < mine[i]]
        nic = nics[(own or tied)[0]]
        found.append(GpuNic(gpu.index, nic.name, nic.links.get(labels[column])))
    by_nic: dict[str, list[int]] = {}
    for entry in found:
        if entry.nic is not None and entry.near:
            by_nic.setdefault(entry.nic, []).append(entry.gpu)
    for entry in found:
        if entry.nic is not None and entry.near:
            entry.shared_with = [g for g in by_nic[entry.nic] if g != entry.gpu]
    return found


def rail_gpus(facts: TopologyFacts) -> dict[str, int]:
    """Compute NIC name -> the GPU local to it (PIX/PXB), for `ib_write_bw --use_cuda=<GPU>`.

    Each NIC gets the nearest GPU; between GPUs equally near it, the one whose own nearest
    NIC it is, then the lowest index. A NIC with no GPU at PIX/PXB is absent: its rail is
    measured from host memory only (there is no GPU whose traffic it would carry directly).
    """
    own = {entry.nic: entry.gpu for entry in reversed(gpu_nic_map(facts)) if entry.near}
    found: dict[str, int] = {}
    for nic in compute_nics(facts):
        near = [g for g in facts.gpus if nic.links.get(f"GPU{g.index}") in NEAR]
        if not near:
            continue
        best = min(_distance(nic.links.get(f"GPU{g.index}")) for g in near)
        closest = [g.index for g in near if _distance(nic.links.get(f"GPU{g.index}")) == best]
        found[nic.name] = own[nic.name] if own.get(nic.name) in closest else min(closest)
    return found
