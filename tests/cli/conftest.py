"""Run the real `bringup` CLI in a child process, as a user would."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def run_cli(
    *args: str | Path,
    cwd: Path | None = None,
    timeout: float = 300,
    env: dict[str, str] | None = None,
) -> Result:
    proc = subprocess.run(
        [sys.executable, "-m", "bringup.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env=env,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="session")
def cli():
    return run_cli
