"""`bringup check --slurm` on a simulated cluster under a real Slurm: the same findings as
over SSH, the job and its nodes in the manifest, an allocation it asked for released, one
it was started inside kept, and a node that cannot be reached named."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bringup.fleet.node_code import NodeCode, build_node_code
from bringup.sim.cluster import SimCluster
from tests.support import REPO
from tests.support.cli import nodes_of, run_cli, start_cli
from tests.support.cluster import needs_slurm
from tests.support.timing import scaled

pytestmark = [pytest.mark.cluster, pytest.mark.slurm, needs_slurm]

FAULTS = {"node02": "missing_gpu", "node03": "xid79"}
LIVE_SUITE = """\
name: live
description: the probes every simulated node answers for real (its NVML, this machine)
budget_s: 120
probes:
  - name: gpu
    timeout_s: 60
  - name: host
    timeout_s: 30
"""


def _live_suite(tmp_path: Path) -> str:
    path = tmp_path / "live.yaml"
    path.write_text(LIVE_SUITE)
    return str(path)


def _check(cluster: SimCluster, out: Path, *args: str, env: dict[str, str] | None = None):
    argv = ["check", "--json", "--suite", "quick", "--profile", str(cluster.profile_path)]
    done = run_cli(
        *argv,
        "--out",
        str(out),
        *args,
        cwd=REPO,
        env={**os.environ, **cluster.slurm_env(), **(env or {})},
        timeout=scaled(240),
    )
    doc = json.loads(done.stdout) if done.stdout.strip() else {}
    return done, doc


def _judged(doc: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """Every finding without its transport: node, check, status, message (but the host
    probe's messages: it measures this machine's disk and memory live, a moment apart)."""
    return sorted(
        (f["node"], f["check"], f["status"], "" if f["check"].startswith("host.") else f["message"])
        for f in doc["findings"]
    )


def _squeue(cluster: SimCluster) -> list[str]:
    done = cluster.slurm.client("squeue", "-h", "-o", "%i") if cluster.slurm else None
    assert done is not None and done.returncode == 0
    return done.stdout.split()


def _steps_created(cluster: SimCluster) -> int:
    """How many job steps slurmctld has created so far (`sdiag`)."""
    assert cluster.slurm is not None
    for line in cluster.slurm.client("sdiag").stdout.splitlines():
        if line.strip().startswith("REQUEST_JOB_STEP_CREATE"):
            return int(line.split("count:")[1].split()[0])
    return 0


def test_check_slurm_finds_what_check_nodes_finds(
    make_slurm_cluster: Callable[..., SimCluster], tmp_path: Path
) -> None:
    cluster = make_slurm_cluster(4, faults=FAULTS)
    inventory = str(cluster.inventory)
    steps_before = _steps_created(cluster)
    over_slurm, slurm_doc = _check(cluster, tmp_path / "slurm", "--slurm", "--nodes", inventory)
    assert over_slurm.returncode == 1, over_slurm.stderr
    # One wave: a step in which every node says its cache lacks the code, one that brings
    # it to all four and runs them: not a step (or two, with the upload) per node.
    assert _steps_created(cluster) - steps_before == 2
    over_ssh, ssh_doc = _check(cluster, tmp_path / "ssh", "--nodes", inventory)
    assert over_ssh.returncode == 1, over_ssh.stderr
    assert _judged(slurm_doc) == _judged(ssh_doc)
    # The code in every node's cache now: the wave is one step.
    steps_before = _steps_created(cluster)
    again, again_doc = _check(cluster, tmp_path / "again", "--slurm", "--nodes", inventory)
    assert again.returncode == 1, again.stderr
    assert _steps_created(cluster) - steps_before == 1
    assert _judged(again_doc) == _judged(slurm_doc)
    # One node's cached zip changed on the node: it alone says so and is given the zip in
    # a second step; the others ran from their caches in the first.
    code = build_node_code()
    cached = cluster.node("node02").cache_dir / "bringup" / "code" / code.file_name
    cached.write_bytes(b"PK not the controller's zip")
    steps_before = _steps_created(cluster)
    mixed, mixed_doc = _check(cluster, tmp_path / "mixed", "--slurm", "--nodes", inventory)
    assert mixed.returncode == 1, mixed.stderr
    assert _steps_created(cluster) - steps_before == 2
    assert _judged(mixed_doc) == _judged(slurm_doc)
    assert cached.read_bytes() == code.data
    # Not a run that judged nothing: every node, its planted fault and only it.
    failed = {(f["node"], f["check"]) for f in slurm_doc["findings"] if f["status"] == "FAIL"}
    assert failed == {("node02", "gpu.count"), ("node03", "xid.events")}
    manifest = json.loads((tmp_path / "slurm" / "manifest.json").read_text())
    assert manifest["nodes"] == cluster.names
    assert manifest["slurm_nodes"] == cluster.names
    assert manifest["slurm_job_id"].isdigit()
    assert _squeue(cluster) == []  # the allocation it asked for is released


def test_inside_an_allocation_it_uses_it_and_keeps_it(
    make_slurm_cluster: Callable[..., SimCluster], tmp_path: Path
) -> None:
    cluster = make_slurm_cluster(3)
    assert cluster.slurm is not None
    granted = cluster.slurm.client("salloc", "--no-shell", "-N2", "-w", "node01,node03")
    job = granted.stderr.split("Granted job allocation ")[1].split()[0]
    inside = {"SLURM_JOB_ID": job, "SLURM_JOB_NODELIST": "node[01,03]"}
    # No inventory: the nodes are the allocation's, named by Slurm (the same hostname
    # everywhere here); GPU facts from each node's own simulated NVML.
    suite = _live_suite(tmp_path)
    done, doc = _check(cluster, tmp_path / "run", "--slurm", "--suite", suite, env=inside)
    assert done.returncode in (0, 1), done.stderr
    assert sorted({f["node"] for f in doc["findings"]}) == ["node01", "node03"]
    reached = {f["node"]: f["status"] for f in doc["findings"] if f["check"] == "node.reachable"}
    assert reached == {"node01": "PASS", "node03": "PASS"}
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["slurm_job_id"] == job
    assert _squeue(cluster) == [job]  # not ours to release
    cluster.slurm.client("scancel", job)


def test_a_node_whose_slurmd_is_gone_is_named(
    make_slurm_cluster: Callable[..., SimCluster], tmp_path: Path
) -> None:
    cluster = make_slurm_cluster(2)
    assert cluster.slurm is not None
    granted = cluster.slurm.client("salloc", "--no-shell", "-N2")
    job = granted.stderr.split("Granted job allocation ")[1].split()[0]
    cluster.kill_node_processes("node02")  # its slurmd with it: the node crashed
    inside = {"SLURM_JOB_ID": job, "SLURM_JOB_NODELIST": "node[01-02]"}
    suite = _live_suite(tmp_path)
    done, doc = _check(cluster, tmp_path / "run", "--slurm", "--suite", suite, env=inside)
    assert done.returncode in (1, 3), done.stderr
    states = {n: v["state"] for n, v in nodes_of(doc).items()}
    assert states == {"node01": "complete", "node02": "unreachable"}
    reason = nodes_of(doc)["node02"]["reason"]
    assert reason.startswith("srun: "), reason
    cluster.slurm.client("scancel", job)


def test_the_slurm_options_need_slurm(tmp_path: Path) -> None:
    done = run_cli("check", "--nodes", str(tmp_path / "x.ini"), "--partition", "gpu", cwd=REPO)
    assert done.returncode == 2
    assert "--partition is an option of --slurm: give --slurm too" in done.stderr


SHORT_SUITE = """\
name: short
description: one live probe with a short deadline
budget_s: 30
probes:
  - name: host
    timeout_s: 5
"""
WATCH_SUITE = """\
name: watch
description: 8 s of NVML sampling, long enough to freeze the node while it runs
budget_s: 30
probes:
  - name: telemetry
    params:
      seconds: 8
    timeout_s: 10
"""


def test_a_frozen_node_is_unreachable_and_the_job_is_released(
    make_slurm_cluster: Callable[..., SimCluster], tmp_path: Path
) -> None:
    cluster = make_slurm_cluster(2)
    assert cluster.slurm is not None
    suite = tmp_path / "short.yaml"
    suite.write_text(SHORT_SUITE)
    cluster.freeze("node02")  # its slurmd too: the step cannot start there
    try:
        done, doc = _check(
            cluster, tmp_path / "run", "--slurm", "--nodes-count", "2", "--suite", str(suite)
        )
    finally:
        cluster.thaw("node02")
    assert done.returncode == 1, done.stderr
    states = {n: v["state"] for n, v in nodes_of(doc).items()}
    assert states == {"node01": "complete", "node02": "unreachable"}
    assert nodes_of(doc)["node02"]["reason"].startswith("srun: "), nodes_of(doc)["node02"]
    reached = [f for f in doc["findings"] if f["check"] == "node.reachable"]
    assert "slurmd" in next(f["action"] for f in reached if f["node"] == "node02")
    running = cluster.slurm.client("squeue", "-h", "-t", "PD,R", "-o", "%i")
    assert running.stdout.split() == []  # released, though one of its nodes hung


def test_a_node_frozen_mid_probe_is_an_error_at_the_probes_deadline(
    make_slurm_cluster: Callable[..., SimCluster], tmp_path: Path
) -> None:
    cluster = make_slurm_cluster(2, nvml=True)
    suite = tmp_path / "watch.yaml"
    suite.write_text(WATCH_SUITE)
    argv = ["check", "--json", "--profile", str(cluster.profile_path), "--suite", str(suite)]
    argv += ["--out", str(tmp_path / "run"), "--slurm", "--nodes-count", "2"]
    env = {**os.environ, **cluster.slurm_env(), "PYTHONPATH": str(REPO)}
    cli = subprocess.Popen(
        [sys.executable, "-m", "bringup.cli", *argv],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        running = storing(build_node_code())  # the node side's own Python
        assert cluster.wait_for_process("node02", running, scaled(60)) is not None
        cluster.freeze("node02")  # the node side says nothing more; its TCP stays open
        stdout, stderr = cli.communicate(timeout=scaled(120))
    finally:
        cluster.thaw("node02")
        if cli.poll() is None:
            cli.kill()
    doc = json.loads(stdout)
    assert nodes_of(doc)["node01"]["state"] == "complete", stderr
    assert nodes_of(doc)["node02"] == {
        "node": "node02",
        "probes": None,
        "state": "error",
        "reason": "probe telemetry gave no answer within 30 s (node hung or step stuck)",
        "seconds": nodes_of(doc)["node02"]["seconds"],
    }
    assert nodes_of(doc)["node02"]["seconds"] < 60


def started(code: NodeCode) -> str:
    """What the command line of the node side's Python holds (fleet/node_code.py's start
    command: the zip's name, size and sha256)."""
    return f" {code.file_name} {len(code.data)} {code.sha256} "


def storing(code: NodeCode) -> str:
    """The node side of the step that brings the zip (a fresh cluster's first run): it
    stores the zip, then runs the probes in the same Python. The step before it, where the
    node said its cache lacked the zip, has the same start but for this last argument and
    ends at once: a node frozen or killed then is one whose next launch fails."""
    return f"{started(code)}{code.magic} 1 "


def _gone_within(cluster: SimCluster, name: str, text: str, timeout_s: float) -> float | None:
    """Seconds until no process of the node has `text` in its command line; None: still there."""
    from bringup.sim.netns import cmdline

    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if not any(text in cmdline(pid) for pid in cluster.pids(name)):
            return time.monotonic() - start
        time.sleep(0.05)
    return None


def test_ctrl_c_ends_every_step_and_releases_the_job(
    make_slurm_cluster: Callable[..., SimCluster], tmp_path: Path
) -> None:
    cluster = make_slurm_cluster(2, nvml=True)
    assert cluster.slurm is not None
    suite = tmp_path / "watch.yaml"
    suite.write_text(WATCH_SUITE.replace("seconds: 8", "seconds: 60").replace("10\n", "90\n"))
    argv = ["check", "--json", "--profile", str(cluster.profile_path), "--suite", str(suite)]
    argv += ["--out", str(tmp_path / "run"), "--slurm", "--nodes-count", "2"]
    env = {**os.environ, **cluster.slurm_env(), "PYTHONPATH": str(REPO)}
    cli = start_cli(*argv, cwd=REPO, env=env)
    running = storing(build_node_code())
    try:
        for name in cluster.names:
            assert cluster.wait_for_process(name, running, scaled(60)) is not None, name
        cli.send_signal(signal.SIGINT)
        stdout, stderr = cli.communicate(timeout=scaled(60))
    finally:
        if cli.poll() is None:
            cli.kill()
    assert stdout.strip(), stderr[-3000:]
    doc = json.loads(stdout)
    assert {n: v["state"] for n, v in nodes_of(doc).items()} == {
        "node01": "interrupted",
        "node02": "interrupted",
    }, stderr
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    # Nothing of the run is left on the nodes, and the allocation it asked for is gone.
    for name in cluster.names:
        # The node side and its probe (a session of its own, which neither Slurm's process
        # group nor srun's signal reaches: it dies with the node side).
        assert _gone_within(cluster, name, running, scaled(5.0)) is not None, name
    running_jobs = cluster.slurm.client("squeue", "-h", "-t", "PD,R", "-o", "%i")
    assert running_jobs.stdout.split() == []


def test_a_node_whose_slurmd_dies_mid_run_is_its_error_and_the_others_complete(
    make_slurm_cluster: Callable[..., SimCluster], tmp_path: Path
) -> None:
    cluster = make_slurm_cluster(3, nvml=True)
    assert cluster.slurm is not None
    suite = tmp_path / "watch.yaml"
    suite.write_text(WATCH_SUITE)
    argv = ["check", "--json", "--profile", str(cluster.profile_path), "--suite", str(suite)]
    argv += ["--out", str(tmp_path / "run"), "--slurm", "--nodes-count", "3"]
    env = {**os.environ, **cluster.slurm_env(), "PYTHONPATH": str(REPO)}
    cli = start_cli(*argv, cwd=REPO, env=env)
    running = storing(build_node_code())
    try:
        for name in cluster.names:  # all three in the one step, each node side running
            assert cluster.wait_for_process(name, running, scaled(60)) is not None, name
        # Past the zip on stdin (stored on each node): the probes run, srun has nothing
        # more to send node02 and goes on waiting for it. (One that dies while srun still
        # sends it the zip: the next test.)
        code = build_node_code()
        for name in cluster.names:
            stored = cluster.node(name).cache_dir / "bringup" / "code" / code.file_name
            deadline = time.monotonic() + scaled(60)
            while not stored.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert stored.exists(), name
        cluster.kill_node_processes("node02")  # slurmd, slurmstepd, the node side: crashed
        stdout, stderr = cli.communicate(timeout=scaled(120))
    finally:
        if cli.poll() is None:
            cli.kill()
    doc = json.loads(stdout)
    states = {n: v["state"] for n, v in nodes_of(doc).items()}
    assert states == {"node01": "complete", "node02": "error", "node03": "complete"}, stderr
    assert nodes_of(doc)["node02"]["reason"] == (
        "probe telemetry gave no answer within 30 s (node hung or step stuck)"
    )
    errors = {(f["node"], f["check"]) for f in doc["findings"] if f["status"] == "ERROR"}
    assert ("node02", "node.run") in errors
    assert not {n for n, _ in errors} - {"node02"}, errors  # the others' verdicts stand
    running_jobs = cluster.slurm.client("squeue", "-h", "-t", "PD,R", "-o", "%i")
    assert running_jobs.stdout.split() == []  # released, its step with it


def test_a_node_that_dies_while_srun_sends_the_zip_is_its_error_the_others_run_again(
    make_slurm_cluster: Callable[..., SimCluster], tmp_path: Path
) -> None:
    """srun ends the whole step when it loses one node's slurmstepd ("aborting, io error
    with slurmstepd on node 1"): the step's other nodes, cut off without their exit status,
    run again in one new step and are judged on what they measure."""
    cluster = make_slurm_cluster(3, nvml=True)
    assert cluster.slurm is not None
    # node02's link carries the zip (about 0.7 MB) for over ten seconds: it dies with the
    # zip in transit, however slowly this loaded machine runs the test.
    cluster.limit_rate("node02", 500_000)
    suite = tmp_path / "watch.yaml"
    suite.write_text(WATCH_SUITE)
    argv = ["check", "--json", "--profile", str(cluster.profile_path), "--suite", str(suite)]
    argv += ["--out", str(tmp_path / "run"), "--slurm", "--nodes-count", "3"]
    env = {**os.environ, **cluster.slurm_env(), "PYTHONPATH": str(REPO)}
    steps_before = _steps_created(cluster)
    cli = start_cli(*argv, cwd=REPO, env=env)
    code = build_node_code()
    try:
        assert cluster.wait_for_process("node02", storing(code), scaled(60)) is not None
        stored = cluster.node("node02").cache_dir / "bringup" / "code" / code.file_name
        # Frozen first, so that what srun sent it lies unread when it dies: its kernel
        # answers srun with a reset (srun takes a plain end of stream quietly, and waits).
        cluster.freeze("node02")
        time.sleep(scaled(0.5))
        cluster.kill_node_processes("node02")  # slurmd, slurmstepd: crashed
        assert not stored.exists()  # the zip was still on its way
        stdout, stderr = cli.communicate(timeout=scaled(120))
    finally:
        if cli.poll() is None:
            cli.kill()
    doc = json.loads(stdout)
    states = {n: v["state"] for n, v in nodes_of(doc).items()}
    assert states == {"node01": "complete", "node02": "error", "node03": "complete"}, stderr
    reason = nodes_of(doc)["node02"]["reason"]
    assert reason.startswith(
        "the node's task ended without its exit status: srun lost the node's slurmstepd: "
    ), reason
    errors = {(f["node"], f["check"]) for f in doc["findings"] if f["status"] == "ERROR"}
    assert ("node02", "node.run") in errors
    assert not {n for n, _ in errors} - {"node02"}, errors  # the others' verdicts stand
    # The look for the code, the step that brought it (ended by srun), and node01 and
    # node03 again in one step: not a step each.
    assert _steps_created(cluster) - steps_before == 3
    running_jobs = cluster.slurm.client("squeue", "-h", "-t", "PD,R", "-o", "%i")
    assert running_jobs.stdout.split() == []
