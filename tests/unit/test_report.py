"""`bringup report` from recorded run directories: the demo fleet, a partial run, a baseline.

The runs are built in report_runs.py from the demo fleet (real CLI) plus recorded real
nccl-tests and dmon outputs; see its docstring for the sources.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from msgspec import structs
from typer.testing import CliRunner

from bringup import profile
from bringup.cli import app
from bringup.commands.report import build_report
from bringup.findings import Status
from bringup.measurements import NodeMeasurements, _burnin
from bringup.report import render
from bringup.report.model import Report
from bringup.report.rundata import load
from bringup.schema import as_json
from tests.support.report_runs import (
    busbw_down,
    demo_run,
    new_xid,
    serial_changed,
    with_measurements,
    write_run,
)

B300 = profile.load("b300")
# The demo's planted faults, as the checks judge them (README "make demo").
DEMO_FAILS = {
    ("b300-node02", "gpu.count"),
    ("b300-node03", "topology.nvlink"),
    ("b300-node04", "gpu.remapped_rows"),
    ("b300-node05", "xid.events"),
}
NODES = [f"b300-node0{i}" for i in range(1, 7)]
# nccl-tests#290, 8x H100 NVLS: in-place busbw at 4 GiB (the fixture's SOURCES.md).
H100_BUSBW = 476.53e9


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_run(tmp_path_factory.mktemp("demo") / "run")


@pytest.fixture(scope="module")
def rich(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run(demo, tmp_path_factory.mktemp("rich") / "run", with_measurements)


def report_of(run: Path, baseline: Path | None = None) -> Report:
    """The report `bringup report` builds: the run judged by the checks, then shown."""
    then = load(baseline) if baseline else None
    return build_report(load(run), B300, then, generated_at="T")


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """The real CLI in a child process."""
    code = "import sys\nfrom bringup.cli import app\napp(sys.argv[1:])\n"
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=300
    )


# --- the demo fleet --------------------------------------------------------------------------


def test_demo_verdict_names_exactly_the_planted_faults(demo: Path) -> None:
    report = report_of(demo)
    verdict = report.verdict
    assert not verdict.accepted
    failing = {(f.node, f.check) for g in verdict.actions for f in g.findings}
    assert failing == DEMO_FAILS
    assert verdict.nodes_failing == ["b300-node02", "b300-node03", "b300-node04", "b300-node05"]
    warned = {(f.node, f.check) for g in verdict.warnings for f in g.findings}
    # The demo's plan is its nodes' probes: every one recorded, nothing missing.
    assert warned == {("b300-node06", "gpu.clock_events")}
    assert verdict.missing == []
    assert verdict.line == "NOT ACCEPTED (demo data)"
    assert [n.node for n in report.nodes] == NODES
    assert report.matrix["b300-node05"]["xid"].lines() == ["FAIL 1", "events"]
    assert {s: c.status for s, c in report.matrix["b300-node01"].items()} == dict.fromkeys(
        report.subjects, Status.PASS
    )


def test_demo_identity(demo: Path) -> None:
    nodes = {n.node: n.measurements.identity for n in report_of(demo).nodes}
    one = nodes["b300-node01"]
    assert one.gpu_models == ["NVIDIA B300 SXM6 AC"]
    assert (one.gpu_count, one.driver, one.cuda, one.nvlink_version) == (8, "580.95.05", "13.0", 5)
    assert one.serials[0] == "DEMO00010000"
    assert set(one.vbios) == {"97.10.00.00.01"}
    assert one.hostname == "b300-node01"
    assert nodes["b300-node02"].gpu_count == 7


def test_demo_identity_for_a_dispute(demo: Path) -> None:
    report = report_of(demo)
    five = next(n for n in report.nodes if n.node == "b300-node05").measurements
    ident = five.identity
    assert ident.gpus[6].model_dump() == {
        "index": 6,
        "pci_bus_id": "00000000:ba:00.0",
        "serial": "DEMO00050006",
        "uuid": "GPU-00000000-0000-0000-0000-000000050006",
    }
    assert ident.system is not None
    assert (ident.system.chassis_serial, ident.system.fabric_manager_version) == (
        "DEMO-CH-05",
        "580.95.05",
    )
    (xid,) = five.xids
    assert (xid.gpu_index, xid.gpu_serial, xid.utc) == (
        6,
        "DEMO00050006",
        "2026-11-28T14:03:41.442918+00:00",
    )
    md = render.markdown(report)
    assert "| chassis serial | DEMO-CH-05 |" in md
    assert "| BMC firmware | not available: ipmitool not installed |" in md
    assert "| NVSwitch firmware | not available: not read by bringup (needs NVIDIA's NSCQ" in md
    assert "| GPU map | GPU 0: PCI 00000000:18:00.0 · serial DEMO00050000 · GPU-0000" in md
    assert "(GPU 6, serial DEMO00050006, 2026-11-28 14:03:41 UTC)" in md
    html = render.html(report, render.make_plots(report, B300))
    assert "GPU 6 (serial DEMO00050006)<br>0000:ba:00<br>2026-11-28 14:03:41 UTC" in html
    assert '<th>Fabric Manager</th><td class="mono">580.95.05</td>' in html


def test_demo_fleet_statistics_and_check_medians(demo: Path) -> None:
    report = report_of(demo)
    stats = {s.metric: s for s in report.fleet}
    assert set(stats) == {"nvme.seq_read", "nvme.seq_write"}
    assert (stats["nvme.seq_read"].median, stats["nvme.seq_read"].spread_pct) == (24.1e9, 0.0)
    assert stats["nvme.seq_read"].stragglers == []
    node02 = next(n for n in report.nodes if n.node == "b300-node02")
    count = next(r for r in node02.checks if r.finding.check == "gpu.count")
    # Five nodes have 8 GPUs, node02 has 7: the median is 8, node02 is 12.5% under it.
    assert (count.fleet_median, count.vs_fleet_pct) == (8, -12.5)


def test_demo_markdown_and_html(demo: Path) -> None:
    report = report_of(demo)
    md = render.markdown(report)
    assert "## Verdict: NOT ACCEPTED" in md
    assert (
        "| FAIL | reset GPU 3 (serial DEMO00040003) (`nvidia-smi -r -i 3`) to apply the pending "
        "row remap |"
    ) in md
    assert "**b300-node04** `gpu.remapped_rows`: GPU 3: row remap pending" in md
    html = render.html(report, render.make_plots(report, B300))
    assert "NOT ACCEPTED" in html
    assert 'id="plot-fleet-temperature"' in html
    # Self-contained: nothing to fetch (namespace URIs in the SVGs are names, not links).
    for fetched in ("<script", "<link", "@import", "src="):
        assert fetched not in html, fetched
    # Links only within the page (#node-...) or to embedded data (heatmap images).
    assert re.findall(r'href="(?!#|data:)[^"]*"', html) == []
    assert re.findall(r"url\((?!#)", html) == []


# --- measurements: NCCL, telemetry, stragglers ---------------------------------------------


def test_nccl_curve_and_metric_from_the_recorded_run(rich: Path) -> None:
    report = report_of(rich)
    node = next(n for n in report.nodes if n.node == "b300-node01").measurements
    assert node.metrics["nccl.busbw"] == H100_BUSBW
    curve = node.curves[0]
    assert (curve.collective, curve.nranks) == ("all_reduce", 8)
    assert curve.points[-1].size_bytes == 4294967296
    assert curve.points[-1].busbw_bytes_per_s == H100_BUSBW
    busbw = next(s for s in report.fleet if s.metric == "nccl.busbw")
    assert (busbw.nodes, busbw.median, busbw.stragglers) == (6, H100_BUSBW, [])
    # The real checks judged it: below the B300 floor of 800 GB/s.
    nccl = [f for f in report.findings if f.check == "nccl.allreduce_busbw"]
    assert {(f.node, f.status, f.value) for f in nccl} == {(n, Status.FAIL, 476.53) for n in NODES}


def test_telemetry_timeline_is_plotted(rich: Path) -> None:
    report = report_of(rich)
    node = next(n for n in report.nodes if n.node == "b300-node01").measurements
    assert len(node.timelines) == 1
    assert len(node.timelines[0].samples) == 11
    assert node.timelines[0].samples[0].temperature_c == 35.0
    figures = render.make_plots(report, B300)
    keys = [p.key for p in figures.all()]
    assert keys[:3] == ["fleet-temperature", "fleet-tflops", "fleet-busbw"]
    assert "timeline-b300-node01-0" in keys
    assert {f"nccl-{n}" for n in NODES} <= set(keys)
    assert "timelines" not in render.summary_json(report)  # bulky samples stay out of JSON


def test_straggler_is_flagged_apart_from_the_floor(demo: Path, tmp_path: Path) -> None:
    run = write_run(demo, tmp_path / "run", with_measurements, busbw_down("b300-node03", 0.9))
    report = report_of(run)
    stragglers = [f for f in report.findings if f.check.startswith("fleet.")]
    assert [(f.node, f.check, f.status) for f in stragglers] == [
        ("b300-node03", "fleet.nccl.busbw", Status.WARN)
    ]
    assert "is 10.0% below the fleet median 476.53 GB/s (tolerance 5%, 6 nodes)" in (
        stragglers[0].message
    )


def test_mfu_and_tokens_from_burnin_step_times() -> None:
    """The arithmetic of MFU from a burn-in record (formula inputs, not hardware figures)."""
    m = NodeMeasurements(node="n")
    facts = {
        "device_kind": "cuda",
        "world_size": 8,
        "warmup_steps": 1,
        "tokens_per_step_per_gpu": 4096,
        "model_flops_per_token": 48_000_000_000,
        "steps": [
            {"step": 0, "time_s": 9.0},
            {"step": 1, "time_s": 2.0},
            {"step": 2, "time_s": 2.0},
        ],
    }
    _burnin(facts, m, peak_flops_per_s=2250e12)
    # 4096 tokens per GPU / 2.0 s (the warm-up step left out) = 2048 tokens/s per GPU, as
    # baseline.json says; 48e9 FLOP/token x 2048 / 2250e12 = 0.04369...
    assert m.metrics["burnin.tokens_per_s"] == 2048.0
    assert m.metrics["burnin.mfu"] == pytest.approx(48e9 * 2048 / 2250e12)
    recorded = NodeMeasurements(node="n")
    _burnin({"mfu": 41.5, "tokens_per_s": 1000}, recorded, None)  # a percentage is read as one
    assert recorded.metrics == {"burnin.tokens_per_s": 1000.0, "burnin.mfu": 0.415}


# --- baseline ------------------------------------------------------------------------------


def test_baseline_flags_exactly_the_planted_regressions(
    demo: Path, rich: Path, tmp_path: Path
) -> None:
    later = write_run(
        demo,
        tmp_path / "later",
        with_measurements,
        busbw_down("b300-node03", 0.9),
        new_xid("b300-node01"),
        serial_changed("b300-node06", 4, "1654922004999"),
    )
    report = report_of(later, baseline=rich)
    flagged = {
        (f.node, f.check, f.status) for f in report.findings if f.check.startswith("baseline.")
    }
    assert flagged == {
        ("b300-node03", "baseline.nccl.busbw", Status.FAIL),
        ("b300-node01", "baseline.xid", Status.FAIL),
        ("b300-node06", "baseline.identity", Status.WARN),
    }
    comparison = report.baseline
    assert comparison is not None
    (regressed,) = comparison.regressions
    assert (regressed.node, regressed.metric) == ("b300-node03", "nccl.busbw")
    assert regressed.change_pct == pytest.approx(-10.0)
    assert [(c.node, c.field, c.baseline, c.current) for c in comparison.identity] == [
        ("b300-node06", "GPU 4 serial", "DEMO00060004", "1654922004999")
    ]
    assert [(x.node, x.event.xid) for x in comparison.new_xids] == [("b300-node01", 48)]
    # node05's Xid 79 was already in the baseline's log: not new.
    # busbw, NVMe read and write, and the gemm TFLOP/s (measured on this CPU) on six nodes
    assert len(comparison.metrics) == 6 * 4


def test_baseline_of_the_same_data_flags_nothing(rich: Path, demo: Path, tmp_path: Path) -> None:
    again = write_run(demo, tmp_path / "again", with_measurements)
    report = report_of(again, baseline=rich)
    assert [f for f in report.findings if f.check.startswith("baseline.")] == []


def test_improvement_is_not_a_regression(demo: Path, rich: Path, tmp_path: Path) -> None:
    faster = write_run(demo, tmp_path / "faster", with_measurements, busbw_down("b300-node02", 1.2))
    report = report_of(faster, baseline=rich)
    assert report.baseline is not None and report.baseline.regressions == []


# --- a partial (crashed) run ---------------------------------------------------------------


def test_partial_run_says_what_is_missing(rich: Path, tmp_path: Path) -> None:
    run = tmp_path / "partial"
    shutil.copytree(rich, run)
    (run / "facts" / "b300-node04.json").unlink()
    node02 = json.loads((run / "facts" / "b300-node02.json").read_text())
    del node02["probes"]["nvme"]
    (run / "facts" / "b300-node02.json").write_text(json.dumps(node02))
    (run / "findings.jsonl").unlink()
    manifest = json.loads((run / "manifest.json").read_text())
    manifest.update(status="running", ended_at=None, exit_code=None)
    (run / "manifest.json").write_text(json.dumps(manifest))

    report = report_of(run)
    assert not report.verdict.accepted
    assert report.verdict.missing == [
        "findings.jsonl is missing: the run was never judged "
        f"(judge its facts with `bringup check --replay {run}`)",
        "the run did not complete (status 'running'): probes after the last recorded one "
        "did not run; what was measured before it stopped is shown",
    ]
    missing = {n.node: n.missing for n in report.nodes}
    assert missing["b300-node04"] == ["no facts recorded: the node never reported a probe"]
    assert missing["b300-node02"] == [
        "not measured: probe 'nvme' has no record on b300-node02 (it did not run or did not finish)"
    ]
    assert missing["b300-node01"] == []
    errors = {(f.node, f.check) for f in report.findings if f.status == Status.ERROR}
    assert errors == {
        ("", "report.findings"),
        ("", "report.run"),
        ("b300-node04", "report.missing"),
        ("b300-node02", "report.missing"),
    }
    # What was measured is still shown.
    node01 = next(n for n in report.nodes if n.node == "b300-node01")
    assert node01.measurements.metrics["nccl.busbw"] == H100_BUSBW
    html = render.html(report, render.make_plots(report, B300))
    assert "no facts recorded: the node never reported a probe" in html


def test_findings_cut_short_by_a_crash(rich: Path, tmp_path: Path) -> None:
    run = tmp_path / "cut"
    shutil.copytree(rich, run)
    text = (run / "findings.jsonl").read_text()
    lines = text.splitlines()
    (run / "findings.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:30])
    data = load(run)
    assert data.unreadable_lines == [len(lines)]
    assert data.findings is not None and len(data.findings) == len(lines) - 1
    # Read on, but never passed over: the cut line is an ERROR of the report.
    report = report_of(run)
    assert not report.verdict.accepted
    assert report.verdict.missing == [
        f"findings.jsonl line {len(lines)} does not parse (cut short or edited): "
        "its verdict is unknown"
    ]


# --- the command -----------------------------------------------------------------------------


def test_command_writes_every_format_and_exits_1(rich: Path, tmp_path: Path) -> None:
    result = cli("report", rich, "--format", "all", "--out", tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines()[0].startswith("NOT ACCEPTED (demo data): ")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["report.html", "report.json", "report.junit.xml", "report.md"]
    summary = json.loads((tmp_path / "report.json").read_text())
    assert summary["verdict"]["accepted"] is False
    assert summary["run"]["profile"] == "b300"


def test_command_json_prints_one_document(demo: Path, tmp_path: Path) -> None:
    result = cli("report", demo, "--format", "md", "--out", tmp_path, "--json")
    doc = json.loads(result.stdout)
    assert doc["verdict"] == "NOT ACCEPTED"
    assert doc["data"]["written"] == [str(tmp_path / "report.md")]
    assert doc["data"]["summary"]["verdict"]["nodes_failing"] == [
        "b300-node02",
        "b300-node03",
        "b300-node04",
        "b300-node05",
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]


def test_two_reports_of_the_same_data_are_identical(rich: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for out in (first, second):
        assert cli("report", rich, "--format", "all", "--out", out).returncode == 1
    stamp = re.compile(
        r"generated[^\n]*?\d{4}-\d\d-\d\dT[\d:]+\+00:00|\"generated_at\": \"[^\"]+\""
    )
    for name in ("report.html", "report.md", "report.json", "report.junit.xml"):
        a, b = (first / name).read_text(), (second / name).read_text()
        assert stamp.sub("", a) == stamp.sub("", b), name


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["report", "/nonexistent/run"], "/nonexistent/run: not a directory"),
        (["report", "{tmp}"], "not a run directory (no manifest.json, facts/ or findings.jsonl)"),
        (["report", "{demo}", "--format", "pdf"], "--format 'pdf': choose from html, md, junit"),
        (["report", "{demo}", "--profile", "b301"], "unknown profile 'b301'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], message: str, demo: Path, tmp_path: Path
) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{demo}", str(demo)) for a in args]
    result = CliRunner().invoke(app, [*argv, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1


# --- tolerances in the profile ---------------------------------------------------------------


def test_shipped_profiles_carry_the_default_tolerances() -> None:
    for name in profile.available():
        tolerances = profile.load(name).tolerances
        assert tolerances == profile.DEFAULT_TOLERANCES
    assert structs.asdict(B300.tolerances["nccl.busbw"]) == {
        "better": "higher",
        "baseline_pct": 5.0,
        "fleet_pct": 5.0,
    }


def test_a_profile_overrides_one_field_of_one_metric(tmp_path: Path) -> None:
    data = {k: v for k, v in as_json(B300).items() if k != "tolerances"}
    data["tolerances"] = {"burnin.mfu": {"baseline_pct": 2}}
    parsed = profile.parse(data, "mine.yaml")
    assert structs.asdict(parsed.tolerances["burnin.mfu"]) == {
        "better": "higher",
        "baseline_pct": 2.0,
        "fleet_pct": 3.0,
    }
    assert parsed.tolerances["nccl.busbw"] == profile.DEFAULT_TOLERANCES["nccl.busbw"]


def test_an_unknown_metric_is_an_error() -> None:
    data = {k: v for k, v in as_json(B300).items() if k != "tolerances"}
    data["tolerances"] = {"nccl.bsubw": {"baseline_pct": 2}}
    with pytest.raises(profile.ProfileError, match=r"unknown metric 'nccl.bsubw'"):
        profile.parse(data, "mine.yaml")


def test_gemm_tflops_from_a_real_cpu_gemm_run() -> None:
    """The gemm probe run for real (torch on CPU, small shapes), read by the report."""
    pytest.importorskip("torch")
    from bringup.facts import NodeFacts
    from bringup.measurements import measure
    from bringup.node.probes import gemm
    from tests.support.report_runs import record

    facts = gemm.collect(gemm.Params(device="cpu", m_sizes=[256], nk=256, iterations=3)).facts
    node = NodeFacts(node="cpu", bringup_version="t", collected_at="t")
    node.probes["gemm"] = record("gemm", facts)
    m = measure(node)
    flops = facts.gpus[0].bf16_flops_per_s
    assert flops is not None and flops > 0
    assert m.gpu_tflops == {0: flops / 1e12}
    assert m.metrics["gemm.tflops"] == flops
