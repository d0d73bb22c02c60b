"""What one node may store (--max-raw-mib, --max-raw-files) is the command line's choice on
every command that runs probes on nodes, and it reaches the one run path (fleet/run.py),
where the RecordGate holds a node to it (tests/unit/test_fleet_run.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bringup.fleet import run as fleet_run
from bringup.fleet.target import NodeCaps
from tests.support.cli import invoke


class Reached(Exception):
    """Raised by the stand-in run path: the caps it was handed."""

    def __init__(self, caps: NodeCaps | None) -> None:
        super().__init__("reached the run path")
        self.caps = caps


@pytest.fixture
def reached(monkeypatch: pytest.MonkeyPatch) -> None:
    def stand_in(*args: Any, caps: NodeCaps | None = None, **kwargs: Any) -> None:
        raise Reached(caps)

    monkeypatch.setattr(fleet_run, "run", stand_in)


@pytest.mark.parametrize(
    "command",
    [
        ["check", "--local", "--suite", "quick"],
        ["diagnose", "--local", "--seconds", "1"],
        ["nccl", "--local"],
        ["burnin", "--local", "--recipe", "tiny"],
        ["handover", "--local"],  # its parts: check first
    ],
    ids=lambda c: c[0],
)
def test_every_probing_command_hands_its_caps_to_the_run(
    reached: None, command: list[str], tmp_path: Path
) -> None:
    result = invoke(
        *command, "--out", tmp_path / "run", "--max-raw-mib", "3", "--max-raw-files", "7"
    )
    assert isinstance(result.exception, Reached), result.output
    assert result.exception.caps == NodeCaps(raw_bytes=3 * 2**20, raw_files=7)


def test_the_default_caps_are_the_documented_ones(reached: None, tmp_path: Path) -> None:
    result = invoke("diagnose", "--local", "--seconds", "1", "--out", tmp_path / "run")
    assert isinstance(result.exception, Reached), result.output
    assert result.exception.caps == NodeCaps(raw_bytes=256 * 2**20, raw_files=2000)


def test_a_cap_below_one_is_bad_input(tmp_path: Path) -> None:
    result = invoke("nccl", "--local", "--max-raw-files", "0", "--out", tmp_path / "run")
    assert result.exit_code == 2
