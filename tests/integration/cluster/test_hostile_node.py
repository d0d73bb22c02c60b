"""A hostile node on the simulated cluster (issue 23, found 7): a node reporting on itself
that floods the controller with records or files. It answers over real SSH with a node side
of its own (its Python interpreter, as the inventory names it, is a script that prints what
a hostile provider would); what lands on the controller's disk stays within the caps, the
node is an ERROR and the run NOT ACCEPTED, and the honest node beside it is judged as ever.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bringup.sim.cluster import SimCluster
from tests.support.cluster import needs_cluster, run_check

pytestmark = [pytest.mark.cluster]

# Started as the node side is (`python3 -c BOOT ...`, the request framed on stdin), it
# claims the controller's zip is cached, so none is sent, and prints what it likes.
HOSTILE = """#!/bin/sh
exec /usr/bin/python3 -c '{code}'
"""
READ_REQUEST = """
import json, sys
request = json.loads(sys.stdin.buffer.read(int(sys.stdin.buffer.readline())))
sys.stdout.write(json.dumps({"bringup_code": "cached"}) + "\\n")
"""

# 300 records of 1 MiB each, the probes asked for (the request on stdin) over and over.
FLOOD = (
    READ_REQUEST
    + """
names = [step["name"] for step in request["probes"]]
for i in range(300):
    name = names[i % len(names)]
    record = {"probe": name, "ok": True, "raw": {"out%d.txt" % i: "x" * 2**20}}
    sys.stdout.write(json.dumps(record) + "\\n")
    sys.stdout.flush()
"""
)

# One record of the first probe asked for, carrying 20,000 raw files.
FILES = (
    READ_REQUEST
    + """
name = request["probes"][0]["name"]
raw = {"f%05d.txt" % i: "x" for i in range(20000)}
sys.stdout.write(json.dumps({"probe": name, "ok": True, "raw": raw}) + "\\n")
"""
)


def hostile(cluster: SimCluster, code: str) -> Path:
    """node02's inventory entry points its Python at a script that sends `code`'s lines."""
    script = cluster.install_tool("node02", "hostile-python", HOSTILE.format(code=code))
    return cluster.write_inventory(
        cluster.workdir / "hostile.ini",
        host_vars={"node02": {"ansible_python_interpreter": str(script)}},
    )


def asked(run_dir: Path, node: str) -> list[str]:
    """The probes the node was asked to run (the others answer from its recording)."""
    doc = json.loads((run_dir / "facts" / f"{node}.json").read_text())
    return [p for p, r in doc["probes"].items() if "replayed" not in (r.get("params") or {})]


def raw_of(run_dir: Path, node: str) -> tuple[int, int]:
    """(files, bytes) of a node's raw outputs on the controller's disk."""
    folder = run_dir / "raw" / node
    files = [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []
    return len(files), sum(p.stat().st_size for p in files)


@needs_cluster
def test_a_node_flooding_records_stores_at_most_the_cap(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(2)
    inventory = hostile(cluster, FLOOD)
    out = tmp_path / "run"
    args = ["--suite", "quick", "--out", str(out), "--max-raw-mib", "2"]
    run = run_check(inventory, *args, profile=cluster.profile_path, timeout_s=300)
    assert run.code == 1, run.stderr
    assert run.doc["verdict"] == "NOT ACCEPTED"
    files, size = raw_of(out, "node02")
    assert (files, size) == (2, 2 * 2**20)  # two records; the third went past 2 MiB
    (message,) = run.messages("node02", "node.run")
    assert message.startswith("refused: probe ")
    assert "took the node's raw output past the cap of 2 MiB in 2000 files (3 MiB in 3" in message
    assert run.statuses("node02")["node.run"] == "ERROR"
    assert "node.run" not in run.statuses("node01")  # the honest node: complete


@needs_cluster
def test_a_second_record_of_a_probe_is_refused(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(2)
    inventory = hostile(cluster, FLOOD)
    out = tmp_path / "run"
    run = run_check(inventory, "--suite", "quick", "--out", str(out), profile=cluster.profile_path)
    assert run.code == 1, run.stderr
    probes = asked(out, "node02")
    assert len(probes) >= 2
    # One record of each probe asked for; the first probe's second record refused.
    assert raw_of(out, "node02") == (len(probes), len(probes) * 2**20)
    (message,) = run.messages("node02", "node.run")
    assert message.startswith(f"refused: the node sent a second record of probe {probes[0]!r}")


@needs_cluster
def test_a_node_sending_20000_files_stores_none_of_them(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(2)
    inventory = hostile(cluster, FILES)
    out = tmp_path / "run"
    run = run_check(inventory, "--suite", "quick", "--out", str(out), profile=cluster.profile_path)
    assert run.code == 1, run.stderr
    assert raw_of(out, "node02") == (0, 0)
    (message,) = run.messages("node02", "node.run")
    assert "past the cap of 256 MiB in 2000 files (0 MiB in 20000 files)" in message
    assert run.doc["verdict"] == "NOT ACCEPTED"
