"""Issue 27, 2: a handover bundle lists its coverage. Its report opens with a table of each
measurement a renter pays for, "measured (part, time)" or "not run" with the command that
adds it; a bundle without the acceptance suite, without NCCL across nodes (more than one
node) or without a burn-in is never ACCEPTED and says so in its verdict line; the bundle
holds a JUnit file, which its manifest lists (so `verify` covers it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bringup import baseline as baselines
from bringup import suite as suite_mod
from bringup.checks.coverage import bundle_coverage, judge_coverage
from bringup.facts import NodeFacts, ProbeRecord
from bringup.report.rundata import Part, RunData
from bringup.rundir import Manifest
from tests.support.cli import invoke
from tests.support.report_runs import STAMP, clean_run

ACCEPTANCE = [step.name for step in suite_mod.load("acceptance").probes]
QUICK = [step.name for step in suite_mod.load("quick").probes]
NODES = ["node01", "node02"]


@pytest.fixture(scope="module")
def demo_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "handover"
    result = invoke("handover", "--demo", "--out", out)
    assert result.exit_code == 1, result.output
    return out


def test_the_demo_bundle_says_what_it_lacks(demo_bundle: Path) -> None:
    summary = json.loads((demo_bundle / "report.json").read_text())
    verdict = summary["verdict"]
    assert verdict["line"] == (
        "NOT ACCEPTED (demo data; partial handover: no acceptance suite, "
        "no NCCL multi-node/pairwise, no burn-in MFU baseline)"
    )
    assert verdict["lacking"] == [
        "no acceptance suite",
        "no NCCL multi-node/pairwise",
        "no burn-in MFU baseline",
    ]
    coverage = [(r["item"], r["measured"], r["required"]) for r in summary["coverage"]]
    assert coverage == [
        ("acceptance suite", False, True),
        ("DCGM level", False, False),
        ("per-GPU compute", False, False),
        ("NVMe on a device", False, False),
        ("storage layout", False, False),
        ("uplink", False, False),
        ("NCCL single-node", False, False),
        ("NCCL multi-node/pairwise", False, True),
        ("burn-in MFU baseline", False, True),
        ("diagnose", False, False),
    ]
    errors = [f["message"] for f in summary["findings"] if f["check"] == "report.coverage"]
    assert errors == [
        "the handover holds no acceptance suite: probes gpu, topology, host, xid, nvme, "
        "not the acceptance suite",
        "the handover holds no NCCL multi-node/pairwise: not run",
        "the handover holds no burn-in MFU baseline: not run",
    ]


def test_the_report_opens_with_the_coverage_table(demo_bundle: Path) -> None:
    md = (demo_bundle / "report.md").read_text()
    assert md.index("## What this handover holds") < md.index("## Verdict: NOT ACCEPTED")
    assert (
        "| burn-in MFU baseline | not run (needed for ACCEPTED) | – | "
        "bringup burnin --nodes hosts.ini --recipe llama-8b-lora |"
    ) in md
    assert "| DCGM level | not run | – | bringup check --nodes hosts.ini --suite acceptance" in md
    html = (demo_bundle / "report.html").read_text()
    assert html.index('<section id="coverage">') < html.index('<section id="verdict"')


def test_the_bundle_holds_junit_and_its_manifest_lists_it(demo_bundle: Path) -> None:
    junit = (demo_bundle / "report.junit.xml").read_text()
    assert junit.count('name="report.coverage #') == 3
    bundle = baselines.load_bundle(demo_bundle)
    assert sorted(bundle.reports_sha256 or {}) == [
        "report.html",
        "report.json",
        "report.junit.xml",
        "report.md",
    ]


def test_a_passing_check_alone_is_not_an_accepted_handover(tmp_path: Path) -> None:
    """A live run of two healthy nodes is ACCEPTED as a check; gathered alone into a
    bundle it lacks the acceptance suite, NCCL across nodes and a burn-in."""
    run = clean_run(tmp_path / "check")
    assert invoke("report", run, "--out", tmp_path / "r").exit_code == 0  # ACCEPTED alone
    result = invoke("handover", "--from", run, "--out", tmp_path / "b")
    assert result.exit_code == 1, result.output
    assert (
        "NOT ACCEPTED (partial handover: no acceptance suite, no NCCL multi-node/pairwise, "
        "no burn-in MFU baseline)"
    ) in result.stdout
    assert "ACCEPTED:" not in result.stdout.replace("NOT ACCEPTED", "")
    assert "  burn-in MFU baseline      not run (needed for ACCEPTED); to add it: " in (
        result.stdout
    )


# --- the rows, from the parts as read (pure) --------------------------------------------------


def record(probe: str, facts: dict[str, Any], at: str = STAMP) -> ProbeRecord:
    return ProbeRecord(probe=probe, ok=True, facts=facts, started_at=at, duration_s=1.0)


def part(kind: str, records: list[ProbeRecord], suite: str | None = None, **manifest: Any) -> Part:
    """A part as rundata reads it: every node holds `records`."""
    planned = manifest.pop("probes", [r.probe for r in records])
    made = Manifest(command=manifest.pop("command", kind), suite=suite, started_at=STAMP)
    facts = {
        n: NodeFacts(
            node=n, bringup_version="0", collected_at=STAMP, probes={r.probe: r for r in records}
        )
        for n in NODES
    }
    run = RunData(Path(kind), made, facts, [], planned=planned)
    return Part(kind, kind, run)


def acceptance_check(nvme_on_device: bool | None = True) -> Part:
    facts: dict[str, dict[str, Any]] = {p: {} for p in ACCEPTANCE}
    facts["dcgm"] = {"level": 3}
    facts["nvme"] = {"paths": [{"path": "/data", "on_block_device": nvme_on_device}]}
    facts["nccl"] = {"nodes": 1, "nranks": 8}
    return part("check", [record(p, facts[p]) for p in ACCEPTANCE], suite="acceptance")


def burnin(steps: int = 3) -> Part:
    rows = [{"step": i, "loss": 1.0, "time_s": 0.5} for i in range(steps)]
    return part("burnin", [record("burnin", {"recipe": "llama-8b-lora", "steps": rows})])


def test_a_whole_handover_lacks_nothing() -> None:
    nccl = part("nccl", [record("nccl", {"nodes": 2, "nranks": 16})])
    diagnose = part("diagnose", [record("gemm", {}), record("telemetry", {})])
    rows = bundle_coverage([acceptance_check(), nccl, diagnose, burnin()], NODES, ACCEPTANCE)
    assert [(r.item, r.measured, r.detail, r.part) for r in rows] == [
        ("acceptance suite", True, "acceptance", "check"),
        ("DCGM level", True, "level 3", "check"),
        ("per-GPU compute", True, "matmul and HBM copy on every GPU", "check"),
        ("NVMe on a device", True, "fio on a block device", "check"),
        ("storage layout", True, "dataset and checkpoint directories", "check"),
        ("uplink", True, "download throughput", "check"),
        ("NCCL single-node", True, "all-reduce inside 2 nodes", "check"),
        ("NCCL multi-node/pairwise", True, "one job over 2 nodes", "nccl"),
        ("burn-in MFU baseline", True, "recipe llama-8b-lora", "burnin"),
        ("diagnose", True, "telemetry under load on 2 nodes", "diagnose"),
    ]
    assert all(r.at == STAMP for r in rows)
    assert judge_coverage(rows) == []


def test_a_quick_suite_is_not_the_acceptance_suite() -> None:
    quick = part("check", [record(p, {"level": 1} if p == "dcgm" else {}) for p in QUICK], "quick")
    rows = {r.item: r for r in bundle_coverage([quick, burnin()], NODES, ACCEPTANCE)}
    assert rows["acceptance suite"].measured is False
    assert rows["acceptance suite"].detail == "the quick suite, not the acceptance suite"
    assert rows["DCGM level"].shown == "measured: level 1"
    assert [f.message for f in judge_coverage(list(rows.values()))] == [
        "the handover holds no acceptance suite: the quick suite, not the acceptance suite",
        "the handover holds no NCCL multi-node/pairwise: not run",
    ]


def test_a_pairwise_run_is_nccl_across_nodes_and_one_node_needs_none() -> None:
    pairwise = part("nccl", [], command="nccl-pairwise", probes=None)
    rows = {r.item: r for r in bundle_coverage([pairwise], NODES, ACCEPTANCE)}
    assert rows["NCCL multi-node/pairwise"].shown == "measured: every pair of nodes"
    alone = {r.item: r for r in bundle_coverage([acceptance_check()], ["node01"], ACCEPTANCE)}
    row = alone["NCCL multi-node/pairwise"]
    assert (row.measured, row.required, row.detail) == (False, False, "one node: nothing to span")


def test_memory_is_no_nvme_and_a_burnin_without_steps_is_no_baseline() -> None:
    rows = {
        r.item: r for r in bundle_coverage([acceptance_check(False), burnin(0)], NODES, ACCEPTANCE)
    }
    assert rows["NVMe on a device"].shown == (
        "not run: fio measured memory or an overlay, not a block device"
    )
    assert rows["burn-in MFU baseline"].shown == "not run (needed for ACCEPTED)"


def test_an_unreadable_part_covers_nothing() -> None:
    broken = Part("check", "check", None, "manifest.json unreadable")
    rows = bundle_coverage([broken], NODES, ACCEPTANCE)
    assert not any(r.measured for r in rows)
    assert rows[0].detail == "no acceptance check in the bundle"
