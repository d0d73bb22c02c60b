"""The provisioning tests' tools: Ansible's own binaries beside this interpreter, the
environment `bringup provision` gives them, and `bringup provision` run as a user would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO
from tests.support.cli import run_cli

PLAYBOOKS = REPO / "playbooks"
BIN = Path(sys.executable).parent
ANSIBLE_PLAYBOOK = shutil.which("ansible-playbook", path=str(BIN)) or shutil.which(
    "ansible-playbook"
)
ANSIBLE_LINT = shutil.which("ansible-lint", path=str(BIN)) or shutil.which("ansible-lint")

needs_ansible = pytest.mark.skipif(
    ANSIBLE_PLAYBOOK is None, reason="ansible-core not installed (pip install ansible-core)"
)


def ansible_env() -> dict[str, str]:
    """The environment `bringup provision` gives ansible-playbook (config, roles, PATH)."""
    env = dict(os.environ)
    env["ANSIBLE_CONFIG"] = str(PLAYBOOKS / "ansible.cfg")
    env["ANSIBLE_ROLES_PATH"] = str(PLAYBOOKS / "roles")
    env["ANSIBLE_NOCOLOR"] = "1"
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def run_provision(
    *args: str, env: dict[str, str] | None = None, timeout: int = 900
) -> subprocess.CompletedProcess[str]:
    """`bringup provision ARGS`: the real CLI in a child process, from the repository."""
    return run_cli("provision", *args, cwd=REPO, env=env, timeout=timeout)
