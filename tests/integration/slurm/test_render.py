"""`bringup slurm render`'s script submitted with a real sbatch: sbatch reads its quoted
#SBATCH values as the shell does, and the job runs the command line the script shows."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bringup.sim.cluster import SimCluster
from tests.support import REPO
from tests.support.cluster import needs_slurm
from tests.support.timing import scaled

pytestmark = [pytest.mark.cluster, pytest.mark.slurm, needs_slurm]

# Stands in for bringup on the nodes: records what the job ran it with, where and as what.
FAKE_BRINGUP = f"""#!{sys.executable}
import json, os, sys
keep = ("SLURM_JOB_NAME", "SLURM_JOB_PARTITION", "SLURM_JOB_NUM_NODES", "SLURM_JOB_ACCOUNT")
doc = {{"argv": sys.argv[1:], "cwd": os.getcwd(), "env": {{k: os.environ.get(k) for k in keep}}}}
with open(os.environ["FAKE_BRINGUP_OUT"], "w") as out:
    json.dump(doc, out)
"""


@pytest.fixture
def short_cluster() -> Iterator[SimCluster]:
    """A cluster whose work directory has a short path: slurmd's batch step makes a Unix
    socket under its spool directory, and pytest's tmp_path is past the 108 bytes allowed."""
    workdir = Path(tempfile.mkdtemp(prefix="bu-sbatch-"))
    cluster = SimCluster(2, workdir, nvml=False, slurm=True)
    try:
        yield cluster.start()
    finally:
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def test_sbatch_reads_the_quoted_values_and_runs_the_command(
    short_cluster: SimCluster, tmp_path: Path
) -> None:
    cluster = short_cluster
    fake = tmp_path / "fake bringup"
    fake.write_text(FAKE_BRINGUP)
    fake.chmod(0o755)
    rendered = subprocess.run(
        [
            sys.executable,
            "-m",
            "bringup.cli",
            "slurm",
            "render",
            "--suite",
            "quick",
            "--nodes-count",
            "2",
            "--partition",
            cluster.slurm.partition if cluster.slurm else "",
            "--job-name",
            "acc #1 it's",
            "--account",
            "ops team",
            "--time",
            "0:05:00",
            "--runs",
            str(tmp_path / "runs dir"),
            "--bringup",
            str(fake),
            "--",
            "--dataset-dir",
            "/data/$(whoami)",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert rendered.returncode == 0, rendered.stderr
    script = tmp_path / "job.sbatch"
    script.write_text(rendered.stdout)
    out = tmp_path / "fake.json"
    env = {**os.environ, **cluster.slurm_env(), "FAKE_BRINGUP_OUT": str(out)}
    done = subprocess.run(
        ["sbatch", "--parsable", str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(60),
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip().split(";")[0]
    # Not `sbatch --wait`: it does not return here (22.05 in a namespace); the job is short.
    end = time.monotonic() + scaled(60)
    while time.monotonic() < end and _in_queue(env, job_id):
        time.sleep(0.5)
    log = tmp_path / f"slurm-{job_id}.out"
    why = subprocess.run(
        ["scontrol", "show", "job", job_id], env=env, capture_output=True, text=True, check=False
    ).stdout
    assert out.is_file(), log.read_text() if log.exists() else why
    doc = json.loads(out.read_text())
    assert doc["argv"] == [
        "check",
        "--slurm",
        "--suite",
        "quick",
        "--profile",
        "auto",  # the default: each node by its own GPU's profile
        "--dataset-dir",
        "/data/$(whoami)",
        "--out",
        f"{tmp_path}/runs dir/{job_id}-quick",
    ]
    assert doc["env"] == {
        "SLURM_JOB_NAME": "acc #1 it's",
        "SLURM_JOB_PARTITION": "sim",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_JOB_ACCOUNT": "ops team",
    }
    assert doc["cwd"] == str(tmp_path)


def _in_queue(env: dict[str, str], job_id: str) -> bool:
    done = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T"],
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(30),
        check=False,
    )
    return done.stdout.strip() not in ("", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")


@pytest.fixture
def short_nvml_cluster() -> Iterator[SimCluster]:
    workdir = Path(tempfile.mkdtemp(prefix="bu-sbatch-"))
    cluster = SimCluster(2, workdir, nvml=True, slurm=True)
    try:
        yield cluster.start()
    finally:
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def test_a_rendered_check_runs_under_sbatch_and_leaves_its_run_directory(
    short_nvml_cluster: SimCluster, tmp_path: Path
) -> None:
    """The script's `bringup check --slurm` uses the allocation sbatch gave it: every node
    judged, one run directory named after the job. The prolog suite stands in for the
    acceptance suite (hours of load on a real node; the same script but for its name)."""
    cluster = short_nvml_cluster
    bringup = tmp_path / "bringup"
    bringup.write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m bringup.cli "$@"\n')
    bringup.chmod(0o755)
    rendered = subprocess.run(
        [
            sys.executable,
            "-m",
            "bringup.cli",
            "slurm",
            "render",
            "--suite",
            "prolog",
            "--nodes-count",
            "2",
            "--partition",
            "sim",
            "--runs",
            str(tmp_path / "runs"),
            "--bringup",
            str(bringup),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert rendered.returncode == 0, rendered.stderr
    script = tmp_path / "job.sbatch"
    script.write_text(rendered.stdout)
    env = {**os.environ, **cluster.slurm_env()}
    done = subprocess.run(
        ["sbatch", "--parsable", str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(60),
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip().split(";")[0]
    end = time.monotonic() + scaled(180)
    while time.monotonic() < end and _in_queue(env, job_id):
        time.sleep(1)
    log = tmp_path / f"slurm-{job_id}.out"
    run = tmp_path / "runs" / f"{job_id}-prolog"
    assert (run / "manifest.json").is_file(), log.read_text() if log.exists() else "no output"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["command"] == "check"
    assert manifest["slurm_job_id"] == job_id
    assert sorted(manifest["nodes"]) == ["node01", "node02"]
    assert sorted(p.name for p in (run / "facts").iterdir()) == ["node01.json", "node02.json"]
    findings = [json.loads(line) for line in (run / "findings.jsonl").read_text().splitlines()]
    assert {f["node"] for f in findings} == {"node01", "node02"}
    assert {f["check"] for f in findings} >= {"gpu.count", "gpu.remapped_rows", "xid.events"}
