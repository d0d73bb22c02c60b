"""The node side of a run: execute probes one by one and stream one JSON line per probe.

Protocol (the same for the local and SSH transports): the request is one JSON document
on stdin, `{"probes": [{"name": "gpu", "params": {...}, "timeout_s": 60}, ...]}`; each
probe's result is printed as one JSON line as soon as it finishes:
`{"probe", "ok", "error", "facts", "raw", "params", "started_at", "duration_s"}`.
While a long probe runs, what it is doing comes as lines of another kind,
`{"probe": name, "progress": {...}}` (bringup/node/progress.py): shown, never recorded.
Two optional fields are for a transport that runs many nodes in one step (Slurm's wave):
`"pieces": N`, each line written in pieces of at most N bytes (`pieces`), and
`"deadline_s": S`, the node side stops itself after S seconds (exit 124).

Each probe runs in a child process with a wall-clock deadline: a probe stuck in a driver
call (NVML can hang on a GPU that fell off the bus) is killed and reported, and the
probes after it still run.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import math
import os
import select
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NoReturn

# Loaded here once, not in each probe's fork: almost every probe runs a tool (tool.py:
# subprocess and friends), and each fork sets its parent-death signal through ctypes.
from bringup.node import progress, tool  # noqa: F401
from bringup.node.catalog import PROBES
from bringup.node.result import ProbeError

DEFAULT_TIMEOUT_S = 120.0

# Receives each progress line of the running probe: {"probe": name, "progress": {...}}.
OnProgress = Callable[[dict[str, Any]], None]


def build_params(name: str, values: dict[str, Any]) -> Any:
    """The probe's Params dataclass from a dict; unknown names raise ValueError."""
    params_type = PROBES[name].Params
    known = {f.name for f in dataclasses.fields(params_type)}
    unknown = sorted(set(values) - known)
    if unknown:
        names = ", ".join(sorted(known))
        raise ValueError(f"unknown parameter {unknown[0]!r} for probe {name!r} (known: {names})")
    return params_type(**values)


def run_one(name: str, values: dict[str, Any]) -> dict[str, Any]:
    """Run one probe in this process and return its result record."""
    started = time.monotonic()
    record: dict[str, Any] = {
        "probe": name,
        "ok": False,
        "error": None,
        "facts": None,
        "raw": {},
        "params": values,
        "started_at": _now(),
    }
    try:
        output = PROBES[name].collect(build_params(name, values))
        record.update(ok=True, facts=dataclasses.asdict(output.facts), raw=output.raw)
        if output.simulated:  # facts.ProbeRecord.provenance: never a live measurement
            record["provenance"] = [{"kind": "simulated", "of": s} for s in output.simulated]
    except ProbeError as exc:
        record.update(error=str(exc), raw=exc.raw)
    except Exception as exc:  # a probe bug must become an ERROR finding, not a lost node
        record["error"] = f"probe {name} crashed: {type(exc).__name__}: {exc}"
    record["duration_s"] = round(time.monotonic() - started, 3)
    return record


def run_all(
    request: dict[str, Any], on_progress: OnProgress | None = None
) -> Iterator[dict[str, Any]]:
    """Run each requested probe in a child process under its deadline, in order; what a
    probe reports while it runs goes to `on_progress`."""
    for item in request.get("probes", []):
        name = item["name"]
        values = item.get("params") or {}
        timeout_s = float(item.get("timeout_s") or DEFAULT_TIMEOUT_S)
        if name not in PROBES:
            yield _failed(name, values, f"unknown probe {name!r}", 0.0)
            continue
        yield _run_child(name, values, timeout_s, on_progress)


def _run_child(
    name: str, values: dict[str, Any], timeout_s: float, on_progress: OnProgress | None = None
) -> dict[str, Any]:
    """Run one probe in a forked child, in a session of its own, and wait at most timeout_s.

    A fork rather than a new interpreter: each probe costs no Python start-up (a node runs
    several; a simulated cluster runs hundreds on a few cores). The child imports its own
    probe's module (catalog.PROBES loads on first use), under the probe's deadline, so the
    node side never pays for the probes it was not asked for. The child's own session lets
    a timeout kill what it started.
    """
    started = time.monotonic()
    result_read, result_write = os.pipe()
    progress_read, progress_write = os.pipe()
    with tempfile.TemporaryFile() as stderr:
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(result_read)
            os.close(progress_read)
            progress.attach(progress_write)
            _child(name, values, result_write, stderr.fileno())
        os.close(result_write)
        os.close(progress_write)

        def forward(fields: dict[str, Any]) -> None:
            if on_progress is not None:
                on_progress({"probe": name, "progress": fields})

        with _ends_with_me(pid):
            data, timed_out = _read_until(result_read, started + timeout_s, progress_read, forward)
        if timed_out:
            kill_tree(pid)
        _, status = os.waitpid(pid, 0)
        stderr.seek(0)
        last = (stderr.read().decode(errors="replace").strip().splitlines() or [""])[-1]
    elapsed = time.monotonic() - started
    if timed_out:
        return _failed(name, values, f"probe {name} timed out after {timeout_s:g} s", elapsed)
    try:
        return json.loads(data)
    except json.JSONDecodeError:
        why = last or _exit_reason(status)
        return _failed(name, values, f"probe {name} died: {why}", elapsed)


def _die_with(parent: int) -> None:
    """The probe is killed when the node side dies, even by SIGKILL (Slurm ending a step,
    the OOM killer): Linux's parent-death signal, set through libc's prctl. Elsewhere the
    probe runs on to its own timeout, as before."""
    pr_set_pdeathsig = 1  # <linux/prctl.h>
    try:
        # The interpreter's own symbols hold libc's prctl: no library search, no subprocess.
        ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the node side died before prctl took effect
        os._exit(1)


@contextlib.contextmanager
def _ends_with_me(pid: int) -> Iterator[None]:
    """While the probe runs, a SIGTERM or SIGHUP to the node side (srun forwarding Ctrl-C,
    an SSH session closed), or its own deadline's SIGALRM (`_stop_at`), kills the probe's
    tree before the node side exits: the probe has
    a session of its own, so neither Slurm's process group nor the terminal reaches it, and
    it would run on to its timeout."""

    def stop(signum: int, _frame: object) -> None:
        kill_tree(pid)
        os._exit(DEADLINE_EXIT if signum == signal.SIGALRM else 128 + signum)

    previous = {}
    with contextlib.suppress(ValueError):  # not the main thread (an in-process caller)
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM):
            previous[signum] = signal.signal(signum, stop)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _child(name: str, values: dict[str, Any], result_fd: int, stderr_fd: int) -> NoReturn:
    """In the forked child: run the probe, write its record, exit without cleanup handlers."""
    code = 0
    try:
        parent = os.getppid()
        os.setsid()
        _die_with(parent)
        # The node's stdout carries the JSON lines: a probe that prints must not break them.
        os.dup2(stderr_fd, 1)
        os.dup2(stderr_fd, 2)
        record = json.dumps(run_one(name, values)).encode()
        with os.fdopen(result_fd, "wb") as out:
            out.write(record)
    except BaseException:  # even SystemExit: the parent must get an answer or a reason
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stderr.flush()
        os._exit(code)


def _read_until(
    fd: int,
    deadline: float,
    progress_fd: int | None = None,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[bytes, bool]:
    """All bytes from fd until EOF, or (what came, True) when the deadline passes first.
    Meanwhile each whole JSON line on progress_fd (closed here) goes to on_progress."""
    chunks: list[bytes] = []
    partial = b""
    watched = [fd] + ([progress_fd] if progress_fd is not None else [])
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return b"".join(chunks), True
            ready, _, _ = select.select(watched, [], [], left)
            if progress_fd in ready:
                chunk = os.read(progress_fd, 1 << 16)
                if not chunk:  # the probe is done reporting (or its child went away)
                    watched.remove(progress_fd)
                *lines, partial = (partial + chunk).split(b"\n")
                for line in lines:
                    fields = _progress_fields(line)
                    if fields is not None and on_progress is not None:
                        on_progress(fields)
                partial = partial[-progress.MAX_LINE_BYTES :]
            if fd in ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return b"".join(chunks), False
                chunks.append(chunk)
    finally:
        os.close(fd)
        if progress_fd is not None:
            os.close(progress_fd)


def _progress_fields(line: bytes) -> dict[str, Any] | None:
    """One progress line's fields, or None for what is not a JSON object."""
    try:
        fields = json.loads(line)
    except ValueError:
        return None
    return fields if isinstance(fields, dict) else None


def _exit_reason(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"


def kill_tree(pid: int) -> None:
    """Kill a probe and everything it started, its own process group or not.

    Tools run through command.run get a session of their own (so their own timeout can
    kill their children), which puts them outside the probe's process group: the tree
    of parent pids is what still ties them to the probe.
    """
    victims = [pid, *_descendants(pid)]
    for victim in victims:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(victim, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(victim, signal.SIGKILL)


def _descendants(pid: int) -> list[int]:
    """Every process below pid, read from /proc (empty where /proc is not Linux's)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # The command name (field 2) may hold spaces and parentheses: split after it.
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue  # the process ended while we looked
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _failed(name: str, values: dict[str, Any], error: str, elapsed: float) -> dict[str, Any]:
    return {
        "probe": name,
        "ok": False,
        "error": error,
        "facts": None,
        "raw": {},
        "params": values,
        "started_at": _now(),
        "duration_s": round(elapsed, 3),
    }


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def pieces(line: bytes, size: int) -> list[bytes]:
    """One JSON line as lines of at most `size` bytes each (newline not counted), for
    `srun --label`, which cuts a task's longer lines at 1 KiB: a line that fits is itself;
    a longer one is pieces marked "+" (more follows) and a last one marked "=". A JSON
    line starts with "{", so neither mark is ever taken for a whole line."""
    body = line.rstrip(b"\n")
    if len(body) <= size:
        return [body]
    step = max(1, size - 1)
    cut = [body[i : i + step] for i in range(0, len(body), step)]
    return [b"+" + part for part in cut[:-1]] + [b"=" + cut[-1]]


# Two request fields for a transport that runs many nodes in one step (Slurm's wave,
# bringup/fleet/slurm_step.py), honoured by `serve` wherever it runs:
# "pieces": BYTES, each line written in `pieces` of at most BYTES (srun --label cuts a
# longer line at 1 KiB); "deadline_s": SECONDS, the node side stops itself then (`_stop_at`),
# since the step, shared with other nodes, cannot be ended for one.
PIECES_FIELD = "pieces"
DEADLINE_FIELD = "deadline_s"
DEADLINE_EXIT = 124  # the node side stopped at its own deadline, as coreutils' timeout


def serve(request: dict[str, Any], out_fd: int) -> None:
    """Run the request, writing each probe's record and each progress line to `out_fd` as
    one JSON line the moment it comes (in pieces, and to a deadline, when the request asks:
    PIECES_FIELD, DEADLINE_FIELD). Straight to the descriptor, not through sys.stdout: the
    local transport runs this in a fork of the controller, whose stdout buffer may hold
    what the controller has not printed yet."""
    piece_bytes = request.get(PIECES_FIELD)
    size = piece_bytes if isinstance(piece_bytes, int) and piece_bytes > 1 else None

    def show(line: dict[str, Any]) -> None:
        data = strict_json(line).encode()
        parts = pieces(data, size) if size else [data]
        out = b"".join(part + b"\n" for part in parts)
        while out:
            out = out[os.write(out_fd, out) :]

    deadline_s = request.get(DEADLINE_FIELD)
    if isinstance(deadline_s, (int, float)) and not isinstance(deadline_s, bool):
        _stop_at(float(deadline_s))
    try:
        for record in run_all(request, on_progress=show):
            show(record)
    finally:
        if deadline_s is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)


def strict_json(value: Any) -> str:
    """`value` as JSON every reader takes: a float that is not finite (a rate over no
    time, a probe's NaN) written null, not Python's `NaN` or `Infinity`, which strict
    readers (msgspec, jq, a browser) refuse. Null is what the controller reads such a
    number as and what the run's files keep (docs/security.md, "A hostile node")."""
    try:
        return json.dumps(value, allow_nan=False)  # every healthy line: no second pass
    except ValueError:
        return json.dumps(_finite_or_null(value))


def _finite_or_null(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite_or_null(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_null(item) for item in value]
    return value


def _stop_at(deadline_s: float) -> None:
    """The node's own deadline: at `deadline_s` the running probe's tree is killed as on
    SIGTERM (`_ends_with_me`), and the node side exits DEADLINE_EXIT."""

    def stop(_signum: int, _frame: object) -> None:
        os._exit(DEADLINE_EXIT)  # no probe running: _ends_with_me handles the other case

    signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, max(0.001, deadline_s))


def main(argv: list[str]) -> int:
    request = json.loads(sys.stdin.read() or "{}")
    serve(request, sys.stdout.fileno())
    return 0
