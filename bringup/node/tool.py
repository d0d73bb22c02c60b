"""Run a command on the node with a hard wall-clock timeout."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass
class CommandResult:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False


def which(name: str) -> str | None:
    """Path of an executable, also looking in sbin folders that a non-login PATH may lack."""
    extra = "/usr/sbin:/sbin:/usr/local/sbin:/usr/bin:/bin"
    return shutil.which(name, path=os.environ.get("PATH", "") + ":" + extra)


def run(argv: list[str], timeout_s: float, env: dict[str, str] | None = None) -> CommandResult:
    """Run argv (never through a shell) and kill its whole process group at the deadline.

    subprocess.run's own timeout kills only the child; a tool that forks (fio, nccl-tests
    under mpirun) would leave grandchildren holding the pipes, so we own the group.
    """
    try:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            start_new_session=True,
            env=env,
        )
    except OSError as exc:
        return CommandResult(argv, 127, "", f"{argv[0]}: {exc.strerror or exc}")
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
        return CommandResult(argv, proc.returncode, stdout, stderr)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        return CommandResult(argv, -9, stdout or "", stderr or "", timed_out=True)


def package_root() -> str:
    """The folder (or the zip the controller shipped) that holds the `bringup` package: what
    a child interpreter (a collective rank, the burn-in trainer) needs on its PYTHONPATH."""
    return str(Path(__file__).resolve().parents[2])  # .../bringup/node/tool.py -> ...
