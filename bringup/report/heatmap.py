"""The report's heatmaps (nodes x GPUs, nodes x message sizes) as SVG text, drawn here.

A heatmap is a grid of coloured, labelled cells with a colour bar: SVG says that directly.
Importing matplotlib and laying out a figure cost a renter more than the rest of
`report --format html` together (benchmarks/report_speed.py, issue 27), for a figure with
no axes to scale; the curves and timelines, which have them, stay matplotlib's
(bringup/report/plots.py).

The colours are ColorBrewer's RdYlGn diverging scheme, 11 classes (Cynthia Brewer,
colorbrewer2.org; the same stops matplotlib's `RdYlGn` interpolates), read linearly
between its stops. Text stays text, XML-escaped, one line, cut to what the figure holds.
"""

from __future__ import annotations

import math
from xml.sax.saxutils import escape as xml_escape

from bringup.report.escape import one_line, xml

# ColorBrewer RdYlGn, 11 classes, red (low) to green (high).
RDYLGN = (
    "#a50026",
    "#d73027",
    "#f46d43",
    "#fdae61",
    "#fee08b",
    "#ffffbf",
    "#d9ef8b",
    "#a6d96a",
    "#66bd63",
    "#1a9850",
    "#006837",
)
LABEL_CHARS = 40  # a fully qualified node name; longer would squeeze the cells
_SIZE_LABELS = ((30, "G"), (20, "M"), (10, "K"))

# Layout, in px of the viewBox (the page scales the figure to its width).
FONT = 12
CELL_W, CELL_H = 64, 24
CHAR_W = 7  # a label character at FONT
PAD = 8
BAR_W, BAR_GAP = 14, 16


def size_label(size_bytes: float) -> str:
    """'8M', '4G': message sizes the way nccl-tests' -b/-e options write them."""
    size = int(size_bytes)
    for shift, unit in _SIZE_LABELS:
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift}{unit}"
    return str(size)


def label(text: str, limit: int = LABEL_CHARS) -> str:
    """Node text as a label: one line, no control characters, at most `limit` characters."""
    shown = one_line(text)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def _text(value: str) -> str:
    return xml_escape(xml(value))


def colour(fraction: float, reverse: bool = False) -> str:
    """The RdYlGn colour at `fraction` (0..1, clipped) of the scale; reversed: green low."""
    fraction = min(1.0, max(0.0, fraction))
    if reverse:
        fraction = 1.0 - fraction
    position = fraction * (len(RDYLGN) - 1)
    low = min(int(position), len(RDYLGN) - 2)
    weight = position - low
    a, b = _rgb(RDYLGN[low]), _rgb(RDYLGN[low + 1])
    mixed = (round(x + (y - x) * weight) for x, y in zip(a, b, strict=True))
    return "#{:02x}{:02x}{:02x}".format(*mixed)


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return int(hex_colour[1:3], 16), int(hex_colour[3:5], 16), int(hex_colour[5:7], 16)


def _dark(hex_colour: str) -> bool:
    """Whether black text would be hard to read on this colour (ITU-R BT.601 luma)."""
    r, g, b = _rgb(hex_colour)
    return 0.299 * r + 0.587 * g + 0.114 * b < 115


def ticks(low: float, high: float, most: int = 8) -> list[float]:
    """Round values from low to high for the colour bar: steps of 1, 2, 2.5 or 5 times a
    power of ten, at most `most` of them (30..90 -> 30, 40, ..., 90)."""
    span = high - low
    if span <= 0 or not math.isfinite(span):
        return [low]
    power = 10 ** math.floor(math.log10(span / most))
    step = next(power * m for m in (1, 2, 2.5, 5, 10) if span / (power * m) <= most - 1)
    first = math.ceil(low / step - 1e-9) * step
    count = math.floor((high - first) / step + 1e-9) + 1
    return [round(first + i * step, 10) for i in range(count)]


def _number(value: float) -> str:
    return f"{value:g}"


def heatmap(
    title: str,
    rows: list[str],
    columns: list[str],
    values: list[list[float | None]],
    unit: str,
    higher_is_worse: bool,
    scale: tuple[float, float] | None = None,
) -> str:
    """Nodes x GPUs (or sizes), each cell coloured and labelled; blank where not measured.

    `scale` (low, high) is the range the colours span, from the profile (30 °C to the
    slowdown temperature, 0 to the busbw floor): colours then say how far a cell is from
    trouble, not how it ranks among the others. The data's own range would paint 33 and
    35 °C as green and red. Values beyond it take the end colour; None: the data's range.
    """
    row_labels = [label(r) for r in rows]
    column_labels = [label(c, 12) for c in columns]
    known = [v for row in values for v in row if v is not None]
    low, high = scale or ((min(known), max(known)) if known else (0.0, 1.0))
    if low == high:  # one value everywhere: a flat colour, not a divide by zero
        low, high = low - 1, high + 1
    names_w = CHAR_W * max((len(r) for r in row_labels), default=1) + PAD
    top = FONT * 2 + PAD
    grid_w, grid_h = CELL_W * len(columns), CELL_H * len(rows)
    bar_x = names_w + grid_w + BAR_GAP
    bar_ticks = ticks(low, high)
    ticks_w = CHAR_W * max(len(_number(t)) for t in bar_ticks) + PAD
    width = bar_x + BAR_W + ticks_w + FONT * 2
    height = top + grid_h + FONT * 2 + PAD
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
        f'font-family="sans-serif" font-size="{FONT}">',
        f"<title>{_text(label(title, 2 * LABEL_CHARS))}</title>",
        f'<text x="{(names_w + names_w + grid_w) / 2:g}" y="{FONT + 2}" '
        f'text-anchor="middle">{_text(label(title, 2 * LABEL_CHARS))}</text>',
    ]
    for r, row in enumerate(values):
        y = top + r * CELL_H
        parts.append(
            f'<text x="{names_w - PAD / 2:g}" y="{y + CELL_H / 2:g}" text-anchor="end" '
            f'dominant-baseline="central">{_text(row_labels[r])}</text>'
        )
        for c, value in enumerate(row):
            x = names_w + c * CELL_W
            if value is None:  # not measured: blank, as the figure says
                parts.append(
                    f'<rect x="{x}" y="{y}" width="{CELL_W}" height="{CELL_H}" '
                    'fill="none" stroke="#ddd"/>'
                )
                continue
            fill = colour((value - low) / (high - low), reverse=higher_is_worse)
            parts.append(
                f'<rect x="{x}" y="{y}" width="{CELL_W}" height="{CELL_H}" fill="{fill}" '
                'stroke="#fff"/>'
            )
            ink = "#fff" if _dark(fill) else "#000"  # readable on either end of the scale
            parts.append(
                f'<text x="{x + CELL_W / 2:g}" y="{y + CELL_H / 2:g}" text-anchor="middle" '
                f'dominant-baseline="central" font-size="{FONT - 2}" fill="{ink}">'
                f"{value:.4g}</text>"
            )
    for c, name in enumerate(column_labels):
        x = names_w + c * CELL_W + CELL_W / 2
        parts.append(
            f'<text x="{x:g}" y="{top + grid_h + FONT + 2}" text-anchor="middle">'
            f"{_text(name)}</text>"
        )
    parts += _colour_bar(bar_x, top, grid_h, low, high, bar_ticks, unit, higher_is_worse)
    parts.append("</svg>")
    return "\n".join(parts)


def _colour_bar(
    x: float,
    top: float,
    height: float,
    low: float,
    high: float,
    bar_ticks: list[float],
    unit: str,
    higher_is_worse: bool,
) -> list[str]:
    """The scale: a gradient from low (bottom) to high (top), its ticks, its unit."""
    gradient = "bringup-scale-" + ("worse" if higher_is_worse else "better")
    stops = "".join(
        f'<stop offset="{i / (len(RDYLGN) - 1):.3f}" '
        f'stop-color="{colour(i / (len(RDYLGN) - 1), higher_is_worse)}"/>'
        for i in range(len(RDYLGN))
    )
    parts = [
        f'<defs><linearGradient id="{gradient}" x1="0" y1="1" x2="0" y2="0">'
        f"{stops}</linearGradient></defs>",
        f'<rect x="{x}" y="{top}" width="{BAR_W}" height="{height}" '
        f'fill="url(#{gradient})" stroke="#999"/>',
    ]
    for tick in bar_ticks:
        y = top + height - (tick - low) / (high - low) * height
        parts.append(
            f'<line x1="{x + BAR_W}" y1="{y:.1f}" x2="{x + BAR_W + 4}" y2="{y:.1f}" stroke="#333"/>'
        )
        parts.append(
            f'<text x="{x + BAR_W + 6}" y="{y:.1f}" dominant-baseline="central">'
            f"{_number(tick)}</text>"
        )
    label_x = x + BAR_W + CHAR_W * max(len(_number(t)) for t in bar_ticks) + PAD + FONT
    middle = top + height / 2
    parts.append(
        f'<text x="{label_x:g}" y="{middle:g}" text-anchor="middle" '
        f'transform="rotate(-90 {label_x:g} {middle:g})">{_text(unit)}</text>'
    )
    return parts
