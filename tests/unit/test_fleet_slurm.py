"""The Slurm transport's pure parts: the salloc and srun command lines, what Slurm prints,
the --slurm options' refusals, and the simulated cluster's slurm.conf."""

from __future__ import annotations

from pathlib import Path

from bringup.fleet.slurm import (
    SlurmChoice,
    granted_job,
    launch_failure,
    node_addresses,
    salloc_argv,
    srun_argv,
)
from bringup.sim.slurm import SimSlurm, SlurmNode
from tests.support.cli import invoke


def test_salloc_asks_for_what_the_options_say() -> None:
    choice = SlurmChoice(partition="gpu", nodes_count=4, account="acme", time="0:30:00")
    assert salloc_argv(choice, [], "bringup-check") == [
        "salloc",
        "--no-shell",
        "--job-name=bringup-check",
        "--nodes=4",
        "--partition=gpu",
        "--account=acme",
        "--time=0:30:00",
    ]


def test_salloc_for_named_nodes_asks_for_exactly_them() -> None:
    argv = salloc_argv(SlurmChoice(), ["node01", "node03"], "bringup")
    assert argv[-2:] == ["--nodelist=node01,node03", "--nodes=2"]
    argv = salloc_argv(SlurmChoice(nodelist="gpu[1-8]"), [], "bringup")
    assert argv[-1] == "--nodelist=gpu[1-8]"


def test_the_granted_job_is_read_from_salloc() -> None:
    assert granted_job("salloc: Granted job allocation 4711\n") == "4711"
    pending = "salloc: Pending job allocation 12\nsalloc: job 12 queued and waiting\n"
    assert granted_job(pending) is None
    assert granted_job("salloc: error: invalid partition specified: nope\n") is None


def test_each_node_is_one_step_of_one_task() -> None:
    argv = srun_argv("42", "node07", "exec python3 x.zip")
    assert argv[:8] == [
        "srun",
        "--jobid=42",
        "--nodelist=node07",
        "--nodes=1",
        "--ntasks=1",
        "--ntasks-per-node=1",
        "--overlap",
        "--quiet",
    ]
    assert argv[-3:] == ["sh", "-c", "exec python3 x.zip"]


def test_a_launch_failure_is_told_from_the_tasks_exit() -> None:
    failed = (
        "srun: error: Task launch for StepId=3.0 failed on node node02: "
        "Communication connection failure\n"
        "srun: error: Application launch failed: Communication connection failure\n"
    )
    assert launch_failure(failed) == (
        "Task launch for StepId=3.0 failed on node node02: Communication connection failure"
    )
    assert launch_failure("srun: error: node02: task 0: Exited with exit code 97\n") is None
    assert launch_failure("Traceback (most recent call last):\n") is None


def test_the_slurm_options_need_slurm() -> None:
    result = invoke("check", "--nodes", "hosts.ini", "--nodelist", "node[01-02]")
    assert result.exit_code == 2
    assert "--nodelist is an option of --slurm: give --slurm too" in result.stderr
    result = invoke("check", "--slurm", "--local")
    assert result.exit_code == 2
    assert "say where the facts come from" in result.stderr
    result = invoke("check", "--demo", "--slurm")
    assert result.exit_code == 2
    assert "say where the facts come from" in result.stderr
    result = invoke("snapshot", "--time", "1:00:00")
    assert result.exit_code == 2
    assert "--time is an option of --slurm: give --slurm too" in result.stderr


def test_the_simulated_slurm_conf_is_private_to_its_cluster(tmp_path: Path) -> None:
    nodes = [
        SlurmNode("node01", "10.231.7.1", "bu-7-n1", {}),
        SlurmNode("node02", "10.231.7.2", "bu-7-n2", {}),
    ]
    conf = SimSlurm(tmp_path, 7, "bu-7-br", nodes, ["HealthCheckInterval=60"]).slurm_conf()
    lines = conf.splitlines()
    slurm_dir = tmp_path / "slurm"
    # Its sockets beside its run's state file: a short path, whatever tmp_path's length.
    assert "AuthInfo=socket=/run/bringup-simcluster/7.slurm/munge.socket" in lines
    assert f"StateSaveLocation={slurm_dir}/state" in lines
    assert "SlurmdSpoolDir=/run/bringup-simcluster/7.slurm/spool/%n" in lines
    assert "ProctrackType=proctrack/pgid" in lines
    assert "TaskPlugin=task/none" in lines
    assert "HealthCheckInterval=60" in lines
    assert "NodeName=node02 NodeAddr=10.231.7.2 CPUs=1 State=UNKNOWN" in lines
    assert (
        lines[-1] == "PartitionName=sim Nodes=node01,node02 Default=YES MaxTime=INFINITE State=UP"
    )
    assert "/etc/" not in conf
    assert next(x for x in lines if x.startswith("SlurmctldHost=")).endswith("(10.231.7.253)")


def test_a_nodes_address_is_slurms_nodeaddr() -> None:
    listed = (
        "NodeName=node01 Arch=x86_64 CoresPerSocket=1 NodeAddr=10.231.3.1 NodeHostName=vm\n"
        "NodeName=gpu7 Arch=x86_64 NodeAddr=gpu7 NodeHostName=gpu7\n"
    )
    assert node_addresses(listed) == {"node01": "10.231.3.1", "gpu7": "gpu7"}


def test_a_slurm_run_is_not_resumed_over_ssh(tmp_path: Path) -> None:
    from bringup.rundir import RunDir

    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    run.manifest.inventory = str(tmp_path / "hosts.ini")
    run.manifest.slurm_job_id = "17"
    run.save_manifest()
    run.finish("interrupted", 1)
    result = invoke("check", "--resume", str(tmp_path / "run"))
    assert result.exit_code == 2
    assert "a --slurm run cannot be resumed (yet); run it again" in result.stderr
