"""`bringup report --format junit`: valid against the common JUnit schema, one testcase per
finding, and a check that could not be measured never reads as passed.

The schema is the Jenkins xunit-plugin junit-10.xsd as pytest's own tests keep it
(tests/fixtures/junit/SOURCES.md); xmlschema validates against it.
"""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from prometheus_client import CollectorRegistry, generate_latest

from bringup import profile
from bringup.commands.report import build_report
from bringup.report.junit import to_junit
from bringup.report.rundata import load
from tests.support.report_runs import demo_run, with_measurements, write_run

SCHEMA = xmlschema.XMLSchema(Path(__file__).resolve().parents[1] / "fixtures/junit/junit-10.xsd")
B300 = profile.load("b300")


@pytest.fixture(scope="module")
def rich(tmp_path_factory: pytest.TempPathFactory) -> Path:
    demo = demo_run(tmp_path_factory.mktemp("demo") / "run")
    return write_run(demo, tmp_path_factory.mktemp("rich") / "run", with_measurements)


def junit_of(run: Path) -> tuple[str, ET.Element]:
    text = to_junit(build_report(load(run), B300, generated_at="T"))
    return text, ET.fromstring(text)


def test_valid_and_one_testcase_per_finding(rich: Path) -> None:
    """Exactly one testcase per finding of the report: a check with several findings on a
    node (one per GPU, say) gives distinct names, none merged."""
    report = build_report(load(rich), B300, generated_at="T")
    text = to_junit(report)
    SCHEMA.validate(text)
    root = ET.fromstring(text)
    cases = [
        (suite.get("name"), case.get("name"))
        for suite in root.iter("testsuite")
        for case in suite.iter("testcase")
    ]
    assert len(cases) == len(report.findings)
    assert len(set(cases)) == len(cases)  # distinct names
    assert root.get("tests") == str(len(report.findings))
    # Checks that wrote two findings or more on one node are there, numbered from 1.
    many = {(n, c.split(" #")[0]) for n, c in cases if " #" in c}
    assert many, "the demo has a check with several findings on one node"
    node, check = sorted(many)[0]
    mine = [f for f in report.findings if (f.node, f.check) == (node, check)]
    assert [c for n, c in cases if n == node and c.startswith(f"{check} #")] == [
        f"{check} #{i}" for i in range(1, len(mine) + 1)
    ]


def test_prometheus_has_one_check_status_per_finding(rich: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from bringup.report.prometheus import RunCollector

    report = build_report(load(rich), B300, generated_at="T")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RunCollector(lambda: rich, lambda _: report))
    text = generate_latest(registry).decode()
    samples = [
        (s.labels["node"], s.labels["check"], s.labels["finding"])
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "bringup_check_status"
    ]
    assert len(samples) == len(report.findings)
    assert len(set(samples)) == len(samples)


def test_failures_are_the_bad_checks(rich: Path) -> None:
    _, root = junit_of(rich)
    failed = {
        (suite.get("name"), (case.get("name") or "").split(" #")[0])
        for suite in root.iter("testsuite")
        for case in suite.iter("testcase")
        if case.find("failure") is not None
    }
    # The demo's planted faults (one check each), and the recorded H100 busbw under the
    # B300 floor everywhere.
    nodes = [f"b300-node0{i}" for i in range(1, 7)]
    assert failed == {
        ("b300-node02", "gpu.count"),
        ("b300-node03", "topology.nvlink"),
        ("b300-node04", "gpu.remapped_rows"),
        ("b300-node05", "xid.events"),
        *((n, "nccl.allreduce_busbw") for n in nodes),
    }
    suite = next(s for s in root.iter("testsuite") if s.get("name") == "b300-node04")
    case = next(c for c in suite.iter("testcase") if c.get("name") == "gpu.remapped_rows")
    failure = case.find("failure")
    assert failure is not None
    assert (failure.get("type"), failure.get("message")) == ("FAIL", "GPU 3: row remap pending")
    assert "action: reset GPU 3 (serial DEMO00040003) (`nvidia-smi -r -i 3`)" in (
        failure.text or ""
    )
    warned = next(s for s in root.iter("testsuite") if s.get("name") == "b300-node06")
    clock = next(c for c in warned.iter("testcase") if c.get("name") == "gpu.clock_events")
    assert clock.find("failure") is None
    assert "WARN: GPU 5: HW slowdown active" in (clock.findtext("system-out") or "")


def test_unmeasured_is_a_failure_of_type_error(rich: Path, tmp_path: Path) -> None:
    run = tmp_path / "partial"
    shutil.copytree(rich, run)
    (run / "facts" / "b300-node04.json").unlink()
    text, root = junit_of(run)
    SCHEMA.validate(text)
    suite = next(s for s in root.iter("testsuite") if s.get("name") == "b300-node04")
    case = next(c for c in suite.iter("testcase") if c.get("name") == "report.missing")
    failure = case.find("failure")
    assert failure is not None and failure.get("type") == "ERROR"


def test_the_schema_check_can_fail() -> None:
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        SCHEMA.validate('<testsuites><testsuite name="x"><testcase/></testsuite></testsuites>')
