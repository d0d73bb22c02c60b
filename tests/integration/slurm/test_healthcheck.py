"""`bringup slurm healthcheck --drain` on a simulated cluster under a real Slurm, run inside
a node as Slurm runs it (srun, or slurmd's own environment for a drained node, which srun
can no longer reach). Node faults come from each node's simulated NVML.

Done when: a node with a planted fault drains itself, exactly that node, with the reason
`sinfo -R` shows; once the fault is gone the next run resumes it; a node drained by an
operator stays drained with the operator's reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bringup.sim.cluster import SimCluster
from bringup.sim.faults import nvml_state
from bringup.sim.nvml import write_state
from tests.support import REPO
from tests.support.cluster import needs_slurm
from tests.support.timing import scaled

pytestmark = [pytest.mark.cluster, pytest.mark.slurm, needs_slurm]

REMAP = "bringup: gpu.remapped_rows GPU 3 row remap pending"
HEALTHCHECK = [sys.executable, "-m", "bringup.cli", "slurm", "healthcheck", "--drain"]


def _client(
    cluster: SimCluster, *argv: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **cluster.slurm_env(), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        list(argv), env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _in_node(
    cluster: SimCluster, name: str, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """The health check as slurmd runs it on `name` (HealthCheckProgram, Prolog): inside the
    node's namespace, SLURMD_NODENAME set, the node's own tools and simulated NVML."""
    node = cluster.node(name)
    env = {
        **os.environ,
        **cluster.node_env(node),
        **cluster.slurm_env(),
        "SLURMD_NODENAME": name,
        "PYTHONPATH": str(REPO),
    }
    return subprocess.run(
        ["ip", "netns", "exec", node.netns, *HEALTHCHECK, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _states(cluster: SimCluster) -> dict[str, tuple[str, str]]:
    """node -> (state, reason) as sinfo says it, the reason whole."""
    done = _client(cluster, "sinfo", "-h", "-N", "-o", "%N %T %E")
    assert done.returncode == 0, done.stderr
    rows = (line.split(" ", 2) for line in done.stdout.splitlines() if line.strip())
    return {n: (s.rstrip("*"), r) for n, s, r in rows}


def _drained_reasons(cluster: SimCluster) -> dict[str, str]:
    """node -> reason, from `sinfo -R` with the reason column wide enough to read it."""
    done = _client(cluster, "sinfo", "-R", "-h", "-o", "%N|%E")
    assert done.returncode == 0, done.stderr
    return dict(line.split("|", 1) for line in done.stdout.splitlines() if line.strip())


def _wait_idle(cluster: SimCluster, name: str) -> str:
    """A node's state once its last job has left it (draining -> drained)."""
    end = time.monotonic() + scaled(30)
    while time.monotonic() < end:
        state = _states(cluster)[name][0]
        if state not in ("draining", "mixed", "allocated", "completing"):
            return state
        time.sleep(0.5)
    return _states(cluster)[name][0]


def test_a_faulty_node_drains_itself_and_is_resumed_once_it_passes(
    make_slurm_cluster: Callable[..., SimCluster], tmp_path: Path
) -> None:
    cluster = make_slurm_cluster(3, nvml=True)
    write_state(nvml_state("row_remap"), cluster.node("node02").nvml_state)
    out = tmp_path / "hc"
    # Every node checks itself in one job, as a Prolog would: only node02 is unfit.
    done = _client(
        cluster, "srun", "-N3", "--ntasks-per-node=1", "-l", *HEALTHCHECK, "--out", str(out)
    )
    lines = sorted(done.stdout.splitlines())
    assert [line.split(": ", 2)[1:] for line in lines] == [
        ["node01", "fit; run " + lines[0].split("; run ")[1]],
        ["node02", f"unfit: {REMAP} [drained]; run " + lines[1].split("; run ")[1]],
        ["node03", "fit; run " + lines[2].split("; run ")[1]],
    ], done.stderr
    assert done.returncode == 1  # srun: the worst task's exit
    assert _wait_idle(cluster, "node02") == "drained"
    assert _drained_reasons(cluster) == {"node02": REMAP}
    assert {n: s for n, (s, _) in _states(cluster).items()} == {
        "node01": "idle",
        "node02": "drained",
        "node03": "idle",
    }
    # Each run is recorded: its facts, findings and the verdict.
    runs = sorted(out.iterdir())
    assert len(runs) == 3
    assert all((r / "healthcheck.json").is_file() for r in runs)

    # Still faulty: left drained, the reason unchanged.
    again = _in_node(cluster, "node02", "--out", str(out))
    assert again.returncode == 1, again.stderr
    assert again.stdout.startswith(f"node02: unfit: {REMAP}; run ")  # nothing to do
    assert _drained_reasons(cluster) == {"node02": REMAP}

    # The fault repaired: the next run resumes the node it drained.
    write_state(nvml_state("healthy"), cluster.node("node02").nvml_state)
    fixed = _in_node(cluster, "node02", "--out", str(out))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert fixed.stdout.startswith("node02: fit [resumed]; run ")
    assert _drained_reasons(cluster) == {}
    assert _states(cluster)["node02"] == ("idle", "none")


def test_a_node_drained_by_an_operator_stays_drained(
    make_slurm_cluster: Callable[..., SimCluster], tmp_path: Path
) -> None:
    cluster = make_slurm_cluster(2, nvml=True)
    drained = _client(
        cluster, "scontrol", "update", "nodename=node01", "state=drain", "reason=fan swap (ops)"
    )
    assert drained.returncode == 0, drained.stderr
    # Healthy: never resumed, the operator's drain is theirs.
    fit = _in_node(cluster, "node01", "--out", str(tmp_path))
    assert fit.returncode == 0, fit.stderr
    assert fit.stdout.startswith("node01: fit [left drained: drained by someone else]")
    assert _drained_reasons(cluster) == {"node01": "fan swap (ops)"}
    # Faulty too: still unfit by the exit code, the operator's reason kept.
    write_state(nvml_state("row_remap"), cluster.node("node01").nvml_state)
    unfit = _in_node(cluster, "node01", "--out", str(tmp_path))
    assert unfit.returncode == 1
    assert _drained_reasons(cluster) == {"node01": "fan swap (ops)"}
    assert _states(cluster)["node02"] == ("idle", "none")


def test_a_hung_nvidia_smi_drains_the_node_within_the_budget(
    make_slurm_cluster: Callable[..., SimCluster], tmp_path: Path
) -> None:
    cluster = make_slurm_cluster(2, nvml=True)
    cluster.install_tool("node02", "nvidia-smi", "#!/bin/sh\nexec sleep 599\n")
    started = time.monotonic()
    done = _in_node(cluster, "node02", "--budget-s", "6", "--out", str(tmp_path))
    took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    # The budget counts from the command's start; Python's own start comes before it.
    assert took < 6 + scaled(3), took
    reason = _drained_reasons(cluster)["node02"]
    assert reason.startswith("bringup: gpu.count did not finish within the 6 s budget (probe gpu")
    assert _hung_tools(str(cluster.node("node02").bin_dir / "nvidia-smi")) == []


def test_slurmd_runs_it_as_the_health_check_program(
    make_slurm_cluster: Callable[..., SimCluster], tmp_path: Path
) -> None:
    """HealthCheckProgram in slurm.conf: slurmd runs the check with its own environment,
    here through a wrapper that adds the node's (its simulated NVML), as a site's own
    wrapper would set a PATH."""
    cluster = SimCluster(2, tmp_path / "cluster", nvml=True).start()
    try:
        wrapper = tmp_path / "healthcheck.sh"
        slurm_dir = cluster.workdir / "slurm"
        conf = slurm_dir / "slurm.conf"
        wrapper.write_text(
            "#!/bin/sh\n"
            f'. "{slurm_dir}/$SLURMD_NODENAME.env"\n'
            # slurmd gives the program SLURMD_NODENAME and nothing else: where slurm.conf
            # is not /etc/slurm/slurm.conf, the wrapper says where it is.
            f"export PYTHONPATH={REPO} SLURM_CONF={conf}\n"
            f"exec {sys.executable} -m bringup.cli slurm healthcheck --drain"
            f" --out {tmp_path}/hc-$SLURMD_NODENAME\n"
        )
        wrapper.chmod(0o755)
        cluster.start_slurm(
            [
                f"HealthCheckProgram={wrapper}",
                "HealthCheckInterval=5",
                "HealthCheckNodeState=ANY",
            ]
        )
        # Planted once Slurm is up (its start waits for every node to be idle).
        write_state(nvml_state("row_remap"), cluster.node("node01").nvml_state)
        end = time.monotonic() + scaled(60)
        while time.monotonic() < end and "node01" not in _drained_reasons(cluster):
            time.sleep(1)
        assert _drained_reasons(cluster) == {"node01": REMAP}
        write_state(nvml_state("healthy"), cluster.node("node01").nvml_state)
        end = time.monotonic() + scaled(60)
        while time.monotonic() < end and "node01" in _drained_reasons(cluster):
            time.sleep(1)
        assert _drained_reasons(cluster) == {}
        assert (tmp_path / "hc-node02").is_dir()  # the healthy node was checked too
    finally:
        cluster.stop()


def _hung_tools(path: str, wait_s: float = 2.0) -> list[int]:
    """Processes still running the hung tool (or the sleep it became) after `wait_s`: a
    SIGKILLed process takes a moment to go."""
    end = time.monotonic() + wait_s
    while True:
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if path in cmd or cmd.strip() == "sleep 599":
                found.append(int(entry.name))
        if not found or time.monotonic() > end:
            return found
        time.sleep(0.1)


def test_as_prolog_a_faulty_node_refuses_the_job_and_keeps_bringups_reason(
    tmp_path: Path,
) -> None:
    """Prolog in slurm.conf: an unfit node fails the job's prolog (Slurm then drains it
    too); the reason stays bringup's, so a later check resumes it once repaired."""
    cluster = SimCluster(2, tmp_path / "cluster", nvml=True).start()
    try:
        slurm_dir = cluster.workdir / "slurm"
        wrapper = tmp_path / "prolog.sh"
        wrapper.write_text(
            "#!/bin/sh\n"
            f'. "{slurm_dir}/$SLURMD_NODENAME.env"\n'
            f"export PYTHONPATH={REPO}\n"
            f"exec {sys.executable} -m bringup.cli slurm healthcheck --drain"
            f" --out {tmp_path}/hc-$SLURMD_NODENAME\n"
        )
        wrapper.chmod(0o755)
        cluster.start_slurm([f"Prolog={wrapper}", f"Epilog={wrapper}"])
        write_state(nvml_state("row_remap"), cluster.node("node01").nvml_state)
        job = _client(cluster, "srun", "-w", "node01", "-t", "1", "echo", "ran", timeout=scaled(60))
        assert job.returncode != 0
        assert "ran" not in job.stdout
        assert "prolog failed" in job.stderr.lower(), job.stderr
        assert _wait_idle(cluster, "node01") == "drained"
        assert _drained_reasons(cluster) == {"node01": REMAP}
        # A healthy node runs its job: its prolog and epilog pass.
        job = _client(cluster, "srun", "-w", "node02", "-t", "1", "echo", "ran", timeout=scaled(60))
        assert (job.returncode, job.stdout) == (0, "ran\n"), job.stderr
        write_state(nvml_state("healthy"), cluster.node("node01").nvml_state)
        fixed = _in_node(cluster, "node01", "--out", str(tmp_path / "after"))
        assert fixed.stdout.startswith("node01: fit [resumed]"), fixed.stdout + fixed.stderr
        assert _drained_reasons(cluster) == {}
    finally:
        cluster.stop()


def _h200_state() -> dict[str, object]:
    """An 8-GPU H200 node: the recorded H200 capture's GPU (tests/fixtures/smi, real
    nvidia-smi -q), once per slot with its own bus id, UUID and serial."""
    import dataclasses

    from bringup.node.parsers.smi_text import parse_q_text
    from bringup.sim.nvml import state_from_facts
    from tests.support import FIXTURES

    facts = parse_q_text((FIXTURES / "smi" / "ugpuexp-h200-q-load.txt").read_text())
    [gpu] = facts.gpus
    gpus = [
        dataclasses.replace(
            gpu,
            index=i,
            pci_bus_id=f"00000000:{0x18 + 0x10 * i:02X}:00.0",
            uuid=f"{(gpu.uuid or 'GPU-')[:-2]}{i:02d}",
            serial=f"{(gpu.serial or '')[:-1]}{i}",
        )
        for i in range(8)
    ]
    return dict(state_from_facts(dataclasses.replace(facts, gpus=gpus)))


def test_an_h200_node_is_judged_by_its_own_profile_and_left_up(
    make_slurm_cluster: Callable[..., SimCluster], tmp_path: Path
) -> None:
    """The default --profile auto: a healthy H200 is fit, never drained for not being a
    B300 (the default profile once named one model for every node)."""
    cluster = make_slurm_cluster(1, nvml=True)
    write_state(_h200_state(), cluster.node("node01").nvml_state)
    done = _in_node(cluster, "node01", "--out", str(tmp_path / "hc"), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    import json

    doc = json.loads(done.stdout)
    said = [f for f in doc["findings"] if f["check"] == "profile.auto"]
    assert [(f["status"], f["value"]) for f in said] == [("PASS", "h200")]
    assert doc["data"]["healthcheck"]["fit"] is True
    assert _drained_reasons(cluster) == {}
    assert _states(cluster)["node01"][0] == "idle"
