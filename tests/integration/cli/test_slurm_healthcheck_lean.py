"""`bringup slurm healthcheck` as the entry point runs it, without the Typer app
(bringup/commands/healthcheck.py), says what the whole app says on the same node: a
healthy node, a faulty one drained through Slurm's client, a hung nvidia-smi stopped
within the budget, and bad input. GPUs from the simulated NVML (docs/nvmlsim.md); Slurm's
client is a stand-in that answers `sinfo` and records each `scontrol` call (the drain
under a real Slurm is tests/integration/slurm/test_healthcheck.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bringup.sim.faults import nvml_state
from bringup.sim.nvml import library_env, write_state
from tests.support import REPO
from tests.support.timing import scaled

# The console script as installed; it also lists the modules it loaded (in a file, so
# that stderr is the command's alone).
ENTRY = """\
import atexit, json, os, sys
atexit.register(lambda: open(os.environ["LISTED"], "w").write(json.dumps(sorted(sys.modules))))
sys.argv[0] = "bringup"
from bringup.cli import run
sys.exit(run())
"""
# The whole Typer app, as before the lean path.
THE_APP = """\
import sys
sys.argv[0] = "bringup"
from bringup.commands.app import whole
whole()()
"""
SINFO = "#!/bin/sh\necho 'idle none'\n"
# each call one line, its arguments each followed by "|"
SCONTROL = '#!/bin/sh\nfor a in "$@"; do printf "%s|" "$a"; done >> "$SCONTROL_LOG"\n'
SCONTROL += 'echo >> "$SCONTROL_LOG"\n'
HANGS = "#!/bin/sh\nexec sleep 597\n"
JOURNALCTL = "#!/bin/sh\necho '-- No entries --'\n"
RUN_NAME = re.compile(r"[0-9]{8}T[0-9]{6}Z-healthcheck(-[0-9]+)?")
STOPPED = re.compile(r"stopped after [0-9.]+ s")  # the share left after the start: varies


def _bin(tmp_path: Path, tools: dict[str, str]) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for name, body in tools.items():
        (folder / name).write_text(body)
        (folder / name).chmod(0o755)
    return folder


def _both(tmp_path: Path, env: dict[str, str], *args: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """`bringup ARGS` by the entry point and by the whole app, each with its own copy of
    the runs directory and of Slurm's log: what each printed, exited with, recorded."""
    said = []
    for way, program in (("lean", ENTRY), ("app", THE_APP)):
        where = tmp_path / way
        where.mkdir(parents=True)
        listed = where / "modules.json"
        log = where / "scontrol.log"
        argv = [a.replace("RUNS", str(tmp_path / "runs")) for a in args]
        child_env = {**env, "LISTED": str(listed), "SCONTROL_LOG": str(log)}
        done = subprocess.run(
            [sys.executable, "-c", program, "slurm", "healthcheck", *argv],
            capture_output=True,
            text=True,
            env=child_env,
            stdin=subprocess.DEVNULL,
            timeout=scaled(120),
            check=False,
        )
        loaded = set(json.loads(listed.read_text())) if listed.exists() else None
        said.append(
            {
                "code": done.returncode,
                "stdout": _same(done.stdout),
                "stderr": _same(done.stderr),
                "slurm": log.read_text() if log.exists() else "",
                "typer": None if loaded is None else "typer" in loaded,
            }
        )
    lean, whole = said
    return lean, whole


def _same(text: str) -> str:
    """The output with what differs from run to run written alike: the run's name (its
    start time), seconds measured, the probe's share of what was left of the budget."""
    text = STOPPED.sub("stopped after N s", RUN_NAME.sub("RUN", text))
    if text.startswith("{"):
        doc = json.loads(text)
        if "data" in doc:  # a refusal's document has none
            doc["data"]["healthcheck"]["seconds"] = "N"
        for finding in doc["findings"]:
            finding["message"] = STOPPED.sub("stopped after N s", finding["message"])
        text = json.dumps(doc, indent=2)
    return text


def _env(library: Path, state: Path, path_first: Path | None = None) -> dict[str, str]:
    """The children's environment: the simulated NVML, and one kernel log for both runs.

    The xid probe reads this machine's kernel log, which grows between the two runs a test
    compares (2216 lines, then 2237: the --json document counts them), so both read a
    journalctl that answers as the real one does when the window holds nothing."""
    env = {**os.environ, **library_env(library, state), "PYTHONPATH": str(REPO)}
    env.pop("SLURMD_NODENAME", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    kernel_log = _bin(state.parent, {"journalctl": JOURNALCTL})
    first = dict.fromkeys(str(p) for p in (path_first, kernel_log) if p is not None)
    env["PATH"] = ":".join([*first, env["PATH"]])
    return env


def _alike(lean: dict[str, Any], whole: dict[str, Any], typer_loaded: bool = False) -> None:
    assert lean["typer"] is typer_loaded  # the lean path ran (or, refusing, loaded typer)
    assert whole["typer"] is None  # the app exits past atexit's listing: not listed
    for key in ("code", "stdout", "stderr", "slurm"):
        assert lean[key] == whole[key], key


def test_a_healthy_node_is_fit_either_way(nvml_library: Path, tmp_path: Path) -> None:
    healthy = write_state(nvml_state("healthy"), tmp_path / "ok.json")
    env = _env(nvml_library, healthy)
    lean, whole = _both(tmp_path, env, "--node", "gpu01", "--out", "RUNS")
    _alike(lean, whole)
    assert lean["code"] == 0 and lean["stdout"].startswith("gpu01: fit; run ")
    lean, whole = _both(tmp_path / "json", env, "--node", "gpu01", "--out", "RUNS", "--json")
    _alike(lean, whole)
    assert json.loads(lean["stdout"])["data"]["healthcheck"]["fit"] is True


def test_a_faulty_node_drains_itself_either_way(nvml_library: Path, tmp_path: Path) -> None:
    faulty = write_state(nvml_state("row_remap"), tmp_path / "remap.json")
    slurm = _bin(tmp_path, {"sinfo": SINFO, "scontrol": SCONTROL})
    env = {**_env(nvml_library, faulty, slurm), "SLURMD_NODENAME": "gpu07"}
    lean, whole = _both(tmp_path, env, "--drain", "--out", "RUNS")
    _alike(lean, whole)
    assert lean["code"] == 1
    reason = "bringup: gpu.remapped_rows GPU 3 row remap pending"
    assert lean["stdout"] == f"gpu07: unfit: {reason} [drained]; run {tmp_path / 'runs'}/RUN\n"
    assert lean["slurm"] == f"update|nodename=gpu07|state=drain|reason={reason}|\n"


def test_a_hung_nvidia_smi_is_unfit_within_the_budget_either_way(
    nvml_library: Path, tmp_path: Path
) -> None:
    healthy = write_state(nvml_state("healthy"), tmp_path / "ok.json")
    env = _env(nvml_library, healthy, _bin(tmp_path, {"nvidia-smi": HANGS}))
    lean, whole = _both(tmp_path, env, "--budget-s", "4", "--node", "n1", "--out", "RUNS")
    _alike(lean, whole)
    assert lean["code"] == 1
    assert "did not finish within the 4 s budget (probe gpu stopped after N s)" in lean["stdout"]


@pytest.mark.parametrize(
    "args",
    [
        ["--suite", "no-such-suite"],
        ["--profile", "no-such-profile", "--json"],
        ["--out", "/dev/null/runs"],
    ],
    ids=["suite", "profile-json", "out"],
)
def test_bad_input_is_refused_alike(nvml_library: Path, tmp_path: Path, args: list[str]) -> None:
    healthy = write_state(nvml_state("healthy"), tmp_path / "ok.json")
    lean, whole = _both(tmp_path, _env(nvml_library, healthy), "--node", "n1", *args)
    _alike(lean, whole, typer_loaded=True)
    assert lean["code"] == 2 and lean["stderr"].startswith("error: ")
