"""report.html in a real headless Chromium: the verdict, the failing findings and every
plot are laid out and visible, nothing overflows the page sideways, and a screenshot is
taken (kept under the test's tmp directory; look at it when changing the template).

The report is of a recorded run that carries every section: the demo fleet's planted
faults, recorded nccl-tests and dmon outputs, and a baseline comparison with regressions.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.report_runs import (
    busbw_down,
    demo_run,
    new_xid,
    serial_changed,
    with_measurements,
    write_run,
)
from tests.support.timing import scaled

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)"),
]

# Runs inside the page after layout, writes what it measured into the DOM for --dump-dom.
PROBE_SCRIPT = """
<script>
(function () {
  const root = document.documentElement;
  const visible = (el) => {
    if (!el) return false;
    const box = el.getBoundingClientRect();
    const style = getComputedStyle(el);
    return box.width > 0 && box.height > 0 && style.visibility !== "hidden"
      && style.display !== "none";
  };
  const plots = [...document.querySelectorAll("figure.plot")].map((figure) => {
    const svg = figure.querySelector("svg");
    return {id: figure.id, visible: visible(svg),
            width: svg ? Math.round(svg.getBoundingClientRect().width) : 0};
  });
  const wide = [...document.body.querySelectorAll("*")]
    .filter((el) => el.getBoundingClientRect().right > root.clientWidth + 1)
    .map((el) => el.tagName + "#" + el.id + "." + (el.getAttribute("class") || ""))
    .slice(0, 10);
  const verdict = document.getElementById("verdict");
  const failing = document.getElementById("failing");
  const result = {
    scrollWidth: root.scrollWidth, clientWidth: root.clientWidth,
    verdictVisible: visible(verdict), verdictText: verdict ? verdict.innerText : "",
    failingVisible: visible(failing), failingText: failing ? failing.innerText : "",
    plots: plots, wide: wide,
  };
  const out = document.createElement("pre");
  out.id = "bringup-probe";
  out.textContent = JSON.stringify(result);
  document.body.appendChild(out);
})();
</script>
"""


def chromium(*args: str, user_data: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    argv = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={user_data}",
        *args,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=scaled(180))


@pytest.fixture(scope="module")
def report_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("browser")
    demo = demo_run(base / "demo")
    handover = write_run(demo, base / "handover", with_measurements)
    later = write_run(
        demo,
        base / "later",
        with_measurements,
        busbw_down("b300-node03", 0.9),
        new_xid("b300-node01"),
        serial_changed("b300-node06", 4, "1654922004999"),
    )
    out = base / "report"
    proc = run_cli(
        *("report", later, "--baseline", handover, "--format", "html", "--out", out),
        timeout=scaled(300),
    )
    assert proc.returncode == 1, proc.stderr
    return out / "report.html"


def measure(report_html: Path, width: int, tmp_path: Path) -> dict:
    probe = tmp_path / "probe.html"
    probe.write_text(report_html.read_text().replace("</body>", PROBE_SCRIPT + "</body>"))
    result = chromium(
        f"--window-size={width},1000", "--dump-dom", probe.as_uri(), user_data=tmp_path / "ud"
    )
    match = re.search(r'<pre id="bringup-probe">(.*?)</pre>', result.stdout, re.S)
    assert match, result.stderr[-2000:]
    return json.loads(html.unescape(match.group(1)))


@pytest.mark.parametrize("width", [1280, 800])
def test_verdict_failing_findings_and_plots_visible_without_overflow(
    report_html: Path, width: int, tmp_path: Path
) -> None:
    seen = measure(report_html, width, tmp_path)
    assert seen["verdictVisible"]
    assert seen["verdictText"].startswith("NOT ACCEPTED")
    assert seen["failingVisible"]
    for expected in (
        "b300-node04 gpu.remapped_rows: GPU 3: row remap pending",
        "b300-node03 baseline.nccl.busbw: NCCL all_reduce busbw (>= 1 GiB) down 10.0%",
        "b300-node01 baseline.xid: 1 new Xid/SXid events",
    ):
        assert expected in seen["failingText"]
    ids = [p["id"] for p in seen["plots"]]
    nodes = [f"b300-node0{i}" for i in range(1, 7)]
    assert (
        ids
        == [
            "plot-fleet-temperature",
            "plot-fleet-tflops",  # the gemm probe, run on this CPU by the recorded runs
            "plot-fleet-busbw",
            "plot-nccl-b300-node01",
            "plot-timeline-b300-node01-0",
            *(f"plot-nccl-{n}" for n in nodes[1:]),
        ]
    )
    assert all(p["visible"] and p["width"] > 200 for p in seen["plots"]), seen["plots"]
    assert seen["wide"] == []
    assert seen["scrollWidth"] <= seen["clientWidth"]


def test_screenshot(report_html: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    result = chromium(
        f"--screenshot={shot}",
        "--window-size=1280,2400",
        report_html.as_uri(),
        user_data=tmp_path / "ud",
    )
    assert shot.exists(), result.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 50_000  # a rendered page, not a blank one
