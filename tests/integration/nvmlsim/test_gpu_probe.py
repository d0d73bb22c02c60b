"""The gpu probe's own collect() and the telemetry sampler, through the real pynvml, against
the simulated NVML built from recorded captures (tests/fixtures/smi/SOURCES.md).

Two independent paths must agree: the facts the probe reads through NVML from a state built
from a capture equal, field by field, the facts parsed from the capture's own text. The
other tests pin the defects a read of nvml.h and nvidia-ml-py found on the NVML path, each
of which failed before its fix (the pure ones: tests/unit/test_gpu_truth.py).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bringup.node.parsers.smi_text import parse_q_text
from bringup.node.parsers.smi_xml import parse_q_xml
from bringup.sim.nvml import apply_fault, library_env, state_from_capture, state_from_profile
from bringup.sim.nvml import write_state as write_nvml_state
from tests.support.timing import scaled

REPO = Path(__file__).resolve().parents[3]
SMI = REPO / "tests" / "fixtures" / "smi"
RunPynvml = Callable[[dict[str, Any], str], Any]  # the conftest fixture run_pynvml

CAPTURES = [
    "ugpuexp-h200-q-load.txt",
    "ugpuexp-h100-q-load.txt",
    "ugpuexp-h100-q-idle.txt",
    "telegraf-a100-sxm4-x4-mig-535-q-x.xml",
    "netdata-a100-sxm4-40gb-mig-510-q-x.xml",
    "mleng-a100-sxm4-80gb-q-excerpt-remapped-rows-pending.txt",
    # NVL72 trays (Gen6 GPU under a Gen5 Grace link; fabric clique) and an HGX B200 board.
    "k8stestinfra-gb200x4-580-q-x.xml",
    "k8stestinfra-gb300x4-580-q-x.xml",
    "k8stestinfra-b200x8-580-q-x.xml",
]
COLLECT = """
import dataclasses
from bringup.node.probes.gpu import Params, collect
out.update(dataclasses.asdict(collect(Params()).facts))
"""
# nvidia-ml-py 12.535.161, which the dependency floor allows, has neither call: the probe
# must fall back to the old ones, not fail (taken away here from the installed one).
AS_OLD_PYNVML = """
for name in ("nvmlDeviceGetTemperatureV", "nvmlDeviceGetMarginTemperature",
             "nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfo_v2_t"):
    delattr(pynvml, name)
"""


def _parsed(name: str) -> dict[str, Any]:
    text = (SMI / name).read_text()
    facts = parse_q_xml(text) if name.endswith(".xml") else parse_q_text(text)
    return dataclasses.asdict(facts)


@pytest.mark.parametrize("capture", CAPTURES)
def test_the_probe_through_nvml_equals_the_capture_field_by_field(
    run_pynvml: RunPynvml, capture: str
) -> None:
    through_nvml = run_pynvml(state_from_capture(SMI / capture), COLLECT)
    parsed = _parsed(capture)
    assert through_nvml.pop("source") == "nvml"
    parsed.pop("source")
    # The probe reads the IMEX service beside NVML (none on this machine); a capture of
    # nvidia-smi shows no IMEX (tests/integration/nvmlsim/test_imex_probe.py).
    assert through_nvml.pop("imex")["domain"] is None
    assert parsed.pop("imex") is None
    assert through_nvml.keys() == parsed.keys()
    if parsed["attached_gpus"] > len(parsed["gpus"]):
        # A trimmed log (telegraf's: 4 attached, 1 listed): the state holds only the GPUs
        # the log shows, so NVML counts those.
        parsed["attached_gpus"] = len(parsed["gpus"])
    for key in through_nvml.keys() - {"gpus"}:
        assert through_nvml[key] == parsed[key], key
    assert len(through_nvml["gpus"]) == len(parsed["gpus"])
    for read, written in zip(through_nvml["gpus"], parsed["gpus"], strict=True):
        # The health mask exists only in NVML's v2 fabric struct, not in nvidia-smi's text.
        read.pop("fabric_health_mask")
        written.pop("fabric_health_mask")
        # How the capture was taken (`nvidia-smi -q -i BUS`: one GPU chosen by bus id), not
        # what the GPU reports: NVML always lists the node's GPUs.
        read.pop("by_bus_id")
        written.pop("by_bus_id")
        # The fields nvidia-smi printed "N/A" (an A100's remapped rows under MIG): NVML
        # answers "not supported" there, which the probe reads as not reported.
        read.pop("not_available")
        written.pop("not_available")
        for field in written:
            assert read[field] == written[field], f"GPU {written['index']}: {field}"


def test_fabric_state_is_read_by_reference(run_pynvml: RunPynvml) -> None:
    # Before: the struct went by value and the process died (SIGSEGV) in the fabric call.
    state = apply_fault(state_from_capture(SMI / "ugpuexp-h200-q-load.txt"), "fabric=in_progress")
    facts = run_pynvml(state, COLLECT)
    gpu = facts["gpus"][0]
    assert (gpu["fabric_state"], gpu["fabric_status"], gpu["fabric_health_mask"]) == (
        "in_progress",
        "success",
        0,
    )


def test_a_lost_gpu_is_named_and_the_others_are_read(run_pynvml: RunPynvml) -> None:
    # Before: GPU_IS_LOST from nvmlDeviceGetHandleByIndex failed the whole probe.
    facts = run_pynvml(apply_fault(state_from_profile("b300"), "lost:1"), COLLECT)
    assert [g["error"] for g in facts["gpus"]] == [None, "NVML: GPU is lost", *[None] * 6]
    assert [g["name"] for g in facts["gpus"]][:3] == [
        "NVIDIA B300 SXM6 AC",
        "unknown",
        "NVIDIA B300 SXM6 AC",
    ]


def test_nvlink_speed_and_slowdown_tlimit_come_from_nvml_fields(run_pynvml: RunPynvml) -> None:
    # Before: NVML_FI_DEV_NVLINK_GET_SPEED (164) and ..._SLOWDOWN_TLIMIT (194) were never read.
    b300 = run_pynvml(state_from_profile("b300"), COLLECT)["gpus"][0]
    assert {link["speed_bytes_per_s"] for link in b300["nvlinks"]} == {53.125e9}
    h200 = run_pynvml(state_from_capture(SMI / "ugpuexp-h200-q-load.txt"), COLLECT)["gpus"][0]
    assert (h200["tlimit_margin_c"], h200["slowdown_tlimit_c"]) == (35.0, -2.0)


def test_an_old_nvidia_ml_py_takes_the_fallbacks(run_pynvml: RunPynvml) -> None:
    # Before: `get(nvml.nvmlDeviceGetTemperatureV, ...)` raised AttributeError before the
    # guard was entered, and the probe failed instead of using nvmlDeviceGetTemperature.
    facts = run_pynvml(state_from_capture(SMI / "ugpuexp-h200-q-load.txt"), AS_OLD_PYNVML + COLLECT)
    gpu = facts["gpus"][0]
    assert gpu["temperature_c"] == _parsed("ugpuexp-h200-q-load.txt")["gpus"][0]["temperature_c"]
    assert gpu["tlimit_margin_c"] is None  # that call is gone: unknown, not a failure
    assert gpu["fabric_state"] == "completed"  # read through the v1 call, by reference


def test_the_sampler_survives_an_old_nvidia_ml_py(run_pynvml: RunPynvml) -> None:
    # Before: the sampler thread died on AttributeError (it caught only its own error type)
    # and the timeline had no samples and no error.
    code = (
        AS_OLD_PYNVML
        + """
from bringup.node.probes.telemetry import sample_for
timeline = sample_for(0.6, interval_s=0.2)
out.update(samples=len(timeline.samples), error=timeline.error,
           temperature=timeline.samples[0].temperature_c if timeline.samples else None)
"""
    )
    result = run_pynvml(state_from_capture(SMI / "ugpuexp-h200-q-load.txt"), code)
    assert result["error"] is None and result["samples"] >= 3
    assert result["temperature"] == 52.0


@pytest.mark.parametrize("driver", ["575.57.08", "580.65.06"])
def test_diagnose_names_gpu5_hw_thermal_on_both_driver_branches(
    nvml_library: Path, tmp_path: Path, driver: str
) -> None:
    """`bringup diagnose --watch` for 10 s on eight B300 GPUs, GPU 5 in HW thermal slowdown
    from 3 s: the same finding whether the counters are at 251-253 (R575) or 269-271 (R580).
    Before: on R575 the counter read at 270 (a power-smoothing field) erased the share."""
    state = apply_fault(state_from_profile("b300", driver=driver), "hw-thermal:5=3")
    state_path = write_nvml_state(state, tmp_path / "state.json")
    env = library_env(nvml_library, state_path)
    env["PYTHONPATH"] = str(REPO)
    argv = [sys.executable, "-m", "bringup.cli", "diagnose", "--local", "--watch"]
    argv += ["--seconds", "10", "--profile", "b300", "--out", str(tmp_path / "run"), "--json"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=scaled(120))
    assert proc.returncode == 1, proc.stderr[-2000:]
    findings = json.loads(proc.stdout)["findings"]
    thermal = [f for f in findings if f["status"] == "FAIL" and "GPU 5" in f["message"]]
    assert len(thermal) == 1, findings
    message = thermal[0]["message"]
    assert message.startswith("GPU 5: HW thermal slowdown ") and "% of the time" in message
    share = float(message.split("HW thermal slowdown ")[1].split("%")[0])
    assert 60 <= share <= 80  # on from 3 s of 10 s: about 70%
    assert not [f for f in findings if f["status"] == "FAIL" and "GPU 5" not in f["message"]]


def _check_local(library: Path, state: dict[str, Any], profile: str, tmp_path: Path) -> dict:
    """`bringup check --local --suite quick` on this machine, its NVML the simulated one."""
    env = library_env(library, write_nvml_state(state, tmp_path / "state.json"))
    env["PYTHONPATH"] = str(REPO)
    argv = [sys.executable, "-m", "bringup.cli", "check", "--local", "--suite", "quick"]
    argv += ["--profile", profile, "--out", str(tmp_path / "run"), "--json"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=scaled(180))
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return {f["check"]: f for f in json.loads(proc.stdout)["findings"] if f["check"][:4] == "gpu."}


def test_check_local_judges_every_gpu_check_of_the_h200_capture(
    nvml_library: Path, tmp_path: Path
) -> None:
    gpu = _check_local(
        nvml_library, state_from_capture(SMI / "ugpuexp-h200-q-load.txt"), "h200", tmp_path
    )
    assert len(gpu) == 12 and not [c for c, f in gpu.items() if f["status"] == "ERROR"]
    # What the capture shows, judged: one GPU (the capture is of one), its model and memory,
    # power limit, temperatures and ECC mode.
    assert gpu["gpu.count"]["message"] == "1 GPUs, expected 8"
    assert gpu["gpu.model"]["message"] == "1/1 GPUs: NVIDIA H200, >= 142333 MiB"
    assert gpu["gpu.power"]["message"] == "1/1 GPUs: power limit >= 700 W, not lowered"
    assert (
        gpu["gpu.thermal"]["status"] == "PASS" and "GPU 0 at 52 C" in gpu["gpu.thermal"]["message"]
    )
    assert gpu["gpu.ecc"]["message"] == "1/1 GPUs: ECC enabled, no uncorrected errors"


def test_check_local_names_a_lost_gpu_and_a_fabric_in_progress(
    nvml_library: Path, tmp_path: Path
) -> None:
    state = apply_fault(state_from_profile("b300"), "lost:1")
    state = apply_fault(state, "fabric:3=in_progress")
    gpu = _check_local(nvml_library, state, "b300", tmp_path)
    assert gpu["gpu.count"]["status"] == "FAIL"
    assert gpu["gpu.count"]["message"] == (
        "GPU 1: NVML: GPU is lost (7 of 8 GPUs readable, expected 8)"
    )
    assert gpu["gpu.fabric"]["status"] == "FAIL"
    assert gpu["gpu.fabric"]["message"] == "GPU 3: fabric state in_progress, status success"
    others = {c: f["status"] for c, f in gpu.items() if c not in ("gpu.count", "gpu.fabric")}
    assert set(others.values()) == {"PASS"}, others  # the other seven GPUs judged healthy


@pytest.mark.parametrize(
    ("capture", "profile"),
    [("k8stestinfra-gb200x4-580-q-x.xml", "gb200"), ("k8stestinfra-gb300x4-580-q-x.xml", "gb300")],
)
def test_check_local_judges_an_nvl72_tray_by_its_own_profile(
    nvml_library: Path, tmp_path: Path, capture: str, profile: str
) -> None:
    """A live node whose NVML is the tray's capture: --profile auto picks the tray's profile,
    and nothing of the healthy tray fails (Before: one profile.auto ERROR)."""
    gpu = _check_local(nvml_library, state_from_capture(SMI / capture), "auto", tmp_path)
    assert gpu["gpu.count"]["message"] == "4 GPUs, as expected"
    # This machine runs no IMEX, which a tray needs: that alone is not judged healthy
    # (tests/integration/nvmlsim/test_imex_probe.py gives the tray its IMEX).
    imex = gpu.pop("gpu.imex")
    assert (imex["status"], imex["message"]) == (
        "ERROR",
        "IMEX not read: nvidia-imex-ctl not found (the nvidia-imex package is not installed)",
    )
    assert not [c for c, f in gpu.items() if f["status"] in ("FAIL", "ERROR")], gpu
    lines = (tmp_path / "run" / "findings.jsonl").read_text().splitlines()
    (auto,) = [f for f in map(json.loads, lines) if f["check"] == "profile.auto"]
    assert (auto["status"], auto["value"]) == ("PASS", profile)


RECORD = """
from bringup.node.protocol import run_one
record = run_one("{probe}", {params})
out.update(ok=record["ok"], error=record["error"], provenance=record.get("provenance"))
"""


@pytest.mark.parametrize(
    ("probe", "params"), [("gpu", "{}"), ("telemetry", "{'seconds': 0.3, 'interval_s': 0.1}")]
)
def test_the_simulator_makes_itself_known_to_the_probe(
    run_pynvml: RunPynvml, probe: str, params: str
) -> None:
    """The simulated library marks every record it answered "simulated GPUs", through the
    library itself (no environment variable): such a run is never a live measurement."""
    record = run_pynvml(state_from_profile("b300"), RECORD.format(probe=probe, params=params))
    assert record["ok"], record["error"]
    assert record["provenance"] == [{"kind": "simulated", "of": "GPUs"}]


def test_real_nvml_leaves_the_record_live() -> None:
    """The marker is the simulator's own symbol: a library without it (the real NVML, or
    none) is not called simulated."""
    from types import SimpleNamespace

    from bringup.node.simulated import nvml_is_simulated

    class RealNvml:  # ctypes.CDLL raises AttributeError for a symbol the library lacks
        def __getattr__(self, name: str) -> object:
            raise AttributeError(name)

    assert not nvml_is_simulated(SimpleNamespace(nvmlLib=RealNvml()))
    assert not nvml_is_simulated(SimpleNamespace(nvmlLib=None))
