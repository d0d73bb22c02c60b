"""A diagnostic pytest plugin: which test leaves a change in the worker process that its
children inherit (environment, working directory, umask, resource limits, ignored or
blocked signals, namespaces, host name) or that it holds (open descriptors, child
processes, threads), and the Slurm logs of every simulated cluster, kept.

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
        # A network namespace entered and not left sends every later srun and ssh of the
        # worker into it; a UTS one changes the host name slurmctld is started by.
        "namespaces": _namespaces(),
        "hostname": os.uname().nodename,
        "fds": len(_listdir("/proc/self/fd")),
        "children": _children(),
        "threads": len(_listdir("/proc/self/task")),
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


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:  # not Linux: nothing to compare
        return []


def _namespaces() -> dict[str, str]:
    """Each namespace of this process, as /proc names it ("net:[4026531840]")."""
    found = {}
    for name in sorted(_listdir("/proc/self/ns")):
        try:
            found[name] = os.readlink(f"/proc/self/ns/{name}")
        except OSError:
            continue
    return found


def _children() -> list[str]:
    """This process's living children, "pid command", in pid order."""
    found = []
    for task in _listdir("/proc/self/task"):
        try:
            pids = Path(f"/proc/self/task/{task}/children").read_text().split()
        except OSError:
            continue
        for pid in pids:
            try:
                command = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                command = "?"
            found.append((int(pid), command))
    return [f"{pid} {command}" for pid, command in sorted(found)]


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    lines = []
    for key in ("env", "rlimits"):
        old, new = before[key], after[key]
        for name in sorted(set(old) | set(new)):
            if old.get(name) != new.get(name):
                lines.append(f"{key} {name}: {old.get(name)!r:.120} -> {new.get(name)!r:.120}")
    for key in ("namespaces", "hostname", "fds", "children", "threads"):
        if before[key] != after[key]:
            lines.append(f"{key}: {before[key]!r:.200} -> {after[key]!r:.200}")
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
