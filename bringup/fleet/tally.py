"""A run's findings as `check` holds them to its end: what they come to, not each one.

At ten thousand nodes a run judges about 290,000 findings; held as objects to the end of
`check` (for the console's matrix, "what to do", the counts, the verdict, the exit code)
they were most of its memory (docs/scale.md, "What the check holds"). A `Tally` takes each
node's findings as the node is judged, after they are written to findings.jsonl, and keeps:

- the count of each status, and every finding's `node` field (the verdict line's "on N
  nodes", completeness's "has findings");
- the findings at WARN or worse, whole and in order (`noted`): what the verdict, "what to
  do", the unreachable table, the checks not judged and the rules over the whole run read;
- each node's row of the node × subject matrix: per subject, in order, how many findings
  passed and how many were skipped (rows shared between nodes that have the same), from
  which `cells()` gives the same cells as `findings.matrix_cells` of every finding;
- the values of the `--profile auto` findings (the profile a run records);
- where each batch of findings sits in findings.jsonl (`batches`), so that what prints
  every finding (`--json`, one node's table) reads them back from the file in the order
  the command gave them (commands/check.py, `read_back`).

A Tally made of a list of findings (`Tally.of`: the commands that hold theirs) keeps the
list: every function that shows a Tally shows a list the same way.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator

from bringup.checks.auto import CHECK as AUTO_PROFILE
from bringup.findings import (
    Cell,
    Finding,
    Status,
    cell_name,
    moved_to,
    one_per_probe,
    worst,
)

# A node's row of the matrix: (subject, passed, skipped) per subject, in the order of its
# first finding. Held once for all nodes whose rows are equal.
Row = tuple[tuple[str, int, int], ...]
# Where a batch goes in the order the command gives its findings: a node's findings by its
# place in the plan (0, index), what comes after the nodes by when it came (1, n).
Order = tuple[int, int]


class Tally:
    """The findings added so far, tallied; see the module's docstring."""

    def __init__(self) -> None:
        self.counts: dict[Status, int] = dict.fromkeys(Status, 0)
        self.total = 0
        self.nodes: set[str] = set()  # every finding's `node` field
        self._noted: dict[Order, list[Finding]] = {}  # WARN or worse, by batch
        self._noted_in_order: list[Finding] | None = []
        # Each batch's subjects of the matrix, in the order of their first finding (equal
        # tuples held once).
        self._subjects: dict[Order, tuple[str, ...]] = {}
        self._subjects_in_order: list[str] | None = []
        self.profiles: set[object] = set()  # the values of the `auto.profile` findings
        self.profiles_pass = True  # every `auto.profile` finding passed
        # (order, count) of each batch, in findings.jsonl's order.
        self.batches: list[tuple[Order, int]] = []
        self._rows: dict[str, Row] = {}
        self._distinct: dict[Row, Row] = {}
        self._distinct_subjects: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._every: list[Finding] | None = None
        # Where every finding is read back from when this Tally holds no list of them
        # (commands/check.py: findings.jsonl, in the order the command gives them).
        self.reader: Callable[[], Iterator[Finding]] | None = None
        self._after = 0  # batches added after the nodes'

    @classmethod
    def of(cls, findings: list[Finding]) -> Tally:
        """The findings of a command that holds them: tallied, the list kept as it is."""
        tally = cls()
        tally.add(findings)
        tally._every = findings
        return tally

    @property
    def noted(self) -> list[Finding]:
        """The findings at WARN or worse, in the order the command gives its findings
        (the plan's nodes, then what came after them), not the order the nodes ended in:
        "what to do" and the verdict line list them so."""
        if self._noted_in_order is None:
            by_batch = self._noted
            self._noted_in_order = [f for order in sorted(by_batch) for f in by_batch[order]]
        return self._noted_in_order

    @property
    def subjects(self) -> list[str]:
        """The matrix's subjects in the order of their first finding, in the order the
        command gives its findings (findings.matrix_cells's columns)."""
        if self._subjects_in_order is None:
            by_batch = self._subjects
            firsts = (s for order in sorted(by_batch) for s in by_batch[order])
            self._subjects_in_order = list(dict.fromkeys(firsts))
        return self._subjects_in_order

    @property
    def bad(self) -> int:
        """How many findings are FAIL, ERROR or UNREACHABLE."""
        return sum(n for status, n in self.counts.items() if status.bad)

    def __len__(self) -> int:
        return self.total

    def add(self, findings: Iterable[Finding], node_index: int | None = None) -> None:
        """Tally a batch, as it was written to findings.jsonl (in that order: the caller
        holds one lock over both). `node_index`: the batch is the findings of the plan's
        node at that place; else it comes after every node's, in the order added."""
        if node_index is None:
            order = (1, self._after)
            self._after += 1
        else:
            order = (0, node_index)
        added = 0
        noted: list[Finding] = []
        subjects: dict[str, None] = {}
        rows: dict[str, dict[str, list[int]]] = {}
        for f in findings:
            added += 1
            status = f.status
            self.counts[status] += 1
            self.nodes.add(f.node)
            if status.rank >= _WARN:
                noted.append(f)
            if f.check == AUTO_PROFILE:
                self.profiles.add(f.value)
                self.profiles_pass = self.profiles_pass and status is Status.PASS
            if status is Status.SKIP and moved_to(f) is not None:
                continue  # counted in the cell of the check that judges its fault
            subject = f.check.split(".", 1)[0]
            subjects[subject] = None
            row = rows.get(f.node)
            if row is None:
                row = rows[f.node] = self._unfrozen(f.node)
            counts = row.get(subject)
            if counts is None:
                counts = row[subject] = [0, 0]
            if status is Status.PASS:
                counts[0] += 1
            elif status is Status.SKIP:
                counts[1] += 1
        for node, row in rows.items():
            frozen = tuple((subject, p, s) for subject, (p, s) in row.items())
            self._rows[node] = self._distinct.setdefault(frozen, frozen)
        self.total += added
        if noted:
            self._noted.setdefault(order, []).extend(noted)
            self._noted_in_order = None
        if subjects:
            firsts = tuple(dict.fromkeys([*self._subjects.get(order, ()), *subjects]))
            self._subjects[order] = self._distinct_subjects.setdefault(firsts, firsts)
            self._subjects_in_order = None
        self.batches.append((order, added))

    def _unfrozen(self, node: str) -> dict[str, list[int]]:
        return {subject: [p, s] for subject, p, s in self._rows.get(node, ())}

    def cells(self) -> dict[tuple[str, str], Cell]:
        """(node, subject) -> its cell, as findings.matrix_cells gives it of every finding
        added: a subject's worst status, how many have it, and for WARN or worse which
        checks (the findings held). Nodes in the order of their first finding."""
        held: dict[tuple[str, str], list[Finding]] = defaultdict(list)
        for f in one_per_probe(self.noted):  # a probe that could not run: one line
            held[(f.node, f.check.split(".", 1)[0])].append(f)
        plain: dict[tuple[Status, int], Cell] = {}
        cells = {}
        for node, row in self._rows.items():
            for subject, passed, skipped in row:
                key = (node, subject)
                problems = held.get(key)
                if problems:
                    status = worst(problems)
                    at_worst = [f for f in problems if f.status is status]
                    checks = []
                    if status is not Status.UNREACHABLE:
                        checks = list(dict.fromkeys(cell_name(f) for f in at_worst))
                    cells[key] = Cell(status=status, count=len(at_worst), checks=checks)
                    continue
                status, count = (Status.SKIP, skipped) if skipped else (Status.PASS, passed)
                cell = plain.get((status, count))
                if cell is None:
                    cell = plain[(status, count)] = Cell(status=status, count=count)
                cells[key] = cell
        return cells

    def every(self) -> Iterator[Finding]:
        """Every finding, in order: the list this Tally was made of, or read back by its
        `reader` (one node's table, --json: what prints each finding)."""
        if self._every is not None:
            return iter(self._every)
        if self.reader is None:
            raise ValueError("the findings were tallied, not held, and nothing reads them back")
        return self.reader()

    def in_order(self) -> Iterator[tuple[int, int]]:
        """(batch, count) in the order the command gives its findings: the plan's nodes,
        then what came after them (a stable sort: a batch's place in the file decides
        between equal places)."""
        ordered = sorted(range(len(self.batches)), key=lambda i: self.batches[i][0])
        for index in ordered:
            yield index, self.batches[index][1]


_WARN = Status.WARN.rank


def tallied(findings: list[Finding] | Tally) -> Tally:
    """A Tally as it is, or one made of a list of findings (the list kept)."""
    return findings if isinstance(findings, Tally) else Tally.of(findings)
