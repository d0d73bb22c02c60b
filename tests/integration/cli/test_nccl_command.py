"""`bringup nccl --local` end to end: the real CLI in a child process, two gloo ranks on
this CPU, and its bad input."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.timing import scaled


def bringup_nccl(
    *args: str | Path, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_cli("nccl", *args, timeout=timeout, env=env)


def test_local_gloo_run_json(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = bringup_nccl(
        "--local",
        *(
            "--backend",
            "gloo",
            "--ranks",
            "2",
            "--min-bytes",
            "64K",
            "--max-bytes",
            "256K",
            "--iters",
            "2",
            "-w",
            "1",
        ),
        *("-p", "h100", "--out", out, "--json"),
    )
    # A gloo/CPU collective under a GPU profile is no NCCL measurement: the bandwidth the
    # H100 profile requires is missing, so NOT ACCEPTED (it was ACCEPTED with a SKIP: 2
    # ranks have no floor on an 8-GPU board).
    assert result.returncode == 1, result.stderr
    doc = json.loads(result.stdout)
    assert doc["run_dir"] == str(out) and doc["exit_code"] == 1
    assert doc["verdict"] == "NOT ACCEPTED"
    (found,) = doc["findings"]
    assert (found["check"], found["status"]) == ("nccl.allreduce_busbw", "ERROR")
    assert found["message"].startswith(
        "ran on gloo/CPU, not NCCL: the torch engine's all_reduce over 2 ranks measured the "
        "CPU and its sockets (peak busbw "
    ), found["message"]
    assert found["message"].endswith("the h100 profile's NCCL bandwidth is not measured")
    (facts,) = doc["data"]["facts"].values()
    assert facts["engine"] == "torch" and facts["nranks"] == 2
    assert [r["size_bytes"] for r in facts["rows"]] == [65536, 131072, 262144]
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["command"], manifest["status"], manifest["exit_code"]) == (
        "nccl",
        "complete",
        1,
    )
    assert manifest["probes"] == ["nccl"]  # what a report holds the node to
    assert manifest["provenance"]["mode"] == "live"
    (node_raw,) = (out / "raw").iterdir()
    assert (node_raw / "nccl" / "torch-all_reduce.txt").is_file()


def test_local_human_output_shows_the_curve(tmp_path: Path) -> None:
    result = bringup_nccl(
        "--local",
        *(
            "--backend",
            "gloo",
            "--ranks",
            "2",
            "--min-bytes",
            "64K",
            "--max-bytes",
            "64K",
            "--iters",
            "1",
            "-w",
            "0",
        ),
        *("-p", "b300", "--out", tmp_path / "run"),  # a CPU has no GPU for --profile auto
    )
    assert result.returncode == 1, result.stderr  # gloo: the B300's NCCL bandwidth unmeasured
    assert "ran on gloo/CPU, not NCCL" in " ".join(result.stdout.split())
    assert "busbw out-of-place GB/s" in result.stdout and "64 KiB" in result.stdout
    assert "nccl.allreduce_busbw" in result.stdout


def test_local_run_that_cannot_measure_exits_1(tmp_path: Path) -> None:
    # No GPU is visible and no CPU ranks were asked for: an ERROR finding, exit 1.
    result = bringup_nccl(
        "--local",
        *("--out", tmp_path / "r", "--json"),
        timeout=scaled(120),
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    assert result.returncode == 1, result.stderr
    findings = json.loads(result.stdout)["findings"]
    # The probe's ERROR, and (under --profile auto) no GPU to pick a profile by, its cause named.
    assert {(f["check"], f["status"]) for f in findings} == {
        ("nccl.allreduce_busbw", "ERROR"),
        ("profile.auto", "ERROR"),
    }
    assert all("no NVIDIA GPU found" in f["message"] for f in findings)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "say where to run: --local (this machine) or --nodes hosts.ini"),
        (["--local", "--nodes", "x.ini"], "say where to run"),
        (["--local", "--pairwise"], "--pairwise needs --nodes hosts.ini"),
        (["--local", "--min-bytes", "8Q"], "not a size: '8Q'"),
        (["--local", "-c", "allreduce"], "unknown collective ['allreduce']"),
        (["--local", "--env", "NCCL_ALGO"], "expected NAME=VALUE"),
        (["--local", "-p", "nosuch"], "nosuch"),
        (["--nodes", "/nonexistent/hosts.ini"], "/nonexistent/hosts.ini"),
        (["--local", "--slow-fraction", "2"], "--slow-fraction must be between 0 and 1"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    result = bringup_nccl(*args, "--out", tmp_path / "run")
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines
    assert result.stdout == ""
