"""The node × subject matrix is one rule in all three outputs (issue 27): the console,
report.md and report.html show each cell as the worst status of the checks of that node's
probe and its count ("PASS 12"), the checks behind a bad cell under it, and a finding
moved where it is judged (findings.matrix_cells decides; each output only draws it)."""

from __future__ import annotations

import json
import os
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from bringup.findings import Cell, Finding, Status, matrix_cells
from tests.support import REPO
from tests.support.cli import invoke, run_cli


def console_matrix(stdout: str) -> dict[str, dict[str, str]]:
    """node -> subject -> the cell's lines joined by a space, as the console prints them
    (every table of the matrix, continued ones included)."""
    matrix: dict[str, dict[str, str]] = {}
    columns: list[str] = []
    node = None
    for line in stdout.splitlines():
        if "┃ node" in line:
            columns = [c.strip() for c in line.split("┃")[1:-1]][1:]
            continue
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if columns and cells and cells[0]:
            node = cells[0]
            matrix.setdefault(node, {}).update(zip(columns, cells[1:], strict=True))
        elif columns and cells and node:  # a cell's next line: the checks of a bad cell
            for column, more in zip(columns, cells[1:], strict=True):
                matrix[node][column] = f"{matrix[node][column]} {more}".strip()
        else:
            node = None
    return matrix


def markdown_matrix(text: str) -> dict[str, dict[str, str]]:
    section = text.split("## Node × subject (nodes with a problem)", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    columns = [c.strip() for c in rows[0].strip("|").split("|")][1:]
    matrix = {}
    for row in rows[2:]:
        node, *cells = (c.strip() for c in row.strip("|").split("|"))
        matrix[node] = {
            s: c.replace("<br>", " ") for s, c in zip(columns, cells, strict=True) if c != "–"
        }
    return matrix


class _Cells(HTMLParser):
    """The rows of the HTML report's matrix section: each cell's text, <br> as a space."""

    def __init__(self) -> None:
        super().__init__()
        self.inside, self.rows, self.cell = False, [], None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "section":
            self.inside = ("id", "matrix") in attrs
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("td", "th"):
            self.cell = ""
        elif self.inside and tag == "br" and self.cell is not None:
            self.cell += " "

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self.inside = False
        elif self.inside and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append(self.cell.strip())
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell += data


def html_matrix(text: str) -> dict[str, dict[str, str]]:
    parser = _Cells()
    parser.feed(text)
    header, *rows = parser.rows
    return {
        node: {s: c for s, c in zip(header[1:], cells, strict=True) if c != "–"}
        for node, *cells in rows
    }


def test_the_demos_report_draws_the_consoles_cells(tmp_path: Path) -> None:
    """node03's gpu cell is "PASS 12" everywhere (its NVLink finding is judged by
    topology.nvlink, where the FAIL is); every node's cells agree between the console,
    report.md, report.html and report.json. On the old main report.md had no matrix and
    report.html showed node03's gpu as SKIP (the worst of every finding, moved ones too)."""
    run = tmp_path / "demo"
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    done = run_cli("check", "--demo", "--out", run, cwd=REPO, env=env)
    assert done.returncode == 1, done.stderr  # the demo's planted faults
    console = console_matrix(done.stdout)
    assert set(console) == {f"b300-node0{i}" for i in range(1, 7)}

    result = invoke("report", run, "--format", "md,html,json", "-q")
    assert result.exit_code == 1, result.output
    markdown = markdown_matrix((run / "report.md").read_text())
    page = html_matrix((run / "report.html").read_text())
    whole = json.loads((run / "report.json").read_text())["matrix"]
    model = {
        node: {s: " ".join(_cell(c).lines()) for s, c in row.items()} for node, row in whole.items()
    }

    assert console["b300-node03"]["gpu"] == "PASS 12"
    assert markdown["b300-node03"]["gpu"] == page["b300-node03"]["gpu"] == "PASS 12"
    assert markdown["b300-node03"]["topology"] == "FAIL 1 nvlink"
    # The reports' matrix lists the nodes with a problem; report.json has every node.
    assert set(markdown) == set(page) == {f"b300-node0{i}" for i in range(2, 7)}
    for node, cells in console.items():
        assert model[node] == cells, node
        if node in markdown:
            assert markdown[node] == page[node] == cells, node


def test_a_cell_is_the_worst_status_its_count_and_the_bad_checks() -> None:
    def f(check: str, status: Status, message: str = "m", node: str = "n1") -> Finding:
        return Finding(node=node, check=check, status=status, message=message)

    cells = matrix_cells(
        [
            f("gpu.count", Status.PASS),
            f("gpu.ecc", Status.FAIL),
            f("gpu.clocks", Status.FAIL),
            f("gpu.nvlink", Status.SKIP, "GPU 2: judged by topology.nvlink (all links down)"),
            f("topology.nvlink", Status.FAIL),
            f("host.kernel", Status.ERROR, "probe crashed"),
            f("host.memory", Status.ERROR, "probe crashed"),
            f("node.reachable", Status.UNREACHABLE, "ssh refused", node="n2"),
        ]
    )
    assert cells[("n1", "gpu")] == Cell(status=Status.FAIL, count=2, checks=["ecc", "clocks"])
    assert cells[("n1", "gpu")].lines() == ["FAIL 2", "ecc", "clocks"]
    assert cells[("n1", "topology")].lines() == ["FAIL 1", "nvlink"]
    # a probe that did not run is one finding, "not judged"
    assert cells[("n1", "host")].lines() == ["ERROR 1", "not judged"]
    assert cells[("n2", "node")].lines() == ["UNREACHABLE"]


def _cell(data: dict[str, Any]) -> Cell:
    """A cell of report.json's matrix, read back."""
    return Cell(status=Status(data["status"]), count=data["count"], checks=data["checks"])
