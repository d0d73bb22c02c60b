"""Shared pieces of the provisioning tests: the marker, tools, and the CLI as a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = REPO / "playbooks"
BIN = Path(sys.executable).parent
ANSIBLE_PLAYBOOK = shutil.which("ansible-playbook", path=str(BIN)) or shutil.which(
    "ansible-playbook"
)
ANSIBLE_LINT = shutil.which("ansible-lint", path=str(BIN)) or shutil.which("ansible-lint")

needs_ansible = pytest.mark.skipif(
    ANSIBLE_PLAYBOOK is None, reason="ansible-core not installed (pip install ansible-core)"
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "provision: Ansible provisioning (playbooks, driver)")


def ansible_env() -> dict[str, str]:
    """The environment `bringup provision` gives ansible-playbook (config, roles, PATH)."""
    env = dict(os.environ)
    env["ANSIBLE_CONFIG"] = str(PLAYBOOKS / "ansible.cfg")
    env["ANSIBLE_ROLES_PATH"] = str(PLAYBOOKS / "roles")
    env["ANSIBLE_NOCOLOR"] = "1"
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


@dataclass
class Provision:
    """One `bringup provision ... --json` run as a user would start it."""

    code: int
    stdout: str
    stderr: str


def run_provision(*args: str, env: dict[str, str] | None = None, timeout: int = 900) -> Provision:
    """`bringup provision`: the real CLI in a child process."""
    code = "from bringup.cli import app; app()"
    proc = subprocess.run(
        [sys.executable, "-c", code, "provision", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=REPO,
    )
    return Provision(proc.returncode, proc.stdout, proc.stderr)
