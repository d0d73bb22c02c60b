"""Hostile files at every file-taking option, 60 examples per option by default
(BRINGUP_TEST_EXAMPLES=200 for a thorough run; 200 took 15 minutes of a loaded suite): exit
0/1/2, one line on stderr for 2, no traceback, one JSON document with --json. In-process
(tests/support/hostile.py); tests/unit/test_bad_input_props.py is the quick version of the
same property."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from tests.support.hostile_inputs import (
    EDGES,
    HOSTILE,
    HOSTILE_RUN,
    RUN_EDGES,
    Edge,
    RunEdge,
    check_edge,
    check_run_edge,
    hostile,
    valid_facts,
)

THOROUGH = settings(HOSTILE, max_examples=int(os.environ.get("BRINGUP_TEST_EXAMPLES", "60")))


@pytest.mark.parametrize("edge", EDGES, ids=[e.name for e in EDGES])
@THOROUGH
@given(data=st.data())
def test_a_hostile_file_is_exit_0_1_or_2_with_one_line(edge: Edge, data: st.DataObject) -> None:
    content = data.draw(hostile(edge.valid(), edge.dump), label="file")
    as_json = data.draw(st.booleans(), label="--json")
    event(f"exit {check_edge(edge, content, data.draw, as_json)}")


# A whole command on a copied run per example: 30 each. 100 each took 16 minutes of the
# suite's 30 on a loaded machine; the breakages are few kinds (RUN_EDGES x hostile bytes),
# and 30 draws cover each kind.
RUN_THOROUGH = settings(HOSTILE_RUN, max_examples=30)


@pytest.mark.parametrize("edge", RUN_EDGES, ids=[e.name for e in RUN_EDGES])
@RUN_THOROUGH
@given(data=st.data())
def test_a_broken_run_directory_is_exit_0_1_or_2_and_never_accepted(
    edge: RunEdge, data: st.DataObject
) -> None:
    content = data.draw(hostile(valid_facts(), lambda doc: json.dumps(doc).encode()))
    event(f"exit {check_run_edge(edge, data.draw, content)}")
