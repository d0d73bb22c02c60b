"""The property of tests/unit/test_report_properties.py over 60 examples (BRINGUP_TEST_EXAMPLES
for more): whatever
strings a node reports (node name, GPU name, serials, VBIOS, host strings, kernel, Xid
line, NVMe path, NCCL collective, a finding's text), `bringup report --format all` exits
1 for the planted FAIL and every output holds (tests/support/hostile.py says which way).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.support.hostile_outputs import HOSTILE, check_report_outputs

# 60 by default: 200 took six minutes of a loaded suite; the strategy's named hostile
# strings are drawn first either way. BRINGUP_TEST_EXAMPLES=200 for a thorough run.
EXAMPLES = int(os.environ.get("BRINGUP_TEST_EXAMPLES", "60"))


@pytest.mark.filterwarnings("ignore:Glyph .* missing from font:UserWarning")
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(HOSTILE)
def test_node_text_never_breaks_an_output(hostile: tuple[str, dict[str, str]]) -> None:
    text, fields = hostile
    with tempfile.TemporaryDirectory() as scratch:
        check_report_outputs(Path(scratch), text, fields)
