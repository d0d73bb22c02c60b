"""Hostile files at every file-taking option, 200 examples per option (the issue's floor for
this tier): exit 0/1/2, one line on stderr for 2, no traceback, one JSON document with
--json. In-process (tests/support/hostile.py), so 200 examples take seconds per option;
tests/unit/test_bad_input_props.py is the quick version of the same property."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from tests.support.hostile_inputs import (
    EDGES,
    RUN_EDGES,
    Edge,
    RunEdge,
    check_edge,
    check_run_edge,
    hostile,
    valid_facts,
)

THOROUGH = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("edge", EDGES, ids=[e.name for e in EDGES])
@THOROUGH
@given(data=st.data())
def test_a_hostile_file_is_exit_0_1_or_2_with_one_line(edge: Edge, data: st.DataObject) -> None:
    content = data.draw(hostile(edge.valid(), edge.dump), label="file")
    as_json = data.draw(st.booleans(), label="--json")
    event(f"exit {check_edge(edge, content, data.draw, as_json)}")


# A whole command on a copied run per example: 30 each, no shrinking (the example as
# drawn names its breakage). 100 each took 16 minutes of the suite's 30 on a loaded machine;
# the breakages are few kinds (RUN_EDGES x hostile bytes), and 30 draws cover each kind.
RUN_THOROUGH = settings(
    max_examples=30,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("edge", RUN_EDGES, ids=[e.name for e in RUN_EDGES])
@RUN_THOROUGH
@given(data=st.data())
def test_a_broken_run_directory_is_exit_0_1_or_2_and_never_accepted(
    edge: RunEdge, data: st.DataObject
) -> None:
    content = data.draw(hostile(valid_facts(), lambda doc: json.dumps(doc).encode()))
    event(f"exit {check_run_edge(edge, data.draw, content)}")
