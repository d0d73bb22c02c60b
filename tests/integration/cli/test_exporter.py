"""`bringup exporter`: the exposition parsed with prometheus-client's own parser, the
textfile written by the real command, and the real server scraped over HTTP on localhost.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from bringup.commands.exporter import report_of
from bringup.report.model import Report
from bringup.report.prometheus import ExporterError, latest_run, registry_for, serve
from tests.support.report_runs import demo_run, with_measurements, write_run
from tests.support.timing import scaled

NODES = [f"b300-node0{i}" for i in range(1, 7)]


@pytest.fixture(scope="module")
def rich(tmp_path_factory: pytest.TempPathFactory) -> Path:
    demo = demo_run(tmp_path_factory.mktemp("demo") / "run")
    return write_run(demo, tmp_path_factory.mktemp("rich") / "run", with_measurements)


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """(name, labels) -> value, from an exposition parsed by prometheus-client."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(parsed: dict, name: str, **labels: str) -> float:
    return parsed[(name, frozenset(labels.items()))]


def test_exposition_values(rich: Path) -> None:
    parsed = samples(generate_latest(registry_for(lambda: rich, report_of)).decode())
    assert value(parsed, "bringup_exporter_up") == 1.0
    assert value(parsed, "bringup_run_accepted") == 0.0
    # Status codes: 0 PASS ... 3 FAIL.
    assert (
        value(parsed, "bringup_check_status", node="b300-node02", check="gpu.count", finding="1")
        == 3.0
    )
    assert (
        value(parsed, "bringup_check_status", node="b300-node01", check="gpu.count", finding="1")
        == 0.0
    )
    assert (
        value(
            parsed,
            "bringup_check_status",
            node="b300-node06",
            check="gpu.clock_events",
            finding="1",
        )
        == 2
    )
    for node in NODES:
        assert value(parsed, "bringup_nccl_busbw_bytes", node=node) == 476.53e9
        assert (
            value(parsed, "bringup_nvme_read_bytes_per_second", node=node, path="/data") == 24.1e9
        )
    assert (
        value(
            parsed,
            "bringup_nccl_busbw_by_size_bytes",
            node="b300-node01",
            collective="all_reduce",
            size_bytes="134217728",
        )
        > 0
    )
    assert value(parsed, "bringup_gpu_temperature_celsius", node="b300-node01", gpu="0") == 34.0
    assert value(parsed, "bringup_xid_events", node="b300-node05") == 1.0
    assert value(parsed, "bringup_findings", status="FAIL") == 10.0  # 4 planted + 6 nccl
    info = [k for k in parsed if k[0] == "bringup_run_info"]
    assert dict(info[0][1])["profile"] == "b300"
    assert dict(info[0][1])["mode"] == "demo"  # derived from its records: never accepted
    assert value(parsed, "bringup_run_accepted") == 0.0


def test_unreadable_run_is_up_0_not_an_error(tmp_path: Path) -> None:
    parsed = samples(generate_latest(registry_for(lambda: tmp_path / "gone", report_of)).decode())
    # Fail closed: a run that cannot be read is not accepted, and the scrape says so.
    assert parsed == {
        ("bringup_exporter_up", frozenset()): 0.0,
        ("bringup_run_accepted", frozenset()): 0.0,
    }


def test_one_broken_run_under_runs_dir_does_not_break_the_scrape(
    rich: Path, tmp_path: Path
) -> None:
    """An older run whose findings.jsonl is a directory made every scrape an HTTP 500."""
    runs = tmp_path / "runs"
    shutil.copytree(rich, runs / "good")
    broken = Path(shutil.copytree(rich, runs / "broken"))
    manifest = json.loads((broken / "manifest.json").read_text())
    manifest["ended_at"] = "2020-01-01T00:00:00+00:00"  # older: the good one is exported
    (broken / "manifest.json").write_text(json.dumps(manifest))
    (broken / "findings.jsonl").unlink()
    (broken / "findings.jsonl").mkdir()
    (runs / "garbage").mkdir()
    (runs / "garbage" / "manifest.json").write_bytes(b"\xff\x00")
    assert latest_run(runs) == runs / "good"
    parsed = samples(generate_latest(registry_for(lambda: latest_run(runs), report_of)).decode())
    assert value(parsed, "bringup_exporter_up") == 1.0
    assert (
        value(parsed, "bringup_check_status", node="b300-node02", check="gpu.count", finding="1")
        == 3.0
    )
    # The broken run itself, exported: read, and not accepted.
    parsed = samples(generate_latest(registry_for(lambda: broken, report_of)).decode())
    assert value(parsed, "bringup_run_accepted") == 0.0
    assert (
        value(parsed, "bringup_check_status", node="run", check="report.findings", finding="1")
        == 4.0
    )


def test_a_report_that_fails_is_up_0_and_the_server_serves(rich: Path) -> None:
    def broken_report(path: Path) -> Report:
        raise RuntimeError("a bug in the report")

    parsed = samples(generate_latest(registry_for(lambda: rich, broken_report)).decode())
    assert value(parsed, "bringup_exporter_up") == 0.0
    assert value(parsed, "bringup_run_accepted") == 0.0


def test_latest_run_by_end_time(rich: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    for name, ended in (
        ("b-older", "2026-01-01T00:00:00+00:00"),
        ("a-newer", "2026-06-01T00:00:00+00:00"),
    ):
        shutil.copytree(rich, runs / name)
        manifest = json.loads((runs / name / "manifest.json").read_text())
        manifest["ended_at"] = ended
        (runs / name / "manifest.json").write_text(json.dumps(manifest))
    (runs / "not-a-run").mkdir()
    assert latest_run(runs) == runs / "a-newer"
    with pytest.raises(ExporterError, match="no readable run directory"):
        latest_run(runs / "not-a-run")


def test_server_on_localhost(rich: Path) -> None:
    server, _ = serve(registry_for(lambda: rich, report_of), "127.0.0.1", 0)
    try:
        host, port = server.server_address[:2]
        assert host == "127.0.0.1"
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/metrics", timeout=scaled(30)
        ) as response:
            text = response.read().decode()
    finally:
        server.shutdown()
    assert (
        value(
            samples(text),
            "bringup_check_status",
            node="b300-node05",
            check="xid.events",
            finding="1",
        )
        == 3
    )


def _exporter_cli(*args: str | Path) -> list[str]:
    code = "import sys\nfrom bringup.cli import app\napp(sys.argv[1:])\n"
    return [sys.executable, "-c", code, *map(str, args)]


def test_textfile_is_written_by_the_command(rich: Path, tmp_path: Path) -> None:
    target = tmp_path / "bringup.prom"
    proc = subprocess.run(
        _exporter_cli("exporter", "--run", rich, "--textfile", target),
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert proc.returncode == 0, proc.stderr
    parsed = samples(target.read_text())
    assert (
        value(
            parsed, "bringup_check_status", node="b300-node03", check="topology.nvlink", finding="1"
        )
        == 3
    )
    assert [p.name for p in tmp_path.iterdir()] == ["bringup.prom"]  # no temporary left


def test_command_serves_and_is_scraped(rich: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copytree(rich, runs / "run1")
    proc = subprocess.Popen(
        _exporter_cli("exporter", "--runs-dir", runs, "--port", "0"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "serving http://127.0.0.1:PORT/metrics from ..."
        assert line.startswith("serving http://127.0.0.1:"), (
            proc.stderr.read() if proc.stderr else line
        )
        url = line.split()[1]
        with urllib.request.urlopen(url, timeout=scaled(30)) as response:
            parsed = samples(response.read().decode())
        assert value(parsed, "bringup_run_accepted") == 0.0
    finally:
        proc.terminate()
        proc.wait(timeout=scaled(30))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "say which run: --run RUN_DIR or --runs-dir DIR"),
        (["--run", "/nonexistent"], "/nonexistent: not a directory"),
        (["--run", "{rich}", "--textfile", "{tmp}/x.txt"], "only files ending in .prom"),
    ],
)
def test_bad_input(args: list[str], message: str, rich: Path, tmp_path: Path) -> None:
    argv = [a.replace("{rich}", str(rich)).replace("{tmp}", str(tmp_path)) for a in args]
    env = dict(os.environ, COLUMNS="200")
    proc = subprocess.run(
        _exporter_cli("exporter", *argv),
        capture_output=True,
        text=True,
        timeout=scaled(120),
        env=env,
    )
    assert proc.returncode == 2
    assert message in proc.stderr
