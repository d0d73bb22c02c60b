"""Hostile files at every file-taking option, the quick tier: exit 0/1/2, one line on
stderr for 2, no traceback, one JSON document with --json (tests/support/hostile.py).
tests/integration/cli/test_bad_input_props.py runs the same with 200 examples per option."""

from __future__ import annotations

import json

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

QUICK = settings(HOSTILE, max_examples=25)


@pytest.mark.parametrize("edge", EDGES, ids=[e.name for e in EDGES])
@QUICK
@given(data=st.data())
def test_a_hostile_file_is_exit_0_1_or_2_with_one_line(edge: Edge, data: st.DataObject) -> None:
    content = data.draw(hostile(edge.valid(), edge.dump), label="file")
    as_json = data.draw(st.booleans(), label="--json")
    event(f"exit {check_edge(edge, content, data.draw, as_json)}")


# Each example copies a run and runs a whole command on it: fewer.
RUN_QUICK = settings(HOSTILE_RUN, max_examples=15)


@pytest.mark.parametrize("edge", RUN_EDGES, ids=[e.name for e in RUN_EDGES])
@RUN_QUICK
@given(data=st.data())
def test_a_broken_run_directory_is_exit_0_1_or_2_and_never_accepted(
    edge: RunEdge, data: st.DataObject
) -> None:
    """A run that is ACCEPTED as written, broken one way (hostile bytes, a FIFO, a symlink,
    a cut, a huge line, a file removed): no traceback, no hang, one line for exit 2, and
    never ACCEPTED (or INTACT) when what it holds cannot be read as the run wrote it."""
    content = data.draw(hostile(valid_facts(), lambda doc: json.dumps(doc).encode()))
    event(f"exit {check_run_edge(edge, data.draw, content)}")
