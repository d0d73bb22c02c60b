"""`bringup diagnose --nodes` on simulated nodes: the real CLI, real SSH into network
namespaces, the real gemm probe on each node's CPU (the nodes have no GPU, so their
telemetry is an ERROR "no NVIDIA driver found"), and a node whose sshd is stopped."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bringup.fleet.node_code import build_node_code
from bringup.sim.cluster import SimCluster
from tests.support import REPO
from tests.support.cli import run_cli
from tests.support.cluster import needs_cluster


def bringup_diagnose(cluster: SimCluster, hosts: Path, *args: str) -> tuple[int, dict[str, Any]]:
    argv = ["diagnose", "--nodes", str(hosts), "--json", "--profile", str(cluster.profile_path)]
    argv += ["--out", str(cluster.workdir / "run")]
    proc = run_cli(*argv, *args, cwd=REPO, timeout=180)
    try:
        return proc.returncode, json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"not one JSON document: {proc.stdout[:500]} {proc.stderr}") from None


def by_node(doc: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """node -> check -> finding (each check answers once per node here)."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for f in doc["findings"]:
        checks = found.setdefault(f["node"], {})
        assert f["check"] not in checks, f"two {f['check']} findings for {f['node']}"
        checks[f["check"]] = f
    return found


@needs_cluster
@pytest.mark.cluster
@pytest.mark.skipif(
    subprocess.run([sys.executable, "-c", "import torch"], check=False).returncode != 0,
    reason="the gemm probe needs torch on the nodes (they run this interpreter)",
)
def test_diagnose_over_ssh_with_one_node_down(make_cluster: Callable[..., SimCluster]) -> None:
    cluster = make_cluster(3)
    # The nodes run the probe with this interpreter (torch is installed there), as an
    # inventory says where a node's python is (ansible_python_interpreter).
    hosts = cluster.write_inventory(
        host_vars={name: {"ansible_python_interpreter": sys.executable} for name in cluster.names}
    )
    cluster.stop_sshd("node03")
    code, doc = bringup_diagnose(cluster, hosts, "--seconds", "1", "--interval", "0.1")

    assert code == 1  # the unreachable node
    found = by_node(doc)
    assert sorted(found) == ["node01", "node02", "node03"]
    # The matmul load runs on the nodes' CPU; the sampler reads each node's own simulated
    # NVML (eight healthy B300 GPUs) through the real pynvml, over SSH.
    assert cluster.nvml_library is not None, cluster.nvml_why_not
    for node in ("node01", "node02"):
        checks = found[node]
        assert {c: f["status"] for c, f in checks.items()} == {
            "node.reachable": "PASS",
            "gemm.tflops": "SKIP",
            "gemm.hbm": "SKIP",
            "diagnose.throttle": "PASS",
        }
        assert checks["gemm.tflops"]["message"].startswith(
            "measured on the CPU (no CUDA GPU): "
        ) and checks["gemm.tflops"]["message"].endswith(" TFLOP/s BF16, not comparable")
    down = found["node03"]
    assert list(down) == ["node.reachable"]
    assert down["node.reachable"]["status"] == "UNREACHABLE"
    address = cluster.node("node03").address
    assert down["node.reachable"]["message"] == (
        f"connection refused by {address}:22 (is sshd running?)"
    )
    # CPU figures of nodes sharing one machine are not compared across the fleet.
    assert not any(f["check"] == "diagnose.fleet_straggler" for f in doc["findings"])

    run = Path(doc["run_dir"])
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["nodes"] == cluster.names and manifest["exit_code"] == 1
    # Every node has its facts file; the unreachable one says nothing was measured.
    files = sorted(p.name for p in (run / "facts").iterdir())
    assert files == ["node01.json", "node02.json", "node03.json"]
    assert json.loads((run / "facts" / "node03.json").read_text())["probes"] == {}
    for node in ("node01", "node02"):
        record = json.loads((run / "facts" / f"{node}.json").read_text())["probes"]["gemm"]
        assert record["ok"] and record["params"]["sustain_s"] == 1.0
        assert record["params"]["sample_interval_s"] == 0.1
        facts = record["facts"]
        assert (facts["device"], facts["timing"]) == ("cpu", "wall-clock")
        (gpu,) = facts["gpus"]
        assert gpu["bf16_flops_per_s"] > 0 and gpu["sustained_bf16_flops_per_s"] > 0
        assert gpu["sustained_s"] > 0 and gpu["hbm_bytes_per_s"] > 0
        assert [r["m"] for r in gpu["sweep"]] == [64, 128, 256]
        timeline = facts["timeline"]
        assert timeline["error"] is None and timeline["gpus"] == 8
        assert {sample["gpu"] for sample in timeline["samples"]} == set(range(8))
    written = [json.loads(line) for line in (run / "findings.jsonl").read_text().splitlines()]
    # Written as each node finished (arrival order), the same findings as printed.
    key = lambda f: (f["node"], f["check"])  # noqa: E731
    assert sorted(written, key=key) == sorted(doc["findings"], key=key)


def test_the_shipped_node_side_runs_gemm_with_the_standard_library_alone(tmp_path: Path) -> None:
    """The zip sent over SSH holds bringup/node/probes/**: gemm and telemetry must import from it
    alone (torch only inside collect), in an interpreter that sees nothing of this checkout."""
    code = build_node_code()
    archive = tmp_path / "node.zip"
    archive.write_bytes(code.data)
    names = zipfile.ZipFile(archive).namelist()
    assert "bringup/node/probes/gemm.py" in names and "bringup/node/probes/telemetry.py" in names
    script = (
        "import sys\n"
        f"sys.path.insert(0, {str(archive)!r})\n"
        "import bringup.node.probes.gemm, bringup.node.probes.telemetry\n"
        "import bringup.node.parsers.dmon\n"
        "third = sorted(m.split('.')[0] for m in sys.modules\n"
        "    if m.split('.')[0] not in (*sys.stdlib_module_names, 'bringup', '__main__'))\n"
        "print(' '.join(third) or 'none', bringup.node.probes.gemm.__file__)\n"
    )
    # -I: no PYTHONPATH, no current directory; -S: no site-packages (so no torch, no pynvml).
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    third, where = proc.stdout.split()
    assert third == "none" and where.startswith(str(archive))
