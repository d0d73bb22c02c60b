"""report.html and report.md from the report model, with the Jinja2 templates of bringup/templates/.

The HTML is one self-contained file: styles inline, plots inline SVG, no script and no
link to anything, so it opens offline and can be mailed or attached to a ticket.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import jinja2
from markupsafe import Markup
from pydantic import BaseModel
from pydantic_core import to_jsonable_python as _jsonable

from bringup.findings import Finding, Status, worst
from bringup.measurements import METRICS, NodeMeasurements, shown
from bringup.node.identity import SystemIdentity
from bringup.profile import Profile
from bringup.report import escape, jsontext
from bringup.report.findingstore import ReportFindings
from bringup.report.model import NodeReport, NodeSections, Report, is_gap, versus_fleet
from bringup.report.nodepass import Maker, NodePart, Parts, node_pass, streamed
from bringup.words import plural

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


@dataclass
class Plot:
    """One embedded figure: where it belongs, what it shows, and its SVG."""

    key: str  # "fleet-temperature", "nccl-b300-node01", ...
    caption: str
    svg: str


@dataclass
class Plots:
    fleet: list[Plot] = field(default_factory=list)
    nodes: dict[str, list[Plot]] = field(default_factory=dict)

    def all(self) -> list[Plot]:
        return [*self.fleet, *(p for node in self.nodes.values() for p in node)]


def make_plots(report: Report, profile: Profile | None) -> Plots:
    """Fleet heatmaps and each node's NCCL curve and telemetry timelines."""
    # The heatmaps are drawn as SVG here (report/heatmap.py); matplotlib loads only for a
    # node's curves and timelines, which need axes: a second of CPU the demo's report and
    # a Markdown, JUnit or JSON one do not need.
    from bringup.report import heatmap

    result = Plots()
    # A large fleet's page has no per-node heatmap (a row a node): statistics only.
    measured = [] if large_fleet(report) else [n.measurements for n in report.nodes]
    temperature = _per_gpu(measured, lambda m: m.gpu_temperature_c)
    if temperature:
        rows, cols, values = temperature
        scale = (COOL_C, _slowdown_c(measured))
        svg = heatmap.heatmap(
            "GPU temperature (°C) at probe time", rows, cols, values, "°C", True, scale
        )
        result.fleet.append(Plot("fleet-temperature", "GPU temperature per node and GPU", svg))
    tflops = _per_gpu(measured, lambda m: m.gpu_tflops)
    if tflops:
        rows, cols, values = tflops
        peak = None
        if profile is not None:
            peak = profile.gpu.bf16_achievable_tflops or profile.gpu.bf16_dense_tflops
        scale = (0.0, peak) if peak else None
        svg = heatmap.heatmap("GEMM TFLOP/s per GPU", rows, cols, values, "TFLOP/s", False, scale)
        result.fleet.append(Plot("fleet-tflops", "GEMM TFLOP/s per node and GPU", svg))
    busbw = _busbw_grid(measured)
    if busbw:
        rows, cols, values = busbw
        floor = profile.nccl.allreduce_busbw_min_gb_s if profile is not None else None
        svg = heatmap.heatmap(
            "all_reduce busbw (GB/s) by message size",
            rows,
            cols,
            values,
            "GB/s",
            False,
            (0.0, floor) if floor else None,
        )
        result.fleet.append(Plot("fleet-busbw", "NCCL busbw per node and message size", svg))
    rails = report.rails
    if rails is not None and rails.rows and not rails.problem:
        # Coloured against line rate: a rail's distance from what its link carries.
        scale = (0.0, rails.line_rate_gbit_s) if rails.line_rate_gbit_s else None
        rows = [r.node for r in rails.rows]
        values = [list(r.cells) for r in rails.rows]
        svg = heatmap.heatmap(
            "ib_write_bw per rail (Gb/s), each rail alone",
            rows,
            rails.columns,
            values,
            "Gb/s",
            False,
            scale,
        )
        result.fleet.append(Plot("fleet-rails", "ib_write_bw per node and rail", svg))
    floor = profile.nccl.allreduce_busbw_min_gb_s if profile is not None else None
    for node in layout_of(report).detailed:
        m = node.measurements
        mine: list[Plot] = []
        if m.curves or any(tl.samples for tl in m.timelines):
            from bringup.report import plots  # matplotlib: for axes of values, only here
        if m.curves:
            svg = plots.nccl_curve(m.curves, floor, f"{node.node}: busbw vs message size")
            mine.append(Plot(f"nccl-{node.node}", f"{node.node}: NCCL busbw vs size", svg))
        for i, tl in enumerate(m.timelines):
            if tl.samples:
                title = f"{node.node}: {tl.probe} timeline"
                svg = plots.timeline(tl, title)
                mine.append(Plot(f"timeline-{node.node}-{i}", title, svg))
        if mine:
            result.nodes[node.node] = mine
    return result


# The temperature scale starts at a cooled GPU's idle temperature and ends where the GPUs
# slow down (as they report it; SLOWDOWN_C where none does): a 35 °C GPU shows cool.
COOL_C = 30.0
SLOWDOWN_C = 90.0


def _slowdown_c(nodes: list[NodeMeasurements]) -> float:
    reported = [m.slowdown_temperature_c for m in nodes if m.slowdown_temperature_c is not None]
    return min(reported) if reported else SLOWDOWN_C


def _per_gpu(
    nodes: list[NodeMeasurements], values_of: object
) -> tuple[list[str], list[str], list[list[float | None]]] | None:
    per_node = {m.node: values_of(m) for m in nodes}  # type: ignore[operator]
    per_node = {n: v for n, v in per_node.items() if v}
    if not per_node:
        return None
    gpus = sorted({g for v in per_node.values() for g in v})
    rows = sorted(per_node)
    grid = [[per_node[n].get(g) for g in gpus] for n in rows]
    return rows, [f"GPU {g}" for g in gpus], grid


def _busbw_grid(
    nodes: list[NodeMeasurements],
) -> tuple[list[str], list[str], list[list[float | None]]] | None:
    per_node: dict[str, dict[int, float]] = {}
    for m in nodes:
        for curve in m.curves:
            if curve.collective in ("all_reduce", "unnamed collective"):
                per_node[m.node] = {p.size_bytes: p.busbw_bytes_per_s / 1e9 for p in curve.points}
                break
    if not per_node:
        return None
    from bringup.report.heatmap import size_label

    sizes = sorted({s for v in per_node.values() for s in v if s >= 1 << 20})[-8:]
    rows = sorted(per_node)
    grid = [[per_node[n].get(s) for s in sizes] for n in rows]
    return rows, [size_label(s) for s in sizes], grid


# --- Jinja2 --------------------------------------------------------------------------------


def _number(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    return str(value)


def _value(f: Finding) -> str:
    if f.value is None:
        return ""
    return f"{_number(f.value)} {f.unit}" if f.unit else _number(f.value)


def _gb(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value / 1e9:.{digits}f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:+.1f}%"


def _md_cell(text: object) -> str:
    """Text for a Markdown table cell: one line (escaping is every field's, see _finalize)."""
    return " ".join(str(text if text is not None else "").split())


def _finalize(autoescape: bool) -> Callable[[object], object]:
    """What every `{{ ... }}` of a template goes through before it is written.

    HTML: autoescape escapes, this removes control characters (markup made by the
    template, `| safe` SVG, passes as it is). Markdown has no autoescape: every field is
    escaped here (escape.markdown), so no field can add markup, a table cell or a line.
    """
    if autoescape:
        return lambda value: value if isinstance(value, Markup) else escape.printable(value)
    return lambda value: value if type(value) is Escaped else escape.markdown(value)


class Escaped(str):
    """Markdown made in Python with every field in it escaped already (`check_rows`):
    what the template writes as it is."""


def check_rows(node: NodeReport) -> Escaped:
    """A node section's table of findings, a row each, as report-node.md.j2 wrote it row
    by row: a node's rows are most of report.md (290,000 at ten thousand nodes), and the
    template's work for each field (a lookup, a filter, the escape) was most of its cost.
    Every field is escaped as the template's `{{ ... }}` escapes (escape.markdown, after
    the same filter); rows without a final newline (the template adds it)."""
    md = escape.markdown
    rows = []
    for row in node.checks:
        f = row.finding
        status = f.status.value
        median = ""
        if row.fleet_median is not None:
            median = f"{md(_number(row.fleet_median))} ({md(_pct(row.vs_fleet_pct))})"
        action = ""
        if f.action and status not in ("PASS", "SKIP"):
            action = f"<br>→ {md(_md_cell(f.action))}"
        rows.append(
            f"| `{md(f.check)}` | {md(status)} | {md(_md_cell(_value(f)))} | "
            f"{md(_md_cell(f.expected or ''))} | {median} | {md(_md_cell(f.message))}{action} |"
        )
    return Escaped("\n".join(rows))


def _known(system: SystemIdentity | None, name: str) -> str:
    """An identity field, "not available: <why>" when the node said why not, else "–"."""
    value = getattr(system, name, None) if system is not None else None
    if value:
        return str(value)
    if system is not None and name in system.unavailable:
        return f"not available: {system.unavailable[name]}"
    return "–"


def _utc(iso: str) -> str:
    """An ISO 8601 UTC time as the report prints it: "2026-11-28 14:03:41 UTC"."""
    try:
        when = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    return f"{when.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC"


@functools.cache
def environment(autoescape: bool) -> jinja2.Environment:
    """One environment per process and escaping: Jinja2 keeps the templates it compiled
    (a third of a report's time when compiled anew) and reloads one whose file changed."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=autoescape,
        undefined=jinja2.StrictUndefined,  # a typo in a template is an error, not a blank
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_finalize(autoescape),
    )
    env.filters.update(
        number=_number,
        value=_value,
        gb=_gb,
        pct=_pct,
        md=_md_cell,
        utc=_utc,
        metric=shown,
        status_class=lambda s: Status(s).value.lower(),
        plural=plural,  # {{ n | plural("node") }}: "1 node", "2 nodes"
    )
    env.globals.update(METRICS=METRICS, Status=Status, known=_known, check_rows=check_rows)
    return env


def html(report: Report, figures: Plots) -> str:
    return "".join(html_pieces(report, figures))


def html_pieces(report: Report, figures: Plots) -> Iterator[str]:
    """report.html in pieces, as the template makes them: written as they come, never
    one string of the whole page."""
    template = environment(autoescape=True).get_template("report.html.j2")
    return template.generate(report=report, plots=figures, layout=layout_of(report))


# Up to this many nodes report.html shows every node in full (the passing ones folded);
# beyond it, a page that opens in a browser in a second or two at ten thousand nodes:
# verdict and problem nodes first, passing nodes as counts and one folded list, the first
# DETAILED_NODES nodes with a problem in full, every node in report.json.
FULL_PAGE_NODES = 100
DETAILED_NODES = 100
GROUP_ITEMS = 25  # findings listed per action on a large fleet's page; the rest counted
# A large fleet's table of nodes with a problem, in tables of this many rows: Chromium lays
# out those below the first screen only when scrolled to (content-visibility). One table
# of 10,000 rows took 3.0 to 3.4 s to lay out here, in tables of 200 rows 0.7 to 0.9 s.
PROBLEM_ROWS = 200


@dataclass
class Layout:
    """How report.html lays out a fleet of this size (docs/reports.md)."""

    large: bool
    detailed: list[NodeReport]  # the nodes shown in full, in report order
    group_items: int  # findings listed per action group
    subject_counts: dict[str, dict[str, int]]  # subject -> worst status -> nodes
    problem_rows: int  # rows per table of the nodes with a problem


def layout_of(report: Report) -> Layout:
    if len(report.nodes) <= FULL_PAGE_NODES:
        verdict = report.verdict
        every = max(1, len(verdict.nodes_failing), *(len(g.findings) for g in verdict.actions))
        every = max(every, *(len(g.findings) for g in verdict.warnings), 0)
        return Layout(False, list(report.nodes), every, {}, max(1, len(report.nodes)))
    counts: dict[str, dict[str, int]] = {s: {} for s in report.subjects}
    for row in report.matrix.values():
        for subject, cell in row.items():
            status = cell.status.value
            counts[subject][status] = counts[subject].get(status, 0) + 1
    # Built from the nodes' summaries: only the sections shown in full are built.
    nodes = report.nodes
    if isinstance(nodes, NodeSections):
        detailed = list(nodes.sections(nodes.problems[:DETAILED_NODES]))
    else:
        detailed = [n for n in nodes if n.problem][:DETAILED_NODES]
    return Layout(True, detailed, GROUP_ITEMS, counts, PROBLEM_ROWS)


def large_fleet(report: Report) -> bool:
    """Whether report.html summarises the fleet rather than show every node."""
    return len(report.nodes) > FULL_PAGE_NODES


def markdown(report: Report) -> str:
    return "".join(markdown_pieces(report))


def markdown_pieces(report: Report, parts: Parts | None = None) -> Iterator[str]:
    """report.md in pieces, as html_pieces: what the whole run shows, then the section of
    each node with a problem (`parts`: made already by node_parts, with the others)."""
    template = environment(autoescape=False).get_template("report.md.j2")
    yield from template.generate(report=report)
    if parts is not None:
        yield from parts.pieces("md")
        return
    assert isinstance(report.nodes, NodeSections)  # the template reads its rows
    with node_pass(report.nodes, [MarkdownSections()]) as own:
        yield from own.pieces("md")


class MarkdownSections:
    """report.md's part of each node with a problem: its section (report-node.md.j2)."""

    def __init__(self) -> None:
        self._template = environment(autoescape=False).get_template("report-node.md.j2")

    def part(self, node: NodePart) -> Iterator[tuple[str, str]]:
        if node.row is not None and node.row.problem:
            yield "md", self._template.render(node=node.section)

    def end(self) -> Iterator[tuple[str, str]]:
        return iter(())


def node_parts(report: Report, formats: list[str]) -> Parts | None:
    """The nodes' parts of these formats' files (md, junit, json), in one pass over the
    nodes (report/nodepass.py); None for a report made by hand, or no such format."""
    from bringup.report import junit

    nodes = streamed(report)
    makers: dict[str, Maker] = {
        "md": MarkdownSections(),
        "junit": junit.Suites(report),
        "json": JsonParts(),
    }
    chosen = [makers[name] for name in formats if name in makers]
    if nodes is None or not chosen:
        return None
    return node_pass(nodes, chosen)


def summary_json(report: Report) -> str:
    """The machine-readable summary: the report model (timelines left out), keys stable."""
    return "".join(json_pieces(report))


def json_pieces(report: Report, parts: Parts | None = None) -> Iterator[str]:
    """report.json in pieces, to be written as they come: exactly the text of
    `json.dumps(report.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"`
    (docs/json.md), but each finding, node, metric and matrix row is dumped on its own,
    so the whole model is never one dict nor one string: at ten thousand nodes that dict
    was the report's peak memory.

    A report built by `build` has its findings and its nodes' sections written in the
    one pass over the nodes (`parts`, made by node_parts; else made here): each node's
    findings read back and made JSON once for both lists (JsonParts)."""
    own = None
    nodes = streamed(report)
    if nodes is not None and parts is None:
        own = parts = node_pass(nodes, [JsonParts()])
    try:
        yield "{"
        for i, name in enumerate(sorted(Report.model_fields)):
            yield ("," if i else "") + f"\n  {json.dumps(name)}: "
            value = getattr(report, name)
            if parts is not None and name in ("findings", "nodes"):
                yield from parts.pieces(f"json.{name}")
            elif isinstance(value, list | NodeSections | ReportFindings) and len(value):
                yield "["
                for j, item in enumerate(value):
                    yield ("," if j else "") + "\n    " + _item_json(item, "    ")
                yield "\n  ]"
            elif isinstance(value, NodeSections | ReportFindings):
                yield "[]"
            elif isinstance(value, dict) and value:
                yield "{"
                for j, key in enumerate(sorted(value)):
                    text = _item_json(value[key], "    ")
                    yield ("," if j else "") + f"\n    {json.dumps(key)}: {text}"
                yield "\n  }"
            else:
                yield _item_json(value, "  ")
        yield "\n}\n"
    finally:
        if own is not None:
            own.close()


class JsonParts:
    """report.json's "findings" list, in report order, and its "nodes" list: each node's
    findings made JSON once for both (a finding's copy in its node's section is the same
    text, six columns further in)."""

    def __init__(self) -> None:
        self._findings = 0
        self._nodes = 0

    def part(self, node: NodePart) -> Iterator[tuple[str, str]]:
        texts = [_finding_json(f, "    ") for f in node.findings]
        for text in texts:
            yield "json.findings", ("," if self._findings else "[") + "\n    " + text
            self._findings += 1
        if node.row is not None:
            section = _section_json(node, texts)
            yield "json.nodes", ("," if self._nodes else "[") + "\n    " + section
            self._nodes += 1

    def end(self) -> Iterator[tuple[str, str]]:
        yield "json.findings", "\n  ]" if self._findings else "[]"
        yield "json.nodes", "\n  ]" if self._nodes else "[]"


def _section_json(node: NodePart, texts: list[str]) -> str:
    """A node's section (model.NodeReport) as `_item_json(node.section, "    ")` writes
    it, from its findings' texts as the findings list has them: without building the
    section's models and dumping them again (tests/unit/test_report_streams.py holds the
    two to the same bytes)."""
    medians = node.nodes.medians
    rows = []
    for f, text in zip(node.findings, texts, strict=True):
        median, delta = versus_fleet(f, medians)
        # As model.CheckRow holds them: floats (a median of 3 is 3.0).
        median_text = "null" if median is None else jsontext.float_text(float(median))
        delta_text = "null" if delta is None else jsontext.float_text(float(delta))
        rows.append(
            "{\n"
            f'          "finding": {text.replace(_SHIFT_FROM, _SHIFT_TO)},\n'
            f'          "fleet_median": {median_text},\n'
            f'          "vs_fleet_pct": {delta_text}\n'
            "        }"
        )
    checks = "[\n        " + ",\n        ".join(rows) + "\n      ]" if rows else "[]"
    status = worst(node.findings) if node.findings else Status.ERROR
    measured = _item_json(node.figures, "      ")
    missing = _item_json([f.message for f in node.findings if is_gap(f)], "      ")
    return (
        "{\n"
        f'      "checks": {checks},\n'
        f'      "measurements": {measured},\n'
        f'      "missing": {missing},\n'
        f'      "node": {_item_json(node.name, "")},\n'
        f'      "status": {_item_json(status.value, "")}\n'
        "    }"
    )


# A finding's text in the findings list is four columns in; in a section's row, ten.
_SHIFT_FROM, _SHIFT_TO = "\n", "\n      "


def _finding_json(f: Finding, indent: str) -> str:
    """A finding as `_item_json(f, indent)` writes it, from its fields directly: the
    report's most numerous item (290,000 at ten thousand nodes), each written once or
    twice. A field of a type json would write otherwise goes the general way."""
    fields = (f.action, f.check, f.message, f.node, f.status.value, f.unit, f.value)
    texts = [jsontext.scalar(value) for value in fields]
    if None in texts:
        return _item_json(f, indent)
    action, check, message, node, status, unit, value = texts
    inner = ",\n" + indent + '  "'
    expected = "null" if f.expected is None else _item_json(f.expected, indent + "  ")
    return (
        f'{{\n{indent}  "action": {action}{inner}check": {check}{inner}expected": {expected}'
        f'{inner}message": {message}{inner}node": {node}{inner}status": {status}'
        f'{inner}unit": {unit}{inner}value": {value}\n{indent}}}'
    )


def _item_json(value: object, indent: str) -> str:
    """One value as json.dumps(indent=2, sort_keys=True) writes it `indent` deep (a JSON
    string never holds a raw newline, so each line can be shifted as a whole)."""
    plain = value.model_dump(mode="json") if isinstance(value, BaseModel) else _jsonable(value)
    return jsontext.dumps(plain, indent)
