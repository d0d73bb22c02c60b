"""Live progress of a run on stderr: nodes done, running and failed, the slowest node with
what it is doing, and each step of a burn-in as it ends.

On a terminal it is a bar redrawn in place (rich), with step lines printed above it. When
stderr is not a terminal (a log, a pipe, CI) nothing is redrawn: step lines are printed as
plain lines, and the state of the run as one plain line at most every STATUS_EVERY_S, so
progress never runs into the findings printed after it.

What a node is doing comes from its transport's stages (connecting, running <probe>) and
from the progress lines long probes send (bringup/node/progress.py): `describe` turns one
into the text shown, "nvme: randread 4k (2/4)", "burnin: step 3/10 loss 9.21 ...".

rich loads only where something is shown: `slurm healthcheck` runs at every job start with
a `Silent` console (its verdict line is all it prints), and pays nothing for it.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from bringup.words import plural

if TYPE_CHECKING:
    from rich.console import Console, Group
    from rich.live import Live
    from rich.text import Text

# Without a terminal: the run's state at most this often (seconds).
STATUS_EVERY_S = 30.0
# Step lines are printed for each node of a run this small; a bigger run shows its slowest
# node's step in the progress line only (a thousand nodes would print a thousand per step).
STEP_LINES_UP_TO = 8


def describe(probe: str, fields: dict[str, Any]) -> str:
    """One progress line of a probe as the console shows it (text from a node: cleaned)."""
    if "step" in fields:
        text = f"{probe}: step {_count(fields.get('step'), fields.get('of'))}"
        if isinstance(fields.get("since_step_s"), int | float):
            return _clean(f"{text}, no step for {fields['since_step_s']:.0f} s")
        parts = [text]
        if isinstance(fields.get("loss"), int | float):
            parts.append(f"loss {fields['loss']:.4g}")
        if isinstance(fields.get("tokens_per_s"), int | float):
            parts.append(f"{fields['tokens_per_s']:,.0f} tok/s")
        if isinstance(fields.get("step_s"), int | float):
            parts.append(f"{fields['step_s']:.2f} s/step")
        if isinstance(fields.get("eta_s"), int | float):
            parts.append(f"ETA {_duration(fields['eta_s'])}")
        return _clean(" ".join(parts))
    phase = str(fields.get("phase") or "running")
    if fields.get("index") is not None and fields.get("of") is not None:
        phase += f" ({_count(fields['index'], fields['of'])})"
    return _clean(f"{probe}: {phase}")


def _count(index: object, of: object) -> str:
    return f"{index}/{of}" if of is not None else str(index)


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def _clean(text: str) -> str:
    """Printable characters only: what a node sent cannot move the cursor or recolour."""
    return "".join(c if c.isprintable() else "?" for c in text)[:200]


class Silent:
    """A console that shows nothing, as rich's Console(quiet=True) does, without rich."""

    quiet = True
    is_terminal = False

    def print(self, *objects: Any, **options: Any) -> None:
        pass


class FleetProgress:
    """Nodes done / running / failed, and the slowest node and what it is doing."""

    def __init__(self, total: int, console: Console | Silent, live: bool | None = None) -> None:
        self.total = total
        self.console = console
        # Redrawn in place only on a terminal (`live` decides in tests).
        self.live = console.is_terminal if live is None else live
        self._lock = threading.Lock()
        self._running: dict[str, tuple[float, str]] = {}  # node -> (started, doing)
        self.done = 0
        self.failed = 0
        self.started = time.monotonic()
        self._status_at = self.started  # when the last plain status line was printed
        self._live: Live | None = None
        if self.live:
            # The bar's parts load only for a terminal: `slurm healthcheck` and CI have none.
            from rich.live import Live

            self._live = Live(get_renderable=self.render, console=console, refresh_per_second=4)

    def __enter__(self) -> FleetProgress:
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()

    def doing(self, node: str, what: str) -> None:
        with self._lock:
            started = self._running.get(node, (time.monotonic(), ""))[0]
            self._running[node] = (started, what)
        self._maybe_status()

    def reported(self, node: str, probe: str, fields: dict[str, Any]) -> None:
        """A progress line from a probe on `node`: its state, and a burn-in step's own
        line (on small runs)."""
        text = describe(probe, fields)
        self.doing(node, text)
        if "step" in fields and self.total <= STEP_LINES_UP_TO and not self.console.quiet:
            from rich.text import Text

            self.console.print(Text(f"{_clean(node)}  {text}"), soft_wrap=True, highlight=False)

    def finished(self, node: str, state: str) -> None:
        """The node is done; `state` is its outcome's (complete, unreachable, error, ...)."""
        with self._lock:
            self._running.pop(node, None)
            self.done += 1
            if state in ("unreachable", "error"):
                self.failed += 1
        self._maybe_status()

    def _maybe_status(self) -> None:
        """Without a terminal: the run's state as one plain line, at most every STATUS_EVERY_S."""
        if self.live or self.console.quiet:
            return
        now = time.monotonic()
        with self._lock:
            if now - self._status_at < STATUS_EVERY_S:
                return
            self._status_at = now
        self.console.print(self.status_line(), soft_wrap=True, highlight=False)

    def status_line(self) -> Text:
        """'nodes 3/8 done, 5 running, 0 failed, 42 s; slowest: node2 burnin: step 4/10 (12 s)'."""
        from rich.text import Text

        with self._lock:
            running = dict(self._running)
            done, failed = self.done, self.failed
        now = time.monotonic()
        text = f"nodes {done}/{self.total} done, {len(running)} running, {failed} failed"
        text += f", {now - self.started:.0f} s"
        if running:
            node, (started, what) = min(running.items(), key=lambda kv: kv[1][0])
            text += f"; slowest: {_clean(node)} {what} ({now - started:.0f} s)"
        return Text(text)

    def render(self) -> Group:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

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
            slowest = f"slowest: {_clean(node)} {what} ({now - started:.0f} s)"
            parts.append(Text(slowest, style="cyan"))
        return Group(*parts)

    def summary(self, states: list[str]) -> Text:
        """'8 nodes in 2.4 s: 7 complete, 1 unreachable' from each node's outcome state."""
        from rich.text import Text

        counts: dict[str, int] = {}
        for state in states:
            counts[state] = counts.get(state, 0) + 1
        text = ", ".join(f"{n} {state}" for state, n in counts.items())
        took = f"{time.monotonic() - self.started:.1f} s"
        return Text(f"{plural(len(states), 'node')} in {took}: {text}")

    def print_summary(self, states: list[str]) -> None:
        """The summary line, on a console that shows it (made only there)."""
        if not self.console.quiet:
            self.console.print(self.summary(states), highlight=False)
