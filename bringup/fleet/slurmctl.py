"""Talking to the Slurm controller about one node: its state and reason, drain, resume.

Every call runs the Slurm client (`sinfo`, `scontrol`) directly, never through a shell, so
a reason with spaces or quotes travels as one argument; each has a wall-clock timeout
(a controller that does not answer must not hold a health check past its budget) and a
killed process group. What the output means is read by small pure functions, pinned
against real output in tests/unit/test_slurm_healthcheck.py.

    state = node_state("node3", timeout_s=2)       # NodeState(state="drained", reason=...)
    drain("node3", "bringup: gpu.ecc ...", timeout_s=2)
    resume("node3", timeout_s=2)
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from dataclasses import dataclass

# sinfo's long state (%T) of a drained node: "drained" (idle), "draining" (jobs still
# running), "drain" (either, in some versions), each maybe with a flag suffix ("drained*":
# not responding).
_DRAIN_WORDS = ("drain", "drained", "draining")


class SlurmError(Exception):
    """A Slurm client failed, timed out or is missing; the message is one line."""


@dataclass(frozen=True)
class NodeState:
    """What the controller says of a node: its long state and the reason it was set."""

    state: str  # sinfo %T without the flag suffix: "idle", "drained", "mixed", ...
    reason: str | None  # the reason an admin or a program gave; None when there is none

    @property
    def drained(self) -> bool:
        """Drained or draining: no new job lands on it."""
        return any(word in _DRAIN_WORDS for word in self.state.split("+"))


# --- what Slurm's output means: pure ------------------------------------------------------


def state_argv(node: str) -> list[str]:
    # %T then %E: the state has no spaces, so the reason is whatever follows the first one.
    return ["sinfo", "--noheader", "--Node", "--nodes", node, "--format", "%T %E"]


def drain_argv(node: str, reason: str) -> list[str]:
    return ["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"]


def resume_argv(node: str) -> list[str]:
    return ["scontrol", "update", f"nodename={node}", "state=resume"]


def parse_state(text: str, node: str) -> NodeState:
    """The node's state from `sinfo -h -N -n NODE -o "%T %E"`: one line per partition the
    node is in, all the same; no line when Slurm does not know the node."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise SlurmError(f"sinfo does not know node {node!r} (is it its Slurm node name?)")
    state, _, reason = lines[0].partition(" ")
    reason = reason.strip()
    # sinfo prints "none" where no reason was set.
    return NodeState(
        state=state.lower().rstrip("*~#!%$@^-"),
        reason=None if reason in ("", "none") else reason,
    )


# --- calling Slurm ------------------------------------------------------------------------


def call(argv: list[str], timeout_s: float) -> str:
    """Run a Slurm client; its stdout. SlurmError, one line, when it fails or times out."""
    shown = shlex.join(argv)
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        raise SlurmError(f"{shown}: {exc.strerror or exc}") from None
    try:
        stdout, stderr = proc.communicate(timeout=max(timeout_s, 0.1))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise SlurmError(f"{shown}: no answer within {timeout_s:.3g} s") from None
    if proc.returncode != 0:
        said = " ".join((stderr or stdout).split()) or f"exit status {proc.returncode}"
        raise SlurmError(f"{shown}: {said}")
    return stdout


def node_state(node: str, timeout_s: float) -> NodeState:
    return parse_state(call(state_argv(node), timeout_s), node)


def drain(node: str, reason: str, timeout_s: float) -> None:
    call(drain_argv(node, reason), timeout_s)


def resume(node: str, timeout_s: float) -> None:
    call(resume_argv(node), timeout_s)
