"""The burn-in's tokens/s is one number: the console line, baseline.json, the report and the
exporter all show the figure `tokens_per_s_per_gpu` computes, to the last digit."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from bringup import baseline as baselines
from bringup.commands.burnin import _figures
from bringup.commands.exporter import report_of
from bringup.facts import decode, read_record
from bringup.measurements import shown
from bringup.node.probes.burnin import tokens_per_s_per_gpu
from bringup.report.prometheus import metrics_of
from bringup.rundir import RunDir
from tests.support import FIXTURES

RECORD = json.loads((FIXTURES / "burnin" / "cpu-tiny-2ranks.json").read_text())


def test_tokens_per_s_is_tokens_per_step_over_the_median_step_after_the_warmup() -> None:
    facts = RECORD["facts"]
    times = [s["time_s"] for s in facts["steps"]][facts["warmup_steps"] :]
    want = round(facts["tokens_per_step_per_gpu"] / statistics.median(times), 2)
    got = tokens_per_s_per_gpu([s["time_s"] for s in facts["steps"]], facts["warmup_steps"], 512)
    assert got == want


def test_console_baseline_report_and_exporter_agree(tmp_path: Path) -> None:
    facts = decode(read_record(RECORD))
    node = baselines.summarize("n1", facts, None, None)
    base = baselines.build([node], "tiny", None, "2026-01-01T00:00:00+00:00")
    baselines.write(tmp_path / "baseline.json", base)
    written = json.loads((tmp_path / "baseline.json").read_text())

    run = RunDir.create(tmp_path / "run", "burnin", None, None)
    run.add_record("n1", dict(RECORD))
    run.finish("complete", 0)
    report = report_of(run.path)
    (measured,) = [n.measurements for n in report.nodes]
    served = [
        s.value
        for family in metrics_of(report)
        for s in family.samples
        if s.name == "bringup_burnin_tokens_per_second"
    ]

    figure = node.tokens_per_s_per_gpu
    assert figure is not None and figure == round(figure, 2)
    assert written["nodes"][0]["tokens_per_s_per_gpu"] == figure
    assert written["metrics"]["burnin.tokens_per_s"] == figure
    assert measured.metrics["burnin.tokens_per_s"] == figure
    assert served == [figure]
    text = shown("burnin.tokens_per_s", figure)
    assert f"{text} per GPU" in _figures(node)
    assert text == f"{figure:.2f} tokens/s"


def test_the_baseline_judgement_names_the_same_figure() -> None:
    from bringup.checks.burnin import judge_baseline

    node = baselines.summarize("n1", decode(read_record(RECORD)), None, None)
    base = baselines.build([node], "tiny", None, "2026-01-01T00:00:00+00:00")
    (verdict,) = judge_baseline(base, base)
    figure = shown("burnin.tokens_per_s", node.tokens_per_s_per_gpu)
    assert verdict.message == f"{figure} per GPU, 100.0% of its baseline ({figure})"
