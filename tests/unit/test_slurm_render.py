"""`bringup slurm render`: sbatch scripts from the plan the commands make, every value quoted."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from bringup.fleet import sbatch
from bringup.suite import load
from tests.support.cli import invoke


def _render(*args: str) -> str:
    result = invoke("slurm", "render", *args)
    assert result.exit_code == 0, result.output
    return result.stdout


def _bash_n(script: str, tmp_path: Path) -> None:
    path = tmp_path / "job.sbatch"
    path.write_text(script)
    done = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def _sbatch_lines(script: str) -> dict[str, str]:
    """--option -> value of each #SBATCH line, unquoted as a shell (and sbatch) reads it."""
    found = {}
    for line in script.splitlines():
        if line.startswith("#SBATCH "):
            option, _, value = shlex.split(line[len("#SBATCH ") :])[0].partition("=")
            found[option] = value
    return found


def _command(script: str) -> list[str]:
    return shlex.split(script.rstrip("\n").splitlines()[-1])


def test_the_acceptance_script_runs_the_suite_through_slurm(tmp_path: Path) -> None:
    script = _render("--suite", "acceptance", "--nodes-count", "4", "--partition", "gpu")
    _bash_n(script, tmp_path)
    assert script.startswith("#!/bin/bash\n")
    assert _sbatch_lines(script) == {
        "--job-name": "bringup-acceptance",
        "--nodes": "4",
        "--ntasks-per-node": "1",
        "--exclusive": "",
        "--partition": "gpu",
        # the plan's deadline: every probe's timeout (3870 s) + 60 s, then 300 s of job
        "--time": "1:16:00",
    }
    assert _command(script) == [
        "bringup",
        "check",
        "--slurm",
        "--suite",
        "acceptance",
        "--profile",
        "auto",  # each node judged by its own GPU's profile
        "--out",
        "$run_dir",
    ]
    # The plan in the comment: each probe of the suite with its timeout.
    for step in load("acceptance").probes:
        assert f"#   {step.name:10} up to {round(step.timeout_s)} s\n" in script
    assert 'run_dir=runs/"${SLURM_JOB_ID}"-acceptance\n' in script


def test_every_value_is_quoted_as_sbatch_and_the_shell_read_it(tmp_path: Path) -> None:
    script = _render(
        "--partition",
        "gpu a",
        "--account",
        "it's; rm -rf ~",
        "--nodelist",
        "node[01-04]",
        "--time",
        "2:00:00",
        "--job-name",
        "acc #1",
        "--runs",
        "/shared/runs $HOME",
        "--",
        "--dataset-dir",
        "/data/$(whoami)",
    )
    _bash_n(script, tmp_path)
    lines = _sbatch_lines(script)
    assert lines["--partition"] == "gpu a"
    assert lines["--account"] == "it's; rm -rf ~"
    assert lines["--nodelist"] == "node[01-04]"
    assert lines["--time"] == "2:00:00"
    assert lines["--job-name"] == "acc #1"
    assert "#SBATCH --account='it'\"'\"'s; rm -rf ~'\n" in script
    assert "run_dir='/shared/runs $HOME'/\"${SLURM_JOB_ID}\"-acceptance\n" in script
    assert _command(script)[-4:] == ["--dataset-dir", "/data/$(whoami)", "--out", "$run_dir"]
    assert "--time: as given." in script


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--partition", "gpu\nrm -rf /"),
        ("--account", "a\\b"),
        ("--job-name", "x\ry"),
        ("--runs", "a\x1b[31m"),
    ],
)
def test_a_value_no_quoting_keeps_on_one_line_is_refused(option: str, value: str) -> None:
    result = invoke("slurm", "render", option, value)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert f"error: {option} " in result.stderr
    assert "no control characters or backslashes" in result.stderr


def test_nccl_runs_across_two_nodes_by_default(tmp_path: Path) -> None:
    script = _render("--suite", "nccl", "--", "--backend", "gloo", "--ranks", "1")
    _bash_n(script, tmp_path)
    assert _sbatch_lines(script)["--nodes"] == "2"
    assert _command(script) == [
        "bringup",
        "nccl",
        "--slurm",
        "--profile",
        "auto",
        "--backend",
        "gloo",
        "--ranks",
        "1",
        "--out",
        "$run_dir",
    ]
    assert "#   nccl       up to " in script


def test_nccl_on_one_node_is_refused() -> None:
    result = invoke("slurm", "render", "--suite", "nccl", "--nodes-count", "1")
    assert result.exit_code == 2
    assert "--nodes-count 2 or more" in result.stderr


def test_the_burnin_script_runs_the_recipe(tmp_path: Path) -> None:
    script = _render("--suite", "burnin", "--recipe", "tiny", "--nodes-count", "2")
    _bash_n(script, tmp_path)
    assert _command(script)[:5] == ["bringup", "burnin", "--slurm", "--recipe", "tiny"]
    assert "(recipe tiny)" in script
    assert "#   burnin     up to " in script


@pytest.mark.parametrize(
    "args",
    [
        ["--suite", "no-such-suite"],
        ["--profile", "no-such-profile"],
        ["--suite", "burnin", "--recipe", "no-such-recipe"],
        ["--nodes-count", "0"],
    ],
)
def test_bad_input_is_said_before_any_script(args: list[str]) -> None:
    result = invoke("slurm", "render", *args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: ")


@pytest.mark.parametrize(
    ("seconds", "limit"),
    [
        (1, "0:01:00"),
        (60, "0:01:00"),
        (61, "0:02:00"),
        (4380, "1:13:00"),
        (86400, "1-00:00:00"),
        (90061, "1-01:02:00"),
    ],
)
def test_time_limits_are_whole_minutes_rounded_up(seconds: float, limit: str) -> None:
    assert sbatch.time_limit(seconds) == limit
