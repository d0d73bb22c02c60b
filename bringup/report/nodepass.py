"""The nodes' parts of report.md, report.junit.xml and report.json, made in one pass over
the nodes.

Each of these files is a head (what the whole run shows: the verdict, the matrix, the
lists), a part per node in node order (its section in report.md, its <testsuite>, its
findings and its section in report.json), and a tail. At ten thousand nodes the parts
are most of the bytes and most of the work: each node's findings read back from the
spool, its figures read back, its section built. File by file, that was done once a file
(the findings once more for report.json's two lists); here each node is read once, and
its part of every file asked for goes to a temporary file of that part's own
(anonymous, as the spools: report/findingstore.py), copied into the file at its place
(docs/scale.md, "One pass over the nodes").

What each file makes of a node is its own module's (`Maker`: render.py's Markdown and
JSON, junit.py's suites); this module only walks the nodes and keeps the parts.
"""

from __future__ import annotations

import codecs
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from tempfile import TemporaryFile
from typing import IO, Protocol

from bringup.findings import Finding
from bringup.measurements import NodeMeasurements
from bringup.report.model import NodeReport, NodeSections, NodeSummary, Report


@dataclass
class NodePart:
    """One name of the report, in report order, with its findings read back (in report
    order) and, for a node of the report's rows, its section built when first asked for."""

    name: str  # a node, or a findings' `node` field that is none: "" (the run's), "a,b"
    findings: list[Finding]
    row: NodeSummary | None  # None: no node of the report (its findings only)
    nodes: NodeSections

    @functools.cached_property
    def section(self) -> NodeReport:
        return self.nodes.section(self.name, self.findings, self.figures)

    @functools.cached_property
    def figures(self) -> NodeMeasurements:
        return self.nodes.figures(self.name)


class Maker(Protocol):
    """A file's parts: what it writes of each node, and after the last one, each as
    (the part's name, text)."""

    def part(self, node: NodePart) -> Iterator[tuple[str, str]]: ...

    def end(self) -> Iterator[tuple[str, str]]: ...


# Read back in pieces of this many bytes: a file is never one string.
PIECE_BYTES = 1 << 20


class Parts:
    """The texts of the pass by part, each in a temporary file of its own, read back in
    pieces as written."""

    def __init__(self) -> None:
        self._files: dict[str, IO[bytes]] = {}

    def add(self, kind: str, text: str) -> None:
        spool = self._files.get(kind)
        if spool is None:
            spool = self._files[kind] = TemporaryFile()  # noqa: SIM115 (closed by close())
        spool.write(text.encode("utf-8"))

    def pieces(self, kind: str) -> Iterator[str]:
        """What was written of `kind`, in order, in pieces of PIECE_BYTES at most."""
        spool = self._files.get(kind)
        if spool is None:
            return
        spool.seek(0)
        decoder = codecs.getincrementaldecoder("utf-8")()
        while chunk := spool.read(PIECE_BYTES):
            yield decoder.decode(chunk)
        if rest := decoder.decode(b"", final=True):
            yield rest  # none: every part was written whole

    def close(self) -> None:
        for spool in self._files.values():
            spool.close()
        self._files.clear()

    def __enter__(self) -> Parts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def node_pass(nodes: NodeSections, makers: list[Maker]) -> Parts:
    """Every name of the report (its rows' nodes and its findings' `node` fields) in report
    order, each read once and given to every maker; their parts, kept."""
    findings = nodes.findings
    rows = {row.node: row for row in nodes.rows}
    parts = Parts()
    try:
        for name in sorted(rows.keys() | set(findings.nodes)):
            mine = findings.of(name) if findings.count(name) else []
            node = NodePart(name, mine, rows.get(name), nodes)
            for make in makers:
                for kind, text in make.part(node):
                    parts.add(kind, text)
        for make in makers:
            for kind, text in make.end():
                parts.add(kind, text)
    except BaseException:
        parts.close()
        raise
    return parts


def streamed(report: Report) -> NodeSections | None:
    """The report's nodes when `build` made it (each section built as it is written, the
    findings read back node by node in report order): then its files' node parts come
    from node_pass. None: a report made by hand (tests), written from its lists."""
    nodes, findings = report.nodes, report.findings
    if isinstance(nodes, NodeSections) and nodes.findings is findings and findings.grouped:
        return nodes
    return None
