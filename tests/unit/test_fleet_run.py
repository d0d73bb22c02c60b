"""The fleet run's worker pool: how many nodes run at once (no nodes reached: a stand-in
runner per node)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bringup.fleet import run as fleet
from bringup.fleet.inventory import Host
from bringup.fleet.plan import plan_node
from bringup.profile import load as load_profile
from bringup.rundir import RunDir
from bringup.suite import load as load_suite


def test_bounded_concurrency_never_runs_more_than_forks_nodes(tmp_path: Path) -> None:
    """Fifty nodes through a pool of 4: at most 4 runners are ever active at once."""
    active = 0
    peak = 0
    lock = threading.Lock()

    def runner(
        request: dict[str, Any], deadline: float, stop: threading.Event, on_stage: fleet.Stage
    ) -> Iterator[dict[str, Any]]:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        on_stage("running")
        time.sleep(0.01)
        with lock:
            active -= 1
        yield {"probe": "xid", "ok": False, "error": "not here", "params": {}}

    suite = load_suite("quick")
    profile = load_profile("b300")
    plans = [
        plan_node(Host(f"n{i:02d}", "127.0.0.1"), runner, suite, profile, remote=False)
        for i in range(50)
    ]
    for plan in plans:
        plan.request = {"probes": plan.request["probes"][-1:]}  # xid only
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    outcomes = fleet.run(plans, run, forks=4)
    assert peak <= 4
    assert [o.node for o in outcomes] == [f"n{i:02d}" for i in range(50)]
    assert {o.state for o in outcomes} == {"complete"}
    assert run.manifest.nodes == [f"n{i:02d}" for i in range(50)]
