"""A report of a 64-node fleet reads at fleet scale: under 2 MB, and in a real headless
Chromium the verdict and every node with a problem are above the fold (in the first
screen, 1280 x 1000), while the passing nodes are one line each further down.

The fleet is the demo's six nodes (five with a planted fault) and 58 healthy copies of
node01, judged by the real checks; the report is written by the real CLI.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from tests.integration.browser.test_report_browser import CHROMIUM, chromium
from tests.support.cli import run_cli
from tests.support.report_runs import fleet_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)"),
]

SIZE = 64
PROBLEM_NODES = [f"b300-node0{i}" for i in range(2, 7)]  # the demo's planted faults
WIDTH, HEIGHT = 1280, 1000

# Where the verdict and each row of the problem table end, after layout.
PROBE_SCRIPT = """
<script>
(function () {
  const bottom = (el) => el ? Math.round(el.getBoundingClientRect().bottom) : -1;
  const rows = [...document.querySelectorAll("#problems tr")].slice(1);
  const result = {
    viewport: window.innerHeight,
    verdict: bottom(document.getElementById("verdict")),
    verdictText: document.getElementById("verdict").innerText,
    problems: rows.map((r) => ({text: r.innerText, bottom: bottom(r)})),
    passing: document.querySelectorAll("#passing li").length,
    foldedNodes: document.querySelectorAll("section.node > details.node-details").length,
  };
  const out = document.createElement("pre");
  out.id = "bringup-probe";
  out.textContent = JSON.stringify(result);
  document.body.appendChild(out);
})();
</script>
"""


@pytest.fixture(scope="module")
def report_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("fleet")
    run = fleet_run(base / "run", SIZE)
    out = base / "report"
    proc = run_cli("report", run, "--format", "html", "--out", out, timeout=300)
    assert proc.returncode == 1, proc.stderr  # the planted faults fail it
    return out / "report.html"


def test_under_two_megabytes(report_html: Path) -> None:
    assert report_html.stat().st_size < 2_000_000


def test_verdict_and_problem_nodes_above_the_fold(report_html: Path, tmp_path: Path) -> None:
    probe = tmp_path / "probe.html"
    probe.write_text(report_html.read_text().replace("</body>", PROBE_SCRIPT + "</body>"))
    result = chromium(
        f"--window-size={WIDTH},{HEIGHT}", "--dump-dom", probe.as_uri(), user_data=tmp_path / "ud"
    )
    match = re.search(r'<pre id="bringup-probe">(.*?)</pre>', result.stdout, re.S)
    assert match, result.stderr[-2000:]
    seen = json.loads(html.unescape(match.group(1)))
    assert seen["verdictText"].startswith("NOT ACCEPTED")
    assert f"{SIZE} nodes: 5 with a problem, 59 passing" in seen["verdictText"]
    assert 0 < seen["verdict"] <= seen["viewport"]
    assert [row["text"].split()[0] for row in seen["problems"]] == PROBLEM_NODES
    assert all(0 < row["bottom"] <= seen["viewport"] for row in seen["problems"]), seen
    # Passing nodes: one line each, their details folded.
    assert seen["passing"] == SIZE - len(PROBLEM_NODES)
    assert seen["foldedNodes"] == SIZE - len(PROBLEM_NODES)
