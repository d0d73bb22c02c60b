"""SIGTERM (what `timeout`, a scheduler or systemd send) ends a run as Ctrl-C does.

benchmarks/gpu_check.sh runs each step under `timeout`: a step that runs out of time must
leave nothing running (the node side, the burn-in probe and the trainer ranks each run in
a session of their own, out of reach of the signal) and a JSON document and run directory
that say the run was interrupted. The burn-in is the deepest tree the controller starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bringup.node.protocol import _descendants
from tests.support.cli import valid_envelope
from tests.support.timing import scaled

# DeepSpeed's CPU op, built once a session (tests/conftest.py), not again by the first rank.
pytestmark = [pytest.mark.burnin, pytest.mark.usefixtures("local_deepspeed_cpu_op")]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for a parent that is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_sigterm_kills_every_process_tree_and_finishes_the_run_as_interrupted(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "bringup.cli", "burnin", "--local", "--recipe", "tiny",
         "--minutes", "10", "--nproc", "2", "--out", out, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    # Wait for the trainer ranks: then the tree is as deep as it gets.
    deadline = time.monotonic() + scaled(240)
    tree: list[int] = []
    while time.monotonic() < deadline and proc.poll() is None:
        tree = _descendants(proc.pid)
        argvs = [_cmdline(p) for p in tree]
        ranks = [a for a in argvs if "burnin.trainer" in a and "distributed.run" not in a]
        if len(ranks) >= 2:
            break
        time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail(f"the trainer ranks never started: {proc.communicate()[1][-2000:]}")
    time.sleep(2)  # the ranks' own children (DeepSpeed's, gloo's) start too
    tree = _descendants(proc.pid)
    assert len(tree) >= 4  # node side, probe, launcher or ranks

    proc.send_signal(signal.SIGTERM)
    try:
        stdout, stderr = proc.communicate(timeout=scaled(60))
    finally:
        # A run that does not end must not outlive its test (its trainers ran on for ten
        # minutes beside the next tests when a deadlock kept the CLI from exiting).
        for pid in [proc.pid, *tree]:
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    assert proc.returncode == 1, stderr[-3000:]
    doc = valid_envelope(json.loads(stdout))
    said = [f["message"] for f in doc["findings"] if f["check"] == "node.run"]
    assert said == ["run interrupted; what was recorded is kept"]
    assert json.loads((out / "manifest.json").read_text())["status"] == "interrupted"
    # Nothing the run started outlives it (reparented to PID 1, it would load the GPU on).
    left = [p for p in tree if _alive(p)]
    assert not left, [_cmdline(p) for p in left]
