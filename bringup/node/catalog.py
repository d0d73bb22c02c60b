"""The one list of probes: name -> module. Each module has `Params`, a facts class and `collect`.

A probe module defines:
  - `Params`: a dataclass of its parameters with defaults (suites set them by name);
  - `FACTS`: the dataclass its `collect` returns as `ProbeOutput.facts`;
  - `collect(params: Params) -> ProbeOutput`, raising `ProbeError` when it cannot measure.
"""

from __future__ import annotations

from types import ModuleType

from bringup.node.probes import (
    burnin,
    dcgm,
    gemm,
    gpu,
    host,
    nccl,
    nvme,
    p2p,
    storage,
    telemetry,
    topology,
    uplink,
    xid,
)

PROBES: dict[str, ModuleType] = {
    "gpu": gpu,
    "topology": topology,
    "host": host,
    "nvme": nvme,
    "storage": storage,
    "uplink": uplink,
    "xid": xid,
    "dcgm": dcgm,
    "nccl": nccl,
    "gemm": gemm,
    "p2p": p2p,
    "telemetry": telemetry,
    "burnin": burnin,
}
