"""What a command prints for people: the findings, then the verdict word with its reason;
--quiet the verdict line alone; --limit over recorded nodes (--demo, --replay, report)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bringup.commands.show import verdict_line
from bringup.findings import Finding, Status
from tests.support.cli import invoke


def _f(node: str, check: str, status: Status, message: str = "m") -> Finding:
    return Finding(node=node, check=check, status=status, message=message)


def test_verdict_line_accepted_with_counts_and_nodes() -> None:
    findings = [_f("a", "gpu.count", Status.PASS), _f("b", "host.cpu", Status.WARN)]
    assert verdict_line(findings).plain == "ACCEPTED: 1 PASS, 1 WARN on 2 nodes"


def test_verdict_line_names_what_failed_and_where() -> None:
    findings = [
        _f("a", "gpu.count", Status.PASS),
        _f("b", "gpu.count", Status.FAIL),
        _f("c", "xid.events", Status.FAIL),
        # one probe that could not run: one name, not one per check
        _f("c", "topology.nvlink", Status.ERROR, "no driver"),
        _f("c", "topology.matrix", Status.ERROR, "no driver"),
    ]
    assert verdict_line(findings).plain == (
        "NOT ACCEPTED: 1 PASS, 2 FAIL, 2 ERROR on 2 of 3 nodes; gpu.count, xid.events, topology"
    )


def test_nothing_judged_is_not_accepted() -> None:
    assert verdict_line([]).plain == "NOT ACCEPTED: nothing was judged"


def test_check_ends_with_the_verdict(tmp_path: Path) -> None:
    result = invoke("check", "--demo", "--out", tmp_path / "run")
    assert result.exit_code == 1
    last = result.stdout.splitlines()[-1]
    assert last.startswith("NOT ACCEPTED (demo data): ") and "on 4 of 6 nodes; gpu.count" in last


def test_quiet_prints_the_verdict_line_alone(tmp_path: Path) -> None:
    result = invoke("check", "--demo", "-q", "--out", tmp_path / "run")
    assert result.exit_code == 1
    (line,) = result.stdout.splitlines()
    assert line.startswith("NOT ACCEPTED (demo data): ")


def test_limit_selects_demo_nodes_as_ansible_does(tmp_path: Path) -> None:
    result = invoke(
        "check", "--demo", "--limit", "b300-node0*:!b300-node02", "--out", tmp_path / "r", "--json"
    )
    nodes = {f["node"] for f in json.loads(result.stdout)["findings"]}
    assert nodes == {f"b300-node0{i}" for i in (1, 3, 4, 5, 6)}
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["nodes"] == sorted(nodes)


def test_limit_on_the_healthy_node_judges_it_alone(tmp_path: Path) -> None:
    result = invoke("check", "--demo", "-l", "b300-node01", "-q", "--out", tmp_path / "r")
    # Nothing failed on it, but demo data is never ACCEPTED, and the exit status says so.
    assert result.exit_code == 1
    assert result.stdout.splitlines() == ["NOT ACCEPTED (demo data): 28 PASS on 1 node"]


def test_limit_selects_replayed_nodes(tmp_path: Path) -> None:
    invoke("check", "--demo", "--out", tmp_path / "all")
    result = invoke(
        "check", "--replay", tmp_path / "all", "-l", "~.*node0[56]", "--out", tmp_path / "r", "-q"
    )
    assert result.exit_code == 1
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["nodes"] == ["b300-node05", "b300-node06"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--limit", "nosuch"], "--limit 'nosuch': no host of the recorded nodes matches"),
        (["--limit", "b300-node01,typo"], "matches 'typo'"),
    ],
)
def test_a_limit_that_matches_nothing_is_bad_input(
    tmp_path: Path, args: list[str], said: str
) -> None:
    result = invoke("check", "--demo", *args, "--out", tmp_path / "r")
    assert result.exit_code == 2
    assert said in result.stderr


def test_limit_with_local_is_refused(tmp_path: Path) -> None:
    result = invoke("check", "--local", "--limit", "x", "--out", tmp_path / "r")
    assert result.exit_code == 2
    assert "--limit selects nodes" in result.stderr


def test_report_limit_reports_on_the_nodes_chosen(tmp_path: Path) -> None:
    run = tmp_path / "run"
    invoke("check", "--demo", "--out", run)
    refused = invoke("report", run, "--limit", "b300-node01")
    assert refused.exit_code == 2 and "give --out DIR" in refused.stderr
    result = invoke(
        "report", run, "-l", "b300-node01", "-o", tmp_path / "one", "--format", "md", "-q"
    )
    assert result.exit_code == 1, result.output
    # The healthy node, but demo data: never ACCEPTED (the exit status follows).
    assert result.stdout.splitlines()[0].startswith("NOT ACCEPTED (demo data): 28 PASS")
    text = (tmp_path / "one" / "report.md").read_text()
    assert "b300-node01" in text and "b300-node02" not in text
    assert "--limit 'b300-node01': 1 of the run's 6 nodes" in text
