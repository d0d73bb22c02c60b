"""Whether what a probe read was simulated: the NVML simulator or a stand-in tool.

The simulators make themselves known where the probe reads them, not through an
environment variable a node may lack: the simulated NVML library exports the symbol
`bringupNvmlSimulated` (bringup/sim/nvml/nvml_sim.c), and the stand-in `dcgmi` of the
simulated cluster is a script that names itself (bringup/sim/dcgm.py). A probe that finds
either marks its record `simulated` (bringup/provenance.py), and a run with such a record
is never ACCEPTED.
"""

from __future__ import annotations

import sys
from typing import Any

NVML_MARKER = "bringupNvmlSimulated"
TOOL_MARKER = b"bringup.sim"  # in the first bytes of a stand-in tool's script
GPUS = "GPUs"  # what a record from the simulated NVML was simulated: "simulated GPUs"


def nvml_is_simulated(pynvml: Any) -> bool:
    """True when the NVML library pynvml loaded is bringup's simulator."""
    library = getattr(pynvml, "nvmlLib", None)
    if library is None:
        return False
    try:
        getattr(library, NVML_MARKER)
    except AttributeError:  # ctypes: the library has no such symbol (real NVML)
        return False
    return True


def sampled_gpus() -> list[str]:
    """[GPUS] when the NVML this process loaded (a telemetry sampler's) is the simulator,
    else []: what a probe that sampled telemetry says it read. The library stays loaded
    after nvmlShutdown, so it can be asked after the sampling."""
    loaded = sys.modules.get("pynvml")
    return [GPUS] if loaded is not None and nvml_is_simulated(loaded) else []


def tool_is_simulated(path: str) -> bool:
    """True when the tool at `path` is one of bringup's stand-ins (a script naming itself);
    a real tool (a binary) or one that cannot be read is not."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(512)
    except OSError:
        return False
    return head.startswith(b"#!") and TOOL_MARKER in head
