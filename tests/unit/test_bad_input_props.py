"""Hostile files at every file-taking option, the quick tier: exit 0/1/2, one line on
stderr for 2, no traceback, one JSON document with --json (tests/support/hostile.py).
tests/integration/cli/test_bad_input_props.py runs the same with 200 examples per option."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.support.hostile_inputs import EDGES, Edge, check_edge, hostile

QUICK = settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("edge", EDGES, ids=[e.name for e in EDGES])
@QUICK
@given(data=st.data())
def test_a_hostile_file_is_exit_0_1_or_2_with_one_line(edge: Edge, data: st.DataObject) -> None:
    content = data.draw(hostile(edge.valid(), edge.dump), label="file")
    as_json = data.draw(st.booleans(), label="--json")
    event(f"exit {check_edge(edge, content, data.draw, as_json)}")
