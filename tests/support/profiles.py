"""The H100 test profile: an 8x H100 80GB HGX node with the public figures of each GPU
(docs/reference.md#gpu-identity, #power-limits, #nvlink, #driver-cuda-and-provisioning).

Tests that pin messages against profile numbers use it rather than the shipped h100.yaml,
so a tuned shipped profile does not move their expectations.
"""

from __future__ import annotations

from typing import Any

from bringup.profile import Profile, parse

H100: dict[str, Any] = {
    "name": "h100-test",
    "description": "8x H100 80GB HBM3 HGX",
    "gpu": {
        "model": "NVIDIA H100 80GB HBM3",
        "count": 8,
        "memory_min_bytes": 81559 * 2**20,
        "compute_capability": "9.0",
        "pci_device_id": "0x2330",
        "power_limit_w": 700,
        "bf16_dense_tflops": 989,
        "pcie_gen": 5,
        "pcie_width": 16,
    },
    "nvlink": {"version": 4, "links_per_gpu": 18, "per_pair": 18, "link_speed_gb_s": 26.562},
    "software": {"min_driver": "580.65.06", "min_cuda": "13.0", "driver_branch": "R580"},
    "nccl": {"allreduce_busbw_min_gb_s": 473},  # 8x H100 NVLS: docs/reference.md#nccl-floors
}


def h100_profile(**sections: dict[str, Any] | None) -> Profile:
    """The H100 test profile, each named section updated: h100_profile(gpu={"count": 4}).

    A section given as None is removed (a profile without NVLink, say).
    """
    data = {key: dict(value) if isinstance(value, dict) else value for key, value in H100.items()}
    for section, values in sections.items():
        data[section] = None if values is None else {**(data.get(section) or {}), **values}
    return parse(data, "tests/support/profiles.py")
