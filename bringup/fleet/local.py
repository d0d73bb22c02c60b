"""The local transport: the node side (bringup.node.protocol) as a child process of this
one, so `--local` and `slurm healthcheck` take the same path, with the same deadlines, as
a remote node.

The child is a fork of this process, not a new interpreter: `slurm healthcheck` runs at
every job start, and a second interpreter start with the node side's imports cost a fifth
of its CPU (benchmarks/node_side.py). The fork runs what `python3 -m bringup.node` runs on
a remote node, in a session of its own, with its own stdin, stdout and stderr.
"""

from __future__ import annotations

import os
import selectors
import signal
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from typing import IO, Any, NoReturn

from bringup.fleet.transport import (
    STOP_POLL_S,
    Interrupted,
    LineBuffer,
    Runner,
    Stage,
    TransportError,
    decode_line,
)
from bringup.node.protocol import kill_tree, serve


def local_runner() -> Runner:
    """The node side as a child process of this one (`--local`): the same path, no SSH."""

    def runner(
        request: dict[str, Any], deadline_s: float, stop: threading.Event, on_stage: Stage
    ) -> Iterator[dict[str, Any]]:
        on_stage("running")
        yield from run_local(request, deadline_s, stop)

    return runner


def run_local(
    request: dict[str, Any], deadline_s: float, stop: threading.Event | None = None
) -> Iterator[dict[str, Any]]:
    """Yield each probe record as the local node side prints it, within deadline_s."""
    with tempfile.TemporaryFile() as stderr:
        pid, out = _start(request, stderr)
        end = time.monotonic() + deadline_s
        lines = LineBuffer("this machine's node side")
        ended = False  # the node side closed its stdout: it is exiting
        # selectors rather than blocking reads: a read blocks past the deadline on a silent
        # node side.
        with selectors.DefaultSelector() as sel:
            sel.register(out, selectors.EVENT_READ)
            try:
                while not ended:
                    left = end - time.monotonic()
                    if left <= 0:
                        raise TransportError(f"node did not finish within {deadline_s:g} s")
                    if stop is not None and stop.is_set():
                        raise Interrupted("interrupted")
                    if not sel.select(timeout=min(left, STOP_POLL_S)):
                        continue
                    chunk = os.read(out, 1 << 16)
                    ended = not chunk
                    for line in lines.feed(chunk):
                        yield decode_line(line)
            finally:
                os.close(out)
                if not ended:
                    # The whole tree: each probe runs in a session of its own, and so does
                    # each tool it runs; killing the node side's group alone would leave
                    # them running.
                    kill_tree(pid)
                _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            stderr.seek(0)
            err = stderr.read().decode(errors="replace").strip().splitlines()
            raise TransportError(f"node side exited {code}: {err[-1] if err else ''}")


def _start(request: dict[str, Any], stderr: IO[bytes]) -> tuple[int, int]:
    """Fork the node side; its pid and the read end of the pipe its lines come on."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _node_side(request, write_end, stderr.fileno())
    os.close(write_end)
    return pid, read_end


def _node_side(request: dict[str, Any], out: int, stderr: int) -> NoReturn:
    """In the forked child: serve the request as a remote node's python3 would, then exit
    without this process's clean-up (its atexit handlers, its buffered output)."""
    code = 0
    try:
        os.setsid()  # a session of its own: Ctrl-C on the terminal reaches the controller
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)  # as in a new interpreter
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # no tool reads the terminal
        # The lines go out on fd 1, as from python3 on a node: a probe's child puts its own
        # stderr there, so only the node side holds the pipe and its exit ends it.
        if out != 1:
            os.dup2(out, 1)
            os.close(out)
        os.dup2(stderr, 2)
        serve(request, 1)
    except BaseException:  # even SystemExit: the controller must get the reason
        code = 1
        os.write(2, traceback.format_exc().encode(errors="replace"))
    finally:
        os._exit(code)
