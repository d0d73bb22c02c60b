"""`make test` and `make test-random` as CI runs them, with pytest replaced by a script that
records its arguments: the slowest tests and the wall time print at the end of every run
(so growth shows in the CI log), the exit status is pytest's, and test-random runs every
tier with one printed seed that replays the order."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import REPO
from tests.support.timing import scaled

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _make(target: str, tmp_path: Path, pytest_exit: int, *args: str) -> subprocess.CompletedProcess:
    """`make TARGET` with setup and lint taken as done, pytest replaced by a recorder."""
    fake = tmp_path / "pytest"
    fake.write_text(f'#!/bin/sh\necho "pytest $*" >> {tmp_path / "calls"}\nexit {pytest_exit}\n')
    fake.chmod(0o755)
    argv = ["make", "--no-print-directory", "-o", "setup-test", "-o", "lint", f"BIN={tmp_path}"]
    return subprocess.run(
        [*argv, target, *args], cwd=REPO, capture_output=True, text=True, timeout=scaled(60)
    )


def _folders() -> list[str]:
    """The integration folders, each a tier of its own (bytecode caches are not)."""
    found = (REPO / "tests" / "integration").iterdir()
    return sorted(p.name for p in found if p.is_dir() and p.name != "__pycache__")


def _calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls").read_text().splitlines()


@pytest.mark.parametrize("pytest_exit", [0, 1])
def test_make_test_prints_the_slowest_tests_and_its_wall_time(
    tmp_path: Path, pytest_exit: int
) -> None:
    done = _make("test", tmp_path, pytest_exit)
    assert (done.returncode == 0) == (pytest_exit == 0), done.stderr
    assert _calls(tmp_path) == ["pytest -q -p no:randomly -n 2 --dist loadfile --durations=25"]
    assert re.search(r"^make test: wall time \d+ s$", done.stdout, re.M), done.stdout


def test_make_test_random_runs_every_tier_with_one_seed(tmp_path: Path) -> None:
    done = _make("test-random", tmp_path, 0, "SEED=4242")
    assert done.returncode == 0, done.stderr
    assert "test-random: seed 4242 (again: make test-random SEED=4242)" in done.stdout
    tiers = [c.split()[-1].rstrip("/") for c in _calls(tmp_path)]
    assert tiers == ["tests/unit", *[f"tests/integration/{name}" for name in _folders()]]
    assert all("-p randomly --randomly-seed=4242" in c for c in _calls(tmp_path))


def test_make_test_random_names_the_seed_and_the_tiers_that_failed(tmp_path: Path) -> None:
    done = _make("test-random", tmp_path, 1, "SEED=7")
    assert done.returncode != 0
    assert "test-random: seed 7 failed in: tests/unit tests/integration/" in done.stdout
    # A failing tier does not stop the others: every tier ran.
    assert len(_calls(tmp_path)) == 1 + len(_folders())
