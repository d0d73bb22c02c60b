"""The diagnostic plugin names what a test leaves in its process (support/process_state.py)."""

from __future__ import annotations

import os

import pytest

from tests.support.process_state import changes, snapshot


def test_an_environment_variable_and_a_umask_left_behind_are_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("BRINGUP_STATE_PROBE", raising=False)
    before = snapshot()
    monkeypatch.setenv("BRINGUP_STATE_PROBE", "1")
    old = os.umask(0o077)
    try:
        after = snapshot()
    finally:
        os.umask(old)
    assert changes(before, after) == [
        "env BRINGUP_STATE_PROBE: None -> '1'",
        f"umask: {oct(old)} -> 0o77",
    ]


def test_a_process_left_as_it_was_shows_no_change() -> None:
    assert changes(snapshot(), snapshot()) == []
