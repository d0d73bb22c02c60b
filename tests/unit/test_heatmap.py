"""The heatmaps drawn as SVG without matplotlib (bringup/report/heatmap.py): ColorBrewer's
RdYlGn at its ends and middle, round colour-bar ticks, and well-formed XML whatever a node
named itself."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from bringup.report import heatmap


def test_the_scale_is_colorbrewer_rdylgn() -> None:
    assert heatmap.colour(0.0) == "#a50026"  # red: low where higher is better
    assert heatmap.colour(0.5) == "#ffffbf"
    assert heatmap.colour(1.0) == "#006837"
    assert heatmap.colour(0.0, reverse=True) == "#006837"  # green: cool where hot is worse
    assert heatmap.colour(-3.0) == "#a50026" and heatmap.colour(7.0) == "#006837"  # clipped
    assert heatmap.colour(0.05) == "#be1826"  # halfway between the first two stops


def test_ticks_are_round() -> None:
    assert heatmap.ticks(30, 90) == [30, 40, 50, 60, 70, 80, 90]
    assert heatmap.ticks(0, 1) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert heatmap.ticks(0, 2250) == [0, 500, 1000, 1500, 2000]
    assert heatmap.ticks(5, 5) == [5]


def test_the_svg_is_well_formed_with_hostile_names() -> None:
    svg = heatmap.heatmap(
        "t <&>", ["a<b>&c", "\x1b[31mred", "n" * 300], ["GPU 0", "GPU 1"],
        [[1.0, None], [2.0, 3.0], [None, None]], "°C", higher_is_worse=True,
    )  # fmt: skip
    root = ET.fromstring(svg)
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "a<b>&c" in texts and "[31mred" in texts
    assert "n" * 39 + "…" in texts
    cells = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text") if t.get("fill")]
    assert cells == ["1", "2", "3"]  # the measured cells, labelled
    rects = list(root.iter("{http://www.w3.org/2000/svg}rect"))
    blank = [r for r in rects if r.get("fill") == "none"]
    assert len(blank) == 3  # not measured: drawn blank, not coloured
