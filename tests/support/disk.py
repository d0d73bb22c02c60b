"""Whether this machine has the free disk the integration tier needs.

The simulated nodes share this machine's disk: their host.free_space check judges it (against
the 1 GB floor of bringup.sim.faults.sim_profile), their NVMe probe runs fio on it, and the
provisioning tests build Debian root filesystems on it. On a nearly full disk those tests fail
far from the cause (a node FAIL on host.free_space, an fio probe that ends before a stop
request reaches it), so the run stops at its start with one line instead.
"""

from __future__ import annotations

import os

# A whole `make test` leaves 0.65 GB in its pytest basetemp, and pytest keeps the last three;
# the simulated nodes' floor is 1 GB beyond whatever the tests hold.
NEEDED_BYTES = 4 * 10**9


def shortfall(path: str, needed: int = NEEDED_BYTES) -> str | None:
    """The line to stop on when `path`'s file system has less than `needed` bytes free."""
    stats = os.statvfs(path)
    return shortfall_line(path, stats.f_bavail * stats.f_frsize, needed)


def shortfall_line(path: str, free: int, needed: int = NEEDED_BYTES) -> str | None:
    """The line for `free` bytes free on `path` where `needed` are; None when enough."""
    if free >= needed:
        return None
    return (
        f"only {free / 10**9:.1f} GB free on {path}, the integration tests need "
        f"{needed / 10**9:.0f} GB: the simulated nodes share this disk and judge its free "
        "space, so they would fail on it; free some space and run again"
    )
