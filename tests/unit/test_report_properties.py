"""Whatever strings a node reports, every output of `bringup report` holds: HTML parses
to the template's own elements, Markdown carries no markup of the node's, JUnit parses
and validates, the console shows plain text. A few examples here (the unit tier stays
fast); tests/integration/cli/test_report_properties.py runs 200.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.support.hostile_outputs import HOSTILE, check_report_outputs


@pytest.mark.filterwarnings("ignore:Glyph .* missing from font:UserWarning")
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(HOSTILE)
def test_node_text_never_breaks_an_output(hostile: tuple[str, dict[str, str]]) -> None:
    text, fields = hostile
    with tempfile.TemporaryDirectory() as scratch:
        check_report_outputs(Path(scratch), text, fields)
