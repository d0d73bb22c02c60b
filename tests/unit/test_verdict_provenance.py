"""Every verdict earned: demo data, replays, edited replays and profile overrides through
the real CLI (in this process), and the exit status that follows the verdict.

Each case failed on main as it stood: a replay of demo data said ACCEPTED and exited 0,
the handover of it and its signed report said ACCEPTED, an edited run replayed without
a word, `inspect` of one capture said ACCEPTED, and demo data exited 0.
"""

from __future__ import annotations

import json
from pathlib import Path

from bringup.fleet.plan import override_changes
from bringup.profile import load
from tests.support.cli import invoke


def _json(*args: str | Path) -> tuple[int, dict]:
    result = invoke(*args, "--json")
    return result.exit_code, json.loads(result.stdout)


def test_demo_replay_handover_verify_never_says_accepted(tmp_path: Path) -> None:
    """The healthy demo node through replay, report, handover and verify: never ACCEPTED,
    the chain of where its facts came from kept at every step, exit 1 everywhere."""
    demo, replay = tmp_path / "d", tmp_path / "r"
    first = invoke("check", "--demo", "--limit", "b300-node01", "--out", demo, "-q")
    assert (first.exit_code, first.stdout.strip()) == (
        1,
        "NOT ACCEPTED (demo data): 28 PASS on 1 node",
    )
    again = invoke("check", "--replay", demo, "--out", replay, "-q")
    assert again.exit_code == 1
    assert (
        again.stdout.strip() == f"NOT ACCEPTED (demo data, replayed from {demo}): 28 PASS on 1 node"
    )
    facts = json.loads((replay / "facts" / "b300-node01.json").read_text())
    chain = facts["probes"]["gpu"]["provenance"]
    assert [link["kind"] for link in chain] == ["demo", "replayed"]
    assert chain[1]["of"] == str(demo) and len(chain[1]["sha256"]) == 64
    code, doc = _json("report", replay, "--out", tmp_path / "rep")
    assert (code, doc["exit_code"], doc["verdict"]) == (1, 1, "NOT ACCEPTED")
    assert doc["provenance"] == {
        "mode": "demo+replayed",
        "live": False,
        "reasons": ["demo data", f"replayed from {demo}"],
    }
    bundle = tmp_path / "h"
    handed = invoke("handover", "--from", replay, "--out", bundle)
    assert handed.exit_code == 1
    # One node: no NCCL across nodes to lack, only the acceptance suite and a burn-in.
    assert handed.stdout.startswith(
        f"NOT ACCEPTED (demo data, replayed from {demo}; partial handover: no acceptance suite, "
        "no burn-in MFU baseline): "
    )
    verified = invoke("verify", bundle)
    assert verified.exit_code == 0 and verified.stdout.startswith("INTACT")
    for name in ("report.md", "report.html"):
        text = (bundle / name).read_text()
        assert "ACCEPTED" in text and "Verdict: ACCEPTED" not in text, name
    assert (
        "## Verdict: NOT ACCEPTED (demo data, replayed from" in (bundle / "report.md").read_text()
    )
    inspected = invoke("inspect", replay, "-q")
    assert inspected.stdout.strip().startswith("NO FAULT FOUND in the facts of 1 node in ")
    assert "demo data, replayed from" in inspected.stdout and "ACCEPTED" not in inspected.stdout


def test_a_replay_of_an_edited_run_names_each_differing_file(tmp_path: Path) -> None:
    demo = tmp_path / "d"
    invoke("check", "--demo", "--out", demo, "-q")
    facts = demo / "facts" / "b300-node04.json"
    edited = json.loads(facts.read_text())
    gpu = edited["probes"]["gpu"]["facts"]["gpus"][3]
    gpu["remapped_rows"]["pending"] = False  # the planted fault, edited away
    facts.write_text(json.dumps(edited))
    (demo / "findings.jsonl").write_text((demo / "findings.jsonl").read_text() + "\n")
    code, doc = _json("check", "--replay", demo, "--out", tmp_path / "r")
    assert code == 1 and doc["verdict"] == "NOT ACCEPTED"
    said = [
        (f["node"], f["status"], f["message"])
        for f in doc["findings"]
        if f["check"] == "replay.source"
    ]
    assert said == [
        (
            "b300-node04",
            "ERROR",
            f"replayed data differs from what run {demo} recorded: facts/b300-node04.json",
        ),
        ("", "ERROR", f"replayed data differs from what run {demo} recorded: findings.jsonl"),
    ]
    # --limit replays some nodes: another node's edited file is not theirs.
    code, doc = _json(
        "check", "--replay", demo, "--limit", "b300-node01", "--out", tmp_path / "one"
    )
    nodes = {f["node"] for f in doc["findings"] if f["check"] == "replay.source"}
    assert nodes == {""}  # findings.jsonl is the run's own


def test_an_unedited_replay_has_no_source_finding(tmp_path: Path) -> None:
    demo = tmp_path / "d"
    invoke("check", "--demo", "--out", demo, "-q")
    code, doc = _json("check", "--replay", demo, "--out", tmp_path / "r")
    assert code == 1
    assert [f for f in doc["findings"] if f["check"] == "replay.source"] == []
    # Only the planted faults fail, and the replay is NOT ACCEPTED for its origin.
    assert sum(f["status"] == "FAIL" for f in doc["findings"]) == 4
    assert doc["provenance"]["reasons"] == ["demo data", f"replayed from {demo}"]


def test_overrides_are_named_field_by_field() -> None:
    base = load("b300")
    overrides = {"gpu": {"count": 7}, "uplink": {"min_mbit_s": 1000}}
    from bringup.fleet.plan import node_profile

    changes = override_changes(base, node_profile(base, overrides, "node02"))
    assert [c.line() for c in changes] == [
        "gpu.count 8 -> 7",
        "uplink.min_mbit_s unset -> 1000",
    ]
    assert override_changes(base, base) == []


def test_inspect_of_one_capture_is_no_acceptance(tmp_path: Path) -> None:
    """A topology matrix under an 8-GPU profile: no fault, never ACCEPTED; exit 0/1."""
    from tests.support import FIXTURES

    topo = FIXTURES / "topo" / "simllm-vastai-h200x8-8nic.txt"
    result = invoke("inspect", topo, "--profile", "h200", "-q")
    assert (result.exit_code, result.stdout.strip()) == (
        0,
        "NO FAULT FOUND in nvidia-smi topo -m (3 checks; not a node acceptance)",
    )
    code, doc = _json("inspect", topo, "--profile", "h200")
    assert (code, doc["exit_code"], doc["verdict"]) == (0, 0, None)
    assert doc["data"]["verdict"].startswith("NO FAULT FOUND in nvidia-smi topo -m")
    other = invoke("inspect", FIXTURES / "topo" / "simllm-vastai-b200x8-no-nic.txt", "-q")
    assert other.exit_code == 1 and other.stdout.startswith("FAULT FOUND in nvidia-smi topo -m (")


def test_a_live_run_with_overrides_is_accepted_with_overrides(tmp_path: Path) -> None:
    """Overrides do not block acceptance, but the verdict says them: the report's verdict
    line and profile block, and the console's."""
    from bringup.commands.show import verdict_line
    from bringup.findings import Finding, Status
    from tests.support.report_runs import clean_run

    run = clean_run(tmp_path / "run")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["overrides"] = {"b300-node07": [{"field": "gpu.count", "profile": 8, "value": 7}]}
    (run / "manifest.json").write_text(json.dumps(manifest))
    code, doc = _json("report", run, "--out", tmp_path / "rep", "--format", "md")
    verdict = doc["data"]["summary"]["verdict"]
    assert (code, doc["verdict"], verdict["line"]) == (0, "ACCEPTED", "ACCEPTED with overrides")
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "## Verdict: ACCEPTED with overrides" in md
    assert "- b300-node07 judged with overrides: gpu.count 8 -&gt; 7" in md
    passed = [Finding(node="n1", check="gpu.count", status=Status.PASS, message="7 GPUs")]
    assert verdict_line(passed, overrides=True).plain == "ACCEPTED with overrides: 1 PASS on 1 node"


def test_overrides_are_compared_with_the_baseline(tmp_path: Path) -> None:
    """A node judged with other overrides than at handover: a WARN naming both."""
    from tests.support.report_runs import clean_run

    then = clean_run(tmp_path / "then")
    now = clean_run(tmp_path / "now")
    manifest = json.loads((now / "manifest.json").read_text())
    manifest["overrides"] = {"b300-node07": [{"field": "gpu.count", "profile": 8, "value": 7}]}
    (now / "manifest.json").write_text(json.dumps(manifest))
    code, doc = _json("report", now, "--baseline", then, "--out", tmp_path / "rep")
    said = [
        (f["node"], f["status"], f["message"])
        for f in doc["findings"]
        if f["check"] == "baseline.overrides"
    ]
    assert said == [("b300-node07", "WARN", "judged with gpu.count 8 -> 7; at then: no overrides")]
    assert code == 0 and doc["data"]["summary"]["verdict"]["line"] == "ACCEPTED with overrides"
