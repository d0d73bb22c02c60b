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
