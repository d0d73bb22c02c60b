"""The --json envelope: the committed schema is the one the models generate, and typed
expectations read and print as the checks meant them."""

from __future__ import annotations

import json

import jsonschema
import pytest

from bringup.commands.envelope import SCHEMA_FILE, document, schema, schema_text
from bringup.findings import Expected, Finding, Status, expected_json, finding_line, read_finding
from tests.support import REPO


def test_the_committed_schema_is_the_generated_one() -> None:
    committed = (REPO / SCHEMA_FILE).read_text()
    assert committed == schema_text(), (
        f"regenerate it: python -m bringup.commands.envelope > {SCHEMA_FILE}"
    )


def test_the_schema_is_valid_draft_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(schema())


def test_a_document_validates_and_leaves_out_what_is_empty() -> None:
    finding = Finding(
        node="n1", check="gpu.count", status=Status.FAIL, message="7 GPUs", value=7,
        expected=">= 8", unit="GPUs",
    )  # fmt: skip
    doc = document("check", 1, [finding], "NOT ACCEPTED", run_dir="runs/x")
    jsonschema.validate(doc, schema())
    assert set(doc) == {"bringup", "command", "exit_code", "verdict", "run_dir", "findings"}
    assert doc["findings"][0]["expected"] == {
        "op": ">=", "value": 8, "unit": "GPUs", "tolerance_pct": None, "note": None,
    }  # fmt: skip


def test_a_document_with_an_unknown_key_is_refused_by_the_schema() -> None:
    doc = document("check", 0, [], "ACCEPTED")
    doc["extra"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema())


@pytest.mark.parametrize(
    ("text", "typed", "shown"),
    [
        (">= 580.65.06", {"op": ">=", "value": "580.65.06"}, ">= 580.65.06"),
        ("8", {"op": "==", "value": 8}, "8"),
        (">= 3.0 GB/s", {"op": ">=", "value": 3.0, "unit": "GB/s"}, ">= 3 GB/s"),
        ("< 5% of the time", {"op": "<", "value": 5, "unit": "%", "note": "of the time"},
         "< 5% of the time"),
        ("within 3% of 476.53 GB/s",
         {"op": "within", "value": 476.53, "unit": "GB/s", "tolerance_pct": 3.0},
         "within 3% of 476.53 GB/s"),
        ("enabled", {"op": "==", "value": "enabled"}, "enabled"),
        ("a disk or network file system",
         {"op": "text", "value": "a disk or network file system"},
         "a disk or network file system"),
    ],
)  # fmt: skip
def test_an_expectation_in_words_is_typed(text: str, typed: dict, shown: str) -> None:
    expected = Expected.parse(text)
    assert {k: v for k, v in expected_json(expected).items() if v is not None} == typed
    assert str(expected) == shown


def test_a_finding_recorded_with_a_text_expectation_reads_back_typed() -> None:
    line = json.dumps(
        {"check": "nvme.seq_read", "status": "FAIL", "message": "slow", "value": 1.33,
         "expected": ">= 3.0 GB/s", "unit": "GB/s"}
    )  # fmt: skip
    found = read_finding(line)
    assert found.expected == Expected(op=">=", value=3.0, unit="GB/s")
    again = read_finding(finding_line(found))
    assert again == found


def test_a_measured_number_is_expected_as_a_number_across_the_demo_fleet() -> None:
    """Every check the demo fleet triggers: where the value is a number, so is the bound."""
    from bringup import profile
    from bringup.checks.catalog import judge_node
    from bringup.sim.demo import demo_nodes

    b300 = profile.load("b300")
    numeric = [
        f
        for node in demo_nodes()
        for f in judge_node(node, b300)
        if f.expected is not None and isinstance(f.value, int | float)
    ]
    assert len({f.check for f in numeric}) >= 8
    wrong = [
        (f.check, str(f.expected))
        for f in numeric
        if f.expected.op == "text" or not isinstance(f.expected.value, int | float)
    ]
    assert wrong == []
