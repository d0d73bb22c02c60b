"""The fabric probe and the RDMA tool outputs through the real CLI, on this machine (which
has no RDMA device): `check --suite fabric` and `inspect` (issue 28)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.support import FIXTURES

HOST = socket.gethostname()


@pytest.fixture(scope="module")
def fabric_run(tmp_path_factory: pytest.TempPathFactory, cli):
    if Path("/sys/class/infiniband").is_dir():
        pytest.skip("this machine has RDMA devices: the test is of a node without")
    out = tmp_path_factory.mktemp("fabric") / "run"
    result = cli(
        "check", "--local", "--suite", "fabric", "--profile", "b300", "--out", out, "--json"
    )
    return result, out


def test_a_node_without_rdma_devices_is_never_a_fabric_pass(fabric_run) -> None:
    result, _ = fabric_run
    assert result.code == 1, result.stderr  # no GPU here either: NOT ACCEPTED
    fabric = {f["check"]: f for f in result.json()["findings"] if f["check"].startswith("fabric.")}
    assert {c: f["status"] for c, f in fabric.items()} == {
        "fabric.ports": "SKIP",
        "fabric.counters": "SKIP",
        "fabric.link_flaps": "SKIP",
        "fabric.gpudirect": "SKIP",
        "fabric.write_bw": "SKIP",
        "fabric.acs": "SKIP",
    }
    assert fabric["fabric.ports"]["message"] == (
        "no RDMA devices under /sys/class/infiniband: the b300 profile expects 8 compute "
        "rails at 800 Gb/s, none measured here"
    )


def test_the_fabric_run_keeps_facts_and_raw_outputs(fabric_run) -> None:
    _, out = fabric_run
    facts = json.loads((out / "facts" / f"{HOST}.json").read_text())
    assert list(facts["probes"]) == ["gpu", "host", "topology", "fabric"]
    record = facts["probes"]["fabric"]
    assert record["ok"] is True
    assert record["facts"]["ports"] == [] and record["facts"]["source"] == "sysfs"
    raw = out / "raw" / HOST / "fabric"
    assert sorted(p.name for p in raw.iterdir()) == ["counters.txt", "link-events.txt", "ports.txt"]


def test_inspect_of_an_ibstat_with_a_port_down(cli) -> None:
    capture = FIXTURES / "fabric" / "ibstat-mlx4-cx3-qdr-port2-down.txt"
    result = cli("inspect", capture, "--json")
    assert result.code == 1, result.stderr
    doc = result.json()
    (finding,) = doc["findings"]
    assert (finding["check"], finding["status"]) == ("fabric.ports", "FAIL")
    assert finding["message"] == "mlx4_0 port 2 (Ethernet): DOWN/Disabled, not ACTIVE/LinkUp"


def test_inspect_of_ib_write_bw_judged_by_a_profile(cli) -> None:
    capture = FIXTURES / "fabric" / "ib_write_bw-mlx4-qdr-sweep-mbs.txt"
    result = cli("inspect", capture, "--profile", "a100", "--json")
    assert result.code == 1, result.stderr
    (finding,) = result.json()["findings"]
    assert (finding["check"], finding["status"], finding["value"]) == (
        "fabric.write_bw",
        "FAIL",
        30.75,
    )
