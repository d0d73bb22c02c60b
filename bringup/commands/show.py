"""Findings on a terminal (rich): one node's table, a fleet's matrix, what to do, the counts.

A probe that could not run on a node is one line here, not one ERROR per check it would
have fed (findings.jsonl, JSON and JUnit keep one finding per check): see one_per_probe.

Node names, checks, messages and actions are text a node sent: each goes to rich as a
`Text` made by `plain` (never a str, which rich would read as markup: `[/]` in a GPU name
would raise), with control characters removed (no escape sequence reaches the terminal).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.padding import Padding
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from bringup.facts import NodeFacts
from bringup.findings import (
    Cell,
    Finding,
    Status,
    checks_count,
    is_probe_line,
    one_per_probe,
    unrun_probes,
    worst,
)
from bringup.report.escape import printable

if TYPE_CHECKING:
    from rich.style import Style

    from bringup.fleet.tally import Tally
    from bringup.provenance import Origin

STYLES = {
    Status.PASS: "green",
    Status.SKIP: "dim",
    Status.WARN: "yellow",
    Status.FAIL: "bold red",
    Status.ERROR: "magenta",
    Status.UNREACHABLE: "bold magenta",
}


def plain(text: object, style: str = "") -> Text:
    """Text shown as it is: no markup read in it, no control character left in it."""
    return Text(printable(text), style=style)


def status_text(status: Status) -> Text:
    return Text(status.value, style=STYLES[status])


def _value(f: Finding) -> str:
    if f.value is None:
        return ""
    value = f"{f.value:.4g}" if isinstance(f.value, float) else str(f.value)
    return f"{value} {f.unit}" if f.unit else value


def _measured(f: Finding) -> Text:
    """'85.6 GB' over a dim '≥ 100': the figure and what it was held to, in one column."""
    text = plain(_value(f))
    if f.expected:
        text.append(printable(f"\n{f.expected}" if text else f.expected), style="dim")
    return text


def node_table(findings: list[Finding], title: str) -> Table:
    """One row per finding: check, status, measured over expected, and message + action."""
    # The message and action carry the meaning: they get the width, the figures stay short.
    table = Table(title=plain(title), title_justify="left", expand=True, box=box.SIMPLE_HEAD)
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("value\nexpected", justify="right", max_width=16, overflow="fold")
    table.add_column("message / action", ratio=1)
    for f in one_per_probe(findings):
        text = plain(f.message)
        if f.action and f.status not in (Status.PASS, Status.SKIP):
            text.append(printable(f"\n→ {f.action}"), style="cyan")
        table.add_row(plain(f.check), status_text(f.status), _measured(f), text)
    return table


def fleet_matrix(
    findings: list[Finding] | Tally, nodes: list[str], width: int = 80
) -> list[RenderableType]:
    """Node × subject matrix: each cell the worst status of the checks of that node's probe
    and how many checks have it ("PASS 12"), the checks behind a bad one below it.

    Subjects (gpu, topology, host, ...) rather than every check as columns, so that a
    fleet table stays readable in a terminal. A finding that says another check judges its
    fault (a SKIP "judged by topology.nvlink") is shown in that check's cell, not in its
    own. Wider than `width` (80 columns: a terminal's least), the subjects go on in a
    second table below, the node column repeated: no cell is ever cut. The cells are
    those of findings.matrix_cells, tallied as each node was judged (fleet/tally.py).
    """
    from bringup.fleet.tally import tallied

    tally = tallied(findings)
    cells = tally.cells()
    subjects = list(tally.subjects)
    # A fleet's cells repeat ("PASS 12" on every healthy node): each distinct one made once.
    keys = {where: (cell.status, cell.count, tuple(cell.checks)) for where, cell in cells.items()}
    distinct = {keys[where]: cell for where, cell in cells.items()}
    texts = {key: _cell(cell) for key, cell in distinct.items()}
    longest = {key: max(len(line) for line in _lines(text)) for key, text in texts.items()}
    node_width = max([len("node"), *(len(printable(n)) for n in nodes)])

    def column_width(subject: str) -> int:
        held = (keys.get((node, subject)) for node in nodes)
        widest = max((longest[key] for key in held if key is not None), default=0)
        return min(_CELL_MAX, max(len(subject), widest))

    tables: list[RenderableType] = []
    for chunk in _chunks(subjects, column_width, width - node_width - _COLUMN_EDGES - 1):
        title = "node × check" if not tables else "node × check (continued)"
        rows = [(node, tuple(keys.get((node, s)) for s in chunk)) for node in nodes]
        tables.append(MatrixTable(title, chunk, rows, texts))
    return tables


CellKey = tuple[Status, int, tuple[str, ...]]  # a matrix cell's status, count and checks
Row = tuple[CellKey | None, ...]  # a node's cells in a table of the matrix


class MatrixTable:
    """One table of the matrix, printed as rich prints its Table, each distinct row laid out
    by rich once.

    At ten thousand nodes rich measuring and laying out every cell of every row was most
    of `check`'s console time (docs/scale.md), while the rows repeat: a healthy node's
    cells are every healthy node's. rich lays out a table of the header and one row per
    distinct set of cells, with a placeholder as wide as the widest name in the node
    column; each node's row is then its set's lines with the node's name in the
    placeholder's place. Where that could differ from rich's own layout of every row (a
    name of two lines, a table wider than the console, which rich narrows by content)
    rich lays out every row."""

    def __init__(
        self,
        title: str,
        subjects: list[str],
        rows: list[tuple[str, Row]],
        texts: dict[CellKey, Text],
    ) -> None:
        self.title = title
        self.subjects = subjects
        self.rows = rows
        self.texts = texts

    def table(self, rows: list[tuple[Text, Row]]) -> Table:
        """The rich Table of these rows."""
        table = Table(title=self.title, title_justify="left")
        table.add_column("node", no_wrap=True)
        for subject in self.subjects:
            table.add_column(plain(subject), max_width=_CELL_MAX, overflow="fold")
        for node, cells in rows:
            shown = [self.texts[key].copy() if key else Text("–", style="dim") for key in cells]
            table.add_row(node, *shown)
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        names = [printable(node) for node, _ in self.rows]
        laid_out = self._laid_out(console, options, names)
        if laid_out is None:
            yield from console.render(self.table([(plain(n), r) for n, r in self.rows]), options)
            return
        head, by_row, foot = laid_out
        width = max([len("node"), *map(cell_len, names)])
        yield from _with_ends(head)
        for name, (_, row) in zip(names, self.rows, strict=True):
            before, style, after, below = by_row[row]
            yield from before
            yield Segment(name + " " * (width - cell_len(name)), style)
            yield from after
            yield Segment.line()
            yield from _with_ends(below)
        yield from _with_ends(foot)

    def _laid_out(
        self, console: Console, options: ConsoleOptions, names: list[str]
    ) -> tuple[list[list[Segment]], dict[Row, _Laid], list[list[Segment]]] | None:
        """rich's lines of the table's head, of each distinct row (its first line split at
        the node's name) and of its foot; None where rich must lay out every row."""
        width = max([len("node"), *map(cell_len, names)])
        distinct = list(dict.fromkeys(row for _, row in self.rows))
        if not distinct or any("\n" in n for n in names) or len(distinct) >= 10**width:
            return None
        marks = [f"{index:0{width}d}" for index in range(len(distinct))]
        sample = self.table([(Text(mark), row) for mark, row in zip(marks, distinct, strict=True)])
        if sample.__rich_measure__(console, options.update_width(1 << 20)).maximum > (
            options.max_width
        ):
            return None  # rich would narrow the columns by their content: every row's
        lines = list(Segment.split_lines(console.render(sample, options)))
        placeholders = set(marks)
        found = [
            (s.text, i) for i, line in enumerate(lines) for s in line if s.text in placeholders
        ]
        starts = dict(found)
        order = sorted(starts.values())
        if len(found) != len(marks) or len(starts) != len(marks) or order[-1] >= len(lines) - 1:
            # A cell that reads like a placeholder, or not the head, the rows and a foot of
            # one line: rich lays out every row.
            return None
        ends = dict(zip(order, [*order[1:], len(lines) - 1], strict=True))
        by_row: dict[Row, _Laid] = {}
        for mark, row in zip(marks, distinct, strict=True):
            start = starts[mark]
            first = lines[start]
            at = next(i for i, s in enumerate(first) if s.text == mark)
            below = lines[start + 1 : ends[start]]
            by_row[row] = (first[:at], first[at].style, first[at + 1 :], below)
        return lines[: order[0]], by_row, lines[-1:]


# A distinct row as rich laid it out: its first line before and after the node's name, the
# name's style, and the row's lines below it.
_Laid = tuple[list[Segment], "Style | None", list[Segment], list[list[Segment]]]


def _with_ends(lines: list[list[Segment]]) -> Iterator[Segment]:
    for line in lines:
        yield from line
        yield Segment.line()


# A cell's widest line: longer check names fold onto the next line (never cut with "…").
_CELL_MAX = 16
# A column's padding (one space each side) and its border line.
_COLUMN_EDGES = 3


def _lines(text: Text | None) -> list[str]:
    return text.plain.split("\n") if text is not None else []


def _chunks(subjects: list[str], column_width: Callable[[str], int], room: int) -> list[list[str]]:
    """The subjects in runs whose columns fit in `room` characters (at least one per run)."""
    chunks: list[list[str]] = [[]]
    used = 0
    for subject in subjects:
        need = column_width(subject) + _COLUMN_EDGES
        if chunks[-1] and used + need > room:
            chunks.append([])
            used = 0
        chunks[-1].append(subject)
        used += need
    return [chunk for chunk in chunks if chunk]


def _cell(cell: Cell) -> Text:
    """A cell of findings.matrix_cells, its status word in the status's colour."""
    first, *checks = cell.lines()
    text = status_text(cell.status)
    text.append(first[len(cell.status.value) :])
    if checks:
        text.append(printable("\n" + "\n".join(checks)))
    return text


# Past this many nodes the console lists the first LISTED nodes under each action, and the
# first LISTED unreachable nodes, and counts the rest (report.md and findings.jsonl have
# every one): ten thousand lines of "where" are read by nobody, and laying them out was
# most of the console's time at that size (docs/scale.md). Smaller runs print every node.
FULL_UP_TO = 1000
LISTED = 25


def problems_by_action(findings: list[Finding], listed: int | None = None) -> Group | None:
    """The failing findings grouped by the action that fixes them, worst first: each
    status and action, and under it where (each node's messages, dim; with `listed`, the
    first so many nodes and how many more). None when there is nothing to do: no empty
    table."""
    shown = one_per_probe(findings)
    bad = [f for f in shown if f.status in (Status.WARN, Status.FAIL, Status.ERROR)]
    if not bad:
        return None
    groups: dict[str, list[Finding]] = defaultdict(list)
    for f in bad:
        groups[f.action or "investigate"].append(f)
    grid = Table.grid(padding=(0, 2, 0, 0))
    grid.add_column("status", no_wrap=True)
    grid.add_column("what", ratio=1)
    ordered = sorted(groups.items(), key=lambda kv: -worst(kv[1]).rank)
    for action, group in ordered:
        text = plain(action)
        text.append(printable("\n" + _where(group, listed=listed)), style="dim")
        grid.add_row(status_text(worst(group)), text)
    return Group(Text("what to do"), Padding(grid, (0, 0, 0, 2)))


def _where(group: list[Finding], shown: int = 2, listed: int | None = None) -> str:
    """Each node's messages, at most `shown` per node so eight alike GPUs stay one line;
    with `listed`, the first so many nodes and a line counting the others."""
    by_node: dict[str, list[str]] = defaultdict(list)
    for f in group:
        by_node[f.node].append(f"{f.check}: {f.message}" if is_probe_line(f) else f.message)
    lines = []
    for node, messages in list(by_node.items())[:listed]:
        more = f" (+{len(messages) - shown} more)" if len(messages) > shown else ""
        lines.append(f"{node}: {'; '.join(messages[:shown])}{more}")
    if listed is not None and len(by_node) > listed:
        lines.append(f"(+{len(by_node) - listed} more nodes: report.md lists each)")
    return "\n".join(lines)


def unreachable_table(findings: list[Finding], listed: int | None = None) -> Table:
    """The nodes that could not be reached, each with its reason and what to do (with
    `listed`, the first so many and a row counting the others)."""
    table = Table(title="unreachable", title_justify="left", expand=True)
    table.add_column("node", no_wrap=True)
    table.add_column("reason", ratio=2)
    table.add_column("action", ratio=1)
    for f in findings[:listed]:
        table.add_row(plain(f.node), plain(f.message), plain(f.action or ""))
    if listed is not None and len(findings) > listed:
        more = f"(+{len(findings) - listed} more nodes: report.md lists each)"
        table.add_row(Text("…"), Text(more, style="dim"), Text(""))
    return table


def show_findings(
    out: Console, findings: list[Finding] | Tally, nodes: list[str], title: str
) -> None:
    """The verdict of a run as every command prints it: one node's table or the fleet's.

    One node: a row per finding. Several: the node × subject matrix, what to do grouped by
    action, and the unreachable nodes with their reasons (past FULL_UP_TO nodes, the first
    LISTED of each, and how many more). Then the status counts. A fleet's is shown from
    what its findings come to (fleet/tally.py: the cells, the findings at WARN or worse,
    the counts), never from every finding at once.
    """
    from bringup.fleet.tally import tallied

    tally = tallied(findings)
    if len(nodes) == 1:
        out.print(node_table(list(tally.every()), f"{nodes[0]} — {title}"))
    else:
        listed = LISTED if len(nodes) > FULL_UP_TO else None
        for table in fleet_matrix(tally, nodes, out.width):
            out.print(table)
        todo = problems_by_action(tally.noted, listed)  # WARN or worse: all it shows
        if todo is not None:
            out.print(todo)
        unreachable = [f for f in tally.noted if f.status == Status.UNREACHABLE]
        if unreachable:
            out.print(unreachable_table(unreachable, listed))
    out.print(summary_line(tally))


def summary_line(findings: list[Finding] | Tally) -> Text:
    """The count of each status (one per finding), and how many of them no probe could feed."""
    from bringup.fleet.tally import tallied

    tally = tallied(findings)
    text = Text()
    for status, n in tally.counts.items():
        if n:
            text.append(f"{n} {status.value}  ", style=STYLES[status])
    unrun = unrun_probes(tally.noted)  # ERRORs: held whole
    if unrun:
        checks = sum(checks_count(group) for group in unrun.values())
        probes = "1 probe" if len(unrun) == 1 else f"{len(unrun)} probes"
        text.append(f"({checks} checks not judged: {probes} could not run)", style="dim")
    return text


def verdict_line(
    findings: list[Finding] | Tally,
    shown: int = 3,
    origin: Origin | None = None,
    overrides: bool = False,
) -> Text:
    """ACCEPTED or NOT ACCEPTED with a one-line reason: the counts, on how many nodes,
    and the first checks that failed (one per probe that could not run). `origin` says
    where facts this run did not measure came from ("demo data", "replayed from d",
    "simulated GPUs"), in brackets after the verdict word as the report says it: such a
    run is never ACCEPTED (bringup/provenance.py, `accepted`). `overrides`: some node was
    judged with its own profile overrides, said after the word ("ACCEPTED with overrides")."""
    from bringup.fleet.tally import tallied
    from bringup.provenance import LIVE, accepted_counted

    tally = tallied(findings)
    origin = origin or LIVE
    said = f" ({origin.note})" if origin.note else ""
    with_overrides = " with overrides" if overrides else ""
    counts = ", ".join(f"{n} {s.value}" for s, n in tally.counts.items() if n)
    nodes = tally.nodes
    if not tally.total:
        return Text.assemble(("NOT ACCEPTED", "bold red"), printable(f"{said}: nothing was judged"))
    if not tally.bad:
        where = f" on {len(nodes)} node{'s' if len(nodes) != 1 else ''}" if any(nodes) else ""
        good = accepted_counted(tally.total, tally.bad, origin)
        word, style = ("ACCEPTED", "bold green") if good else ("NOT ACCEPTED", "bold red")
        told = f"{with_overrides if good else ''}{said}: {counts}{where}"
        return Text.assemble((word, style), printable(told))
    bad = [f for f in one_per_probe(tally.noted) if f.status.bad]
    checks = list(dict.fromkeys(f.check for f in bad))
    more = f" (+{len(checks) - shown} more)" if len(checks) > shown else ""
    bad_nodes = {f.node for f in bad}
    where = f" on {len(bad_nodes)} of {len(nodes)} nodes" if len(nodes) > 1 else ""
    reason = f"{said}: {counts}{where}; {', '.join(checks[:shown])}{more}"
    return Text.assemble(("NOT ACCEPTED", "bold red"), printable(reason))


def inspect_line(findings: list[Finding], what: str, note: str | None = None) -> Text:
    """The verdict of `inspect`: whether the capture shows a fault, never ACCEPTED (one
    output is not a node: "NO FAULT FOUND in nvidia-smi topo -m (3 checks; not a node
    acceptance)"). A FAIL, an ERROR (what could not be judged) or nothing judged at all is
    not "no fault": FAULT FOUND, with the checks, or NOTHING JUDGED. `note`: where recorded
    facts came from (bringup/provenance.py), said in the brackets ("demo data")."""
    checks = len({(f.node, f.check) for f in findings})
    counts = "".join(
        f", {n} {s.value}"
        for s in Status
        if s.bad and (n := sum(1 for f in findings if f.status == s))
    )
    said = f"; {note}" if note else ""
    scope = f"{checks} check{'s' if checks != 1 else ''}{counts}{said}; not a node acceptance"
    if not findings:
        return Text.assemble(("NOTHING JUDGED", "bold red"), printable(f" in {what}"))
    bad = [f for f in one_per_probe(findings) if f.status.bad]
    if not bad:
        return Text.assemble(("NO FAULT FOUND", "bold green"), printable(f" in {what} ({scope})"))
    named = ", ".join(dict.fromkeys(f.check for f in bad))
    return Text.assemble(("FAULT FOUND", "bold red"), printable(f" in {what} ({scope}): {named}"))


def inspect_exit_code(findings: list[Finding]) -> int:
    """0 only when something was judged and nothing was bad (NO FAULT FOUND)."""
    return 0 if findings and not any(f.status.bad for f in findings) else 1


# --- how long each probe took -------------------------------------------------------------


def probe_durations(nodes: list[NodeFacts]) -> dict[str, dict[str, float]]:
    """node -> probe -> seconds it ran, in the suite's order; recorded (replayed) ones left out."""
    found: dict[str, dict[str, float]] = {}
    for node in nodes:
        times = {
            name: record.duration_s
            for name, record in node.probes.items()
            if not record.params.get("replayed")
        }
        if times:
            found[node.node] = times
    return found


def duration_lines(durations: dict[str, dict[str, float]]) -> list[str]:
    """What each probe cost: one node's times and total; for a fleet, the median and the
    slowest node per probe, and the slowest node's total."""
    if not durations:
        return []
    if len(durations) == 1:
        ((node, times),) = durations.items()
        parts = [f"{probe} {seconds_text(s)}" for probe, s in times.items()]
        return [
            f"probe times on {node}: {', '.join(parts)}; total {seconds_text(sum(times.values()))}"
        ]
    probes: dict[str, dict[str, float]] = defaultdict(dict)
    for node, times in durations.items():
        for probe, seconds in times.items():
            probes[probe][node] = seconds
    lines = [f"probe times over {len(durations)} nodes (median, slowest):"]
    for probe, by_node in probes.items():
        slow = max(by_node, key=lambda n: by_node[n])
        median = sorted(by_node.values())[len(by_node) // 2]
        lines.append(
            f"  {probe:12} {seconds_text(median):>10}  {seconds_text(by_node[slow]):>10} ({slow})"
        )
    totals = {node: sum(times.values()) for node, times in durations.items()}
    slowest = max(totals, key=lambda n: totals[n])
    lines.append(f"  {'total':12} {'':>10}  {seconds_text(totals[slowest]):>10} ({slowest})")
    return lines


def seconds_text(seconds: float) -> str:
    """0.42 s, 12.3 s, 4 min 5 s, 1 h 2 min."""
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"
