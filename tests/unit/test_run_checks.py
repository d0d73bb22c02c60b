"""Judgements only a whole run shows: stragglers, regressions against a baseline, a run
directory with pieces missing. Pure functions over measurements; the report tests run
them on recorded run directories through `bringup report`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bringup.checks.completeness import judge_completeness
from bringup.checks.regression import Known, judge_regressions
from bringup.checks.stragglers import judge_stragglers
from bringup.facts import NodeFacts, ProbeRecord
from bringup.findings import Finding, Status
from bringup.measurements import Identity, NodeMeasurements, XidRow
from bringup.profile import DEFAULT_TOLERANCES
from bringup.report.rundata import RunData
from bringup.rundir import Manifest

# nccl-tests#290, 8x H100 NVLS: in-place busbw at 4 GiB (tests/fixtures/nccl SOURCES.md).
H100_BUSBW = 476.53e9
XID79 = "NVRM: Xid (PCI:0000:ba:00): 79, pid=0, GPU has fallen off the bus."


def node(name: str, busbw: float, serial: str = "1654922004001", *xids: str) -> NodeMeasurements:
    return NodeMeasurements(
        node=name,
        identity=Identity(gpu_count=8, serials=[serial], driver="580.95.05"),
        metrics={"nccl.busbw": busbw},
        xids=[XidRow(xid=79, line=line) for line in xids],
    )


def test_a_node_below_the_fleet_median_is_a_straggler() -> None:
    fleet = [node("n1", H100_BUSBW), node("n2", H100_BUSBW), node("n3", 0.9 * H100_BUSBW)]
    (f,) = judge_stragglers(fleet, DEFAULT_TOLERANCES)
    assert (f.node, f.check, f.status, f.value, f.unit) == (
        "n3",
        "fleet.nccl.busbw",
        Status.WARN,
        428.88,
        "GB/s",
    )
    assert f.message == (
        "NCCL all_reduce busbw (>= 1 GiB) 428.88 GB/s is 10.0% below the fleet median "
        "476.53 GB/s (tolerance 5%, 3 nodes)"
    )
    # Within 5% of the median is no straggler; two nodes have no median to speak of.
    assert judge_stragglers([*fleet[:2], node("n3", 0.96 * H100_BUSBW)], DEFAULT_TOLERANCES) == []
    assert judge_stragglers(fleet[1:], DEFAULT_TOLERANCES) == []


def test_a_node_that_cannot_be_compared_is_an_error_not_nothing_changed() -> None:
    then = [node("n1", H100_BUSBW)]  # n2's facts file in the baseline does not parse
    now = [node("n1", H100_BUSBW), node("n2", 0.5 * H100_BUSBW)]
    findings = judge_regressions(
        now,
        then,
        DEFAULT_TOLERANCES,
        "old",
        known_now=Known(["n1", "n2"]),
        known_then=Known(["n1", "n2"], {"n2": "facts/n2.json unreadable"}),
    )
    assert [(f.node, f.check, f.status, f.message) for f in findings] == [
        (
            "n2",
            "baseline.compare",
            Status.ERROR,
            "cannot compare n2: facts unreadable in the baseline old (facts/n2.json "
            "unreadable): what changed on it since handover is unknown",
        )
    ]


def test_a_baseline_of_other_nodes_compares_nothing_and_says_so_once() -> None:
    findings = judge_regressions(
        [node("n1", H100_BUSBW)], [node("m1", H100_BUSBW)], DEFAULT_TOLERANCES, "old"
    )
    assert [(f.node, f.check, f.status, f.message) for f in findings] == [
        (
            "",
            "baseline.compare",
            Status.ERROR,
            "the baseline old has no node in common with this run: nothing was compared "
            "(there: m1; here: n1)",
        )
    ]


def test_regressions_identity_new_xids_and_missing_nodes() -> None:
    then = [node("n1", H100_BUSBW), node("n2", H100_BUSBW, "1654922004001", XID79)]
    now = [
        node("n1", 0.9 * H100_BUSBW),
        node("n2", 1.2 * H100_BUSBW, "1654922004999", XID79, XID79.replace("ba", "bb")),
    ]
    findings = judge_regressions(now, [*then, node("n3", H100_BUSBW)], DEFAULT_TOLERANCES, "old")
    assert [(f.node, f.check, f.status) for f in findings] == [
        ("n1", "baseline.nccl.busbw", Status.FAIL),  # n2 got faster: no regression
        ("n2", "baseline.identity", Status.WARN),
        ("n2", "baseline.xid", Status.FAIL),  # the Xid 79 seen at handover is not new
        ("n3", "baseline.node", Status.ERROR),
    ]
    assert findings[0].message == (
        "NCCL all_reduce busbw (>= 1 GiB) down 10.0% since the baseline old: "
        "428.88 GB/s now, 476.53 GB/s then (tolerance 5%)"
    )
    assert findings[1].message == (
        "changed since the baseline old: GPU 0 serial 1654922004001 -> 1654922004999"
    )
    assert findings[2].value == 1


def test_what_a_run_directory_lacks_is_an_error() -> None:
    manifest = Manifest(
        command="check", profile="b300", suite="quick", started_at="T", nodes=["n1", "n2"]
    )
    recorded = {
        "n1": NodeFacts(
            node="n1",
            bringup_version="0",
            collected_at="T",
            probes={p: ProbeRecord(probe=p, ok=True) for p in ("gpu", "topology", "host", "xid")},
        ),
        "n2": NodeFacts(node="n2", bringup_version="0", collected_at="T"),
    }
    run = RunData(
        Path("runs/r1"),
        manifest,
        recorded,
        None,
        findings_problem="findings.jsonl is missing: the run was never judged",
        planned=["gpu", "topology", "host", "xid"],
    )
    findings = judge_completeness(run)
    assert [(f.node, f.check, f.status) for f in findings] == [
        ("", "report.run", Status.ERROR),
        ("", "report.findings", Status.ERROR),
        *[("n2", "report.missing", Status.ERROR)] * 4,  # one per piece missing
    ]
    assert findings[1].action == "judge the recorded facts again: `bringup check --replay runs/r1`"
    assert [f.message for f in findings if f.node == "n2"] == [
        f"not measured: probe {p!r} has no record on n2 (it did not run or did not finish)"
        for p in ("gpu", "topology", "host", "xid")
    ]
    # Nothing at all: no manifest, no node.
    bare = RunData(Path("r"), None, {}, [], manifest_problem="manifest.json is missing")
    assert [(f.check, f.status) for f in judge_completeness(bare)] == [
        ("report.manifest", Status.ERROR),
        ("report.nodes", Status.ERROR),
    ]


def test_a_run_is_held_to_its_recorded_plan_and_profile() -> None:
    """The manifest's own probe list is the plan (a replay keeps the original's); no plan or
    no profile is an ERROR, except for provisioning, which judges no thresholds."""
    recorded = {"n1": NodeFacts(node="n1", bringup_version="0", collected_at="T")}

    def gaps(manifest: Manifest, planned: list[str] | None) -> list[tuple[str, str, str]]:
        judged = [Finding(node="n1", check="burnin.run", status=Status.PASS, message="ok")]
        run = RunData(Path("r"), manifest, recorded, judged, planned=planned)
        return [(f.node, f.check, f.message) for f in judge_completeness(run)]

    burnin = Manifest(command="burnin", started_at="T", nodes=["n1"], status="complete")
    assert [check for _, check, _ in gaps(burnin, None)] == ["report.suite", "report.profile"]
    provision = replace(burnin, command="provision")
    assert [check for _, check, _ in gaps(provision, [])] == []
    judged = replace(burnin, profile="h200")
    assert gaps(judged, ["burnin"]) == [
        (
            "n1",
            "report.missing",
            "not measured: probe 'burnin' has no record on n1 (it did not run or did not finish)",
        )
    ]


def burnin_facts(name: str, device_kind: str) -> NodeFacts:
    record = ProbeRecord(probe="burnin", ok=True, facts={"device_kind": device_kind})
    return NodeFacts(node=name, bringup_version="0", collected_at="T", probes={"burnin": record})


def bad(node: str, check: str, message: str = "bad") -> Finding:
    return Finding(node=node, check=check, status=Status.ERROR, message=message)


def test_a_cpu_burnin_says_its_missing_profile_once_in_burnin_mfu() -> None:
    """One cause, one finding: a CPU has no profile, and burnin.mfu says so with the action
    that fits ("run the burn-in on the GPUs"); report.profile ("give --profile NAME", which
    no CPU has) no longer repeats it. Never ACCEPTED all the same: burnin.mfu is an ERROR."""
    manifest = Manifest(command="burnin", started_at="T", nodes=["n1"], status="complete")

    def checks(kind: str, findings: list[Finding]) -> list[str]:
        facts = {"n1": burnin_facts("n1", kind)}
        run = RunData(Path("r"), manifest, facts, findings, planned=["burnin"])
        return [f.check for f in judge_completeness(run)]

    mfu = bad("n1", "burnin.mfu", "0.1 GFLOP/s of model FLOPs per GPU on cpu: a CPU burn-in")
    ran = Finding(node="n1", check="burnin.run", status=Status.PASS, message="8 steps")
    assert checks("cpu", [ran, mfu]) == []
    # Its burnin.mfu lost (an edited findings.jsonl): report.profile stands again.
    assert checks("cpu", [ran]) == ["report.profile"]
    # A GPU burn-in with no profile: report.profile says it, as before.
    assert checks("cuda", [ran, mfu]) == ["report.profile"]


def test_a_joint_job_that_did_not_run_is_one_finding_for_all_its_nodes() -> None:
    """`burnin --joint` whose node02 could not join: burnin.job ERROR on node01 names the
    cause; node02's facts were judged by nothing, and its "never judged" gap and the
    missing profile are that job's failure, not two more findings."""
    manifest = Manifest(
        command="burnin", started_at="T", nodes=["n1", "n2"], status="complete",
        probes=["burnin"], jobs=[["n1", "n2"]],
    )  # fmt: skip
    facts = {"n1": burnin_facts("n1", "cpu"), "n2": burnin_facts("n2", "cpu")}
    job = bad("n1", "burnin.job", "the 2-node job did not complete: n2: cannot connect")

    def found(manifest: Manifest, findings: list[Finding]) -> list[tuple[str, str, str]]:
        run = RunData(Path("r"), manifest, facts, findings, planned=["burnin"])
        return [(f.node, f.check, f.message) for f in judge_completeness(run)]

    assert found(manifest, [job]) == []
    # Not recorded as one job: n2 was never judged, said as before.
    alone = replace(manifest, jobs=[])
    assert found(alone, [job]) == [
        ("n2", "report.missing", "no findings for this node: its facts were never judged")
    ]
    # Only a bad job verdict covers its nodes: a job that ran judges every node itself.
    ran = replace(job, status=Status.PASS, message="tiny over 2 nodes")
    assert ("n2", "report.missing", "no findings for this node: its facts were never judged") in (
        found(manifest, [ran])
    )
