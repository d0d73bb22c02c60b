"""The per-rail ib_write_bw job (`ibperf`): every node's rails measured against a partner's,
NIC i to NIC i, on the pairing of `nccl --pairwise` (bringup/fleet/job.py).

`bringup check` runs it after the suite's probes when the suite names the job (`jobs:
[ibperf]`: the fabric and acceptance suites) and two nodes or more answered. Each node's
rails come from what its probes just recorded: the fabric probe's ACTIVE/LinkUp ports, in
device order (NIC i of one node meets NIC i of the other), the GPU at PIX/PXB of each NIC
from `nvidia-smi topo -m` (the topology probe), and GPUDirect readiness (nvidia_peermem or
DMA-BUF), which puts the buffers in that GPU's memory.

The pairs run as nccl --pairwise's do: first neighbours (an odd node with the first), each
round's node-disjoint pairs at once, each round in its own run directory under the run
(`ibperf-pairs-N/`); then each node with a bad rail again with a node whose rails were all
good (`ibperf-retest-N/`). Both sides of a pair start at once; the first node of a pair is
the server. The rails' figures land in `ibperf.json` of the run, the findings in the run.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bringup import profile as profiles
    from bringup.checks.ibperf import CountersSeen, RailResult
    from bringup.facts import NodeFacts
    from bringup.findings import Finding
    from bringup.fleet.target import Nodes
    from bringup.node.ibperf_facts import IbperfFacts, Rail
    from bringup.rundir import RunDir

JOB = "ibperf"
RESULTS_FILE = "ibperf.json"
STEP_SLACK_S = 60.0  # the probe step's deadline above the probe's own


def node_rails(node: NodeFacts) -> tuple[list[Rail], bool, str | None]:
    """(rails, GPUDirect ready, why none) of one node from its recorded probes."""
    from bringup.facts import FactsError, decode
    from bringup.node.fabric_facts import FabricFacts
    from bringup.node.ibperf_facts import Rail

    record = node.probes.get("fabric")
    if record is None or not record.ok:
        return [], False, "the fabric probe did not run on it"
    try:
        fabric: FabricFacts = decode(record)
    except FactsError as exc:
        return [], False, str(exc)
    nearest = _nearest_gpus(node)
    up = [p for p in fabric.ports if p.state == "ACTIVE" and p.phys_state in ("LinkUp", None)]
    if nearest:  # the compute rails: the NICs at PIX/PXB of a GPU
        up = [p for p in up if p.device in nearest]
    up.sort(key=lambda p: (_natural(p.device), p.port))
    rails = [
        Rail(
            rail=i,
            device=p.device,
            ib_port=p.port,
            gpu=nearest.get(p.device),
            rate_gbit_s=p.rate_gbit_s,
        )
        for i, p in enumerate(up)
    ]
    gd = fabric.gpudirect
    ready = gd is not None and bool(
        gd.peermem_loaded or (gd.dmabuf_kernel and gd.open_kernel_module)
    )
    return rails, ready, None if rails else "no RDMA port ACTIVE/LinkUp"


def _nearest_gpus(node: NodeFacts) -> dict[str, int]:
    """NIC name -> the GPU local to it (PIX/PXB), from topo -m: the GPU-to-NIC map the
    topology checks judge (node/gpu_nic.py), so the job and the checks agree on each rail."""
    from bringup.facts import FactsError, decode
    from bringup.node.gpu_nic import rail_gpus

    record = node.probes.get("topology")
    if record is None or not record.ok:
        return {}
    try:
        topo = decode(record)
    except FactsError:
        return {}
    return rail_gpus(topo)


def _natural(name: str) -> tuple[str, int]:
    """mlx5_2 before mlx5_10."""
    match = re.fullmatch(r"(.*?)(\d+)", name)
    return (match.group(1), int(match.group(2))) if match else (name, -1)


def run_ibperf(
    nodes: Nodes,
    run: RunDir,
    prof: profiles.Profile | str | None,
    params: dict[str, Any] | None = None,
) -> list[Finding]:
    """The job over the nodes of the run that recorded rails; its findings, recorded."""
    from bringup.checks import finding
    from bringup.checks.ibperf import (
        CHECK,
        bad_nodes,
        judge_rail_counters,
        judge_rails,
    )
    from bringup.files import write_atomic
    from bringup.findings import Status
    from bringup.fleet.job import pair_up, retest_pairs

    recorded = {n.node: n for n in run.recorded()}
    rails: dict[str, tuple[list[Rail], bool]] = {}
    findings: list[Finding] = []
    for name in nodes.names:
        node = recorded.get(name)
        if node is None:
            continue  # unreachable: its own finding says so
        found, ready, why = node_rails(node)
        if found:
            rails[name] = (found, ready)
        else:
            findings.append(replace(finding(CHECK, Status.SKIP, f"not measured: {why}"), node=name))
    names = [n for n in nodes.names if n in rails]
    if len(names) < 2:
        for name in names:
            why = "no other node with rails answered: the per-rail job needs two"
            findings.append(replace(finding(CHECK, Status.SKIP, why), node=name))
        run.add_findings(findings)
        return findings
    profiles_by_node = {n: _profile_of(recorded[n], prof) for n in names}
    base = dict(params or {})
    seen: list[CountersSeen] = []
    first = _measure(pair_up(names), nodes, run, rails, base, "pairs", seen)
    suspects = sorted(bad_nodes(first, profiles_by_node), key=names.index)
    good = [n for n in names if n not in suspects]
    retests = _measure(retest_pairs(suspects, good), nodes, run, rails, base, "retest", seen)
    findings += judge_rails(names, first, retests, profiles_by_node)
    findings += judge_rail_counters(names, seen)
    run.add_findings(findings)
    # The nodes judged by their retest: the report shows those figures for them.
    retested = [n for n in suspects if any(r.node == n for r in retests)]
    document = {"retested": retested, "rails": [r.as_json() for r in [*first, *retests]]}
    write_atomic(run.path / RESULTS_FILE, json.dumps(document, indent=2) + "\n")
    return findings


def _profile_of(node: NodeFacts, prof: profiles.Profile | str | None) -> profiles.Profile | None:
    from bringup.profile import Profile

    if isinstance(prof, Profile):
        return prof
    if prof is None:
        return None
    from bringup.checks.auto import judge_node_model

    found, _ = judge_node_model(node)
    return found


def _measure(
    pairs: list[tuple[str, str]],
    nodes: Nodes,
    run: RunDir,
    rails: dict[str, tuple[list[Rail], bool]],
    base: dict[str, Any],
    stage: str,
    seen: list[CountersSeen],
) -> list[RailResult]:
    """Pairs in rounds (no node twice in a round), each round's pairs at once, each round in
    a run directory of its own; every pair's rail results (and, into `seen`, each side's
    counter readings around its tests)."""
    from bringup.checks.ibperf import CountersSeen, pair_results
    from bringup.commands.common import progress_console
    from bringup.fleet.job import rounds
    from bringup.fleet.plan import FleetError, plan_node
    from bringup.fleet.run import run as run_fleet
    from bringup.rundir import RunDir, RunDirError
    from bringup.suite import ProbeStep, Suite

    by_name = {h.name: h for h in nodes.hosts}
    results: list[RailResult] = []
    for index, group in enumerate(rounds(pairs)):
        try:
            sub = RunDir.create(
                _fresh(run.path / f"ibperf-{stage}-{index + 1}"), JOB, run.manifest.profile, None
            )
        except RunDirError as exc:  # a full disk: every pair of the round says so
            for a, b in group:
                results += _unplanned(a, b, f"not run: {exc}", stage, "")
                results += _unplanned(b, a, f"not run: {exc}", stage, "")
            continue
        plans = []
        for a, b in group:
            count = min(len(rails[a][0]), len(rails[b][0]))
            for node, peer, role in ((a, b, "server"), (b, a, "client")):
                own, ready = rails[node]
                params = {
                    **base,
                    "role": role,
                    "peer": peer,
                    "peer_address": by_name[a].address if role == "client" else "",
                    "rails": [_rail_dict(r) for r in own[:count]],
                    "use_cuda": ready,
                    "host_pass": rails[a][1] or rails[b][1],
                }
                timeout = _probe_timeout(params) + STEP_SLACK_S
                step = ProbeStep(name=JOB, params=params, timeout_s=timeout)
                suite = Suite(
                    name=JOB, description="per-rail ib_write_bw", budget_s=timeout, probes=[step]
                )
                try:
                    plans.append(
                        plan_node(
                            by_name[node],
                            nodes.runner(by_name[node]),
                            suite,
                            None,
                            remote=nodes.remote,
                        )
                    )
                except FleetError as exc:
                    results += _unplanned(node, peer, str(exc), stage, sub.path.name)
        # Both sides of every pair of the round at once: a server waits for its client.
        run_fleet(
            plans, sub, forks=max(1, len(plans)), caps=nodes.target.caps, console=progress_console()
        )
        sub.finish("complete", 0)
        for a, b in group:
            found = _sides([a, b], sub)
            results += pair_results((a, found[a]), (b, found[b]), stage, sub.path.name)
            for node, peer in ((a, b), (b, a)):
                side = found[node]
                if not isinstance(side, str):
                    seen.append(CountersSeen(node, peer, side))
    return results


def _fresh(path: Path) -> Path:
    """The sub-run's directory; beside an earlier one (a resumed run), a new name."""
    candidate, again = path, 1
    while candidate.exists():
        again += 1
        candidate = path.with_name(f"{path.name}.{again}")
    return candidate


def _rail_dict(rail: Rail) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(rail)


def _probe_timeout(params: dict[str, Any]) -> float:
    """The probe's own bound: every test's deadline, one after another."""
    from bringup.node.probes.ibperf import Params

    defaults = Params()
    connect = float(params.get("connect_timeout_s", defaults.connect_timeout_s))
    duration = float(params.get("duration_s", defaults.duration_s))
    n = len(params["rails"])
    per_bw = connect + duration + 30.0
    return (2 * n + 1) * per_bw + n * (connect + 60.0)


def _unplanned(node: str, peer: str, why: str, stage: str, where: str) -> list[RailResult]:
    from bringup.checks.ibperf import RailResult

    return [
        RailResult(
            node, peer, -1, "", 0, None, None, "single", None, None, False, why, stage, where
        )
    ]


def _sides(names: list[str], sub: RunDir) -> dict[str, IbperfFacts | str]:
    """Each node's ibperf facts in the sub-run, or why there are none."""
    from bringup.facts import FactsError, decode

    found: dict[str, IbperfFacts | str] = {}
    for name in names:
        record = sub.facts_of(name).probes.get(JOB) if name in sub.manifest.nodes else None
        if record is None:
            found[name] = "no result from this node (unreachable?)"
        elif not record.ok:
            found[name] = record.error or "the ibperf probe failed"
        else:
            try:
                found[name] = decode(record)
            except FactsError as exc:
                found[name] = str(exc)
    return found
