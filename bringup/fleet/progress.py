"""Live progress of a run on stderr: nodes done, running and failed, and the slowest node
with what it is doing (rich)."""

from __future__ import annotations

import threading
import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text


class FleetProgress:
    """Nodes done / running / failed, and the slowest node and what it is doing (rich)."""

    def __init__(self, total: int, console: Console) -> None:
        self.total = total
        self.console = console
        self._lock = threading.Lock()
        self._running: dict[str, tuple[float, str]] = {}  # node -> (started, doing)
        self.done = 0
        self.failed = 0
        self.started = time.monotonic()
        self._live = Live(get_renderable=self.render, console=console, refresh_per_second=4)

    def __enter__(self) -> FleetProgress:
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.stop()

    def doing(self, node: str, what: str) -> None:
        with self._lock:
            started = self._running.get(node, (time.monotonic(), ""))[0]
            self._running[node] = (started, what)

    def finished(self, node: str, state: str) -> None:
        """The node is done; `state` is its outcome's (complete, unreachable, error, ...)."""
        with self._lock:
            self._running.pop(node, None)
            self.done += 1
            if state in ("unreachable", "error"):
                self.failed += 1

    def render(self) -> Group:
        with self._lock:
            running = dict(self._running)
            done, failed = self.done, self.failed
        now = time.monotonic()
        line = Text()
        line.append(f"nodes {done}/{self.total} done", style="bold")
        line.append(f"  {len(running)} running  ")
        line.append(f"{failed} failed", style="bold red" if failed else "dim")
        line.append(f"  {now - self.started:.0f} s", style="dim")
        bar = Table.grid()  # a grid row ends its line, a bare ProgressBar does not
        bar.add_row(ProgressBar(total=self.total, completed=done, width=50))
        parts: list[Any] = [line, bar]
        if running:
            node, (started, what) = min(running.items(), key=lambda kv: kv[1][0])
            parts.append(Text(f"slowest: {node} {what} ({now - started:.0f} s)", style="cyan"))
        return Group(*parts)

    def summary(self, states: list[str]) -> Text:
        """'8 nodes in 2.4 s: 7 complete, 1 unreachable' from each node's outcome state."""
        counts: dict[str, int] = {}
        for state in states:
            counts[state] = counts.get(state, 0) + 1
        text = ", ".join(f"{n} {state}" for state, n in counts.items())
        return Text(f"{len(states)} nodes in {time.monotonic() - self.started:.1f} s: {text}")
