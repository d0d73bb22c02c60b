"""The report at fleet scale: summary first, problem nodes in full, passing nodes one line
each; heatmap colours span the profile's range, not the data's."""

from __future__ import annotations

import re

import pytest

from bringup import profile
from bringup.commands.report import build_report
from bringup.report import render
from bringup.report.model import Report
from bringup.report.rundata import load
from tests.support.report_runs import fleet_run

B300 = profile.load("b300")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Report:
    run = fleet_run(tmp_path_factory.mktemp("fleet") / "run", 10)
    return build_report(load(run), B300, generated_at="T")


def test_problem_nodes_and_what_is_wrong_with_them(fleet: Report) -> None:
    problems = {n.node: n.troubles for n in fleet.nodes if n.problem}
    assert problems == {
        "b300-node02": ["gpu.count FAIL"],
        "b300-node03": ["topology.nvlink FAIL"],
        "b300-node04": ["gpu.remapped_rows FAIL"],
        "b300-node05": ["xid.events FAIL"],
        "b300-node06": ["gpu.clock_events WARN"],
    }


def test_markdown_passing_nodes_one_line_each(fleet: Report) -> None:
    text = render.markdown(fleet)
    assert "10 nodes: 5 with a problem, 5 passing." in text
    passing = re.findall(
        r"^- (b300-node\d+) PASS · \d+ findings · 8× NVIDIA B300 SXM6 AC", text, re.M
    )
    assert passing == ["b300-node01", *(f"b300-node{i:02d}" for i in range(7, 11))]
    # Only problem nodes get a section of their own.
    assert re.findall(r"^## (b300-node\d+) — ", text, re.M) == [
        f"b300-node0{i}" for i in range(2, 7)
    ]


def test_temperature_colours_span_30_to_the_slowdown_temperature(fleet: Report) -> None:
    plots = render.make_plots(fleet, B300)
    svg = next(p.svg for p in plots.fleet if p.key == "fleet-temperature")
    # Every GPU reads 34 °C; the colour bar runs from 30 to the GPUs' 90 °C slowdown.
    ticks = re.findall(r">\s*([0-9.]+)\s*</text>", svg)
    assert ticks[-7:] == ["30", "40", "50", "60", "70", "80", "90"]
