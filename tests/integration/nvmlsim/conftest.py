"""The simulated NVML, compiled once per session and loaded by the real pynvml in a child.

A child process, because pynvml loads libnvidia-ml.so.1 once per process and the state is
read at nvmlInit: each test gets a fresh library load with its own state and clock.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bringup.sim.nvml import NvmlSimError, build_library, library_env, write_state
from tests.support.timing import scaled

REPO = Path(__file__).resolve().parents[3]
SMI = REPO / "tests" / "fixtures" / "smi"

RunPynvml = Callable[[dict[str, Any], str], Any]


@pytest.fixture(scope="session")
def nvml_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """libnvidia-ml.so.1 built from nvml_sim.c; skipped where there is no cc or no nvml.h."""
    try:
        return build_library(tmp_path_factory.mktemp("nvmlsim"))
    except NvmlSimError as exc:
        pytest.skip(f"cannot build the simulated NVML: {exc}")


@pytest.fixture
def run_pynvml(nvml_library: Path, tmp_path: Path) -> RunPynvml:
    """Run `code` (Python, with `pynvml` imported and `out` a dict) in a child process that
    loads the simulator with `state`; returns `out` as JSON gave it back."""

    def run(state: dict[str, Any], code: str) -> Any:
        state_path = write_state(state, tmp_path / "state.json")
        script = "import json, pynvml\nout = {}\n" + textwrap.dedent(code)
        script += "\nprint(json.dumps(out))\n"
        env = library_env(nvml_library, state_path)
        env["PYTHONPATH"] = str(REPO)
        result = subprocess.run(
            [sys.executable, "-X", "faulthandler", "-c", script],
            capture_output=True,
            text=True,
            env=env,
            timeout=scaled(120),
        )
        if result.returncode != 0:
            tail = (result.stderr or result.stdout).strip().splitlines()[-6:]
            raise AssertionError(f"child exited {result.returncode}: " + " | ".join(tail))
        return json.loads(result.stdout.strip().splitlines()[-1])

    return run
