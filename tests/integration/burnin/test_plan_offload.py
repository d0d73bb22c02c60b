"""Offload's memory in the plan (bringup/planning/memory.py) against DeepSpeed's own
estimator, `estimate_zero3_model_states_mem_needs` of the installed DeepSpeed.

DeepSpeed's GPU figure is the sharded model states plus 4 bytes per parameter of the
largest layer (its allowance for gathering); the plan counts the gathered modules apart
(the largest module and the next layer, 16-bit: docs/plan.md). So the comparison is of
what the estimator shards: the plan's weight, gradient and optimizer shards against the
estimator's GPU figure less its largest-layer term; and what a node keeps off its GPUs
against the estimator's CPU figure (zero_init, no buffer factor).
"""

from __future__ import annotations

import pytest

from bringup import profile
from bringup.node.burnin import flops
from bringup.planning import memory as M
from bringup.planning import models

pytestmark = pytest.mark.burnin

H100 = M.device_of(profile.load("h100"))


def sharded(mem: M.Memory) -> int:
    """The plan's sharded model states: every part but the gathered modules and buffers."""
    kept = [
        p
        for c in (mem.weights, mem.gradients, mem.optimizer)
        for p in c.parts
        if not p.what.startswith(("gathered", "DeepSpeed reduction"))
    ]
    return sum(p.bytes for p in kept)


@pytest.mark.parametrize("gpus_per_node", [1, 8])
@pytest.mark.parametrize("nodes", [1, 4])
@pytest.mark.parametrize(
    ("optimizer", "params"), [("cpu", "gpu"), ("cpu", "cpu")], ids=["optimizer", "both"]
)
def test_offload_matches_deepspeeds_estimator(
    gpus_per_node: int, nodes: int, optimizer: str, params: str
) -> None:
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs

    shape = models.load("llama-8b-lora").shape
    total = flops.parameter_counts(shape).total
    largest = max(flops.layer_parameters(shape), shape.vocab_size * shape.hidden_size)
    gpus = gpus_per_node * nodes
    s = M.Setup(shape, "full", M.LoraSpec(), 4096, 1, True, 3, gpus)
    s = s.but(offload_optimizer=optimizer, offload_params=params)
    cpu, gpu, largest_layer = estimate_zero3_model_states_mem_needs(
        total,
        largest,
        num_gpus_per_node=gpus_per_node,
        num_nodes=nodes,
        cpu_offload=True,
        cpu_offload_params=params == "cpu",
        zero_init=True,
        additional_buffer_factor=1.0,
    )
    device = M.Device("h100", "H100", "gpu", H100.memory_bytes, None, gpus_per_node)
    assert sharded(M.memory(s, device)) == pytest.approx(gpu - largest_layer, abs=gpus)
    assert M.offloaded_bytes(s, gpus_per_node)["cpu"] == pytest.approx(cpu, abs=gpus)
