"""The multi-node burn-in's pure parts: node spread, the joint job's verdict, the requests."""

from __future__ import annotations

import dataclasses

from bringup import recipe as recipes
from bringup.baseline import NodeBaseline
from bringup.checks import burnin_run as nodes
from bringup.commands.burnin import Job, burnin_suite, joint_deepspeed_config, node_params
from bringup.findings import Status
from bringup.fleet.inventory import Host
from bringup.node.probes.burnin import BurninFacts, RankRecord


def node_baseline(node: str, median: float | None) -> NodeBaseline:
    fields: dict = {k: None for k in NodeBaseline.model_fields if k != "telemetry"}
    fields.update(
        node=node, recipe="tiny", device_kind="cpu", world_size=1, steps_measured=6,
        step_time_median_s=median, loss_curve=[], peak_memory_bytes=[],
    )  # fmt: skip
    return NodeBaseline(**fields)


def test_node_spread_warns_for_the_node_behind_the_median() -> None:
    found = nodes.judge_node_spread(
        [node_baseline("n1", 1.0), node_baseline("n2", 1.04), node_baseline("n3", 1.1)]
    )
    assert {f.node: f.status for f in found} == {
        "n1": Status.PASS,
        "n2": Status.PASS,
        "n3": Status.WARN,
    }
    n3 = next(f for f in found if f.node == "n3")
    assert n3.message == (
        "median step time 1.1 s, +5.8% against the nodes' 1.04 s: this node trails the others"
    )
    assert n3.value == 0.0577


def test_node_spread_needs_two_nodes_with_times() -> None:
    assert nodes.judge_node_spread([node_baseline("n1", 1.0), node_baseline("n2", None)]) == []


def facts(error: str | None = None, stopped_by: str | None = "steps", ranks=()) -> BurninFacts:
    return BurninFacts(
        recipe="tiny", world_size=2, nnodes=2, device_kind="cpu", device_name="cpu",
        dtype="fp32", zero_stage=3, seq_len=128, micro_batch=2, grad_accum=2,
        gradient_checkpointing=True, warmup_steps=2, error=error, stopped_by=stopped_by,
        ranks=[RankRecord(rank=r) for r in ranks],
    )  # fmt: skip


def test_job_error_lets_the_joining_node_speak_first() -> None:
    results = {
        "n1": facts(error="trainer exited 1: timed out waiting for clients", stopped_by=None),
        "n2": facts(
            error="trainer exited 1: DistNetworkError: cannot connect to (10.0.0.1, 29518)"
        ),
    }
    reason = nodes.job_error(["n1", "n2"], results)
    assert reason == "n2: trainer exited 1: DistNetworkError: cannot connect to (10.0.0.1, 29518)"
    assert nodes.job_error(["n1", "n2"], {"n1": facts(), "n2": "unreachable: refused"}) == (
        "n2: unreachable: refused"
    )
    assert nodes.job_error(["n1", "n2"], {"n1": facts(), "n2": facts()}) is None
    assert nodes.job_error(["n1", "n2"], {"n1": facts(stopped_by=None), "n2": facts()}) == (
        "n1: the trainer did not report its end"
    )


def test_merge_job_takes_every_nodes_ranks() -> None:
    merged = nodes.merge_job(["n1", "n2"], {"n1": facts(ranks=[0, 1]), "n2": facts(ranks=[3, 2])})
    assert [r.rank for r in merged.ranks] == [0, 1, 2, 3] and merged.nnodes == 2


def test_joint_config_keeps_checkpoints_on_each_node_and_leaves_the_original() -> None:
    config = {"zero_optimization": {"stage": 3}}
    joint = joint_deepspeed_config(config)
    assert joint["checkpoint"] == {"use_node_local_storage": True}
    assert "checkpoint" not in config


def test_each_node_gets_its_work_dir_environment_and_place_in_the_job() -> None:
    recipe = recipes.load("tiny")
    hosts = [
        Host("n1", "10.0.0.1", vars={"bringup_nccl_env": {"NCCL_SOCKET_IFNAME": "ib0"}}),
        Host("n2", "10.0.0.2"),
    ]
    job = Job(recipe, nproc=1, with_gemm=True, node_work_dir="/scratch/", port=29518)
    job.rendezvous_timeout_s = 30.0
    assert [step.name for step in burnin_suite(job).probes] == ["gemm", "burnin"]
    first = node_params(job, hosts, "run1", joint=False)[0]
    # A base and a prefix: the node makes its own private directory there (node/workdir.py).
    assert (first["work_base"], first["work_prefix"]) == ("/scratch/", "run1-n1-")
    assert "work_dir" not in first and first["env"] == {"NCCL_SOCKET_IFNAME": "ib0"}
    assert "nnodes" not in first
    second = node_params(job, hosts, "run1", joint=True)[1]
    assert (second["nnodes"], second["node_rank"], second["master_addr"]) == (2, 1, "10.0.0.1")
    assert (second["master_port"], second["rendezvous_timeout_s"]) == (29518, 30.0)
    assert (second["work_base"], second["work_prefix"]) == ("/scratch/", "run1-n2-")
    assert second["env"] == {}
    # No --node-work-dir: "" for the node's own cache, never a fixed name in /tmp.
    default = node_params(Job(recipe), hosts, "run1", joint=False)[0]
    assert default["work_base"] == ""
    assert second["deepspeed_config"]["checkpoint"] == {"use_node_local_storage": True}


def test_a_joined_node_is_judged_by_its_own_telemetry_within_the_jobs_steps() -> None:
    """A joint job: only rank 0's node records the steps. The other node's record holds its
    ranks and its GPUs' telemetry; judged alone it read as "no data" (burnin.throttle ERROR
    on node02 of every joint burn-in). Its own telemetry decides, on that node."""
    from tests.unit.test_burnin_checks import as_gpu, h200_timeline, recorded

    job = as_gpu(recorded(), h200_timeline())
    timeline = h200_timeline()
    timeline.samples[2].clock_event_reasons = ["hw_thermal_slowdown"]  # edit: node02's GPU2
    joined = dataclasses.replace(as_gpu(recorded(), timeline), steps=[])  # no rank 0 here
    healthy = dataclasses.replace(job, steps=[])
    found = nodes.judge_joined_nodes(
        ["n1", "n2", "n3"], {"n1": job, "n2": joined, "n3": healthy}, job, None
    )
    assert [(f.node, f.check, f.status) for f in found] == [
        ("n2", "burnin.throttle", Status.FAIL),
        ("n3", "burnin.throttle", Status.PASS),
    ]
    assert found[0].message == (
        "GPU2 throttled under load: hw_thermal_slowdown (100% of loaded samples)"
    )
    assert found[1].message == "8 GPUs: no throttling"
    # On the CPU (as the simulated cluster trains) there is nothing to sample: SKIP, not
    # the no-data ERROR.
    cpu = dataclasses.replace(recorded(), steps=[], telemetry=None)
    [skip] = nodes.judge_joined_nodes(["n1", "n2"], {"n1": job, "n2": cpu}, recorded(), None)
    assert (skip.node, skip.status) == ("n2", Status.SKIP)
    assert skip.message == "no telemetry samples: no telemetry recorded"
