"""Checks on the `nvidia-smi topo -m` matrix: GPU count, NVLink between every GPU pair, NICs.

Where the node also has the gpu probe's facts (NVML), they are the context of two checks:
a GPU count both sources agree on is gpu.count's finding, not this one's; and a GPU cut
off from NVLink is this module's finding, carrying what NVML says of its links.
"""

from __future__ import annotations

from bringup.checks import Check, finding
from bringup.findings import Finding, Status, equal, one_of
from bringup.node import gpu_nic
from bringup.node.gpu_facts import GpuFacts
from bringup.node.probes.topology import TopologyFacts, TopoPair
from bringup.profile import Profile

# PCIe paths from the closest to the farthest (the Legend of `nvidia-smi topo -m`).
_PCIE_ORDER = ["PIX", "PXB", "PHB", "NODE", "SYS", "SOC"]


def _nvlink_down(gpu: int | None = None) -> str:
    """What to look at when NVLink is down (for one GPU, or the node)."""
    status = "`nvidia-smi nvlink -s`" if gpu is None else f"`nvidia-smi nvlink -s -i {gpu}`"
    return (
        "check the Fabric Manager (`systemctl status nvidia-fabricmanager`; nvlsm on NVLink 5) "
        f"and {status}"
    )


def judge_gpu_count(
    facts: TopologyFacts, profile: Profile, gpus: GpuFacts | None = None
) -> list[Finding]:
    """The matrix shows as many GPUs as the profile says the node has.

    When NVML (`gpus`) counts as many GPUs as the matrix shows, a wrong count is one
    fault seen twice: gpu.count judges it, and this check says so.
    """
    name = "topology.gpu_count"
    seen, expected = facts.gpu_count, profile.gpu.count

    def verdict(status: Status, message: str, action: str | None = None) -> list[Finding]:
        return [
            finding(
                name,
                status,
                message,
                value=seen,
                expected=str(expected),
                unit="GPUs",
                action=action,
            )
        ]

    if seen == expected:
        return verdict(Status.PASS, f"{seen}/{expected} GPUs in the topology")
    if not facts.complete and seen < expected:
        # A cut capture shows fewer rows than the node has: that is not a missing GPU.
        message = (
            f"topology matrix incomplete: {seen} GPUs read, expected {expected}; "
            "cannot tell a missing GPU from cut output"
        )
        action = "rerun `nvidia-smi topo -m` and keep its whole output"
        return verdict(Status.ERROR, message, action)
    if gpus is not None and _nvml_count(gpus) == seen:
        message = f"{seen} GPUs in the topology, as NVML lists: the count is judged by gpu.count"
        return verdict(Status.SKIP, message)
    if seen < expected:
        action = (
            "a GPU is missing from the driver's view: check `nvidia-smi -L`, "
            "the kernel log for Xid 79 (fell off the bus), reseat or RMA"
        )
    else:
        action = f"the node has more GPUs than profile {profile.name!r} describes: use its profile"
    return verdict(Status.FAIL, f"{seen} GPUs, expected {expected}", action)


def _nvml_count(gpus: GpuFacts) -> int:
    """The GPUs NVML or a log says are present: as gpu.count counts them (attached or listed)."""
    return max(len(gpus.gpus), gpus.attached_gpus or 0)


def judge_nvlink(
    facts: TopologyFacts, profile: Profile, gpus: GpuFacts | None = None
) -> list[Finding]:
    """Every GPU pair is joined by the profile's NV# (e.g. NV18 on HGX H100/H200/B200/B300).

    A GPU with no NVLink to any other GPU is this check's finding, also when NVML
    (`gpus`) reports its links down: the message carries what NVML says.
    """
    name = "topology.nvlink"
    if profile.nvlink is None:
        reason = f"profile {profile.name!r} has no NVLink (PCIe-only node)"
        return [finding(name, Status.SKIP, reason)]
    if facts.gpu_count < 2:
        return [finding(name, Status.SKIP, f"{facts.gpu_count} GPU: no GPU pair to check")]
    if not facts.pairs:
        message = "no GPU pair could be read from the topology matrix"
        return [finding(name, Status.ERROR, message, action="rerun `nvidia-smi topo -m`")]

    want = profile.nvlink.per_pair
    wrong = [p for p in facts.pairs if p.link != f"NV{want}"]
    findings: list[Finding] = []
    if wrong and all(p.nvlinks == 0 for p in facts.pairs):
        findings.append(_no_nvlink_at_all(name, facts.pairs, want, gpus))
    elif len(wrong) == len(facts.pairs) > 1 and len({p.link for p in wrong}) == 1:
        # Every pair NV12 where NV18 is expected: one node-wide finding, not 28 alike.
        findings.append(_every_pair(name, wrong, want))
    else:
        cut_off = gpus_without_nvlink(facts)
        findings += [_gpu_without_nvlink(name, g, facts, want, gpus) for g in cut_off]
        # A cut-off GPU's pairs are already named by its finding: one line, not seven.
        findings += [
            _wrong_pair(name, p, want) for p in wrong if p.a not in cut_off and p.b not in cut_off
        ]
    gpus = max(facts.gpu_count, profile.gpu.count)
    total = gpus * (gpus - 1) // 2
    if not facts.complete and len(facts.pairs) < total:
        findings.append(_incomplete(name, len(facts.pairs), total))
    if not findings:
        message = f"{len(facts.pairs)}/{len(facts.pairs)} GPU pairs NV{want}"
        return [finding(name, Status.PASS, message, value=want, expected=str(want), unit="NVLinks")]
    return findings


def gpus_without_nvlink(facts: TopologyFacts) -> list[int]:
    """GPUs the matrix shows with no NVLink to any other GPU (all of them: none has NVLink).

    Exactly the GPUs topology.nvlink names as cut off, or all of a node without NVLink.
    """
    pairs = facts.pairs
    gpus = sorted({p.a for p in pairs} | {p.b for p in pairs})
    return [g for g in gpus if all(p.nvlinks == 0 for p in pairs if g in (p.a, p.b))]


def _nvml_links(gpus: GpuFacts | None, index: int) -> str:
    """' and NVML reports all 18 links down': NVML's view of one GPU's links ('' if none)."""
    gpu = next((g for g in gpus.gpus if g.index == index), None) if gpus is not None else None
    if gpu is None or not gpu.nvlinks:
        return ""
    total, down = len(gpu.nvlinks), sum(1 for link in gpu.nvlinks if not link.active)
    if down == total:
        return f" and NVML reports all {total} links down"
    if down:
        return f" and NVML reports {down} of {total} links down"
    return f", yet NVML reports all {total} links active"


def _nvml_nodewide(gpus: GpuFacts | None) -> str:
    """'; NVML reports all links down on 8/8 GPUs' ('' when NVML reported no link state)."""
    reporting = [g for g in gpus.gpus if g.nvlinks] if gpus is not None else []
    if not reporting:
        return ""
    down = sum(1 for g in reporting if not any(link.active for link in g.nvlinks))
    return f"; NVML reports all links down on {down}/{len(reporting)} GPUs"


def _no_nvlink_at_all(
    name: str, pairs: list[TopoPair], want: int, gpus: GpuFacts | None
) -> Finding:
    links = "/".join(sorted({p.link for p in pairs}))
    return finding(
        name,
        Status.FAIL,
        f"no NVLink between any GPUs: all {len(pairs)} pairs {links}, expected NV{want}"
        f"{_nvml_nodewide(gpus)}",
        value=links,
        expected=f"NV{want}",
        action=f"NVLink is down on the whole node: {_nvlink_down()}; "
        "or this is a PCIe node and the profile is wrong",
    )


def _every_pair(name: str, pairs: list[TopoPair], want: int) -> Finding:
    """All pairs show the same NV#, not the profile's: a different system or a wrong profile."""
    have = pairs[0].nvlinks
    message = f"all {len(pairs)} GPU pairs NV{have}, expected NV{want} ({have} of {want} links)"
    if have > want:
        status, action = Status.WARN, "check that the profile matches this node"
    else:
        status = Status.FAIL
        action = (
            "check that the profile matches this node (HGX A100 shows NV12); "
            f"else NVLinks are down on every GPU: {_nvlink_down()}"
        )
    return finding(
        name, status, message, value=have, expected=str(want), unit="NVLinks", action=action
    )


def _gpu_without_nvlink(
    name: str, gpu: int, facts: TopologyFacts, want: int, gpus: GpuFacts | None
) -> Finding:
    """One finding for a GPU cut off from the NVLink fabric (vllm-project/vllm#16336)."""
    mine = [p for p in facts.pairs if gpu in (p.a, p.b)]
    links = "/".join(sorted({p.link for p in mine}))
    others = f"all {len(mine)}" if facts.complete else f"all {len(mine)} read"
    message = f"GPU{gpu} has no NVLink to any other GPU ({links} to {others}"
    nvml = _nvml_links(gpus, gpu)
    # Both sources in one line; the NV# expected is then in the finding's `expected` only.
    message += f", topo -m){nvml}" if nvml else f"), expected NV{want}"
    return finding(
        name,
        Status.FAIL,
        message,
        value=links,
        expected=f"NV{want}",
        action=f"GPU{gpu} NVLink down: {_nvlink_down(gpu)}; reseat / RMA GPU{gpu}",
    )


def _wrong_pair(name: str, pair: TopoPair, want: int) -> Finding:
    where = f"GPU{pair.a}-GPU{pair.b}"
    if pair.nvlinks == 0:
        return finding(
            name,
            Status.FAIL,
            f"{where}: {pair.link}, expected NV{want}",
            value=pair.link,
            expected=f"NV{want}",
            action=f"no NVLink between GPU{pair.a} and GPU{pair.b}: {_nvlink_down(pair.a)}; "
            f"reseat / RMA GPU{pair.a} or GPU{pair.b}",
        )
    if pair.nvlinks < want:
        return finding(
            name,
            Status.FAIL,
            f"{where}: {pair.link}, expected NV{want} ({pair.nvlinks} of {want} links)",
            value=pair.nvlinks,
            expected=str(want),
            unit="NVLinks",
            action=f"NVLinks down between GPU{pair.a} and GPU{pair.b}: find the inactive links "
            f"with `nvidia-smi nvlink -s -i {pair.a}`; reseat / RMA",
        )
    # More links than expected is no fault of the node: the profile is probably not its own.
    return finding(
        name,
        Status.WARN,
        f"{where}: {pair.link}, expected NV{want} (more links than the profile says)",
        value=pair.nvlinks,
        expected=str(want),
        unit="NVLinks",
        action="check that the profile matches this node",
    )


def _incomplete(name: str, judged: int, total: int) -> Finding:
    return finding(
        name,
        Status.WARN,
        f"topology matrix incomplete: judged {judged} of {total} GPU pairs",
        value=judged,
        expected=str(total),
        unit="pairs",
        action="rerun `nvidia-smi topo -m` and keep its whole output",
    )


def judge_nic_affinity(facts: TopologyFacts, profile: Profile) -> list[Finding]:
    """Each GPU has a NIC behind at most PCIe bridges (PIX/PXB), for GPUDirect RDMA.

    Under a profile with one compute NIC per GPU (`network.compute_ports` equal to the GPU
    count: the HGX designs), each GPU's nearest compute NIC is its rail (bringup.node.gpu_nic):
    a bonded front-end NIC does not count, and two GPUs whose nearest NIC is the same one
    share a rail the design gives each of them.
    """
    name = "topology.nic_affinity"
    if not facts.nic_details:
        return [finding(name, Status.SKIP, "no NIC in the topology matrix")]
    spec = profile.network
    if spec.compute_ports is not None and spec.compute_ports == profile.gpu.count:
        findings = _one_nic_per_gpu(facts, profile.name)
    else:
        findings = _any_near_nic(facts)
    if findings:
        return findings
    n = len(facts.gpus)
    return [finding(name, Status.PASS, f"{n}/{n} GPUs have a NIC at PIX/PXB")]


def _any_near_nic(facts: TopologyFacts) -> list[Finding]:
    findings: list[Finding] = []
    for gpu in facts.gpus:
        label = f"GPU{gpu.index}"
        if any(gpu.index in nic.nearest_gpus for nic in facts.nic_details):
            continue
        closest, link = _closest_nic(facts, label)
        findings.append(_far(label, closest, link))
    return findings


def _far(label: str, nic: str | None, link: str | None) -> Finding:
    closest = f"{nic} at {link}" if nic is not None else "no compute NIC in the matrix"
    return finding(
        "topology.nic_affinity",
        Status.WARN,
        f"{label}: no NIC at PIX/PXB (closest: {closest})",
        value=link,
        expected=one_of("PIX", "PXB"),
        action=f"{label}'s RDMA traffic crosses the CPU: check the NIC placement against "
        "the vendor's layout; ignore on nodes without GPUDirect RDMA",
    )


def _one_nic_per_gpu(facts: TopologyFacts, profile: str) -> list[Finding]:
    """Each GPU's own compute NIC at PIX/PXB, and no two GPUs on one."""
    mapping = gpu_nic.gpu_nic_map(facts)
    findings = [_far(f"GPU{e.gpu}", e.nic, e.link) for e in mapping if not e.near]
    seen: set[str] = set()
    for entry in mapping:
        if not entry.shared_with or entry.nic in seen or entry.nic is None:
            continue
        seen.add(entry.nic)
        gpus = sorted([entry.gpu, *entry.shared_with])
        labels = ", ".join(f"GPU{g}" for g in gpus)
        findings.append(
            finding(
                "topology.nic_affinity",
                Status.WARN,
                f"{labels} share {entry.nic} ({entry.link}) as their nearest NIC: the "
                f"{profile} profile has one compute NIC per GPU",
                value=len(gpus),
                expected=equal(1),
                unit="GPUs per NIC",
                action=f"{len(gpus)} GPUs' RDMA traffic goes through {entry.nic}: check that "
                "every compute NIC is seated and enumerated (`ibstat`, `nvidia-smi topo -m`) "
                "and the placement against the vendor's layout",
            )
        )
    return findings


def _closest_nic(facts: TopologyFacts, gpu: str) -> tuple[str, str]:
    """The NIC nearest to a GPU and its path; unknown paths rank last."""

    def distance(item: tuple[str, str]) -> int:
        link = item[1]
        return _PCIE_ORDER.index(link) if link in _PCIE_ORDER else len(_PCIE_ORDER)

    paths = [(nic.name, nic.links.get(gpu, "unknown")) for nic in facts.nic_details]
    return min(paths, key=distance)


CHECKS: list[Check] = [
    Check(
        "topology.gpu_count",
        "topology",
        judge_gpu_count,
        "the topology matrix shows the profile's GPU count",
        context="gpu",
    ),
    Check(
        "topology.nvlink",
        "topology",
        judge_nvlink,
        "every GPU pair is joined by the profile's NV#",
        context="gpu",
    ),
    Check(
        "topology.nic_affinity",
        "topology",
        judge_nic_affinity,
        "every GPU has a NIC at PIX/PXB (WARN only)",
    ),
]
