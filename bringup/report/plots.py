"""The report's plots with axes (a node's NCCL curve, its telemetry timeline): matplotlib
figures returned as SVG text to embed in report.html. The heatmaps are report/heatmap.py's.

Agg backend and Figure objects (no pyplot state), so plots can be drawn without a display
and from any thread. The SVG is made deterministic: a fixed `svg.hashsalt` for the ids
matplotlib generates and no creation date, so the same data gives the same bytes. Text
stays text (`svg.fonttype: none`): smaller, selectable, and readable by the browser test.

Labels are node names and collectives a node reported: drawn as they are, never parsed as
mathtext (`text.parse_math: False`; `$\\frac{$` in a node name would raise), control
characters removed and cut to a length a figure can hold (`_label`); the SVG writer
escapes them for XML.
"""

from __future__ import annotations

import io
import math
import re

import matplotlib

matplotlib.use("Agg")  # before anything draws: no display on a controller or in CI

from matplotlib.figure import Figure

from bringup.measurements import Curve, Timeline
from bringup.report.escape import one_line
from bringup.report.heatmap import size_label

RC = {
    "text.parse_math": False,  # labels are node text, not TeX
    "svg.hashsalt": "bringup-report",  # stable element ids
    "svg.fonttype": "none",
    "font.size": 9,
    "font.family": "sans-serif",
    "axes.grid": True,
    "grid.alpha": 0.3,
}
LABEL_CHARS = 40  # a fully qualified node name; longer would squeeze the axes


def _label(text: str, limit: int = LABEL_CHARS) -> str:
    """Node text as a label: one line, no control characters, at most `limit` characters."""
    shown = one_line(text)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def to_svg(fig: Figure) -> str:
    """The figure as an inline <svg> element: no XML prolog, scalable to its container."""
    buffer = io.StringIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight")
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    # Width and height in pt would fix the size; the viewBox keeps the aspect ratio and
    # CSS (`svg { width: 100%; height: auto }`) fits it to the page without overflow.
    head, rest = text.split(">", 1)
    head = re.sub(r'\s(width|height)="[^"]*"', "", head)
    return f'{head} role="img">{rest}'


def _figure(width_in: float, height_in: float) -> Figure:
    with matplotlib.rc_context(RC):
        return Figure(figsize=(width_in, height_in), layout="constrained")


def nccl_curve(curves: list[Curve], floor_gb_s: float | None, title: str) -> str:
    """Bus bandwidth against message size, one line per collective; the floor dashed."""
    with matplotlib.rc_context(RC):
        fig = _figure(6.4, 3.0)
        ax = fig.add_subplot()
        sizes: set[int] = set()
        for curve in curves:
            xs = [p.size_bytes for p in curve.points]
            ys = [p.busbw_bytes_per_s / 1e9 for p in curve.points]
            sizes.update(xs)
            label = _label(curve.collective) + (f" ({curve.nranks} ranks)" if curve.nranks else "")
            ax.plot(xs, ys, marker="o", markersize=3, label=label)
        highest = max((p.busbw_bytes_per_s / 1e9 for c in curves for p in c.points), default=0)
        if floor_gb_s is not None:
            ax.axhline(floor_gb_s, linestyle="--", color="tab:red", linewidth=1)
            ax.annotate(
                f"floor {floor_gb_s:g} GB/s",
                (0.01, floor_gb_s),
                xycoords=("axes fraction", "data"),
                va="top",
                color="tab:red",
            )
            highest = max(highest, floor_gb_s)
        positive = sorted(s for s in sizes if s > 0)
        if positive:
            ax.set_xscale("log", base=2)
            ticks = positive[:: max(1, math.ceil(len(positive) / 10))]
            ax.set_xticks(ticks, [size_label(t) for t in ticks])
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_ylim(0, highest * 1.1 or 1)
        ax.set_title(_label(title, 2 * LABEL_CHARS))
        ax.legend(loc="lower right", fontsize=8)
        return to_svg(fig)


def timeline(tl: Timeline, title: str) -> str:
    """Temperature, power and SM clock over time, one line per GPU."""
    series = (
        ("temperature_c", "°C", 1.0),
        ("power_w", "W", 1.0),
        ("sm_clock_hz", "SM MHz", 1e6),
    )
    gpus = sorted({s.gpu for s in tl.samples})
    with matplotlib.rc_context(RC):
        fig = _figure(6.4, 5.4)
        axes = fig.subplots(len(series), 1, sharex=True)
        for ax, (field, unit, scale) in zip(axes, series, strict=True):
            for gpu in gpus:
                points = [
                    (s.t_s, getattr(s, field) / scale)
                    for s in tl.samples
                    if s.gpu == gpu and getattr(s, field) is not None
                ]
                if points:
                    ax.plot(*zip(*points, strict=True), linewidth=0.8, label=f"GPU {gpu}")
            ax.set_ylabel(unit)
        axes[-1].set_xlabel("seconds")
        axes[0].set_title(_label(title, 2 * LABEL_CHARS))
        if gpus:
            axes[0].legend(loc="upper right", fontsize=6, ncols=min(len(gpus), 8))
        return to_svg(fig)
