"""The property of tests/unit/test_report_properties.py over 200 examples: whatever
strings a node reports (node name, GPU name, serials, VBIOS, host strings, kernel, Xid
line, NVMe path, NCCL collective, a finding's text), `bringup report --format all` exits
1 for the planted FAIL and every output holds (tests/support/hostile.py says which way).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.support.hostile_outputs import HOSTILE, check_report_outputs

EXAMPLES = 200


@pytest.mark.filterwarnings("ignore:Glyph .* missing from font:UserWarning")
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(HOSTILE)
def test_node_text_never_breaks_an_output(hostile: tuple[str, dict[str, str]]) -> None:
    text, fields = hostile
    with tempfile.TemporaryDirectory() as scratch:
        check_report_outputs(Path(scratch), text, fields)
