"""The p2p probe run for real with torch: host buffers stand in for GPUs (no GPU here)."""

from __future__ import annotations

import pytest

from bringup.node.probes import p2p
from bringup.node.result import ProbeError


def test_every_pair_both_ways_on_stand_ins() -> None:
    params = p2p.Params(device="cpu", cpu_devices=3, size_bytes=1 << 20, warmup=1, iterations=2)
    facts = p2p.collect(params).facts
    assert (facts.device, facts.gpus, facts.size_bytes) == ("cpu", ["cpu"] * 3, 1 << 20)
    assert [(p.a, p.b) for p in facts.pairs] == [(0, 1), (0, 2), (1, 2)]
    for pair in facts.pairs:
        assert pair.error is None and pair.peer_access is False
        assert pair.a_to_b_bytes_per_s and pair.b_to_a_bytes_per_s
        assert pair.bidirectional_bytes_per_s


def test_no_gpu_is_a_probe_error_with_the_reason() -> None:
    with pytest.raises(ProbeError, match="torch sees no CUDA GPU: peer-to-peer copies need GPUs"):
        p2p.collect(p2p.Params())
