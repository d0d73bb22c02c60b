"""The real nvidia-smi outputs of tests/fixtures/smi/ (SOURCES.md says where each is from)."""

from __future__ import annotations

from bringup.node.gpu_facts import Gpu, GpuFacts
from tests.support import FIXTURES

SMI = FIXTURES / "smi"
MIB = 1048576
ALL_SMI = sorted(p.name for p in SMI.iterdir() if p.name != "SOURCES.md")


def read(name: str) -> str:
    return (SMI / name).read_text()


def only_gpu(facts: GpuFacts) -> Gpu:
    assert len(facts.gpus) == 1
    return facts.gpus[0]
