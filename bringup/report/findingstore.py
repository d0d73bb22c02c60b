"""The findings of a run as the report holds them: on disk by node, with what the whole
run needs taken as they pass.

At ten thousand nodes of the scale benchmark findings.jsonl holds 290,000 findings; held
as objects, even with their texts shared, they were 130 MB of the report's 400 MB
(docs/scale.md, "The streamed report"). Here each finding is written to an anonymous
temporary file as it is read, a node's findings in chunks, and the report reads a node's
findings back when it writes that node (its section, its JUnit suite, report.json's
list). What stays in memory: per node where its chunks are and how many findings it has,
the names of the checks seen, and the findings a verdict or a rule over the whole run
reads (`noted`: WARN or worse, and the whole run's own `report.*` and `fleet.*`), which
are a fraction of the whole.

The spool is written and read by this process alone (tempfile.TemporaryFile: no name in
a shared directory, gone when closed), so pickle is safe here, as for the figures
(report/figures.py), and gives each finding back equal to the one written.
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import IO

from bringup.findings import Finding, Status

# A chunk is the findings of one node that came one after another (a check writes a
# node's findings together), cut at this many: one pickle each, its texts shared in it.
CHUNK = 256


def noted(f: Finding) -> bool:
    """Whether a finding stays in memory: what the verdict lists (WARN or worse) and the
    whole run's own findings (`report.*`, `fleet.*`), which rules over the run read."""
    return f.status.rank >= Status.WARN.rank or f.check.startswith(("report.", "fleet."))


class FindingsSpool:
    """Findings written once each, in the order given, and read back by node (`of`) or all
    in that order (iteration). Its `noted` findings are held, in that order too."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._chunks: list[tuple[int, int]] = []  # (offset, length) in the file, in order
        self._by_node: dict[str, list[int]] = {}  # f.node -> its chunks
        self._counts: dict[str, int] = {}  # f.node -> its findings
        self._total = 0
        self._pending: list[Finding] = []  # the chunk being gathered, of one node
        self.checks: set[str] = set()
        self.noted: list[Finding] = []

    @classmethod
    def of_findings(cls, findings: Iterable[Finding]) -> FindingsSpool:
        spool = cls()
        for f in findings:
            spool.add(f)
        return spool

    def add(self, f: Finding) -> None:
        pending = self._pending
        if pending and (pending[0].node != f.node or len(pending) >= CHUNK):
            self._flush()  # a new chunk
        self._pending.append(f)
        self._counts[f.node] = self._counts.get(f.node, 0) + 1
        self._total += 1
        self.checks.add(f.check)
        if noted(f):
            self.noted.append(f)

    def _flush(self) -> None:
        if not self._pending:
            return
        if self._file is None:
            self._file = tempfile.TemporaryFile()  # noqa: SIM115 (unlinked; closed when dropped)
        data = pickle.dumps(self._pending, protocol=pickle.HIGHEST_PROTOCOL)
        end = self._file.seek(0, 2)  # a copy (`extended`) appends to the same file
        self._file.write(data)
        self._by_node.setdefault(self._pending[0].node, []).append(len(self._chunks))
        self._chunks.append((end, len(data)))
        self._pending = []

    def _chunk(self, index: int) -> list[Finding]:
        assert self._file is not None  # a chunk was written
        offset, length = self._chunks[index]
        self._file.seek(offset)
        found: list[Finding] = pickle.loads(self._file.read(length))  # this process's own
        return found

    @property
    def nodes(self) -> set[str]:
        """Every finding's `node` field, as written ("" for the run's own findings)."""
        return set(self._counts)

    def count(self, node: str) -> int:
        return self._counts.get(node, 0)

    def of(self, node: str) -> list[Finding]:
        """One node's findings (its `node` field), in the order they were added."""
        self._flush()
        return [f for index in self._by_node.get(node, []) for f in self._chunk(index)]

    def __iter__(self) -> Iterator[Finding]:
        self._flush()
        for index in range(len(self._chunks)):
            yield from self._chunk(index)

    def __len__(self) -> int:
        return self._total

    def __bool__(self) -> bool:
        return self._total > 0

    def extended(self, more: Iterable[Finding]) -> FindingsSpool:
        """These findings and `more` after them, on the same file; this one unchanged."""
        self._flush()
        copy = FindingsSpool()
        copy._file = self._file
        copy._chunks = list(self._chunks)
        copy._by_node = {node: list(chunks) for node, chunks in self._by_node.items()}
        copy._counts = dict(self._counts)
        copy._total = self._total
        copy.checks = set(self.checks)
        copy.noted = list(self.noted)
        for f in more:
            copy.add(f)
        copy._flush()
        return copy

    def filtered(self, keep: Callable[[Finding], bool]) -> FindingsSpool:
        """The findings `keep` keeps, in order, spooled anew."""
        return FindingsSpool.of_findings(f for f in self if keep(f))


class ReportFindings:
    """Every finding of a report in report order (node, then the catalog's check order,
    then unknown checks by name; a node's findings of one check as written), read back a
    node at a time: a report of ten thousand nodes never holds them all."""

    def __init__(self, spool: FindingsSpool, check_order: list[str] | None = None) -> None:
        self._spool = spool
        order = {name: i for i, name in enumerate(check_order or [])}
        self._order = order
        self._sorted = check_order is not None
        self.nodes = sorted(spool.nodes)  # the `node` fields, in report order
        # The held ones in report order: a stable sort of a part keeps the order the
        # whole's sort gives it.
        self.noted = self._in_order(spool.noted) if self._sorted else list(spool.noted)
        self.bad_count = sum(1 for f in spool.noted if f.status.bad)

    @property
    def grouped(self) -> bool:
        """Whether they come node by node (report order): iteration is `groups`'."""
        return self._sorted

    @classmethod
    def held(cls, findings: Iterable[Finding]) -> ReportFindings:
        """Findings given in report order already (a report made by hand, tests)."""
        return cls(FindingsSpool.of_findings(findings))

    def _in_order(self, findings: list[Finding]) -> list[Finding]:
        order = self._order
        return sorted(findings, key=lambda f: (f.node, order.get(f.check, len(order)), f.check))

    def of(self, node: str) -> list[Finding]:
        """One node's findings (their `node` field), in report order."""
        mine = self._spool.of(node)
        return self._in_order(mine) if self._sorted else mine

    def groups(self) -> Iterator[tuple[str, list[Finding]]]:
        """Each `node` field with its findings, in report order."""
        for node in self.nodes:
            yield node, self.of(node)

    def __iter__(self) -> Iterator[Finding]:
        if not self._sorted:
            yield from self._spool  # as given
            return
        for _, found in self.groups():
            yield from found

    def __len__(self) -> int:
        return len(self._spool)

    def __bool__(self) -> bool:
        return bool(self._spool)

    def count(self, node: str) -> int:
        return self._spool.count(node)


def in_report_order(findings: ReportFindings | Iterable[Finding]) -> ReportFindings:
    """The report's findings as ReportFindings (a list: in the order given)."""
    if isinstance(findings, ReportFindings):
        return findings
    return ReportFindings.held(findings)
