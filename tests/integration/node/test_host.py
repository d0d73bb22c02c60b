"""The host probe against what a child process of this machine reports (`ulimit` in sh)."""

from __future__ import annotations

import resource
import subprocess

from bringup.node.probes import host


def test_memlock_limits_match_the_shell() -> None:
    soft, hard = host.memlock_limits()
    out = subprocess.run(["sh", "-c", "ulimit -l"], capture_output=True, text=True, check=True)
    shell = out.stdout.strip()  # KiB, or "unlimited"
    assert soft == (None if shell == "unlimited" else int(shell) * 1024)
    raw_hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    assert hard == (None if raw_hard == resource.RLIM_INFINITY else raw_hard)
