"""The real nvidia-smi outputs of tests/fixtures/smi/ (SOURCES.md says where each is from)."""

from __future__ import annotations

from pathlib import Path

from bringup.node.gpu_facts import Gpu, GpuFacts

FIXTURES = Path(__file__).parent.parent / "fixtures"
SMI = FIXTURES / "smi"
MIB = 1048576
ALL_SMI = sorted(p.name for p in SMI.iterdir() if p.name != "SOURCES.md")


def read(name: str) -> str:
    return (SMI / name).read_text()


def only_gpu(facts: GpuFacts) -> Gpu:
    assert len(facts.gpus) == 1
    return facts.gpus[0]
