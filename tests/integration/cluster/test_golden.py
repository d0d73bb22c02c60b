"""`bringup learn` and `check --golden` on the 8-node simulated cluster: each node's gpu
probe reads its own simulated NVML (through the real pynvml), so one node's driver is
changed the way a driver update changes it, in that node's NVML state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from bringup.sim.nvml import write_state
from tests.support import REPO
from tests.support.cli import run_cli
from tests.support.cluster import needs_cluster, run_check

pytestmark = [needs_cluster, pytest.mark.cluster]


def suite(tmp_path: Path) -> Path:
    """The probes the manifest is learned from: gpu (NVML), host (live), topology (recorded)."""
    quick = yaml.safe_load((REPO / "checks/suites/quick.yaml").read_text())
    quick["probes"] = [s for s in quick["probes"] if s["name"] in ("gpu", "host", "topology")]
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(quick))
    return path


def test_learn_then_a_changed_driver_is_flagged_on_that_node_alone(
    make_cluster, tmp_path: Path
) -> None:
    cluster = make_cluster(8, nvml=True)
    fleet = suite(tmp_path)
    args = ["--suite", str(fleet)]
    first = run_check(
        cluster.inventory, *args, "--out", str(tmp_path / "first"), profile=cluster.profile_path
    )
    assert first.code in (0, 1), first.stderr
    assert not [f for f in first.doc["findings"] if f["check"].startswith("fleet.")]

    golden = tmp_path / "golden.yaml"
    learned = run_cli("learn", str(tmp_path / "first"), "--out", str(golden), "--json", cwd=REPO)
    assert learned.returncode == 0, learned.stderr
    assert json.loads(learned.stdout)["data"]["not_learned"] == {}
    manifest = yaml.safe_load(golden.read_text())
    driver = manifest["node"]["driver_version"]
    assert len(manifest["gpus"]) == 8 and manifest["node"]["kernel"]

    node05 = cluster.node("node05")
    state = json.loads(node05.nvml_state.read_text())
    assert state["driver_version"] == driver
    state["driver_version"] = "580.82.07"  # an older R580 driver left on one node
    write_state(state, node05.nvml_state)

    second = run_check(
        cluster.inventory,
        *args,
        "--golden",
        str(golden),
        "--out",
        str(tmp_path / "second"),
        profile=cluster.profile_path,
    )
    flagged = [
        (f["node"], f["status"], f["message"])
        for f in second.doc["findings"]
        if f["check"] == "fleet.golden" and f["status"] != "PASS"
    ]
    assert flagged == [
        ("node05", "FAIL", f"driver_version is '580.82.07', golden: '{driver}' ({golden})")
    ]
    passed = {f["node"] for f in second.doc["findings"] if f["check"] == "fleet.golden"}
    assert passed == set(cluster.names)
    odd = [
        (f["node"], f["message"])
        for f in second.doc["findings"]
        if f["check"] == "fleet.consistency"
    ]
    assert odd == [("node05", f"driver_version is '580.82.07'; 7 of 8 nodes have '{driver}'")]
