"""GPU checks: judge what the gpu probe (NVML) or an nvidia-smi log reported, per GPU.

One module per subject: identity.py (count, model, driver, persistence), memory.py (ECC,
row remapping), links.py (PCIe, NVLink, fabric), imex.py (the IMEX domain of NVL72
trays), thermals.py (power, temperature,
clocks); per_gpu.py is how they judge GPU by GPU. The list below is the checks' order in
every table and report.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from bringup.checks import Check
from bringup.checks.gpu import identity, imex, links, memory, thermals
from bringup.findings import Finding
from bringup.node.gpu_facts import GpuFacts

PROBE = "gpu"


def _readable(judge: Callable[..., list[Finding]]) -> Callable[..., list[Finding]]:
    """`judge` on the GPUs that could be read: a lost GPU is gpu.count's finding alone, so
    it does not come back as one unknown-field SKIP or FAIL in every other check."""

    @functools.wraps(judge)
    def on_readable(facts: GpuFacts, *rest: Any) -> list[Finding]:
        return judge(identity.readable(facts), *rest)

    return on_readable


CHECKS: list[Check] = [
    Check(
        "gpu.count",
        PROBE,
        identity.judge_count,
        "as many GPUs as the profile says",
        context="topology",
    ),
    Check(
        "gpu.model",
        PROBE,
        _readable(identity.judge_model),
        "every GPU is the profile's model, with its memory",
    ),
    Check(
        "gpu.driver",
        PROBE,
        _readable(identity.judge_driver),
        "driver and CUDA version at least the minimum",
    ),
    Check("gpu.persistence", PROBE, _readable(identity.judge_persistence), "persistence mode on"),
    Check(
        "gpu.ecc",
        PROBE,
        _readable(memory.judge_ecc),
        "ECC on, no uncorrected ECC errors",
        profile_free=True,
    ),
    Check(
        "gpu.remapped_rows",
        PROBE,
        _readable(memory.judge_remapped_rows),
        "no pending or failed row remap",
        profile_free=True,
    ),
    Check(
        "gpu.pcie",
        PROBE,
        _readable(links.judge_pcie),
        "PCIe link at full width (and gen under load)",
    ),
    Check("gpu.power", PROBE, _readable(thermals.judge_power), "power limit not lowered"),
    Check(
        "gpu.thermal",
        PROBE,
        _readable(thermals.judge_thermal),
        "headroom to slowdown and HBM temperature",
    ),
    Check(
        "gpu.clock_events",
        PROBE,
        _readable(thermals.judge_clock_events),
        "no throttling reason active",
    ),
    Check(
        "gpu.nvlink",
        PROBE,
        _readable(links.judge_nvlink),
        "all NVLinks up at the profile's version",
        context="topology",
        profile_free=True,
    ),
    Check(
        "gpu.fabric",
        PROBE,
        _readable(links.judge_fabric),
        "NVLink fabric registration completed",
        profile_free=True,
    ),
    Check(
        "gpu.imex",
        PROBE,
        imex.judge_imex,
        "IMEX service running, its domain UP with this node READY (NVL72 trays)",
        profile_free=True,
        applies=imex.required,
    ),
]
