"""The gpu probe's own collect() against the simulated NVML built from a real capture.

The probe is not this simulator's to fix: the test that wants every field right is marked
xfail with the defects it shows; the other pins every field that already comes back right.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bringup.node.parsers.smi_text import parse_q_text
from bringup.sim.nvml import apply_fault, state_from_capture

H200 = Path(__file__).resolve().parents[2] / "fixtures" / "smi" / "ugpuexp-h200-q-load.txt"
RunPynvml = Callable[[dict[str, Any], str], Any]  # the conftest fixture run_pynvml

COLLECT = """
import dataclasses
from bringup.node.probes.gpu import Params, collect
out.update(dataclasses.asdict(collect(Params()).facts))
"""
# What the probe does not yet read right (see the module docstring).
KNOWN_WRONG = {"slowdown_tlimit_c", "fabric_state", "fabric_status"}


def _expected() -> dict[str, Any]:
    facts = dataclasses.asdict(parse_q_text(H200.read_text()))
    facts["source"] = "nvml"
    return facts


def test_gpu_probe_reads_every_other_field_right(run_pynvml: RunPynvml) -> None:
    # Its fabric call crashes the process (below): answer NOT_SUPPORTED to read the rest.
    state = apply_fault(state_from_capture(H200), "not-supported=nvmlDeviceGetGpuFabricInfo")
    facts = run_pynvml(state, COLLECT)
    expected = _expected()
    for gpu in (*facts["gpus"], *expected["gpus"]):
        for name in KNOWN_WRONG:
            del gpu[name]
    assert facts == expected


@pytest.mark.xfail(
    reason="gpu probe: nvmlDeviceGetGpuFabricInfo is passed the struct by value, not byref "
    "(segfault); NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT (194) is never read",
    strict=False,
)
def test_gpu_probe_matches_the_capture(run_pynvml: RunPynvml) -> None:
    assert run_pynvml(state_from_capture(H200), COLLECT) == _expected()
