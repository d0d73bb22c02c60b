"""Issue 27, 8: a baseline is called the handover only when it is one (a bundle);
a plain check run given as --baseline is "the baseline run"."""

from __future__ import annotations

from pathlib import Path

from bringup import profile
from bringup.commands.report import build_report
from bringup.report import render
from bringup.report.rundata import load
from tests.support.cli import invoke
from tests.support.report_runs import demo_run, write_run

B300 = profile.load("b300")


def test_a_plain_run_is_the_baseline_run_not_the_handover(tmp_path: Path) -> None:
    first = demo_run(tmp_path / "r1")
    later = write_run(first, tmp_path / "r2")
    built = build_report(load(later), B300, load(first), generated_at="T")
    md, html = render.markdown(built), render.html(built, render.make_plots(built, B300))
    assert "Compared with the baseline run `r1`" in md
    assert "## Changed since the baseline run" in md
    assert "## Metrics against the baseline run r1" in md
    assert "compared with the baseline run <code>r1</code>" in html
    assert "handover" not in md.lower()
    assert "handover" not in html.lower()


def test_a_bundle_is_the_handover(tmp_path: Path) -> None:
    bundle = tmp_path / "h1"
    assert invoke("handover", "--demo", "--out", bundle).exit_code == 1
    later = write_run(bundle / "check", tmp_path / "r2")
    built = build_report(load(later), B300, load(bundle), generated_at="T")
    md = render.markdown(built)
    assert "Compared with the handover `h1`" in md
    assert "## Changed since handover" in md
    assert "baseline run" not in md
