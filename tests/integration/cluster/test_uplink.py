"""The uplink probe over a real rate-limited link of the simulated cluster.

node02 runs a real iperf3 server and a real HTTP server (python -m http.server) in its
namespace; node01's link is limited to 100 Mbit/s both ways (tc tbf, SimCluster.limit_rate).
`bringup check --nodes ... --uplink ...` on node01, over SSH as a user runs it, must report
what crossed the limited link, state the time for the dataset, and judge the site's figure.

What crosses the link depends on the machine as well as the limit: on a loaded 2-core CI
machine four TCP streams through tbf have read 88 Mbit/s (retransmits, a starved sender).
So the figure is held to two things that do not move with load: it is exactly what iperf3
itself reported (its own JSON, kept in the run's raw folder), and it lies between half the
limit and just above it. Nothing passes through tbf faster than its rate; a wrong unit
(bytes for bits: 8x) or the unlimited link (Gbit/s) falls outside.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bringup import rundir
from bringup.sim.cluster import SimCluster
from tests.support import REPO
from tests.support.cluster import needs_cluster, run_check
from tests.support.timing import scaled

LINK_BITS = 100_000_000
pytestmark = [
    needs_cluster,
    pytest.mark.skipif(shutil.which("iperf3") is None, reason="no iperf3 (apt-get install iperf3)"),
]


@contextlib.contextmanager
def served(cluster: SimCluster, name: str, argv: list[str], port: int) -> Iterator[None]:
    """A server in the node's namespace until the block ends."""
    netns = cluster.node(name).netns
    proc = subprocess.Popen(
        ["ip", "netns", "exec", netns, *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        end = time.monotonic() + scaled(10)
        while time.monotonic() < end:
            ready = subprocess.run(
                ["ip", "netns", "exec", netns, "ss", "-ltn", f"sport = :{port}"],
                capture_output=True,
                text=True,
            )
            if f":{port}" in ready.stdout:
                break
            time.sleep(0.1)
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=scaled(10))


def uplink_suite(tmp_path: Path, duration_s: float) -> Path:
    suite = yaml.safe_load((REPO / "checks/suites/acceptance.yaml").read_text())
    suite["probes"] = [s for s in suite["probes"] if s["name"] == "uplink"]
    suite["probes"][0]["params"]["duration_s"] = duration_s
    path = tmp_path / "uplink.yaml"
    path.write_text(yaml.safe_dump(suite))
    return path


def site_profile(cluster: SimCluster, tmp_path: Path, min_mbit_s: float) -> Path:
    profile = yaml.safe_load(cluster.profile_path.read_text())
    profile["uplink"] = {"min_mbit_s": min_mbit_s, "dataset_bytes": 512 * 10**9}
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


def through_the_limit(finding: dict[str, object]) -> float:
    """The figure is one the limited link can carry: at most its rate (5 % for tbf's
    burst and rounding), at least half of it."""
    assert finding["unit"] == "Mbit/s"
    value = float(finding["value"])  # type: ignore[arg-type]
    limit = LINK_BITS / 1e6
    assert 0.5 * limit <= value <= 1.05 * limit, finding["message"]
    return value


def iperf3_own_figure(run_dir: Path, node: str) -> float:
    """The receiver's sum in iperf3's own JSON as the run kept it, in Mbit/s."""
    folder = rundir.raw_folder(run_dir, node)
    assert folder is not None, f"no raw folder for {node} in {run_dir}"
    doc = json.loads((folder / "uplink" / "iperf3.json").read_text())
    return float(doc["end"]["sum_received"]["bits_per_second"]) / 1e6


def test_iperf3_and_http_report_the_limited_link(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(2, nvml=False)
    cluster.limit_rate("node01", LINK_BITS)
    server = cluster.node("node02").address
    suite = uplink_suite(tmp_path, duration_s=5)
    common = ["--limit", "node01", "--suite", str(suite)]

    with served(cluster, "node02", ["iperf3", "-s", "-p", "5201"], 5201):
        run = run_check(
            cluster.inventory,
            *common,
            "--uplink",
            f"iperf3://{server}:5201",
            "--out",
            str(tmp_path / "iperf3"),
            profile=site_profile(cluster, tmp_path, min_mbit_s=200),
        )
    (found,) = [f for f in run.doc["findings"] if f["check"] == "uplink.throughput"]
    assert found["status"] == "FAIL", found  # below the site's 200 Mbit/s
    value = through_the_limit(found)
    assert value == pytest.approx(iperf3_own_figure(tmp_path / "iperf3", "node01"), abs=0.05)
    said = f" Mbit/s from iperf3://{server}:5201 (iperf3 download, 5 s, 4 streams): 512 GB "
    assert said + "would take 1" in found["message"]  # 50-105 Mbit/s: 10 h 50 min to 22 h 45 min
    # At the site's 200 Mbit/s: 4.096e12 bit / 2e8 bit/s = 20480 s.
    assert found["message"].endswith(
        "below the site's 200 Mbit/s, at which it would take 5 h 41 min"
    )

    www = tmp_path / "www"
    www.mkdir()
    with (www / "dataset.bin").open("wb") as f:
        f.truncate(200 * 10**6)  # more than 5 s at 100 Mbit/s
    http_server = [
        "python3",
        "-m",
        "http.server",
        "8000",
        "--bind",
        server,
        "--directory",
        str(www),
    ]
    with served(cluster, "node02", http_server, 8000):
        run = run_check(
            cluster.inventory,
            *common,
            "--uplink",
            f"http://{server}:8000/dataset.bin",
            "--out",
            str(tmp_path / "http"),
            profile=site_profile(cluster, tmp_path, min_mbit_s=50),
        )
    (found,) = [f for f in run.doc["findings"] if f["check"] == "uplink.throughput"]
    assert found["status"] == "PASS", found
    through_the_limit(found)
    said = f" Mbit/s from http://{server}:8000/dataset.bin (http download, 5 s): 512 GB would "
    assert said + "take 1" in found["message"]
