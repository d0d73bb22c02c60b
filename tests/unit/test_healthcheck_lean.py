"""`bringup slurm healthcheck` without the Typer app (bringup/commands/healthcheck.py, issue
31): the entry point runs it with none of typer, click or rich loaded, and it reads a
command line exactly as the app does, or leaves the line to the app. That its output
equals the app's on the same node is tests/integration/cli/test_slurm_healthcheck_lean.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from bringup.checks.catalog import CHECK_MODULES
from bringup.cli import app
from bringup.commands import healthcheck
from tests.support import REPO
from tests.support.timing import scaled

# The console script as installed (`bringup ARGS`), writing the modules it loaded to a file.
ENTRY = """\
import atexit, json, sys
listed = sys.argv[1]
atexit.register(lambda: open(listed, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["bringup", *sys.argv[2:]]
from bringup.cli import run
sys.exit(run())
"""
# What the health check's lean path must not load: the app and what builds it.
AVOIDED = ("typer", "click", "rich", "bringup.commands.app", "bringup.commands.common")


def _loaded(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    listed = tmp_path / "modules.json"
    # No NVML library: the gpu probe fails fast and the node is unfit, judged all the same.
    env = {**os.environ, "PYTHONPATH": str(REPO), "LD_LIBRARY_PATH": str(tmp_path)}
    env.pop("SLURMD_NODENAME", None)
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, str(listed), *args],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=scaled(120),
        check=False,
    )
    return done, set(json.loads(listed.read_text()))


CHECK_SUBJECTS = {f"bringup.checks.{module}" for module in CHECK_MODULES.values()}


def _top(modules: set[str]) -> set[str]:
    return {m for m in modules if m in AVOIDED or m.split(".")[0] in AVOIDED}


def test_the_health_check_runs_without_typer_click_or_rich(tmp_path: Path) -> None:
    args = ["slurm", "healthcheck", "--node", "n1", "--out", str(tmp_path / "runs")]
    done, loaded = _loaded(tmp_path, *args)
    assert done.returncode == 1, done.stderr  # unfit: no GPU answered
    assert done.stdout.startswith("n1: unfit: bringup: gpu."), done.stdout
    assert "bringup.checks.gpu" in loaded  # it judged, in this process
    assert sorted(_top(loaded)) == []
    # No profile fits a node whose GPU did not answer: its findings are still only those of
    # the two probes it ran, and only their subjects' checks load.
    subjects = {m.split(".")[2] for m in loaded if m.count(".") == 2 and m in CHECK_SUBJECTS}
    assert subjects == {"gpu", "xid"}


def test_a_line_it_does_not_read_goes_to_the_app(tmp_path: Path) -> None:
    done, loaded = _loaded(tmp_path, "slurm", "healthcheck", "--budget-s", "1e1", "--help")
    assert done.returncode == 0, done.stderr
    assert "Is this node fit for the next job?" in done.stdout
    assert {"typer", "bringup.commands.app"} <= loaded


def test_bad_input_is_said_as_the_app_says_it(tmp_path: Path) -> None:
    """A refusal found after the options are read (a suite that does not exist) loads
    the app's error line, not the app: one line on stderr, exit 2."""
    args = ["slurm", "healthcheck", "--suite", "no-such-suite", "--out", str(tmp_path)]
    done, loaded = _loaded(tmp_path, *args)
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "bringup.commands.app" not in loaded


# --- the options: read as the app reads them, or left to it --------------------------------

# Lines the lean path reads; each must give what the app's own parser gives.
READ = [
    [],
    ["--drain"],
    ["--node", "gpu07", "--out", "/var/tmp/hc", "--json"],
    ["-s", "prolog", "-p", "b300", "-o", "runs", "-q"],
    ["--suite=prolog", "--profile=h100", "--budget-s=4", "--keep=3"],
    ["--budget-s", "1"],
    ["--budget-s", "12.5", "--keep", "1", "--node", "a", "--node", "b"],
    ["--drain", "--drain", "--quiet", "--json", "--out=x y"],
    ["--node", "node[01]", "--profile", "./my profile.yaml"],
]
# Lines it leaves to the app: help, unknown options, values the app may read otherwise
# or refuse, forms it does not model.
LEFT = [
    ["--help"],
    ["--nosuch"],
    ["extra"],
    ["--node"],
    ["--node", "--json"],
    ["--node", ""],
    ["--budget-s", "0"],
    ["--budget-s", "0.5"],
    ["--budget-s", "nan"],
    ["--budget-s", "inf"],
    ["--budget-s", "1e1"],
    ["--budget-s", "04"],
    ["--budget-s", "1_0"],
    ["--budget-s", " 5"],
    ["--keep", "0"],
    ["--keep", "-1"],
    ["--keep", "1.5"],
    ["--keep", "01"],
    ["-o=x"],
    ["-ox"],
    ["-qo", "x"],
    ["--drain=1"],
    ["--json=yes"],
    ["--", "--drain"],
    ["-h"],
]


def _app_params(args: list[str]) -> dict[str, object]:
    command = typer.main.get_command(app).commands["slurm"].commands["healthcheck"]  # type: ignore[attr-defined]
    with command.make_context("healthcheck", list(args)) as ctx:
        return dict(ctx.params)


@pytest.mark.parametrize("args", READ, ids=lambda a: " ".join(a) or "(none)")
def test_a_line_it_reads_gives_the_apps_options(args: list[str]) -> None:
    options = healthcheck.parse(args)
    assert options is not None
    assert dataclasses.asdict(options) == _app_params(args)


@pytest.mark.parametrize("args", LEFT, ids=" ".join)
def test_a_line_it_does_not_model_is_left_to_the_app(args: list[str]) -> None:
    assert healthcheck.parse(args) is None


def test_it_knows_every_option_of_the_command_and_no_other() -> None:
    command = typer.main.get_command(app).commands["slurm"].commands["healthcheck"]  # type: ignore[attr-defined]
    names = {opt: param.name for param in command.params for opt in param.opts}
    lean = {**healthcheck._VALUED, **healthcheck._FLAGS}
    assert lean == names
    assert [f.name for f in dataclasses.fields(healthcheck.Options)] == [
        p.name for p in command.params
    ]
    defaults = _app_params([])
    assert dataclasses.asdict(healthcheck.Options()) == defaults


def test_a_completion_or_another_command_is_not_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert healthcheck.answer(["slurm", "render"]) is None
    assert healthcheck.answer(["check", "healthcheck"]) is None
    monkeypatch.setattr(sys, "argv", ["bringup"])
    monkeypatch.setenv("_BRINGUP_COMPLETE", "complete_bash")
    assert healthcheck.answer(["slurm", "healthcheck"]) is None
