"""The p2p check on recorded pair bandwidths (the probe itself: tests/integration/node)."""

from __future__ import annotations

import itertools

from bringup.checks.p2p import judge_bandwidth
from bringup.findings import Status
from bringup.node.probes.p2p import P2pFacts, PairBandwidth
from tests.support.profiles import h100_profile

PROFILE = h100_profile()  # 18 NVLinks x 26.562 GB/s: 956 GB/s both ways, floor 669
# HGX H100 peer copies, one way (NVIDIA/nccl#1264): about 375 GB/s; both ways about 750.
ONE_WAY = 375e9


def pairs(slow: dict[tuple[int, int], float] | None = None, gpus: int = 8) -> P2pFacts:
    found = []
    for a, b in itertools.combinations(range(gpus), 2):
        scale = (slow or {}).get((a, b), 1.0)
        found.append(
            PairBandwidth(a, b, True, ONE_WAY * scale, ONE_WAY * scale, 2 * ONE_WAY * scale)
        )
    return P2pFacts("cuda", "2.13.0", ["NVIDIA H100 80GB HBM3"] * gpus, 256 << 20, found)


def test_every_pair_near_the_median_passes() -> None:
    ((status, message),) = [(f.status, f.message) for f in judge_bandwidth(pairs(), PROFILE)]
    assert status is Status.PASS
    assert message == (
        "28 pairs: median 750 GB/s both ways, 78% of the links' both-way; "
        "none more than 10% below the median"
    )


def test_one_slow_pair_fails_naming_both_gpus() -> None:
    findings = judge_bandwidth(pairs({(2, 5): 0.6}), PROFILE)
    assert [(f.status, f.message) for f in findings] == [
        (
            Status.FAIL,
            "GPUs 2-5: 450 GB/s both ways, 40% below the median of 28 pairs (750 GB/s); "
            "one way 225 / 225 GB/s",
        )
    ]
    assert "nvlink -s -i 2" in (findings[0].action or "")


def test_every_pair_under_the_profile_floor_warns() -> None:
    findings = judge_bandwidth(
        pairs({p: 0.8 for p in itertools.combinations(range(8), 2)}), PROFILE
    )
    assert {f.status for f in findings} == {Status.WARN} and len(findings) == 28
    assert findings[0].message == "GPUs 0-1: 600 GB/s both ways, under 70% of the links' 956 GB/s"


def test_no_peer_access_on_nvlink_fails_and_an_error_is_its_own() -> None:
    facts = pairs(gpus=3)
    facts.pairs[0].peer_access = False
    facts.pairs[2] = PairBandwidth(1, 2, False, error="RuntimeError: CUDA error: out of memory")
    found = [(f.status, f.message) for f in judge_bandwidth(facts, PROFILE)]
    assert found == [
        (Status.ERROR, "GPUs 1-2: RuntimeError: CUDA error: out of memory"),
        (Status.FAIL, "GPUs 0-1: no peer access between them, on an NVLink system"),
    ]


def test_one_gpu_and_host_buffers_are_skipped() -> None:
    (one,) = judge_bandwidth(pairs(gpus=1), PROFILE)
    assert (one.status, one.message) == (Status.SKIP, "1 GPU: no pair to measure")
    cpu = pairs(gpus=2)
    cpu.device = "cpu"
    assert judge_bandwidth(cpu, PROFILE)[0].status is Status.SKIP
