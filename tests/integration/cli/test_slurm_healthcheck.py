"""`bringup slurm healthcheck` on this machine, without Slurm: the verdict, the run it
records and the budget, with GPUs from the simulated NVML (docs/nvmlsim.md) and a
`nvidia-smi` that hangs. The drain itself is tests/integration/slurm/test_healthcheck.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bringup.fleet.local import run_local
from bringup.fleet.transport import TransportError
from bringup.sim.faults import nvml_state
from bringup.sim.nvml import library_env, write_state
from tests.support import REPO
from tests.support.cli import run_cli, valid_envelope
from tests.support.timing import scaled

HANGS = "#!/bin/sh\nexec sleep 597\n"  # a driver call that never returns


def _env(library: Path, state: Path, path_first: Path | None = None) -> dict[str, str]:
    env = {**os.environ, **library_env(library, state), "PYTHONPATH": str(REPO)}
    env.pop("SLURMD_NODENAME", None)
    if path_first is not None:
        env["PATH"] = f"{path_first}:{env['PATH']}"
    return env


def _hanging_smi(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(HANGS)
    smi.chmod(0o755)
    return bin_dir


def _left_running(bin_dir: Path, wait_s: float = 2.0) -> list[int]:
    """The hung tools this test started (their PATH holds its `bin_dir`) still alive after
    `wait_s` (a SIGKILLed process takes a moment to go). Another test's, or another suite's
    running beside this one, are not this test's to judge."""
    end = time.monotonic() + wait_s
    mark = str(bin_dir).encode()
    while True:
        found = []
        for entry in Path("/proc").iterdir():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
                ours = cmd == "sleep 597" and mark in (entry / "environ").read_bytes()
            except (OSError, ValueError):
                continue
            if ours:
                found.append(int(entry.name))
        if not found or time.monotonic() > end:
            return found
        time.sleep(0.1)


def test_a_fault_is_unfit_with_its_reason_and_a_healthy_node_fit(
    nvml_library: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    faulty = write_state(nvml_state("row_remap"), tmp_path / "remap.json")
    done = run_cli(
        "slurm", "healthcheck", "--node", "gpu07", "--out", runs, env=_env(nvml_library, faulty)
    )
    assert done.returncode == 1, done.stderr
    run = next(runs.iterdir())
    assert done.stdout == (
        f"gpu07: unfit: bringup: gpu.remapped_rows GPU 3 row remap pending; run {run}\n"
    )
    verdict = json.loads((run / "healthcheck.json").read_text())
    assert verdict["node"] == "gpu07"
    assert verdict["fit"] is False
    assert verdict["reason"] == "bringup: gpu.remapped_rows GPU 3 row remap pending"
    assert verdict["budget_s"] == 10.0
    assert (run / "facts" / "gpu07.json").is_file()
    manifest = json.loads((run / "manifest.json").read_text())
    assert (manifest["command"], manifest["suite"], manifest["exit_code"]) == (
        "healthcheck",
        "prolog",
        1,
    )

    healthy = write_state(nvml_state("healthy"), tmp_path / "ok.json")
    env = {**_env(nvml_library, healthy), "SLURMD_NODENAME": "node05"}
    done = run_cli("slurm", "healthcheck", "--node", "ignored", "--out", runs, "--json", env=env)
    assert done.returncode == 0, done.stderr
    doc = valid_envelope(json.loads(done.stdout))
    assert doc["exit_code"] == 0
    assert doc["data"]["healthcheck"]["node"] == "node05"  # SLURMD_NODENAME before --node
    assert {f["node"] for f in doc["findings"]} == {"node05"}
    # Under --profile auto the node is judged by its own GPU's profile, and says which.
    assert {f["check"].split(".")[0] for f in doc["findings"]} == {"gpu", "xid", "profile"}
    (chosen,) = [f for f in doc["findings"] if f["check"] == "profile.auto"]
    assert chosen["status"] == "PASS" and "judged by profile b300" in chosen["message"]
    assert len(list(runs.iterdir())) == 2


def test_a_hung_nvidia_smi_is_unfit_within_the_budget(nvml_library: Path, tmp_path: Path) -> None:
    healthy = write_state(nvml_state("healthy"), tmp_path / "ok.json")
    env = _env(nvml_library, healthy, _hanging_smi(tmp_path))
    started = time.monotonic()
    done = run_cli("slurm", "healthcheck", "--budget-s", "4", "--out", tmp_path / "r", env=env)
    took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert "did not finish within the 4 s budget (probe gpu stopped after" in done.stdout
    # The budget is kept on the health check's own clock: the probe stopped within it.
    stopped = re.search(r"probe gpu stopped after ([0-9.]+) s", done.stdout)
    assert stopped is not None and float(stopped.group(1)) < 4, done.stdout
    # The wall time adds the interpreter's start, which a loaded machine stretches: bounded
    # loosely, far below the hung tool's 597 s and any other deadline of the suite.
    assert took < 4 + scaled(10), took
    assert _left_running(tmp_path / "bin") == []


def test_the_local_transports_deadline_ends_every_process_it_started(tmp_path: Path) -> None:
    """The node side's deadline before the probe's: the probe and its tool (each in a session
    of its own) end with it."""
    request = {"probes": [{"name": "gpu", "params": {"timeout_s": 60}, "timeout_s": 30}]}
    os.environ["PATH"], old = f"{_hanging_smi(tmp_path)}:{os.environ['PATH']}", os.environ["PATH"]
    try:
        started = time.monotonic()
        with pytest.raises(TransportError, match="node did not finish within 3 s"):
            list(run_local(request, 3))
        assert time.monotonic() - started < 3 + scaled(2)  # the hung tool sleeps 597 s
    finally:
        os.environ["PATH"] = old
    assert _left_running(tmp_path / "bin") == []


# What the health check must not load (issue 31): it runs at every job start, and each of
# these cost it CPU for nothing. The SSH and Slurm targets and their libraries, Slurm's
# client without --drain, the live progress bar (no terminal under slurmd), the XML parser
# of `nvidia-smi -q -x` (NVML answers), the topology probe (not in the suite).
NOT_LOADED = (
    "paramiko",
    "bringup.fleet.ssh",
    "bringup.fleet.slurm",
    "bringup.fleet.slurmctl",
    "bringup.fleet.target",
    "rich.live",
    "xml.etree.ElementTree",
    "bringup.node.probes.topology",
)
MODULES_AT_EXIT = """\
import atexit, json, sys
listed = sys.argv[1]
atexit.register(lambda: open(listed, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["bringup", *sys.argv[2:]]
from bringup.cli import run
sys.exit(run())
"""


def test_the_health_check_loads_only_what_it_runs(nvml_library: Path, tmp_path: Path) -> None:
    healthy = write_state(nvml_state("healthy"), tmp_path / "ok.json")
    script = tmp_path / "modules.py"
    script.write_text(MODULES_AT_EXIT)
    listed = tmp_path / "modules.json"
    argv = [sys.executable, str(script), str(listed), "slurm", "healthcheck", "--node", "n1"]
    argv += ["--out", str(tmp_path / "runs")]
    env = _env(nvml_library, healthy)
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=scaled(120))
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(listed.read_text()))
    assert "bringup.checks.gpu" in loaded  # the run judged, in this process
    assert sorted(loaded.intersection(NOT_LOADED)) == []


def test_the_local_node_side_is_no_second_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fork of this process: it runs where no python3 could be started again."""
    monkeypatch.setattr("sys.executable", "/nonexistent/python3")
    records = list(run_local({"probes": [{"name": "nope", "timeout_s": 5}]}, 30))
    assert [(r["probe"], r["error"]) for r in records] == [("nope", "unknown probe 'nope'")]
