"""Check of the `p2p` probe: peer-to-peer copy bandwidth of every GPU pair.

Each pair's bidirectional bandwidth is judged against the median of the node's pairs
(a pair more than PAIR_BELOW under it FAILs: one degraded link among identical ones) and,
where the profile has NVLink, against P2P_SHARE of what the GPU's links carry both ways
(WARN below: a floor set from one public measurement). A pair without peer access on an
NVLink system FAILs. docs/reference.md#nvlink gives the figures.
"""

from __future__ import annotations

import statistics

from bringup.checks import Check, finding
from bringup.findings import Finding, Status
from bringup.node.probes.p2p import P2pFacts, PairBandwidth
from bringup.profile import Profile

# bringup policy (docs/reference.md#check-thresholds):
PAIR_BELOW = 0.10  # a pair 10% below the pairs' median is a straggler, as a GPU in gemm
# Peer copies on HGX H100 reach 78% (one way) to 82% (both ways) of 18 links x 26.5625
# GB/s (NVIDIA/nccl#1264; docs/reference.md#nvlink): 70% leaves room for run-to-run spread.
P2P_SHARE = 0.70

_LINK_ACTION = (
    "check the NVLinks of both GPUs (`nvidia-smi nvlink -s -i <gpu>`, `nvidia-smi nvlink -e`), "
    "the Fabric Manager log and `nvidia-smi topo -p2p r`; reseat or RMA the GPU that is in "
    "every slow pair"
)


def judge_bandwidth(facts: P2pFacts, profile: Profile) -> list[Finding]:
    check = "p2p.bandwidth"
    if facts.device != "cuda":
        return [finding(check, Status.SKIP, "measured between host buffers (no CUDA GPU)")]
    if len(facts.gpus) < 2:
        return [finding(check, Status.SKIP, f"{len(facts.gpus)} GPU: no pair to measure")]
    findings = [
        finding(check, Status.ERROR, f"GPUs {p.a}-{p.b}: {p.error}") for p in facts.pairs if p.error
    ]
    measured = {(p.a, p.b): p for p in facts.pairs if p.bidirectional_bytes_per_s}
    if profile.nvlink is not None:
        findings += [
            finding(
                check,
                Status.FAIL,
                f"GPUs {p.a}-{p.b}: no peer access between them, on an NVLink system",
                action="check `nvidia-smi topo -p2p r`, the Fabric Manager service and the "
                "IOMMU/ACS settings",
            )
            for p in measured.values()
            if not p.peer_access
        ]
    if not measured:
        return findings or [finding(check, Status.ERROR, "no pair measured")]
    median = statistics.median(p.bidirectional_bytes_per_s or 0.0 for p in measured.values())
    floor = _floor(profile)
    for pair in measured.values():
        value = pair.bidirectional_bytes_per_s or 0.0
        below = (median - value) / median if median > 0 else 0.0
        if below > PAIR_BELOW:
            findings.append(
                finding(
                    check,
                    Status.FAIL,
                    f"GPUs {pair.a}-{pair.b}: {_gb(value)} GB/s both ways, {below:.0%} below "
                    f"the median of {len(measured)} pairs ({_gb(median)} GB/s); one way "
                    f"{_one_way(pair)}",
                    value=round(value / 1e9, 1),
                    expected=f">= {_gb((1 - PAIR_BELOW) * median)}",
                    unit="GB/s",
                    action=_LINK_ACTION.replace("<gpu>", str(pair.a)),
                )
            )
        elif floor is not None and value < floor:
            findings.append(
                finding(
                    check,
                    Status.WARN,
                    f"GPUs {pair.a}-{pair.b}: {_gb(value)} GB/s both ways, under "
                    f"{P2P_SHARE:.0%} of the links' {_gb(floor / P2P_SHARE)} GB/s",
                    value=round(value / 1e9, 1),
                    expected=f">= {_gb(floor)}",
                    unit="GB/s",
                    action=_LINK_ACTION.replace("<gpu>", str(pair.a)),
                )
            )
    if any(f.status is not Status.PASS for f in findings):
        return findings
    of_links = f", {median / (floor / P2P_SHARE):.0%} of the links' both-way" if floor else ""
    return [
        finding(
            check,
            Status.PASS,
            f"{len(measured)} pairs: median {_gb(median)} GB/s both ways{of_links}; "
            f"none more than {PAIR_BELOW:.0%} below the median",
            value=round(median / 1e9, 1),
            unit="GB/s",
        )
    ]


def _floor(profile: Profile) -> float | None:
    """P2P_SHARE of the GPU's NVLinks both ways, B/s; None without NVLink in the profile."""
    link = profile.nvlink
    if link is None:
        return None
    return P2P_SHARE * 2 * link.links_per_gpu * link.link_speed_gb_s * 1e9


def _one_way(pair: PairBandwidth) -> str:
    ab, ba = pair.a_to_b_bytes_per_s, pair.b_to_a_bytes_per_s
    return f"{_gb(ab or 0.0)} / {_gb(ba or 0.0)} GB/s"


def _gb(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1e9:.0f}"


CHECKS = [
    Check("p2p.bandwidth", "p2p", judge_bandwidth, "peer copy bandwidth of every GPU pair"),
]
