"""The fabric suite on a simulated cluster with rails: 4 nodes x 8 ConnectX rails (a sysfs
tree per node), stand-in `ib_write_bw`/`ib_write_lat` that do a real TCP exchange between
the namespaces and print a recorded real output scaled per rail (tests/support/
perftest_sim.py), rail 3 of node02 at half speed.

`bringup check --nodes hosts.ini --suite fabric` runs the probes, then the per-rail job on
the pairing of `nccl --pairwise`: node02's rail 3 is the one FAIL, named by NIC, port and
the GPU behind it; a port counter growing during the run FAILs that port; a planted mlx5
link flap WARNs; a node whose perftest port is firewalled is an ERROR naming its partner,
in bounded time.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from bringup.sim.cluster import SimCluster
from bringup.sim.netns import run_setup
from tests.support.cluster import BAD, needs_cluster, run_check
from tests.support.perftest_sim import counter_file, pci_address, with_rails
from tests.support.timing import scaled

pytestmark = needs_cluster

SLOW = {"node02": {"mlx5_3": 0.5}}
FLAP_LINE = "[18865.848172] mlx5_core {pci} ibp{bus}s0: Link down\n"


def _grow(counter: Path, stop: threading.Event) -> None:
    """A symbol_error counter that keeps counting while the run goes on."""
    value = 0
    while not stop.wait(0.3):
        value += 1
        # Whole or not at all, as sysfs reads are: a truncated file read mid-write would be
        # an unreadable counter, not a grown one.
        fresh = counter.parent.parent / f".{counter.name}.new"  # outside counters/
        fresh.write_text(f"{value}\n")
        os.replace(fresh, counter)


def test_the_slow_rail_is_named_and_nothing_else_fails(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(4)
    bus = pci_address(6).split(":")[1]
    flap = FLAP_LINE.format(pci=pci_address(6), bus=int(bus, 16))
    roots = with_rails(cluster, tmp_path, SLOW, {"node04": flap})
    stop = threading.Event()
    grower = threading.Thread(
        target=_grow, args=(counter_file(roots["node03"], "mlx5_5", "symbol_error"), stop)
    )
    grower.start()
    try:
        result = run_check(
            cluster.inventory,
            "--suite",
            "fabric",
            "--out",
            str(tmp_path / "run"),
            profile=cluster.profile_path,
            timeout_s=scaled(300),
        )
    finally:
        stop.set()
        grower.join()
    doc = result.doc
    bad = sorted(
        (f["node"], f["check"], f["status"]) for f in doc["findings"] if f["status"] in BAD
    )
    # node03's counter grows all along: over the fabric probe's idle window and under the
    # rails' own traffic, each its finding.
    assert bad == [
        ("node02", "fabric.rail_bw", "FAIL"),
        ("node03", "fabric.counters", "FAIL"),
        ("node03", "fabric.rail_counters", "FAIL"),
    ], (bad, [f["message"] for f in doc["findings"] if "counters" in f["check"]])
    (slow,) = result.messages("node02", "fabric.rail_bw")
    assert "rail 3: mlx5_3 port 1, GPU 3" in slow
    assert "384.3 Gb/s alone, 384.3 Gb/s with every rail at once" in slow
    assert "below 750 Gb/s" in slow
    assert "measured with node01, again with node04" in slow
    (grew,) = result.messages("node03", "fabric.counters")
    assert grew.startswith("mlx5_5 port 1") and "symbol_error grew" in grew
    (loaded,) = result.messages("node03", "fabric.rail_counters")
    assert loaded.startswith("rail 5: mlx5_5 port 1: symbol_error grew by")
    # In both its pairs (with node04, then as node01's known-good partner): one finding.
    assert "during the rail tests with node04, node01" in loaded
    for node in ("node01", "node02", "node04"):
        assert result.statuses(node)["fabric.rail_counters"] == "PASS"
    (flapped,) = result.messages("node04", "fabric.link_flaps")
    assert result.statuses("node04")["fabric.link_flaps"] == "WARN"
    assert "mlx5_6" in flapped and "link down 1 time" in flapped
    for node in ("node01", "node03", "node04"):
        (ok,) = result.messages(node, "fabric.rail_bw")
        assert result.statuses(node)["fabric.rail_bw"] == "PASS"
        assert "8 rails" in ok and "768.7-768.7 Gb/s alone" in ok
    assert result.code == 1 and doc["verdict"] == "NOT ACCEPTED"
    assert doc["provenance"]["live"] is False  # stand-in perftest: simulated
    rails = json.loads((tmp_path / "run" / "ibperf.json").read_text())["rails"]
    first = [r for r in rails if r["stage"] == "pairs" and r["mode"] == "single"]
    assert sorted({(r["node"], r["partner"]) for r in first}) == [
        ("node01", "node02"),
        ("node02", "node01"),
        ("node03", "node04"),
        ("node04", "node03"),
    ]
    assert {r["rail"] for r in first} == set(range(8))


def _firewall(cluster: SimCluster, name: str) -> None:
    """Drop the node's incoming perftest connections (TCP 18515 and up); SSH stays open."""
    ruleset = (
        "table inet bringup_sim {\n"
        "  chain input { type filter hook input priority 0; tcp dport 18515-18600 drop; }\n"
        "}\n"
    )
    run_setup(["ip", "netns", "exec", cluster.node(name).netns, "nft", "-f", "-"], ruleset)


def test_a_firewalled_peer_is_an_error_naming_it_never_a_wait(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(2)
    # The first test waits its whole connect deadline on the dead peer: a short one here (5 s,
    # not 20), far below the bound below, which the tests after it would each cost again.
    with_rails(cluster, tmp_path, {}, interval_s=1, connect_timeout_s=5)
    _firewall(cluster, "node01")  # node01 serves the pair: node02 cannot reach it
    result = run_check(
        cluster.inventory,
        "--suite",
        "fabric",
        "--out",
        str(tmp_path / "run"),
        profile=cluster.profile_path,
        timeout_s=scaled(400),
    )
    errors = {
        f["node"]: f["message"]
        for f in result.doc["findings"]
        if f["check"] == "fabric.rail_bw" and f["status"] == "ERROR"
    }
    assert set(errors) == {"node01", "node02"}, result.doc["findings"]
    assert "node01" in errors["node02"] and "no answer from node01" in errors["node02"]
    assert "node02" in errors["node01"]
    # The first test's deadline, then no other test waits on the dead peer.
    assert result.wall_s < scaled(300), result.wall_s
