"""The diagnostic plugin names what a test leaves in its process (support/process_state.py)."""

from __future__ import annotations

import os
import subprocess
import sys

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


def test_a_descriptor_and_a_child_left_open_are_named() -> None:
    before = snapshot()
    read, write = os.pipe()
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=read)
    try:
        lines = changes(before, snapshot())
    finally:
        os.close(write)
        child.wait(timeout=30)
        os.close(read)
    assert f"fds: {before['fds']} -> {before['fds'] + 2}" in lines
    assert any(line.startswith("children: ") and f"{child.pid} python" in line for line in lines)


def test_a_namespace_or_host_name_changed_is_named() -> None:
    """Entering a namespace needs privileges a test must not use on its own machine: the
    comparison is asked of two snapshots that differ as an entered one would."""
    before = snapshot()
    assert "net" in before["namespaces"] and before["hostname"]
    after = {
        **before,
        "namespaces": {**before["namespaces"], "net": "net:[1]"},
        "hostname": "elsewhere",
    }
    assert changes(before, after) == [
        f"namespaces: {before['namespaces']!r:.200} -> {after['namespaces']!r:.200}",
        f"hostname: {before['hostname']!r} -> 'elsewhere'",
    ]
