"""Helpers the tests import: the real CLI (in a child process or in-process), a local sshd,
the H100 test profile, recorded report runs, the simulated cluster and Ansible.

They live here, not in a conftest.py, because test modules import them by name
(`from tests.support.cli import run_cli`); pytest's conftest files are for fixtures and hooks.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"  # real recorded tool outputs, SOURCES.md in each folder
