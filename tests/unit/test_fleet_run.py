"""The fleet run's worker pool: how many nodes run at once (no nodes reached: a stand-in
runner per node)."""

from __future__ import annotations

import copy
import threading
import time
import types
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bringup.findings import finding_json
from bringup.fleet import run as fleet
from bringup.fleet.inventory import Host
from bringup.fleet.plan import plan_node
from bringup.profile import load as load_profile
from bringup.rundir import RunDir, load_facts
from bringup.suite import load as load_suite
from tests.support.runners import answering


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
        plan.request = {"probes": [s for s in plan.request["probes"] if s["name"] == "xid"]}
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    outcomes = fleet.run(plans, run, forks=4)
    assert peak <= 4
    assert [o.node for o in outcomes] == [f"n{i:02d}" for i in range(50)]
    assert {o.state for o in outcomes} == {"complete"}
    assert run.manifest.nodes == [f"n{i:02d}" for i in range(50)]


# --- a hostile node: what it may store is bounded --------------------------------------------


def hostile_run(
    tmp_path: Path, records: Iterator[dict[str, Any]], caps: fleet.NodeCaps | None = None
) -> tuple[fleet.NodeOutcome, Path, dict[str, bool]]:
    """One node (the quick suite's xid and host probes) whose runner yields `records`."""
    closed = {"closed": False}

    def runner(
        request: dict[str, Any], deadline: float, stop: threading.Event, on_stage: fleet.Stage
    ) -> Iterator[dict[str, Any]]:
        on_stage("running")
        try:
            yield from records
        finally:
            closed["closed"] = True  # the transport's session ends here

    plan = plan_node(Host("evil", "127.0.0.1"), runner, load_suite("quick"), load_profile("b300"))
    plan.request = {"probes": [s for s in plan.request["probes"] if s["name"] in ("xid", "host")]}
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    (outcome,) = fleet.run([plan], run, forks=1, caps=caps)
    return outcome, run.path, closed


def raw_on_disk(run: Path) -> tuple[int, int]:
    files = [p for p in (run / "raw").rglob("*") if p.is_file()] if (run / "raw").exists() else []
    return len(files), sum(p.stat().st_size for p in files)


def node_run_errors(outcome: fleet.NodeOutcome) -> list[str]:
    return [f.message for f in outcome.findings if f.check == "node.run" and f.status == "ERROR"]


def test_a_node_sending_records_past_the_raw_cap_is_an_error_and_stored_no_further(
    tmp_path: Path,
) -> None:
    """300 records of 1 MiB each (one probe name) filled the controller's disk."""
    sent = 0

    def flood() -> Iterator[dict[str, Any]]:
        nonlocal sent
        for index in range(300):
            sent += 1
            yield {"probe": "xid", "ok": True, "raw": {f"r{index}.txt": "x" * 2**20}}

    caps = fleet.NodeCaps(raw_bytes=4 * 2**20, raw_files=2000)
    outcome, run, closed = hostile_run(tmp_path, flood(), caps)
    assert sent == 2 and closed["closed"]  # stopped at the second record: nothing more read
    assert raw_on_disk(run) == (1, 2**20)  # the first record only
    (error,) = node_run_errors(outcome)
    assert error.startswith("refused: the node sent a second record of probe 'xid'; not stored")
    assert outcome.state == "error"


def test_a_node_past_the_raw_byte_cap_stores_nothing_more(tmp_path: Path) -> None:
    records = iter(
        [
            {"probe": "xid", "ok": True, "raw": {"a.txt": "x" * 3 * 2**20}},
            {"probe": "host", "ok": True, "raw": {"b.txt": "y" * 2 * 2**20}},
        ]
    )
    outcome, run, _ = hostile_run(tmp_path, records, fleet.NodeCaps(4 * 2**20, 2000))
    assert raw_on_disk(run) == (1, 3 * 2**20)
    (error,) = node_run_errors(outcome)
    assert error.startswith(
        "refused: probe 'host' took the node's raw output past the cap of 4 MiB in 2000 files "
        "(5 MiB in 2 files); not stored"
    )


def test_a_node_sending_20000_files_leaves_at_most_the_file_cap(tmp_path: Path) -> None:
    many = {f"f{i}.txt": "1" for i in range(20000)}
    records = iter(
        [
            {"probe": "xid", "ok": True, "raw": {"a.txt": "x"}},
            {"probe": "host", "ok": True, "raw": many},
        ]
    )
    outcome, run, _ = hostile_run(tmp_path, records, fleet.NodeCaps())
    assert raw_on_disk(run) == (1, 1)
    (error,) = node_run_errors(outcome)
    assert "past the cap of 256 MiB in 2000 files (0 MiB in 20001 files)" in error
    facts = (run / "facts" / "evil.json").read_text()
    assert '"host"' not in facts  # the refused record is not in the facts either


def test_a_record_of_a_probe_not_asked_for_is_refused(tmp_path: Path) -> None:
    records = iter([{"probe": "nvme", "ok": True, "raw": {"a.txt": "x"}}])
    outcome, run, _ = hostile_run(tmp_path, records)
    assert raw_on_disk(run) == (0, 0)
    (error,) = node_run_errors(outcome)
    assert error.startswith("refused: the node sent a record of probe 'nvme', which it was not")


def test_a_record_that_is_not_one_is_refused_in_one_line(tmp_path: Path) -> None:
    """A record's fields of the wrong type (pydantic's lax mode took "yes" for a bool):
    neither it nor its raw outputs stored, and the node's error is one line."""
    records = iter(
        [
            {"probe": "xid", "ok": "yes", "raw": {"a.txt": "x"}},
            {"probe": "host", "ok": True},
        ]
    )
    outcome, run, closed = hostile_run(tmp_path, records)
    assert raw_on_disk(run) == (0, 0) and closed["closed"]
    (error,) = node_run_errors(outcome)
    assert error == (
        "refused: the node sent a record of probe 'xid' that is not one (at ok: Expected "
        "`bool`, got `str`); not stored, nothing more stored from the node"
    )
    assert outcome.state == "error"
    assert '"xid"' not in (run / "facts" / "evil.json").read_text()


def test_threads_judging_their_first_nodes_together_build_each_validator_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """64 threads judged their first nodes at once and each built the probes' validators
    (pydantic's: a hundred and fifty of them at 1,000 nodes, seconds of CPU). msgspec
    builds its schema of a type at the type's first read: one thread reads first, alone,
    and the others after it."""
    import msgspec

    from bringup import facts as facts_mod
    from bringup.sim.demo import demo_nodes

    record = demo_nodes()[0].probes["gpu"].facts
    gpu_type = facts_mod.PROBES["gpu"].FACTS
    state = {"reading": 0, "first_reads_together": 0}
    lock = threading.Lock()

    def slow(data: object, kind: type, strict: bool) -> object:
        with lock:
            state["reading"] += 1
            if kind not in facts_mod._READY:
                state["first_reads_together"] = max(state["first_reads_together"], state["reading"])
        time.sleep(0.05)  # long enough for every thread to be asking
        with lock:
            state["reading"] -= 1
        return msgspec.convert(data, kind, strict=strict)

    fake = types.SimpleNamespace(convert=slow, ValidationError=msgspec.ValidationError)
    monkeypatch.setattr(facts_mod, "msgspec", fake)
    monkeypatch.setattr(facts_mod, "_READY", set())
    read: list[object] = []
    threads = [
        threading.Thread(
            target=lambda: read.append(facts_mod.validate_facts("gpu", gpu_type, record))
        )
        for _ in range(16)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(read) == 16 and state["first_reads_together"] == 1


# --- what a run holds once its nodes are judged --------------------------------------------


def test_the_fleet_checks_judge_the_values_taken_at_judging_as_they_judge_the_facts(
    tmp_path: Path,
) -> None:
    """Twelve nodes answering with the demo fleet's records (each demo node twice: shared
    serials; one copy of the healthy node with another VBIOS): once the run ends it holds no node's
    facts, and the fleet checks over the values each node left in its outcome are the
    same findings, in the same order, as over the facts read back from the run."""
    from bringup.commands.check import judge_fleet
    from bringup.facts import record_json
    from bringup.sim.demo import demo_nodes

    demo = [[record_json(r) for r in n.probes.values()] for n in demo_nodes()]
    odd = copy.deepcopy(demo[0])  # the healthy node with another VBIOS on GPU 0: odd one out
    next(r for r in odd if r["probe"] == "gpu")["facts"]["gpus"][0]["vbios_version"] = "97.0"

    suite = load_suite("acceptance")
    profile = load_profile("b300")
    plans = []
    for i in range(12):
        records = odd if i == 6 else demo[i % len(demo)]
        plan = plan_node(Host(f"n{i:02d}", "127.0.0.1"), answering(records), suite, profile)
        recorded = {r["probe"] for r in records}
        plan.request = {"probes": [s for s in plan.request["probes"] if s["name"] in recorded]}
        plans.append(plan)
    run = RunDir.create(tmp_path / "run", "check", "b300", "acceptance")
    outcomes = fleet.run(plans, run, forks=4, compare=True)
    assert run._facts == {}  # every node judged and let go of: only headers are held
    findings = [f for o in outcomes for f in o.findings]
    taken = judge_fleet(run, findings, None, None, outcomes)
    read_back = judge_fleet(run, findings, None, None)
    assert {f.check for f in taken} == {"fleet.identity", "fleet.consistency"}
    assert [finding_json(f) for f in taken] == [finding_json(f) for f in read_back]


def test_findings_held_once_keep_every_value_and_type() -> None:
    """What a run keeps of every node's findings: equal texts and expectations held
    once, each finding's values (and their types: 8 is not 8.0) as judged."""
    from bringup.findings import Finding, Status, finding_line

    def made(node: str, expected: object) -> Finding:
        return Finding(
            node=node,
            check="gpu.count",
            status=Status.PASS,
            message=" ".join(["8", "GPUs"]),  # a new string each time, as a check makes it
            value=8,
            expected=expected,
            unit="GPUs",
            action=" ".join(["reseat", "the", "GPU"]),
        )

    shared = fleet.Shared()
    judged = [made("n1", ">= 8"), made("n2", ">= 8"), made("n3", ">= 8.0")]
    before = [finding_line(f) for f in judged]
    held = [shared.finding(f) for f in judged]
    assert [finding_line(f) for f in held] == before
    assert held[0].expected is held[1].expected and held[2].expected is not held[0].expected
    assert held[0].message is held[1].message and held[0].action is held[2].action
    copied = replace(held[0], node="n4")  # a copy is its own: n2 unchanged
    assert copied.node == "n4" and finding_line(held[1]) == before[1]


def test_a_node_whose_facts_file_cannot_be_written_is_an_error_the_others_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run directory's disk full when a node ends: its facts file is not written. The
    run went down with the OSError (a traceback, every other node's outcome lost); now the
    node is an ERROR that says so, judged from what it sent, and the others are judged."""
    import errno

    from bringup import rundir as rundir_module

    real = rundir_module.write_atomic_at

    def full(folder: int, name: str, text: str, **kwargs: Any) -> None:
        if name == "n1.json":
            raise OSError(errno.ENOSPC, "No space left on device")
        real(folder, name, text, **kwargs)

    monkeypatch.setattr(rundir_module, "write_atomic_at", full)
    record = {"probe": "xid", "ok": False, "error": "not here", "params": {}}
    suite, profile = load_suite("quick"), load_profile("b300")
    plans = [
        plan_node(Host(f"n{i}", "127.0.0.1"), answering([record]), suite, profile, remote=False)
        for i in range(3)
    ]
    for plan in plans:
        plan.request = {"probes": [s for s in plan.request["probes"] if s["name"] == "xid"]}
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    outcomes = fleet.run(plans, run, forks=2)
    assert [(o.node, o.state) for o in outcomes] == [
        ("n0", "complete"),
        ("n1", "error"),
        ("n2", "complete"),
    ]
    (error,) = node_run_errors(outcomes[1])
    assert error.startswith("its facts file could not be written (No space left on device)")
    # Judged from what it sent, as the others: its xid probe's own finding is there.
    checks = {f.check for f in outcomes[1].findings}
    assert {f.check for f in outcomes[0].findings} - {"node.run"} <= checks
    (action,) = [f.action for f in outcomes[1].findings if f.check == "node.run"]
    assert action is not None and action.startswith("free space on the run directory's")
    assert not (run.path / "facts" / "n1.json").exists()
    assert (run.path / "facts" / "n0.json").exists() and (run.path / "facts" / "n2.json").exists()
    # Held, not let go of: with room again, the run's end writes the file with its record.
    monkeypatch.setattr(rundir_module, "write_atomic_at", real)
    run.finish("complete", 1)
    assert list(load_facts(run.path / "facts" / "n1.json")[0].probes) == ["xid"]


def test_an_unreachable_node_whose_file_cannot_be_written_stays_unreachable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never `reached` for the disk's sake: its reason first, the file's after."""
    import errno

    from bringup import rundir as rundir_module
    from bringup.fleet.transport import Unreachable

    def full(folder: int, name: str, text: str, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def refused(
        request: dict[str, Any], deadline: float, stop: threading.Event, on_stage: fleet.Stage
    ) -> Iterator[dict[str, Any]]:
        raise Unreachable("connection refused")
        yield {}

    monkeypatch.setattr(rundir_module, "write_atomic_at", full)
    plan = plan_node(Host("n0", "127.0.0.1"), refused, load_suite("quick"), load_profile("b300"))
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    (outcome,) = fleet.run([plan], run, forks=1)
    assert outcome.state == "unreachable"
    (reachable,) = [f for f in outcome.findings if f.check == "node.reachable"]
    assert reachable.status == "UNREACHABLE"
    assert reachable.message == (
        "connection refused; its facts file could not be written (No space left on device)"
    )


def test_a_node_whose_findings_cannot_be_written_stops_the_run_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """findings.jsonl cannot take a node's findings (the disk full): the run cannot record
    its verdict, so it ends (the command says so in one line, exit 2: commands/common.py).
    It waited for every other node to end first (a burn-in: hours) and lost their outcomes
    anyway; now the others are stopped at once, as by Ctrl-C, what they sent kept on disk."""
    import errno

    from bringup.fleet.transport import Interrupted

    real = RunDir.add_findings

    def full(self: RunDir, findings: list[Any], data: bytes | None = None) -> None:
        if any(f.node == "n1" for f in findings):
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, findings, data)

    def slow(
        request: dict[str, Any], deadline: float, stop: threading.Event, on_stage: fleet.Stage
    ) -> Iterator[dict[str, Any]]:
        on_stage("running")
        yield {"probe": "xid", "ok": False, "error": "not here", "params": {}}
        if stop.wait(60):  # the next probe, a minute long: stopped first
            raise Interrupted("stopped")

    record = {"probe": "xid", "ok": False, "error": "not here", "params": {}}
    suite, profile = load_suite("quick"), load_profile("b300")
    plans = [
        plan_node(
            Host(f"n{i}", "127.0.0.1"),
            answering([record]) if i == 1 else slow,
            suite,
            profile,
            remote=False,
        )
        for i in range(3)
    ]
    for plan in plans:
        plan.request = {"probes": [s for s in plan.request["probes"] if s["name"] == "xid"]}
    monkeypatch.setattr(RunDir, "add_findings", full)
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    started = time.monotonic()
    with pytest.raises(OSError, match="No space left on device"):
        fleet.run(plans, run, forks=3)
    assert time.monotonic() - started < 30
    # What the others sent is on disk: their records, in their files or the run's journal.
    nodes = {facts.node: list(facts.probes) for facts in load_facts(run.path)}
    assert nodes["n0"] == ["xid"] and nodes["n2"] == ["xid"]
