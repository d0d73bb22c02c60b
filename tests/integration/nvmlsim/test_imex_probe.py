"""The gpu probe on a GB200 tray, for real: the real pynvml over the simulated NVML built
from NVIDIA's GB200 `-q -x` capture, and the IMEX service read through stand-in
`systemctl` and `nvidia-imex-ctl` printing AWS's real 18-tray report
(tests/fixtures/imex/SOURCES.md), then judged by the gb200 profile.

The simulated cluster has no GB200 nodes (its fleet is HGX B300), so the tray is this one
process's: the same collect() a node runs, with its tools on PATH.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

from bringup.checks.catalog import judge_probe
from bringup.facts import ProbeRecord, decode
from bringup.findings import Status
from bringup.profile import load
from bringup.sim.nvml import state_from_capture
from tests.integration.nvmlsim.conftest import SMI, RunPynvml

IMEX = SMI.parent / "imex" / "aws-pcluster-p6e-gb200-18node-570-ctl-N-up.txt"
GB200_XML = SMI / "k8stestinfra-gb200x4-580-q-x.xml"
THIS_TRAY = "172.31.49.228"  # Node #3 of the report, as this tray's nodes_config.cfg says


def _tray(folder: Path, report: str) -> str:
    """Stand-in IMEX tools and config in `folder`; the child code that collects with them."""
    tools = folder / "bin"
    tools.mkdir(exist_ok=True)
    (folder / "report.txt").write_text(report)
    scripts = {
        "systemctl": "echo active\n",
        "nvidia-imex-ctl": (
            f'case "$1" in -q) echo READY ;; -N) cat "{folder / "report.txt"}" ;; esac\n'
        ),
    }
    for name, body in scripts.items():
        path = tools / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    nodes = folder / "nodes_config.cfg"
    nodes.write_text(
        "".join(line.split()[3] + "\n" for line in report.splitlines() if line.startswith("Node #"))
    )
    config = folder / "config.cfg"
    config.write_text(f"IMEX_NODE_CONFIG_FILE={nodes}\n")
    return f"""
import dataclasses, os
import bringup.node.imex as imex
os.environ["PATH"] = {str(tools)!r} + os.pathsep + os.environ["PATH"]
# This process is the tray at {THIS_TRAY} (no such interface here): its own names, as read.
imex.local_addresses = lambda: ["{THIS_TRAY}"]
from bringup.node.probes.gpu import Params, collect
out.update(dataclasses.asdict(collect(Params(imex_config={str(config)!r})).facts))
"""


def _judged(run_pynvml: RunPynvml, folder: Path, report: str) -> list:
    facts = run_pynvml(state_from_capture(GB200_XML), _tray(folder, report))
    # As the controller gets it: JSON back into the probe's dataclasses.
    decoded = decode(ProbeRecord(probe="gpu", ok=True, facts=json.loads(json.dumps(facts))))
    assert decoded.source == "nvml" and len(decoded.gpus) == 4
    return [f for f in judge_probe("gpu", decoded, None, load("gb200")) if f.check == "gpu.imex"]


def test_a_gb200_tray_in_an_up_domain_passes(run_pynvml: RunPynvml, tmp_path: Path) -> None:
    (finding,) = _judged(run_pynvml, tmp_path, IMEX.read_text())
    assert (finding.status, finding.message) == (
        Status.PASS,
        "IMEX domain UP, 18/18 nodes READY, this node #3 (172.31.49.228) connected to all; "
        "nodes_config.cfg lists it",
    )


def test_a_gb200_tray_whose_imex_is_down_fails(run_pynvml: RunPynvml, tmp_path: Path) -> None:
    report = IMEX.read_text()
    line = next(line for line in report.splitlines() if f" {THIS_TRAY} " in line)
    down = report.replace(
        line, line.replace("READY                - Version: 570.172", "UNAVAILABLE")
    )
    (finding,) = _judged(
        run_pynvml, tmp_path, down.replace("Domain State: UP", "Domain State: DEGRADED")
    )
    assert (finding.status, finding.message) == (
        Status.FAIL,
        "IMEX domain DEGRADED, 17/18 nodes READY: this node #3 (172.31.49.228) UNAVAILABLE",
    )
