"""A diagnostic pytest plugin: which test leaves a change in the worker process that its
children inherit (environment, working directory, umask, resource limits, ignored or
blocked signals), and the Slurm logs of every simulated cluster, kept.

Why: under pytest-xdist a worker is one long process, and what a test leaves in it meets
whatever file that worker takes next (docs/contributing.md, "not yet on two workers").

    BRINGUP_STATE_LOG=/var/tmp/state pytest -p tests.support.process_state -n 2 --dist loadfile

Each worker writes DIR/<worker>.log: every test it started, in order, and under a test
each change it left; DIR/slurmlogs/ holds each simulated Slurm's logs as it stopped.
"""

from __future__ import annotations

import itertools
import os
import resource
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
_KEPT = itertools.count()


def _out() -> Path:
    out = Path(os.environ.get("BRINGUP_STATE_LOG", "state-log")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    return out


def snapshot() -> dict[str, Any]:
    """What a child process inherits from this one."""
    try:
        cwd = os.getcwd()
    except OSError as exc:  # a working directory removed under the process
        cwd = f"unreadable: {exc}"
    umask = os.umask(0)
    os.umask(umask)
    catchable = set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}
    return {
        "env": dict(os.environ),
        "cwd": cwd,
        "umask": oct(umask),
        "rlimits": {
            name: resource.getrlimit(getattr(resource, name))
            for name in dir(resource)
            if name.startswith("RLIMIT_")
        },
        "ignored": sorted(int(s) for s in catchable if signal.getsignal(s) == signal.SIG_IGN),
        "blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
    }


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    lines = []
    for key in ("env", "rlimits"):
        old, new = before[key], after[key]
        for name in sorted(set(old) | set(new)):
            if old.get(name) != new.get(name):
                lines.append(f"{key} {name}: {old.get(name)!r:.120} -> {new.get(name)!r:.120}")
    for key in ("cwd", "umask", "ignored", "blocked"):
        if before[key] != after[key]:
            lines.append(f"{key}: {before[key]} -> {after[key]}")
    return lines


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    log = _out() / f"{_WORKER}.log"
    before = snapshot()
    with log.open("a") as out:
        out.write(f"START {item.nodeid}\n")
    yield
    with log.open("a") as out:
        out.writelines(f"  LEFT {line}\n" for line in changes(before, snapshot()))


def pytest_configure(config: pytest.Config) -> None:
    from bringup.sim import slurm

    stop = slurm.SimSlurm.stop

    def keep_logs_then_stop(self: slurm.SimSlurm) -> None:
        kept = _out() / "slurmlogs" / f"{_WORKER}-{next(_KEPT)}"
        shutil.copytree(self.dir / "log", kept, dirs_exist_ok=True)
        stop(self)

    slurm.SimSlurm.stop = keep_logs_then_stop  # type: ignore[method-assign]
