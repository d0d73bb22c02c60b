"""The xid probe on this machine: the real journalctl or dmesg in a child process."""

from __future__ import annotations

from bringup.node.probes import xid
from bringup.node.probes.xid import XidFacts
from bringup.node.result import ProbeError


def test_collect_reads_this_machines_kernel_log() -> None:
    """Runs the real journalctl/dmesg; either facts or a one-line ProbeError."""
    try:
        output = xid.collect(xid.Params(window_s=3600, timeout_s=30))
    except ProbeError as exc:
        assert "\n" not in str(exc) and "kernel log" in str(exc)
        return
    facts = output.facts
    assert isinstance(facts, XidFacts)
    assert facts.source in ("journalctl -k", "dmesg")
    assert facts.window_s == (3600 if facts.source == "journalctl -k" else None)
    kept = output.raw["kernel-log.txt"].splitlines()
    assert all(("nvrm" in s.lower() or "nvidia" in s.lower() or "xid" in s.lower()) for s in kept)
