"""JUnit XML for CI pipelines that gate training on acceptance: one testcase per finding.

A check with several findings on one node (one per GPU, one per path) gives a testcase
for each, named "gpu.ecc #1", "gpu.ecc #2": CI counts exactly what the report counts.

Valid against the common JUnit schema (Jenkins xunit-plugin junit-10.xsd, the one pytest's
xunit2 output follows; a copy is in tests/fixtures/junit/). That schema has no `<error>`
element in a testcase, so a check that could not be measured (ERROR, UNREACHABLE) is a
`<failure type="ERROR">`: every JUnit reader then counts it as failed, never as passed.
A WARN passes, with its message in `<system-out>`; a SKIP is `<skipped>`.

Node names and messages are whatever a node sent: every text and attribute goes through
escape.xml (no character XML 1.0 forbids, no control character), so one odd byte from a
node never makes the document unreadable to the CI gate.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Iterator

from bringup.findings import Finding, Status
from bringup.report import escape
from bringup.report.findingstore import in_report_order
from bringup.report.model import Report
from bringup.report.nodepass import NodePart, Parts, node_pass, streamed

RUN_SUITE = "run"  # the testsuite of findings that belong to no node


def _text(findings: list[Finding]) -> str:
    lines = []
    for f in findings:
        line = f"{f.status.value}: {f.message}"
        if f.action and f.status not in (Status.PASS, Status.SKIP):
            line += f"\n  action: {f.action}"
        lines.append(line)
    return "\n".join(lines)


def case_names(findings: list[Finding]) -> list[str]:
    """Each finding's name among its node's: the check, or "check #i" when the check has
    several findings there (distinct, in the order the check wrote them)."""
    total: dict[str, int] = defaultdict(int)
    for f in findings:
        total[f.check] += 1
    seen: dict[str, int] = defaultdict(int)
    names = []
    for f in findings:
        seen[f.check] += 1
        names.append(f"{f.check} #{seen[f.check]}" if total[f.check] > 1 else f.check)
    return names


def _only_xml_text(root: ET.Element) -> None:
    """Every text, tail and attribute value of the tree made legal XML 1.0 (escape.xml)."""
    for element in root.iter():
        if element.text:
            element.text = escape.xml(element.text)
        if element.tail:
            element.tail = escape.xml(element.tail)
        for key, value in list(element.attrib.items()):
            element.set(key, escape.xml(value))


def to_junit(report: Report) -> str:
    """The report's findings as a JUnit <testsuites> document (UTF-8 text)."""
    return "".join(junit_pieces(report))


def junit_pieces(report: Report, parts: Parts | None = None) -> Iterator[str]:
    """The document in pieces, one <testsuite> (a node) at a time, to be written as they
    come: at ten thousand nodes the whole tree was the report's largest object. The text
    is the one ET.indent and ET.tostring give of the whole tree. `parts`: the suites made
    already in the one pass over the nodes (render.node_parts); else made here."""
    # Each node's findings read back in turn (report/findingstore.py), in report order:
    # node, then catalog check order. The run's own ("") are the suite RUN_SUITE, last.
    findings = in_report_order(report.findings)
    # The totals head the document: counted first, without building a testcase.
    tests = len(findings)
    failures = sum(1 for f in findings.noted if f.status.bad)
    root = ET.Element("testsuites", name=report.title)
    root.set("tests", str(tests))
    root.set("failures", str(failures))
    root.set("errors", "0")
    _only_xml_text(root)
    head = ET.tostring(root, encoding="unicode")  # <testsuites ... />: opened by hand
    prolog = '<?xml version="1.0" encoding="UTF-8"?>\n'
    if not findings:
        yield prolog + head + "\n"
        return
    yield prolog + head.removesuffix(" />") + ">"
    nodes = streamed(report)
    if parts is not None:
        yield from parts.pieces("junit")
    elif nodes is not None:
        with node_pass(nodes, [Suites(report)]) as own:
            yield from own.pieces("junit")
    else:
        names = {n or RUN_SUITE for n in findings.nodes}
        ordered = sorted(names, key=lambda n: (n == RUN_SUITE, n))
        for node in ordered:
            found = findings.of(node)
            if node == RUN_SUITE:  # the run's own, then a node of that name's (if any)
                found = [*findings.of(""), *found]
            yield "\n  " + _suite_xml(report, node, found)
    yield "\n</testsuites>\n"


class Suites:
    """The document's part of each node (report/nodepass.py): its <testsuite>, in node
    order; the run's own findings ("") and a node named RUN_SUITE's, the suite RUN_SUITE,
    last."""

    def __init__(self, report: Report) -> None:
        self._report = report
        self._last: dict[str, list[Finding]] = {}

    def part(self, node: NodePart) -> Iterator[tuple[str, str]]:
        if not node.findings:
            return
        if node.name in ("", RUN_SUITE):
            self._last[node.name] = node.findings  # the run's own: a few
            return
        yield "junit", "\n  " + _suite_xml(self._report, node.name, node.findings)

    def end(self) -> Iterator[tuple[str, str]]:
        found = [*self._last.get("", []), *self._last.get(RUN_SUITE, [])]
        if found:
            yield "junit", "\n  " + _suite_xml(self._report, RUN_SUITE, found)


def _suite_xml(report: Report, node: str, found: list[Finding]) -> str:
    """One node's <testsuite>, the text ET.indent(level=1) and ET.tostring gave of its tree
    (tests/unit/test_report_streams.py holds it to that), written directly: at ten
    thousand nodes building and serialising 290,000 elements was a tenth of the report."""
    cases = []
    failures = skipped = 0
    classname = _attr(f"bringup.{node}")
    for name, f in zip(case_names(found), found, strict=True):
        head = f'\n    <testcase name="{_attr(name)}" classname="{classname}" time="0">\n      '
        if f.status.bad:
            kind = "FAIL" if f.status == Status.FAIL else f.status.value
            inner = (
                f'<failure type="{_attr(kind)}" message="{_attr(f.message)}">'
                f"{_cdata(_text([f]))}</failure>"
            )
            failures += 1
        elif f.status == Status.SKIP:
            inner = f'<skipped message="{_attr(f.message)}" />'
            skipped += 1
        else:
            inner = f"<system-out>{_cdata(_text([f]))}</system-out>"
        cases.append(f"{head}{inner}\n    </testcase>")
    stamp = f' timestamp="{_attr(report.run.started_at)}"' if report.run.started_at else ""
    return (
        f'<testsuite name="{_attr(node)}" tests="{len(cases)}" failures="{failures}" '
        f'errors="0" skipped="{skipped}" time="0"{stamp}>{"".join(cases)}\n  </testsuite>'
    )


# ElementTree's escapes, as ET.tostring applies them, after escape.xml's.
_CDATA = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_ATTRIB = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\r": "&#13;", "\n": "&#10;"}
)


def _cdata(text: str) -> str:
    """A text node as ET writes it: legal XML 1.0 (escape.xml), `&`, `<`, `>` escaped."""
    return escape.xml(text).translate(_CDATA)


def _attr(text: str) -> str:
    """An attribute value as ET writes it: legal XML 1.0 (escape.xml: a tab is a space
    already), quotes and line breaks as character references."""
    return escape.xml(text).translate(_ATTRIB)
