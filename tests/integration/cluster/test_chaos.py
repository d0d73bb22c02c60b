"""A chaos run: consecutive `bringup check --nodes` runs on 8 simulated nodes, each with
faults the simulated cluster can inject, one fault per node on nodes drawn afresh for every
run, and at least one node left healthy.

By default every fault kind strikes once, in the order and on the nodes a fixed seed draws
(CHAOS_SEED): the faults are shared out over as few runs as hold them (7 a run), so the
runs that wait on a deadline (a frozen node, a hung fio) wait once, not once per kind. A
thorough run asks for more faults with BRINGUP_CHAOS_FAULTS (20 was the old default): every
kind as many times as fit, the rest drawn at random, from a fresh seed that is printed;
BRINGUP_CHAOS_SEED replays one.

Every run must end within its deadline, give every node the outcome its fault calls for
(reached, UNREACHABLE, or node.run ERROR, with a finding for every check of every probe of a
reached node; a node without a fault is reached, whatever its neighbours suffer), keep what
a node recorded before its fault, and leave no process behind on any node: once the faults
are restored, each node's namespace holds only its sshd.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from bringup.files import InputError
from bringup.jsondata import to_json as record_data
from bringup.rundir import iter_facts
from bringup.sim.cluster import SimCluster, SimClusterError
from bringup.sim.netns import cmdline
from tests.support.cli import nodes_of
from tests.support.cluster import CheckRun, judged_checks, needs_cluster, run_check
from tests.support.timing import scaled

pytestmark = [pytest.mark.cluster]

NODES = 8
# The default runs' seed: each kind once, the same order and nodes every time.
CHAOS_SEED = 1
# The most faults one run carries: one per node, and one node at least stays healthy.
FAULTS_PER_RUN = NODES - 1
PROBES = ("host", "gpu", "nvme")
# The nvme probe (a few 1 s fio runs on 2 MiB) is the one a hung fio or a frozen node sits
# in: its timeout (plus the controller's grace) is what those two runs wait, so it is short.
TIMEOUTS = {"host": 30.0, "gpu": 30.0, "nvme": scaled(15.0)}
# The controller's deadline for a node (fleet/plan.py: the probes' timeouts + 60 s); the
# run may take a connect timeout and the CLI's start on top.
DEADLINE_S = sum(TIMEOUTS.values()) + 60.0
RUN_LIMIT_S = DEADLINE_S + scaled(20.0)  # the product's deadline, plus a slack a load scales
HANGING = "#!/bin/sh\nexec sleep 300\n"
SETTLE_S = 60.0  # a node's leftovers must be gone by then (a probe ends at its deadline)

# What the faulted node's outcome must be: reached (it answered, whatever its findings),
# unreachable, or error (reached, then lost mid-run).
EXPECTED = {
    "sshd_stopped": "unreachable",
    "host_key_swapped": "unreachable",
    "sshd_stopped_mid_run": "reached",  # new connections refused, the running session goes on
    "node_killed_mid_run": "error",
    "frozen_mid_run": "error",
    "hung_tool": "reached",  # fio hangs: the nvme probe ends at its deadline, ERROR
    "packet_loss": "reached",
    "rate_limit": "reached",
    "latency": "reached",
}
MID_RUN = {"sshd_stopped_mid_run", "node_killed_mid_run", "frozen_mid_run"}


@dataclass
class Fault:
    kind: str
    node: str
    recorded: dict[str, Any] | None = None  # the node's facts when a mid-run fault struck
    struck: bool = False


def _suite(path: Path, data: Path) -> Path:
    """host, gpu (the simulated NVML) and a small nvme: seconds per run."""
    nvme = {"paths": [str(data)], "size_bytes": 2 << 20, "checkpoint_bytes": 2 << 20}
    nvme |= {"runtime_s": 1, "ramp_s": 0}
    suite = {
        "name": "chaos",
        "description": "host, gpu and a small nvme, for the chaos run",
        "budget_s": DEADLINE_S,
        "probes": [
            {"name": "host", "timeout_s": TIMEOUTS["host"]},
            {"name": "gpu", "timeout_s": TIMEOUTS["gpu"]},
            {"name": "nvme", "params": nvme, "timeout_s": TIMEOUTS["nvme"]},
        ],
    }
    path.write_text(yaml.safe_dump(suite))
    return path


def _facts(run_dir: Path, node: str) -> dict[str, Any] | None:
    """The node's records as every reader of the run reads them (rundir.iter_facts): the
    run journal's while it runs (it has no facts file until it ends), then its file's."""
    try:
        found = [e.facts for e in iter_facts(run_dir) if e.facts and e.facts.node == node]
    except (OSError, ValueError, InputError):  # not written yet, or its journal just settled
        return None
    return record_data(found[0]) if found else None


def _strike_mid_run(cluster: SimCluster, fault: Fault, run_dir: Path) -> None:
    """Once the node has recorded host and gpu and runs fio: note its facts, then strike."""
    end = time.monotonic() + scaled(60)
    while time.monotonic() < end:
        facts = _facts(run_dir, fault.node)
        answered = facts is not None and {"host", "gpu"} <= set(facts["probes"])
        if answered and cluster.wait_for_process(fault.node, "fio", timeout_s=0.2) is not None:
            fault.recorded = facts
            break
        time.sleep(0.05)
    else:
        return
    if fault.kind == "sshd_stopped_mid_run":
        cluster.stop_sshd(fault.node)
    elif fault.kind == "node_killed_mid_run":
        cluster.kill_node_processes(fault.node)
    elif fault.kind == "frozen_mid_run":
        cluster.freeze(fault.node)
    fault.struck = True


def _inject(cluster: SimCluster, fault: Fault) -> None:
    """The faults that are in place before the run starts."""
    kind, node = fault.kind, fault.node
    if kind == "sshd_stopped":
        cluster.stop_sshd(node)
    elif kind == "host_key_swapped":
        cluster.swap_host_key(node)
    elif kind == "hung_tool":
        cluster.install_tool(node, "fio", HANGING)
    elif kind == "packet_loss":
        cluster.add_loss(node, 10)
    elif kind == "rate_limit":
        cluster.limit_rate(node, 1_000_000)
    elif kind == "latency":
        cluster.add_latency(node, 50)
    fault.struck = kind not in MID_RUN


def _restore(cluster: SimCluster, fault: Fault) -> None:
    kind, node = fault.kind, fault.node
    if kind in ("sshd_stopped", "sshd_stopped_mid_run", "node_killed_mid_run"):
        cluster.start_sshd(node)
    elif kind == "host_key_swapped":
        cluster.trust_host_key(node)
    elif kind == "frozen_mid_run":
        cluster.thaw(node)
    elif kind == "hung_tool":
        (cluster.node(node).bin_dir / "fio").unlink()
    elif kind in ("packet_loss", "rate_limit", "latency"):
        cluster.clear_network_faults(node)


def _outcome(run: CheckRun, node: str) -> str:
    statuses = run.statuses(node)
    if statuses.get("node.reachable") == "UNREACHABLE":
        assert statuses == {"node.reachable": "UNREACHABLE"}, (node, statuses)
        return "unreachable"
    assert statuses.get("node.reachable") == "PASS", (node, statuses)
    # Every check of every probe has its finding: measured, or ERROR "not measured".
    expected = judged_checks(PROBES)
    assert expected <= set(statuses), (node, expected - set(statuses))
    return "error" if statuses.get("node.run") == "ERROR" else "reached"


def _leftovers(cluster: SimCluster) -> dict[str, list[str]]:
    """Each node's processes other than its sshd, after waiting for them to end."""
    end = time.monotonic() + scaled(SETTLE_S)
    while True:
        left = {}
        for name in cluster.names:
            sshd = cluster.node(name).sshd
            others = [p for p in cluster.pids(name) if sshd is None or p != sshd.pid]
            if others:
                left[name] = [f"{p}: {cmdline(p)}" for p in others]
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.25)


def _kinds(cluster: SimCluster) -> list[str]:
    """Every fault kind this machine can inject (latency needs the kernel's netem)."""
    kinds = sorted(EXPECTED)
    try:
        cluster.add_latency(cluster.names[0], 1)
    except SimClusterError as exc:
        print(f"no latency faults here: {exc}")
        kinds.remove("latency")
    cluster.clear_network_faults(cluster.names[0])
    return kinds


def _schedule(rng: random.Random, kinds: list[str], count: int) -> list[str]:
    """`count` faults in random order: every kind as many times as fit (at least once), the
    remaining faults drawn at random."""
    schedule = kinds * max(1, count // len(kinds))
    schedule += [rng.choice(kinds) for _ in range(count - len(schedule))]
    rng.shuffle(schedule)
    return schedule


def _runs(rng: random.Random, schedule: list[str], nodes: list[str]) -> list[list[Fault]]:
    """The faults shared out over as few runs as hold them (FAULTS_PER_RUN each, as even as
    can be), each fault on a node of its own, drawn for every run."""
    count = -(-len(schedule) // FAULTS_PER_RUN)
    runs = []
    for index in range(count):
        kinds = schedule[index::count]
        drawn = rng.sample(nodes, len(kinds))
        runs.append([Fault(kind=k, node=n) for k, n in zip(kinds, drawn, strict=True)])
    return runs


def faults_and_seed(environ: Mapping[str, str]) -> tuple[int | None, int]:
    """How many faults (None: one per fault kind) and the seed: fixed for the default runs,
    fresh when BRINGUP_CHAOS_FAULTS asks for more; BRINGUP_CHAOS_SEED wins either way."""
    count_text = environ.get("BRINGUP_CHAOS_FAULTS", "").strip()
    count = int(count_text) if count_text else None
    if count is not None and count < 1:
        raise ValueError(f"BRINGUP_CHAOS_FAULTS={count_text!r}: give a number >= 1")
    seed_text = environ.get("BRINGUP_CHAOS_SEED", "").strip()
    if seed_text:
        return count, int(seed_text)
    return count, CHAOS_SEED if count is None else time.time_ns() % 1_000_000


@needs_cluster
def test_every_fault_kind_on_a_drawn_node(
    make_cluster: Callable[..., SimCluster], tmp_path: Path
) -> None:
    count, seed = faults_and_seed(os.environ)
    again = f"BRINGUP_CHAOS_SEED={seed}" + (f" BRINGUP_CHAOS_FAULTS={count}" if count else "")
    print(f"\nchaos seed {seed} ({again} replays this run)")
    rng = random.Random(seed)
    cluster = make_cluster(NODES)
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    suite = _suite(tmp_path / "chaos.yaml", data)
    kinds = _kinds(cluster)
    schedule = _schedule(rng, kinds, count or len(kinds))
    assert set(schedule) == set(kinds)
    runs = _runs(rng, schedule, cluster.names)
    faults: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    walls: list[float] = []
    for index, run_faults in enumerate(runs):
        run_dir = tmp_path / f"run{index:02d}"
        strikers, injected = [], []
        try:
            for fault in run_faults:
                _inject(cluster, fault)
                injected.append(fault)
                if fault.kind in MID_RUN:
                    striker = threading.Thread(
                        target=_strike_mid_run, args=(cluster, fault, run_dir), daemon=True
                    )
                    striker.start()
                    strikers.append(striker)
            run = run_check(
                cluster.inventory,
                "--suite",
                str(suite),
                "--out",
                str(run_dir),
                timeout_s=RUN_LIMIT_S + 60,
                profile=cluster.profile_path,
            )
        finally:
            for striker in strikers:
                striker.join()
            for fault in injected:
                _restore(cluster, fault)
        struck = ", ".join(f"{f.kind} on {f.node}" for f in run_faults)
        where = f"run {index} ({struck}; seed {seed})"
        walls.append(run.wall_s)
        print(f"{where}: {run.wall_s:.1f} s, exit {run.code}")
        assert [f.kind for f in run_faults if not f.struck] == [], f"{where}: never struck"
        assert run.code in (0, 1), (where, run.stderr[-2000:])
        assert run.wall_s < RUN_LIMIT_S, where
        assert sorted(nodes_of(run.doc)) == cluster.names, where
        on = {fault.node: fault for fault in run_faults}
        for name in cluster.names:
            outcome = _outcome(run, name)
            wanted = EXPECTED[on[name].kind] if name in on else "reached"
            assert outcome == wanted, (where, name, outcome, nodes_of(run.doc)[name])
            outcomes[outcome] += 1
        for fault in run_faults:
            # What the node recorded before the fault struck is still there, unchanged.
            after = _facts(run_dir, fault.node)
            if fault.recorded is not None:
                assert after is not None, (where, fault.node)
                for probe, record in fault.recorded["probes"].items():
                    assert after["probes"].get(probe) == record, (where, fault.node, probe)
            if EXPECTED[fault.kind] == "reached":
                assert after is not None and set(after["probes"]) == set(PROBES), (
                    where,
                    fault.node,
                )
            faults[fault.kind] += 1
        assert _leftovers(cluster) == {}, where
    print(f"chaos seed {seed}: {len(schedule)} faults in {len(runs)} runs on {NODES} nodes")
    print("faults: " + ", ".join(f"{k} {n}" for k, n in sorted(faults.items())))
    print("outcomes (node x run): " + ", ".join(f"{k} {n}" for k, n in sorted(outcomes.items())))
    print(f"run wall time: max {max(walls):.1f} s, total {sum(walls):.0f} s")
