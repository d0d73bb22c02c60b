"""GPU checks: judge what the gpu probe (NVML) or an nvidia-smi log reported, per GPU.

One module per subject: identity.py (count, model, driver, persistence), memory.py (ECC,
row remapping), links.py (PCIe, NVLink, fabric), thermals.py (power, temperature,
clocks); per_gpu.py is how they judge GPU by GPU. The list below is the checks' order in
every table and report.
"""

from __future__ import annotations

from bringup.checks import Check
from bringup.checks.gpu import identity, links, memory, thermals

PROBE = "gpu"

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
        identity.judge_model,
        "every GPU is the profile's model, with its memory",
    ),
    Check(
        "gpu.driver",
        PROBE,
        identity.judge_driver,
        "driver and CUDA version at least the minimum",
    ),
    Check("gpu.persistence", PROBE, identity.judge_persistence, "persistence mode on"),
    Check("gpu.ecc", PROBE, memory.judge_ecc, "ECC on, no uncorrected ECC errors"),
    Check("gpu.remapped_rows", PROBE, memory.judge_remapped_rows, "no pending or failed row remap"),
    Check("gpu.pcie", PROBE, links.judge_pcie, "PCIe link at full width (and gen under load)"),
    Check("gpu.power", PROBE, thermals.judge_power, "power limit not lowered"),
    Check("gpu.thermal", PROBE, thermals.judge_thermal, "headroom to slowdown and HBM temperature"),
    Check("gpu.clock_events", PROBE, thermals.judge_clock_events, "no throttling reason active"),
    Check(
        "gpu.nvlink",
        PROBE,
        links.judge_nvlink,
        "all NVLinks up at the profile's version",
        context="topology",
    ),
    Check("gpu.fabric", PROBE, links.judge_fabric, "NVLink fabric registration completed"),
]
