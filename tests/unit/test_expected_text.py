"""An expectation written as text that Python reads as a number JSON has not (Infinity,
nan: text a node may report) stays text, so its finding reads back from findings.jsonl.
Found by tests/unit/test_report_properties.py (hostile node text 'Infinity')."""

from __future__ import annotations

import pytest

from bringup.findings import Expected, Finding, Status, finding_line, read_finding


@pytest.mark.parametrize("text", ["Infinity", "-inf", "nan", "NaN", "inf"])
def test_a_non_finite_number_stays_text_and_the_finding_reads_back(text: str) -> None:
    assert Expected.parse(text).value == text
    finding = Finding(node="n1", check="gpu.count", status=Status.FAIL, message="m", expected=text)
    again = read_finding(finding_line(finding))
    assert again == finding


def test_finite_numbers_are_still_numbers() -> None:
    assert Expected.parse(">= 3.0 GB/s").value == 3.0
    assert Expected.parse("8").value == 8


def test_a_text_is_parsed_once_and_its_expectation_shared_unchanged() -> None:
    """Every node's finding gives its check's threshold as the same text: parsed once,
    one frozen Expected for all of them; a text that differs only in its spaces is the
    same expectation, and a finding's own unit still makes a new one, not a change."""
    first = Expected.parse(">= 3.0 GB/s")
    assert Expected.parse(">= 3.0 GB/s") is first
    assert Expected.parse(">=  3.0   GB/s") == first
    assert (first.op, first.value, first.unit) == (">=", 3.0, "GB/s")
    bare = Expected.parse("<= 85")
    finding = Finding(
        node="n1", check="gpu.thermal", status=Status.PASS, message="m", expected="<= 85", unit="C"
    )
    assert finding.expected is not None and finding.expected.unit == "C"
    assert bare.unit is None and Expected.parse("<= 85") is bare
