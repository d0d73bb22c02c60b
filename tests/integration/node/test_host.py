"""The host probe against what a child process of this machine reports (`ulimit` in sh)."""

from __future__ import annotations

import resource
import subprocess

from bringup.node.identity import SystemIdentity
from bringup.node.probes import host


def test_memlock_limits_match_the_shell() -> None:
    soft, hard = host.memlock_limits()
    out = subprocess.run(["sh", "-c", "ulimit -l"], capture_output=True, text=True, check=True)
    shell = out.stdout.strip()  # KiB, or "unlimited"
    assert soft == (None if shell == "unlimited" else int(shell) * 1024)
    raw_hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    assert hard == (None if raw_hard == resource.RLIM_INFINITY else raw_hard)


def test_the_host_probe_records_the_identity_and_its_tool_outputs() -> None:
    out = host.collect(host.Params(paths=[]))
    ident = out.facts.identity
    assert isinstance(ident, SystemIdentity)
    assert "dmi.txt" in out.raw
    # Whatever this machine lacks is said, field by field, never left silent.
    for name in ("bmc_firmware", "fabric_manager_version", "chassis_serial"):
        assert getattr(ident, name) is not None or name in ident.unavailable, name
