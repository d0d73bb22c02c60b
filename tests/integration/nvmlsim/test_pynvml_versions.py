"""The gpu probe with the oldest nvidia-ml-py the dependency floor allows (pyproject.toml),
against the simulated NVML: the newest is the one installed, which every other test here
uses. The floor was raised to 13.580.65 because older releases lay out the v1 fabric struct
with an 80-byte cluster UUID where nvml.h has 16 bytes (fabric state misread) and have no
v2 struct: test_the_floor_reads_the_fabric_state fails on 12.535.161.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from bringup.node.parsers.smi_text import parse_q_text
from bringup.sim.nvml import apply_fault, library_env, state_from_capture, write_state
from tests.support.timing import scaled

REPO = Path(__file__).resolve().parents[3]
H200 = REPO / "tests" / "fixtures" / "smi" / "ugpuexp-h200-q-load.txt"
COLLECT = """
import dataclasses, json, pynvml
from bringup.node.probes.gpu import Params, collect
facts = dataclasses.asdict(collect(Params()).facts)
print(json.dumps({"pynvml": pynvml.__file__, "facts": facts}))
"""


def floor_version() -> str:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    (spec,) = [d for d in project["dependencies"] if d.startswith("nvidia-ml-py")]
    match = re.fullmatch(r"nvidia-ml-py>=([0-9.]+)", spec)
    assert match, spec
    return match[1]


@pytest.fixture(scope="session")
def oldest_pynvml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """nvidia-ml-py at the floor, installed into a folder of its own (from PyPI)."""
    target = tmp_path_factory.mktemp("pynvml-floor")
    argv = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target"]
    argv += [str(target), f"nvidia-ml-py=={floor_version()}"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=scaled(300))
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
        pytest.skip(f"cannot install nvidia-ml-py=={floor_version()}: {last}")
    return target


def _collect(library: Path, pynvml_dir: Path, state: dict, tmp_path: Path) -> dict:
    env = library_env(library, write_state(state, tmp_path / "state.json"))
    env["PYTHONPATH"] = f"{pynvml_dir}:{REPO}"
    proc = subprocess.run(
        [sys.executable, "-c", COLLECT],
        capture_output=True,
        text=True,
        env=env,
        timeout=scaled(120),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["pynvml"].startswith(str(pynvml_dir))  # the floor, not the installed one
    return result["facts"]


def test_the_floor_reads_the_capture(
    nvml_library: Path, oldest_pynvml: Path, tmp_path: Path
) -> None:
    facts = _collect(nvml_library, oldest_pynvml, state_from_capture(H200), tmp_path)
    parsed = dataclasses.asdict(parse_q_text(H200.read_text()))
    read, written = facts["gpus"][0], parsed["gpus"][0]
    for field in written:
        if field != "fabric_health_mask":  # NVML's v2 struct only
            assert read[field] == written[field], field


def test_the_floor_reads_the_fabric_state(
    nvml_library: Path, oldest_pynvml: Path, tmp_path: Path
) -> None:
    state = apply_fault(state_from_capture(H200), "fabric=in_progress")
    gpu = _collect(nvml_library, oldest_pynvml, state, tmp_path)["gpus"][0]
    assert (gpu["fabric_state"], gpu["fabric_status"]) == ("in_progress", "success")
