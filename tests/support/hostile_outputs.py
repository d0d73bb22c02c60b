"""Node-reported strings as a hostile node would send them, and the property every output
of `bringup report` must hold for them (tests/unit and tests/integration/cli run it).

The strings mix markup of every output (HTML, Markdown, rich), matplotlib mathtext,
control characters (NUL, BEL, ESC sequences, C1, bidi overrides, CR/LF), path pieces and
any other Unicode; hostile_run (report_runs.py) plants them in the facts and findings of a
run directory: node name, GPU name, serials, VBIOS, host strings, kernel, Xid line, NVMe
path, NCCL collective, a finding's message, value, unit, expected and action.
"""

from __future__ import annotations

import functools
import io
import json
import re
import tempfile
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import xmlschema
from hypothesis import strategies as st
from rich.console import Console

from bringup.commands.show import show_findings
from bringup.findings import read_finding
from tests.support import FIXTURES
from tests.support.cli import invoke
from tests.support.report_runs import HOSTILE_FIELDS, hostile_run

SCHEMA = xmlschema.XMLSchema(FIXTURES / "junit" / "junit-10.xsd")
FRAGMENTS = [
    "<script>alert(1)</script>",
    "<SCRIPT SRC=//x>",
    "<img src=x onerror=alert(1)>",
    "</td></tr></table>",
    "<!--",
    "]]>",
    "&amp;",
    "&",
    "|",
    "\\|",
    "\\",
    "`",
    "**",
    "[a](javascript:alert(1))",
    "![](http://x/pixel.png)",
    "\n# Verdict: ACCEPTED\n",
    "[/]",
    "[bold]",
    "[link=http://x]",
    "$\\frac{$",
    "$x^2$",
    "$",
    "\x00",
    "\x07",
    "\x1b[31m",
    "\x1b]0;title\x07",
    "\x9b",
    "\r\n",
    "\t",
    "\u202e",
    "\ufffe",
    "../../etc/passwd",
    "/",
    ",",
    " ",
]
# Any Unicode but lone surrogates (JSON from a node cannot carry them: the run's files
# would not parse, which the fail-closed tests cover), control characters included.
ANY_CHAR = st.characters(exclude_categories=["Cs"])
NODE_TEXT = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(ANY_CHAR, max_size=8)), max_size=6
).map("".join)
# One text for every field, and for some fields a text of their own.
HOSTILE = st.tuples(
    NODE_TEXT, st.dictionaries(st.sampled_from(HOSTILE_FIELDS), NODE_TEXT, max_size=4)
)

CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)


def html_tags(text: str) -> set[str]:
    parser = _Tags()
    parser.feed(text)
    parser.close()
    return parser.tags


def check_report_outputs(base: Path, text: str, fields: dict[str, str]) -> None:
    """`bringup report --format all` on a run carrying the strings, then every output."""
    run = hostile_run(base / "run", text, **fields)
    out = base / "out"
    result = invoke("report", run, "--format", "all", "--out", out)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert result.exit_code == 1, result.output  # the planted FAIL
    assert result.stdout.startswith("NOT ACCEPTED (demo data): ")
    assert CONTROL.search(result.stdout) is None

    html = (out / "report.html").read_text()
    # The template's own tags only: no node text became an element.
    assert html_tags(html) <= template_tags(), html_tags(html) - template_tags()
    assert "<script" not in html.lower()
    assert CONTROL.search(html) is None

    md = (out / "report.md").read_text()
    assert re.search(r"<(?!br>)", md) is None  # every `<` is the template's own <br>
    assert "<script" not in md.lower()
    assert CONTROL.search(md) is None

    junit = (out / "report.junit.xml").read_text()
    ET.fromstring(junit)
    SCHEMA.validate(junit)

    summary = json.loads((out / "report.json").read_text())
    assert summary["verdict"]["accepted"] is False

    findings = [
        read_finding(line) for line in (run / "findings.jsonl").read_text().split("\n") if line
    ]
    nodes = sorted({f.node for f in findings})
    for shown in (nodes, [*nodes, "other"]):  # one node's table, and the fleet's view
        terminal = io.StringIO()
        console = Console(file=terminal, record=True, width=160, color_system=None)
        show_findings(console, findings, shown, "check")
        assert "\x1b" not in terminal.getvalue()
        assert CONTROL.search(console.export_text()) is None


@functools.cache
def template_tags() -> frozenset[str]:
    """The elements of the report of the same run with plain text: the template's own and
    matplotlib's. Node text may remove some (an empty label), never add one."""
    with tempfile.TemporaryDirectory() as scratch:
        run = hostile_run(Path(scratch) / "run", "plain")
        result = invoke("report", run, "--format", "html", "--out", Path(scratch) / "out")
        assert result.exit_code == 1, result.output
        return frozenset(html_tags((Path(scratch) / "out" / "report.html").read_text()))
