"""`bringup slurm healthcheck`: is this node fit for the next job, within a few seconds?

Slurm runs it as HealthCheckProgram, Prolog or Epilog (docs/slurm.md). It runs a fast
suite on the local node through the one run path (fleet.plan, fleet.run, the local
transport), records the run like any other, and says fit (exit 0) or unfit (exit 1).
With --drain it drains an unfit node with a one-line reason, and resumes a node it
drained itself once it passes again; a node drained by anyone else is left as it is.

The decisions are the small pure functions below (`reason_text`, `decide`,
`fit_to_budget`, `exit_code`); talking to Slurm is fleet.slurmctl.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bringup.checks.auto import CHECK as AUTO_CHECK
from bringup.files import is_link
from bringup.findings import Finding, Status
from bringup.fleet.transport import Runner, Stage, TransportError

if TYPE_CHECKING:  # Slurm is asked only with --drain
    from bringup.fleet.slurmctl import NodeState

# The exit codes Slurm reads (docs/slurm.md#exit-codes).
EXIT_FIT = 0
EXIT_UNFIT = 1  # a FAIL or an ERROR: what could not be measured is not healthy either
EXIT_USAGE = 2  # bad options; as every bringup command

# What marks a drain as ours: a node drained with another reason is never resumed by us.
REASON_PREFIX = "bringup: "
# sinfo -R prints the whole reason, but a screen does not; the check and the start of its
# message say what is wrong, the run directory says the rest.
MAX_REASON = 120
# Seconds the node side needs before its first probe runs (an interpreter, the probe
# modules imported), kept out of the probes' share of the budget.
NODE_START_S = 1.5
# Seconds kept for judging, writing the run and (with --drain) asking Slurm, as a share of
# the budget and at most this many.
SLURM_SHARE = 0.25
SLURM_MAX_S = 3.0


class Action(str, Enum):
    """What --drain does to the node."""

    NONE = "none"  # as it should be already
    DRAIN = "drain"  # unfit: drain it (or update our own reason)
    RESUME = "resume"  # fit again, drained by us: resume it
    KEEP = "keep"  # drained by someone else: never touched


# --- decisions: pure ---------------------------------------------------------------------


def exit_code(findings: list[Finding]) -> int:
    """0 when every check passed or warned; 1 when any FAILed, ERRORed or was unreachable."""
    return EXIT_UNFIT if any(f.status.bad for f in findings) else EXIT_FIT


def reason_text(findings: list[Finding]) -> str | None:
    """The one-line drain reason, or None for a fit node:
    "bringup: gpu.remapped_rows GPU 3 row remap pending (+1 more)".

    A FAIL is named before an ERROR: a fault that was measured says more than a probe that
    could not run (which often follows from it); and a probe's own ERROR before the
    `profile.auto` ERROR that follows from it (no GPU answered, so no model to judge by)."""
    bad = [f for f in findings if f.status.bad]
    if not bad:
        return None
    cause = [f for f in bad if f.check != AUTO_CHECK] or bad
    first = next((f for f in bad if f.status is Status.FAIL), cause[0])
    more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
    text = f"{first.check} {_flat(first.message)}"
    room = MAX_REASON - len(REASON_PREFIX) - len(more)
    if len(text) > room:
        text = text[: room - 3].rstrip() + "..."
    return REASON_PREFIX + text + more


def _flat(message: str) -> str:
    """A message as one plain line: "GPU 3: row remap pending" -> "GPU 3 row remap pending".

    Slurm keeps the reason as one string; control characters and double quotes (which
    scontrol's own parser would take as delimiters) are dropped."""
    text = " ".join("".join(c if c.isprintable() else " " for c in message).split())
    text = text.replace('"', "'")
    # A short "part: " in front (GPU 3, GPU 0000:ba:00, nvme0n1) loses its colon.
    cut = text.find(": ")
    if 0 < cut <= 24 and text[0].isalpha():
        return f"{text[:cut]} {text[cut + 2 :]}"
    return text


def ours(state: NodeState) -> bool:
    return state.reason is not None and state.reason.startswith(REASON_PREFIX)


def decide(reason: str | None, state: NodeState) -> Action:
    """What to do with the node: `reason` is reason_text() of this run (None: fit)."""
    if state.drained and not ours(state):
        return Action.KEEP
    if reason is not None:
        return Action.NONE if state.drained and state.reason == reason else Action.DRAIN
    return Action.RESUME if state.drained else Action.NONE


def probe_seconds(budget_s: float, drain: bool) -> float:
    """The share of the budget the node side gets; the rest judges, writes and asks Slurm."""
    kept = min(SLURM_MAX_S, budget_s * SLURM_SHARE) if drain else min(1.0, budget_s * 0.1)
    return max(budget_s - kept, 0.1)


def fit_to_budget(request: dict[str, Any], seconds: float) -> dict[str, Any]:
    """The request with every probe's timeout shrunk in proportion, so the probes together
    fit in `seconds` after the node side's start; unchanged when they fit.

    Each probe is then stopped at its share by the node side, with every tool it started
    (a hung nvidia-smi is killed there), and a hung first probe leaves time for the others.
    The tools' own timeouts (a probe's `timeout_s` parameter) are left as the suite set
    them: a tool that hangs past its probe's share fails the probe."""
    steps = request["probes"]
    total = sum(float(s["timeout_s"]) for s in steps)
    room = max(seconds - NODE_START_S, 0.1)
    if total <= room:
        return request
    factor = room / total
    fitted = [{**s, "timeout_s": round(float(s["timeout_s"]) * factor, 3)} for s in steps]
    return {**request, "probes": fitted}


# The node side's words for a probe it stopped at its deadline (bringup.node.protocol).
_TIMED_OUT = re.compile(r"^probe (?P<probe>\S+) timed out after (?P<s>[0-9.]+) s$")


def budget_error(error: str | None, budget_s: float) -> str | None:
    """A probe stopped at its share of the budget, said as the budget's:
    "did not finish within the 10 s budget (probe gpu stopped after 5.3 s)"."""
    match = _TIMED_OUT.match(error or "")
    if match is None:
        return error
    return (
        f"did not finish within the {budget_s:g} s budget "
        f"(probe {match['probe']} stopped after {match['s']} s)"
    )


def within_budget(runner: Runner, budget_s: float) -> Runner:
    """The runner, with the failures its deadlines cause said as the budget's: each probe
    stopped at its share, and the whole node side stopped at what is left of the budget."""

    def runner_in_budget(
        request: dict[str, Any], deadline_s: float, stop: threading.Event, on_stage: Stage
    ) -> Iterator[dict[str, Any]]:
        end = time.monotonic() + deadline_s
        try:
            for record in runner(request, deadline_s, stop, on_stage):
                yield {**record, "error": budget_error(record.get("error"), budget_s)}
        except TransportError:
            if time.monotonic() >= end - 0.05:
                raise TransportError(f"did not finish within the {budget_s:g} s budget") from None
            raise

    return runner_in_budget


# --- where it runs and where its runs go ---------------------------------------------------


def slurm_node_name(given: str | None, env: dict[str, str] | None = None) -> str:
    """The node's Slurm name: SLURMD_NODENAME (set by slurmd for HealthCheckProgram, Prolog,
    Epilog and every task), else --node, else the short hostname. Never the hostname first:
    containers and some sites give every node the same one."""
    environ = os.environ if env is None else env
    return environ.get("SLURMD_NODENAME") or given or socket.gethostname().split(".")[0]


def default_runs_dir(env: dict[str, str] | None = None) -> Path:
    """Where health-check runs are kept without --out: BRINGUP_HEALTHCHECK_DIR, else
    /var/lib/bringup/healthcheck for root (slurmd runs the checks as root), else the user's
    state directory. Never a fixed path under /tmp, which every user can write."""
    environ = os.environ if env is None else env
    if environ.get("BRINGUP_HEALTHCHECK_DIR"):
        return Path(environ["BRINGUP_HEALTHCHECK_DIR"])
    if os.geteuid() == 0:
        return Path("/var/lib/bringup/healthcheck")
    state = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "bringup" / "healthcheck"


_RUN_NAME = re.compile(r"^[0-9]{8}T[0-9]{6}Z-healthcheck(-[0-9]+)?$")


def new_run_path(runs: Path, now: datetime | None = None) -> Path:
    """A new, empty directory under `runs`: <UTC time>-healthcheck (-2, -3, ... when a
    prolog and a periodic check start in the same second)."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    runs.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        path = runs / (f"{stamp}-healthcheck" + (f"-{n}" if n > 1 else ""))
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise OSError(f"{runs}: too many health-check runs in one second")


def prune_runs(runs: Path, keep: int, current: Path | None = None) -> list[Path]:
    """Remove all but the `keep` most recently modified health-check runs under `runs`
    (only directories named as new_run_path names them, never a symlink), and never
    `current`, the run just written; the removed paths.

    By modification time, not by name: a name is the clock's at the start, and a run
    named from a clock that was ahead would otherwise outlive every run after it, or the
    run just written be the one removed."""
    found = []
    for path in runs.iterdir():
        if current is not None and path.name == current.name:
            continue  # kept, and counted as one of the `keep`
        if _RUN_NAME.match(path.name) and not is_link(path) and path.is_dir():
            with contextlib.suppress(OSError):  # gone meanwhile: nothing to prune
                found.append((path.stat().st_mtime_ns, path.name, path))
    found.sort()
    others = keep - 1 if current is not None else keep
    old = [path for _, _, path in found[: max(len(found) - others, 0)]]
    for path in old:
        shutil.rmtree(path, ignore_errors=True)
    return old
