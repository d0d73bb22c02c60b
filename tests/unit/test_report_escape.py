"""Text a node sent stays text in every output: HTML, Markdown, JUnit, plots, the console.

One run (hostile_run) whose node name, GPU name, serials, VBIOS, host strings, Xid line,
NVMe path, NCCL collective and a finding all carry a payload of markup (HTML, Markdown,
rich), matplotlib mathtext and control characters.
"""

from __future__ import annotations

import io
import json
import re
import warnings
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
import xmlschema
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from bringup import profile
from bringup.commands.report import build_report, verdict_lines
from bringup.report import escape, heatmap, junit, render
from bringup.report.model import Report
from bringup.report.rundata import load
from tests.support import FIXTURES
from tests.support.report_runs import hostile_run

B300 = profile.load("b300")
SCHEMA = xmlschema.XMLSchema(FIXTURES / "junit" / "junit-10.xsd")
PAYLOAD = (
    "<script>alert(1)</script> a|b & [/] [bold]x [a](http://x) $\\frac{$ \x00\x07\x1b[31m\u202e"
)
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u202e]")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    run = hostile_run(tmp_path_factory.mktemp("hostile") / "run", PAYLOAD)
    return build_report(load(run), B300, generated_at="T")


class Tags(HTMLParser):
    """Every start tag of a document, as a browser's tokenizer sees it."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)


def test_html_escapes_node_text_and_plots_draw_mathtext_literally(report: Report) -> None:
    html = render.html(report, render.make_plots(report, B300))  # mathtext: no ValueError
    parser = Tags()
    parser.feed(html)
    parser.close()
    assert "script" not in parser.tags
    assert "<script" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "\\frac{" in html  # drawn as the text it is, in the plots too
    assert CONTROL.search(html) is None


def test_markdown_escapes_every_field(report: Report) -> None:
    md = render.markdown(report)
    assert "<script" not in md
    assert "&lt;script&gt;alert(1)&lt;/script&gt; a\\|b &amp; \\[/\\]" in md
    assert "[a](http://x)" not in md  # no link made of node text
    assert CONTROL.search(md) is None
    # The payload's pipe splits no table: every row of a table has as many cells as its head.
    for table in re.findall(r"(?:^\|.*\n)+", md, re.MULTILINE):
        rows = table.splitlines()
        cells = {len(re.findall(r"(?<!\\)\|", row)) for row in rows}
        assert len(cells) == 1, rows
    # Where the payload reaches it: GPU model, serials, VBIOS, host, Xid line, NVMe path.
    escaped = escape.markdown(PAYLOAD)
    rows = ("| GPU model |", "| GPU serials |", "| VBIOS |", "| host |", "| chassis serial |")
    for row in (*rows, "| BIOS |", "| BMC firmware |", "| NICs |"):
        line = next(line for line in md.splitlines() if line.startswith(row))
        assert escaped in line, row
    assert f"- Xid 79: NVRM: Xid (PCI:0000:ba:00): 79, {escaped}" in md
    assert f"/data/{escaped}" in md


def test_junit_parses_and_validates_whatever_the_node_sent(report: Report) -> None:
    text = junit.to_junit(report)
    root = ET.fromstring(text)
    SCHEMA.validate(text)
    assert CONTROL.search(text) is None
    (suite,) = [s for s in root if s.get("name", "").startswith("node-")]
    assert suite.get("name") == escape.xml(f"node-{PAYLOAD}")
    case = next(c for c in suite if c.get("name") == "gpu.name")
    failure = case.find("failure")
    assert failure is not None
    assert failure.get("message") == escape.xml(f"GPU name {PAYLOAD}")


def test_json_keeps_the_text_as_sent(report: Report) -> None:
    """JSON escapes by itself: the summary carries the node's text unchanged."""
    summary = json.loads(render.summary_json(report))
    assert f"node-{PAYLOAD}" in {n["node"] for n in summary["nodes"]}


def test_console_verdict_is_plain_text(report: Report, tmp_path: Path) -> None:
    lines = verdict_lines(report)
    assert lines[0].startswith("NOT ACCEPTED (demo data): ")
    assert all(CONTROL.search(line) is None for line in lines)


def test_console_prints_node_text_literally() -> None:
    from bringup.commands.show import plain

    console = Console(file=io.StringIO(), record=True, width=300, color_system=None)
    console.print(plain(PAYLOAD))
    text = console.export_text()
    assert "[/] [bold]x" in text
    assert CONTROL.search(text) is None


def test_escapes_one_by_one() -> None:
    assert escape.printable("a\x1b[31mb\tc\x00\x9bd\ne") == "a[31mb cd\ne"
    assert escape.one_line(" a\n\n b\r ") == "a b"
    assert escape.printable("run\udcff\u2028x") == "runx"  # a path's undecodable byte
    assert escape.markdown("a|b<c>&d[e]\\f\ng") == "a\\|b&lt;c&gt;&amp;d\\[e\\]\\\\f g"
    assert escape.xml("a\x00b\ud800c\ufffed\x1be\x85f") == "abcdef"


def test_plots_draw_mathtext_and_long_names_as_text() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a label squeezing the axes to nothing warns
        svg = heatmap.heatmap(
            "t", ["$\\frac{$", "n" * 300], ["GPU 0"], [[1.0], [2.0]], "°C", higher_is_worse=True
        )
    assert ">$\\frac{$</text>" in svg
    assert "n" * 39 + "…" in svg and "n" * 40 not in svg


@given(st.one_of(st.text(), st.text(min_size=250, max_size=300), st.integers(), st.floats()))
def test_each_escape_answers_the_same_from_its_cache(text: object) -> None:
    """printable, markdown and xml keep their answers for short texts (report/escape.py):
    asked twice, or of a text too long to keep, each gives what its rule gives."""
    printable = escape._CONTROL.sub("", str(text).replace("\t", " "))
    rule = {
        escape.printable: printable,
        escape.markdown: "".join({**escape._MARKDOWN, "\n": " "}.get(c, c) for c in printable),
        escape.xml: escape._NOT_XML.sub("", printable),
    }
    for function, expected in rule.items():
        assert function(text) == expected
        assert function(text) == expected  # the kept answer
