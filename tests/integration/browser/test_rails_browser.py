"""The per-rail table of report.html in a real headless Chromium (issue 28): the node x rail
heat map and the table of ib_write_bw against line rate are laid out and visible, with the
slow rail's figure, and node text stays text.

The run is the demo fleet's, with the per-rail job's results of 4 of its nodes (the
figures the simulated cluster's stand-in prints: the recorded real ib_write_bw scaled to an
800 Gb/s rail, rail 3 of the second node at half speed) and the findings judged from them.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from bringup.checks.ibperf import bad_nodes, judge_rails
from bringup.fleet.job import pair_up, retest_pairs
from bringup.profile import load
from bringup.rundir import RunDir
from tests.integration.browser.test_report_browser import CHROMIUM, chromium
from tests.support.cli import run_cli
from tests.support.perftest_sim import rail_results
from tests.support.report_runs import demo_run
from tests.support.timing import scaled

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)"),
]

PROBE = """
<script>
(function () {
  const visible = (el) => {
    if (!el) return false;
    const box = el.getBoundingClientRect();
    return box.width > 0 && box.height > 0 && getComputedStyle(el).visibility !== "hidden";
  };
  const table = document.getElementById("rail-table");
  const plot = document.getElementById("plot-fleet-rails");
  const out = document.createElement("pre");
  out.id = "bringup-probe";
  out.textContent = JSON.stringify({
    tableVisible: visible(table), tableText: table ? table.innerText : "",
    plotVisible: visible(plot ? plot.querySelector("svg") : null),
    plotText: plot ? plot.textContent : "",
    scripts: document.querySelectorAll("script").length,
  });
  document.body.appendChild(out);
})();
</script>
"""


def _with_rails(run_path: Path, nodes: list[str]) -> None:
    """The per-rail job's ibperf.json and findings in the run, as `check` writes them."""
    slow = {nodes[1]: 3}
    first = rail_results(pair_up(nodes), slow)
    profiles = dict.fromkeys(nodes, load("b300"))
    suspects = sorted(bad_nodes(first, profiles))
    retests = rail_results(
        retest_pairs(suspects, [n for n in nodes if n not in suspects]), slow, "retest"
    )
    run = RunDir.reopen(run_path)
    document = {"retested": suspects, "rails": [r.as_json() for r in [*first, *retests]]}
    (run_path / "ibperf.json").write_text(json.dumps(document))
    run.add_findings(judge_rails(nodes, first, retests, profiles))
    run.finish("complete", 1)


def test_the_per_rail_table_shows_in_chromium(tmp_path: Path) -> None:
    run_path = demo_run(tmp_path / "demo")
    nodes = ["b300-node01", "b300-node02", "b300-node03", "<b>node04</b>"]
    _with_rails(run_path, nodes)
    out = tmp_path / "report"
    proc = run_cli("report", run_path, "--format", "html,md", "--out", out, timeout=scaled(300))
    assert proc.returncode == 1, proc.stderr
    page = (out / "report.html").read_text()
    assert "<b>node04</b>" not in page and "&lt;b&gt;node04&lt;/b&gt;" in page
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", PROBE + "</body>"))
    result = chromium("--window-size=1280,1000", "--dump-dom", probe.as_uri(), user_data=tmp_path)
    match = re.search(r'<pre id="bringup-probe">(.*?)</pre>', result.stdout, re.S)
    assert match, result.stderr[-2000:]
    seen = json.loads(html.unescape(match.group(1)))
    assert seen["tableVisible"] and seen["plotVisible"], seen
    assert seen["scripts"] == 1  # ours: the node named <b>node04</b> injected nothing
    rows = seen["tableText"].splitlines()
    assert rows[0].split("\t")[:4] == ["node", "partner", "0 mlx5_0", "1 mlx5_1"]
    second = next(r.split("\t") for r in rows if r.startswith("b300-node02"))
    assert second[1] == "<b>node04</b>"  # judged by its retest with a known-good node
    assert second[2 + 3] == "384.3 (48%)" and second[2] == "768.7 (96%)"
    assert "ib_write_bw per rail" in seen["plotText"]
    markdown = (out / "report.md").read_text()
    assert "## Rails: ib_write_bw per rail" in markdown
    rails = markdown.split("## Rails: ib_write_bw per rail", 1)[1]
    row = next(line for line in rails.splitlines() if line.startswith("| b300-node02 |"))
    assert row.endswith(
        "| 768.7 (96%) | 768.7 (96%) | 768.7 (96%) | 384.3 (48%) |" + " 768.7 (96%) |" * 4
    )
