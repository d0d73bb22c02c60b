"""The console view of findings: a probe that could not run is one line, not one per check.

The findings come from the real catalog judging a GPU-less node's records (the gpu and
topology probes' own error messages when no driver is installed); findings.jsonl, JSON
and JUnit keep one finding per check, only the console folds them.
"""

from __future__ import annotations

import io
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table

from bringup.checks.catalog import checks_for, judge_node
from bringup.commands.show import (
    FULL_UP_TO,
    LISTED,
    MatrixTable,
    fleet_matrix,
    node_table,
    one_per_probe,
    plain,
    show_findings,
    summary_line,
)
from bringup.facts import NodeFacts, ProbeRecord
from bringup.findings import Finding, Status, read_finding
from bringup.profile import load
from bringup.report.escape import printable
from tests.support import FIXTURES
from tests.support.cli import invoke
from tests.support.report_runs import demo_run

B300 = load("b300")
NO_NVML = "no NVIDIA driver found (libnvidia-ml.so not loadable)"
NO_SMI = "no NVIDIA driver found (nvidia-smi not on PATH)"


def gpuless(node: str) -> list[Finding]:
    """A node without the NVIDIA driver, judged as `bringup check` judges it."""
    records = {
        "gpu": ProbeRecord(probe="gpu", ok=False, error=NO_NVML),
        "topology": ProbeRecord(probe="topology", ok=False, error=NO_SMI),
    }
    facts = NodeFacts(node=node, bringup_version="0", collected_at="T", probes=records)
    return judge_node(facts, B300)


def rendered(*items: object) -> str:
    console = Console(record=True, width=200, color_system=None)
    for item in items:
        console.print(item)
    return console.export_text()


def test_findings_stay_one_per_check() -> None:
    findings = gpuless("node01")
    # gpu.imex is an NVL72 tray's: a B300 board has no IMEX to leave unjudged.
    judged = [c for c in checks_for("gpu") if c.applies is None or c.applies(B300)]
    assert len(judged) == 12 and len(checks_for("gpu")) == 13
    assert [(f.check, f.status, f.message) for f in findings] == [
        *[(c.name, Status.ERROR, NO_NVML) for c in judged],
        *[(c.name, Status.ERROR, NO_SMI) for c in checks_for("topology")],
    ]


def test_one_console_line_per_probe() -> None:
    shown = one_per_probe(gpuless("node01"))
    assert [(f.node, f.check, f.status, f.message) for f in shown] == [
        ("node01", "gpu", Status.ERROR, f"{NO_NVML} - 12 checks not judged"),
        ("node01", "topology", Status.ERROR, f"{NO_SMI} - 3 checks not judged"),
    ]
    text = rendered(node_table(gpuless("node01"), "node01"), summary_line(gpuless("node01")))
    assert text.count("not judged") == 3  # two rows and the summary
    assert "gpu.count" not in text
    assert "15 ERROR  (15 checks not judged: 2 probes could not run)" in text


def test_fleet_matrix_and_actions_name_the_probe_once_per_node() -> None:
    findings = gpuless("node01") + gpuless("node02")
    console = Console(record=True, width=200, color_system=None)
    show_findings(console, findings, ["node01", "node02"], "check")
    text = console.export_text()
    # gpu and topology of two nodes: one probe line each, "not judged" under its status
    assert text.count("ERROR 1    │") == 4
    assert text.count("not judged │") == 4
    assert text.count(f"gpu: {NO_NVML} - 12 checks not judged") == 2
    assert text.count(NO_NVML) == 2
    assert "30 ERROR  (30 checks not judged: 4 probes could not run)" in text


def test_an_error_of_one_check_is_shown_as_it_is() -> None:
    crashed = Finding(node="n", check="gpu.ecc", status=Status.ERROR, message="check crashed")
    other = replace(crashed, check="gpu.pcie", message="PCIe not read")
    assert one_per_probe([crashed, other]) == [crashed, other]
    # The same message from two subjects is two faults, not one probe.
    topo = replace(crashed, check="topology.nvlink")
    assert one_per_probe([crashed, topo]) == [crashed, topo]


# --- node text is text: no rich markup, no control characters -------------------------------

HOSTILE = "[bold]GPU[/] [/] [link=http://x]x[/link] \x1b[31mred\x07\x1b]0;title\x07 \u202eevil"


def test_node_text_prints_literally_on_one_node() -> None:
    node = f"node[/]{HOSTILE}"
    findings = [
        Finding(node=node, check="gpu.count", status=Status.FAIL, message=HOSTILE, action=HOSTILE),
        Finding(node=node, check=f"gpu.{HOSTILE}", status=Status.PASS, message="ok", value=HOSTILE),
    ]
    console = Console(record=True, width=400, color_system=None)
    show_findings(console, findings, [node], "check")
    text = console.export_text()
    assert "node[/][bold]GPU[/] [/] [link=http://x]x[/link] [31mred]0;title evil" in text
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text


def test_node_text_prints_literally_in_the_fleet_view() -> None:
    nodes = ["a[/]", f"b {HOSTILE}"]
    findings = [
        Finding(
            node=nodes[0], check="gpu.count", status=Status.FAIL, message=HOSTILE, action=HOSTILE
        ),
        Finding(node=nodes[1], check="node.reachable", status=Status.UNREACHABLE, message=HOSTILE),
        Finding(node=nodes[1], check=f"x.{HOSTILE}", status=Status.WARN, message="[/]"),
    ]
    console = Console(record=True, width=400, color_system=None)
    show_findings(console, findings, nodes, "check")
    text = console.export_text()
    assert "a[/]" in text
    assert text.count("[bold]GPU[/] [/]") >= 3  # what to do, where, and unreachable
    assert "\x1b" not in text and "\x07" not in text


def test_inspect_names_a_file_with_brackets_literally(tmp_path: Path) -> None:
    """`inspect` printed the file name as markup: `[/]` in it raised MarkupError."""
    (tmp_path / "node[").mkdir()
    odd = tmp_path / "node[" / "]smi.txt"  # the path reads ".../node[/]smi.txt"
    shutil.copy(FIXTURES / "smi" / "ugpuexp-h100-q-idle.txt", odd)
    result = invoke("inspect", odd, "--profile", "h100")
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code in (0, 1)
    # rich may fold a long path at a slash: compare with the line breaks and spaces taken
    # out, so the test does not hang on how long the temporary folder's name is.
    assert "".join(f"{odd}: smi-q".split()) in "".join(result.stdout.split())


# --- the fleet matrix: counts, moved findings, 80 columns, unreachable nodes ----------------


def demo_findings(tmp_path: Path) -> tuple[list[Finding], list[str]]:
    """What `check --demo` judged (the real CLI's findings.jsonl)."""
    run = demo_run(tmp_path / "demo")
    lines = (run / "findings.jsonl").read_text().splitlines()
    findings = [read_finding(line) for line in lines if line.strip()]
    return findings, sorted({f.node for f in findings if f.node})


def row_of(text: str, node: str) -> list[str]:
    """A node's row of the matrix, its cells stripped (first line of each)."""
    line = next(line for line in text.splitlines() if f" {node} " in line)
    return [cell.strip() for cell in line.split("│")[1:-1]]


def test_a_cell_counts_its_checks_and_a_moved_finding_is_shown_where_judged(
    tmp_path: Path,
) -> None:
    """node03's GPU passed 12 checks; its NVLink finding stepped aside for topology.nvlink
    (a SKIP "judged by topology.nvlink"): the gpu cell is "PASS 12", not SKIP, and the
    FAIL is in the topology cell."""
    findings, nodes = demo_findings(tmp_path)
    text = rendered(*fleet_matrix(findings, nodes, 80))
    header = row_of(text.replace("┃", "│"), "node")
    row = dict(zip(header, row_of(text, "b300-node03"), strict=True))
    assert row == {
        "node": "b300-node03",
        "profile": "PASS 1",
        "gpu": "PASS 12",
        "topology": "FAIL 1",
        "host": "PASS 5",
        "xid": "PASS 2",
        "nvme": "PASS 5",
    }
    # node02's topology count stepped aside for gpu.count: its cell holds the rest.
    assert dict(zip(header, row_of(text, "b300-node02"), strict=True))["topology"] == "PASS 2"


def test_the_matrix_fits_80_columns_and_cuts_nothing(tmp_path: Path) -> None:
    findings, nodes = demo_findings(tmp_path)
    text = rendered(*fleet_matrix(findings, nodes, 80))
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80
    assert "…" not in text
    for name in ("count", "nvlink", "remapped_rows", "events", "clock_events"):
        assert f"│ {name} " in text


def test_a_wide_suite_goes_on_in_a_second_table(tmp_path: Path) -> None:
    """Twelve probes do not fit 80 columns side by side: the subjects go on below, the
    node column repeated, every cell whole."""
    subjects = [f"probe{i:02d}" for i in range(12)]
    findings = [
        Finding(node=node, check=f"{s}.a_rather_long_check_name", status=status, message="m")
        for node in ("node01", "node02")
        for s, status in zip(subjects, [Status.FAIL, *[Status.PASS] * 11], strict=True)
    ]
    tables = fleet_matrix(findings, ["node01", "node02"], 80)
    assert len(tables) >= 2
    text = rendered(*tables)
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80
    assert "…" not in text
    assert all(f" {s} " in text for s in subjects)
    assert text.count("node01") == len(tables)
    assert "node × check (continued)" in text
    # The long check name folds onto the next line of its cell, whole.
    assert "a_rather_long_ch" in text and "eck_name" in text


def test_every_node_unreachable_is_one_clear_cell_and_no_empty_table() -> None:
    findings = [
        Finding(
            node=node,
            check="node.reachable",
            status=Status.UNREACHABLE,
            message="ssh: connection refused",
            action="check the node is up",
        )
        for node in ("node01", "node02")
    ]
    console = Console(record=True, width=80, color_system=None)
    show_findings(console, findings, ["node01", "node02"], "check")
    text = console.export_text()
    assert row_of(text, "node01") == ["node01", "UNREACHABLE"]
    assert "reachable │" not in text and "UNREACHABLE reachable" not in text
    assert "what to do" not in text
    assert text.count("ssh: connection refused") == 2  # the unreachable table, once a node


# --- the matrix at ten thousand nodes: each distinct row laid out once, printed as rich does --


def printed(table: object, width: int, color: bool) -> str:
    """What a terminal gets (escape codes and all, with `color`)."""
    console = Console(
        file=io.StringIO(),
        width=width,
        force_terminal=color,
        color_system="truecolor" if color else None,
    )
    console.print(table)
    return console.file.getvalue()  # type: ignore[attr-defined]


def as_rich_prints_it(table: MatrixTable) -> Table:
    """The same table laid out by rich row by row, as before the rows were laid out once."""
    return table.table([(plain(node), row) for node, row in table.rows])


NAMES = [
    "node01",
    "a[/]",
    "b [bold]x[/] y",
    "ノード七",  # two cells a character
    "trailing ",
    " leading",
    "tab\there",
    "e\u0301",  # a combining accent
]


@pytest.mark.parametrize("color", [False, True])
@pytest.mark.parametrize("width", [80, 200])
def test_the_matrix_prints_byte_for_byte_what_rich_printed_row_by_row(
    tmp_path: Path, color: bool, width: int
) -> None:
    findings, nodes = demo_findings(tmp_path)
    # The demo's cells on nodes named every way a node may be named, and one unreachable.
    renamed = {old: new for old, new in zip(nodes, NAMES, strict=False)}
    findings = [replace(f, node=renamed.get(f.node, f.node)) for f in findings]
    findings.append(
        Finding(node="gone", check="node.reachable", status=Status.UNREACHABLE, message="x")
    )
    nodes = [*(renamed.get(n, n) for n in nodes), "gone", "never-judged"]
    tables = fleet_matrix(findings, nodes, width)
    assert tables and all(isinstance(t, MatrixTable) for t in tables)
    for table in tables:
        assert isinstance(table, MatrixTable)
        assert (
            table._laid_out(
                Console(width=width), Console(width=width).options, [printable(n) for n in nodes]
            )
            is not None
        )  # laid out once per distinct row, not by rich row by row
        assert printed(table, width, color) == printed(as_rich_prints_it(table), width, color)


def test_a_wide_suite_prints_alike_in_both_tables() -> None:
    subjects = [f"probe{i:02d}" for i in range(12)]
    findings = [
        Finding(node=node, check=f"{s}.a_rather_long_check_name", status=status, message="m")
        for node in ("node01", "node02", "node03")
        for s, status in zip(subjects, [Status.FAIL, Status.WARN, *[Status.PASS] * 10], strict=True)
    ]
    tables = fleet_matrix(findings, ["node01", "node02", "node03"], 80)
    assert len(tables) >= 2
    for table in tables:
        assert isinstance(table, MatrixTable)
        assert printed(table, 80, True) == printed(as_rich_prints_it(table), 80, True)


@pytest.mark.parametrize(
    ("nodes", "check", "width"),
    [
        (["node01", "two\nlines"], "gpu.count", 80),  # a name of two lines
        (["node01", "node02"], "gpu.000000", 80),  # a check that reads like a placeholder
        (["n" * 90, "node02"], "gpu.count", 80),  # wider than the console: rich narrows it
    ],
)
def test_where_rich_lays_out_every_row_it_does(nodes: list[str], check: str, width: int) -> None:
    findings = [
        Finding(node=node, check=check, status=Status.FAIL, message="m", action="a")
        for node in nodes
    ]
    (table, *_) = fleet_matrix(findings, nodes, width)
    assert isinstance(table, MatrixTable)
    console = Console(width=width)
    names = [printable(n) for n in nodes]
    assert table._laid_out(console, console.options, names) is None
    assert printed(table, width, True) == printed(as_rich_prints_it(table), width, True)


def test_ten_thousand_rows_are_laid_out_as_few_distinct_ones() -> None:
    """A fleet's rows repeat: rich lays out each distinct one, not each node's."""
    nodes = [f"node{i:05d}" for i in range(10_000)]
    findings = [
        Finding(node=node, check=check, status=status, message="m")
        for i, node in enumerate(nodes)
        for check, status in (
            ("gpu.count", Status.FAIL if i % 1000 == 7 else Status.PASS),
            ("host.kernel", Status.PASS),
        )
    ]
    (table,) = fleet_matrix(findings, nodes, 80)
    assert isinstance(table, MatrixTable)
    assert len(set(row for _, row in table.rows)) == 2
    text = printed(table, 80, False)
    assert text.count("\n") == 4 + 10_000 + 10 + 1  # head, a row a node, a FAIL's 2nd line, foot
    assert "│ node01007 │ FAIL 1 │ PASS 1 │" in text and "│           │ count  │        │" in text


def fleet_failing(count: int, status: Status = Status.FAIL) -> tuple[list[Finding], list[str]]:
    nodes = [f"node{i:05d}" for i in range(count)]
    check = "node.reachable" if status is Status.UNREACHABLE else "gpu.count"
    findings = [
        Finding(node=n, check=check, status=status, message=f"{n} is short", action="reseat")
        for n in nodes
    ]
    return findings, nodes


def shown(findings: list[Finding], nodes: list[str]) -> str:
    console = Console(record=True, width=120, color_system=None)
    show_findings(console, findings, nodes, "check")
    return console.export_text()


def test_up_to_a_thousand_nodes_what_to_do_names_every_node() -> None:
    findings, nodes = fleet_failing(FULL_UP_TO)
    text = shown(findings, nodes)
    assert all(f"{n}: {n} is short" in text for n in nodes)
    assert "more nodes" not in text


def test_past_a_thousand_nodes_each_action_names_its_first_nodes_and_counts_the_rest() -> None:
    findings, nodes = fleet_failing(FULL_UP_TO + 1)
    text = shown(findings, nodes)
    assert [n for n in nodes if f"{n}: {n} is short" in text] == nodes[:LISTED]
    assert f"(+{FULL_UP_TO + 1 - LISTED} more nodes: report.md lists each)" in text
    assert all(f"│ {n} │" in text for n in nodes)  # the matrix keeps a row a node
    assert f"{FULL_UP_TO + 1} FAIL" in text


def test_past_a_thousand_nodes_the_unreachable_table_names_its_first_nodes() -> None:
    findings, nodes = fleet_failing(FULL_UP_TO + 1, Status.UNREACHABLE)
    text = shown(findings, nodes)
    text = text[text.index("\nunreachable") :]
    assert [n for n in nodes if f"{n} is short" in text] == nodes[:LISTED]
    assert f"(+{FULL_UP_TO + 1 - LISTED} more nodes: report.md lists each)" in text
