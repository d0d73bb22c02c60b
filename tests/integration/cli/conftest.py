"""The real `bringup` CLI in a child process, as a user would run it: the `cli` fixture."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bringup.sim.nvml import NvmlSimError, build_library
from tests.support.cli import run_cli


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def run(
    *args: str | Path,
    cwd: Path | None = None,
    timeout: float = 300,
    env: dict[str, str] | None = None,
) -> Result:
    proc = run_cli(*args, cwd=cwd, env=env, timeout=timeout)
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="session")
def cli() -> Callable[..., Result]:
    return run


@pytest.fixture(scope="session")
def nvml_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """libnvidia-ml.so.1 built from nvml_sim.c for the health check's tests; skipped where
    there is no cc or no nvml.h."""
    try:
        return build_library(tmp_path_factory.mktemp("nvmlsim"))
    except NvmlSimError as exc:
        pytest.skip(f"cannot build the simulated NVML: {exc}")
