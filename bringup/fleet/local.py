"""The local transport: the node side (`python -m bringup.node`) as a child process of
this one, so `--local` takes the same path, with the same deadlines, as a remote node."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from bringup.fleet.transport import (
    STOP_POLL_S,
    Interrupted,
    LineBuffer,
    Runner,
    Stage,
    TransportError,
    decode_line,
)
from bringup.node.protocol import kill_tree


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
    proc = subprocess.Popen(
        [sys.executable, "-m", "bringup.node"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdin and proc.stdout and proc.stderr
    proc.stdin.write(json.dumps(request).encode())
    proc.stdin.close()
    end = time.monotonic() + deadline_s
    lines = LineBuffer("this machine's node side")
    # selectors rather than readline(): readline blocks past the deadline on a silent node.
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        try:
            while True:
                left = end - time.monotonic()
                if left <= 0:
                    raise TransportError(f"node did not finish within {deadline_s:g} s")
                if stop is not None and stop.is_set():
                    raise Interrupted("interrupted")
                if not sel.select(timeout=min(left, STOP_POLL_S)):
                    continue
                chunk = os.read(proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    break
                for line in lines.feed(chunk):
                    yield decode_line(line)
        finally:
            if proc.poll() is None:
                # The whole tree: each probe runs in a session of its own, and so does each
                # tool it runs; killing the node side's group alone would leave them running.
                kill_tree(proc.pid)
            proc.wait()
    if proc.returncode != 0:
        err = proc.stderr.read().decode(errors="replace").strip().splitlines()
        raise TransportError(f"node side exited {proc.returncode}: {err[-1] if err else ''}")
