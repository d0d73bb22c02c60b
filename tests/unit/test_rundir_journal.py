"""A running node's records go to the run's journal (facts/journal.NNNNNN.jsonl) as they
arrive, synced by the journal's writer without the node's thread waiting, one sync for
every record waiting then; its facts file is written once when it ends. Every record
that arrived is kept whatever stops the run, and every reader of a run directory reads
the journal a crash left, the run's or, in a run made before it, the node's own
(facts/<node>.journal)."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bringup import journal as journal_module
from bringup import rundir as rundir_module
from bringup.checks.completeness import judge_completeness
from bringup.facts import record_json
from bringup.journal import journal_files, read_journal
from bringup.report import rundata
from bringup.rundir import RunDir, RunDirError, iter_facts, load_facts
from tests.support.cli import invoke

GPU = {"probe": "gpu", "ok": True, "facts": {"driver_version": "580.65"}, "duration_s": 1.5}
XID = {"probe": "xid", "ok": False, "error": "journalctl: no access", "duration_s": 0.2}


def journaled_run(tmp_path: Path, *records: dict[str, object]) -> RunDir:
    """A run whose node n1 is running (journaled) with these records, each on disk (the
    journal's writer synced them), not yet settled."""
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    run.add_nodes(["n1", "n2"])
    run.journal("n1")
    for record in records:
        run.add_record("n1", dict(record))
    run.flush()
    return run


def filed(run: Path) -> list[str]:
    """The nodes with a facts file of their own (flat layout)."""
    return sorted(p.stem for p in (run / "facts").glob("*.json"))


def probes_on_disk(run: Path, node: str = "n1") -> list[str]:
    return list(json.loads((run / "facts" / f"{node}.json").read_text())["probes"])


def journal_of(run: Path) -> Path:
    """The run journal's first file."""
    return run / "facts" / "journal.000001.jsonl"


def line(node: str, record: dict[str, object]) -> str:
    return json.dumps({"node": node, "record": record}) + "\n"


def test_a_running_nodes_records_are_appended_and_its_file_written_once(tmp_path: Path) -> None:
    run = journaled_run(tmp_path, GPU, XID)
    journal = journal_of(run.path)
    assert filed(run.path) == []  # planned nodes: the manifest names them, no file yet
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [(x["node"], x["record"]["probe"]) for x in lines] == [("n1", "gpu"), ("n1", "xid")]
    run.settle("n1")
    assert probes_on_disk(run.path) == ["gpu", "xid"]
    assert run.facts_of("n1").probes["xid"].error == "journalctl: no access"
    run.journal("n2")
    run.add_record("n2", dict(GPU))  # the next batch carries n1's settled line
    run.flush()
    later = [json.loads(x) for x in journal.read_text().splitlines()[2:]]
    assert [x.get("settled") or (x["node"], x["record"]["probe"]) for x in later] == [
        "n1",
        ("n2", "gpu"),
    ]
    assert filed(run.path) == ["n1"]
    run.finish("complete", 0)
    assert not journal.exists()  # the run finished: every record is in its facts file
    assert filed(run.path) == ["n1", "n2"]


def test_every_reader_reads_the_journal_a_crash_left(tmp_path: Path) -> None:
    """Killed mid-node (no settle): the records in the journal are the node's, though it
    has no facts file yet; a planned node with none is the manifest's alone."""
    run = journaled_run(tmp_path, GPU, XID)
    (entry,) = list(iter_facts(run.path))
    assert entry.facts is not None and list(entry.facts.probes) == ["gpu", "xid"]
    assert entry.relative == "facts/journal.000001.jsonl"
    # The node as its file would have begun: the run's version and start.
    assert (entry.facts.bringup_version, entry.facts.collected_at) == (
        run.manifest.version,
        run.manifest.started_at,
    )
    assert [(f.node, list(f.probes)) for f in load_facts(run.path)] == [("n1", ["gpu", "xid"])]
    read = rundata.load(run.path)
    assert list(read.facts["n1"].probes) == ["gpu", "xid"]
    assert read.nodes == ["n1", "n2"]  # n2 planned, never reported: still the run's
    lacking = {f.node: f.message for f in judge_completeness(read) if f.check == "report.missing"}
    assert "no facts recorded" in lacking["n2"]  # an ERROR: never a verdict without it


def test_a_planned_node_gets_its_one_facts_file_when_it_ends_never_replaced(
    tmp_path: Path,
) -> None:
    """No planned node's file is written at the start and replaced at the end: one file
    a node, written once (a replaced file is a freed inode every later file scans past
    on ext4; docs/scale.md). A node never run gets its file when the run finishes."""
    run = journaled_run(tmp_path, GPU)
    assert filed(run.path) == []
    run.settle("n1")
    inode = (run.path / "facts" / "n1.json").stat().st_ino
    run.release("n1")
    run.finish("interrupted", 130)
    assert (run.path / "facts" / "n1.json").stat().st_ino == inode
    assert filed(run.path) == ["n1", "n2"]
    assert probes_on_disk(run.path, "n2") == []
    assert [list(f.probes) for f in load_facts(run.path)] == [["gpu"], []]


def test_a_resumed_run_folds_the_journal_into_the_facts_file(tmp_path: Path) -> None:
    path = journaled_run(tmp_path, GPU).path
    reopened = RunDir.reopen(path)
    assert probes_on_disk(path) == ["gpu"]
    assert not journal_of(path).exists()
    assert list(reopened.facts_of("n1").probes) == ["gpu"]


def test_a_process_killed_mid_node_keeps_every_record(tmp_path: Path) -> None:
    """A real crash: the process that records is SIGKILLed with the node unsettled."""
    path = tmp_path / "run"
    script = textwrap.dedent(
        f"""
        import os, signal, time
        from pathlib import Path
        from bringup.rundir import RunDir
        run = RunDir.create(Path({str(path)!r}), "check", "b300", "quick")
        run.add_nodes(["n1"])
        run.journal("n1")
        run.add_record("n1", {GPU!r})
        run.add_record("n1", {XID!r})
        # Nobody waits: the journal's writer puts both lines in the file on its own.
        journal = Path({str(path)!r}) / "facts" / "journal.000001.jsonl"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if journal.exists() and journal.read_bytes().count(b"\\n") == 2:
                break
            time.sleep(0.005)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert [list(f.probes) for f in load_facts(path)] == [["gpu", "xid"]]


def test_a_cut_short_last_line_is_left_out_the_rest_kept(tmp_path: Path) -> None:
    run = journaled_run(tmp_path, GPU)
    with journal_of(run.path).open("ab") as out:  # a crash mid-append, and a machine's zeros
        out.write(b'{"node": "n1", "record": {"probe": "xid", "ok": tr' + b"\0" * 64)
    assert [list(f.probes) for f in load_facts(run.path)] == [["gpu"]]


def test_a_line_that_is_no_record_before_one_that_is_refuses_the_node(tmp_path: Path) -> None:
    """Whose record the line that is none was cannot be known: every node is refused."""
    run = journaled_run(tmp_path, GPU)
    journal_of(run.path).write_text(line("n1", {"probe": "gpu"}) + line("n1", XID))
    with pytest.raises(RunDirError, match=r"journal\.000001\.jsonl: line 1 is not a journal"):
        load_facts(run.path)
    (n1, n2) = list(iter_facts(run.path))  # planned, no file yet: the manifest's nodes
    assert (n1.name, n2.name) == ("n1", "n2")
    assert n1.facts is None and n2.facts is None
    assert n2.problem and "line 1 is not a journal line" in n2.problem


def test_a_journal_that_is_a_symlink_is_refused_not_followed(tmp_path: Path) -> None:
    run = journaled_run(tmp_path)
    (run.path / "facts").mkdir()  # made by the first record or file: none yet
    (tmp_path / "elsewhere").write_text(line("n1", GPU))
    os.symlink(tmp_path / "elsewhere", journal_of(run.path))
    with pytest.raises(RunDirError, match=r"journal\.000001\.jsonl"):
        load_facts(run.path)


def test_a_released_node_is_read_back_and_keeps_its_records_when_recorded_again(
    tmp_path: Path,
) -> None:
    run = journaled_run(tmp_path, GPU)
    before = run.facts_of("n1")
    run.release("n1")
    assert run.facts_of("n1") == before  # read back from its file
    assert [f.node for f in run.recorded()] == ["n1", "n2"]
    assert run.probe_times()["n1"] == {"gpu": 1.5}
    run.add_record("n1", dict(XID))  # a later job's record: the earlier ones stay
    assert probes_on_disk(run.path) == ["gpu", "xid"]


def test_finishing_a_run_settles_a_node_its_runner_never_did(tmp_path: Path) -> None:
    run = journaled_run(tmp_path, GPU)
    run.finish("complete", 0)
    assert probes_on_disk(run.path) == ["gpu"]
    assert not any("journal" in name for name in run.manifest.files_sha256 or {})


def mine(tmp_path: Path, fd: int) -> bool:
    """Whether `fd` is a file below this test's folder. A sync patched for the process is
    called by every run's journal writer, and one an earlier test left unflushed writes
    its last batch up to BATCH_INTERVAL_S later: counted here, it was a flake."""
    return os.readlink(f"/proc/self/fd/{fd}").startswith(f"{tmp_path}/")


def test_each_record_is_synced_by_the_journals_writer_not_the_nodes_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record is on disk without its node's thread waiting for it: the journal's writer
    writes and syncs it (a thread of its own), and `flush` returns once it has. Each sync
    is logged with the file it synced and the thread that did (the real sync runs too)."""
    synced: list[tuple[str, str]] = []

    def logged(real: Any) -> Any:
        def sync(fd: int) -> None:
            real(fd)
            if mine(tmp_path, fd):
                synced.append((os.readlink(f"/proc/self/fd/{fd}"), threading.current_thread().name))

        return sync

    monkeypatch.setattr(os, "fdatasync", logged(os.fdatasync))
    monkeypatch.setattr(os, "fsync", logged(os.fsync))
    run = journaled_run(tmp_path)
    journal = str(journal_of(run.path))
    run.add_record("n1", dict(GPU))
    deadline = time.monotonic() + 30
    while (journal, "bringup-journal") not in synced and time.monotonic() < deadline:
        time.sleep(0.005)  # nobody waits for it
    # The journal's name into its folder once, then its first record, by the writer.
    writer = [path for path, thread in synced if thread == "bringup-journal"]
    assert writer[-2:] == [str(run.path / "facts"), journal]
    synced.clear()
    run.add_record("n1", dict(XID))
    run.flush()  # returns once the record is synced, by whichever thread synced it
    assert [path for path, _ in synced] == [journal]


def test_a_power_loss_keeps_every_synced_record_and_leaves_out_the_torn_tail(
    tmp_path: Path,
) -> None:
    """What a machine's crash can leave of a running node: no facts file yet (it is
    written when the node ends), the journal's records every one synced, and after them
    the part of an append that had not returned (a cut line, then the zeros of blocks
    never written). Every reader keeps the synced records, and a resumed run starts from
    them."""
    run = journaled_run(tmp_path, GPU, XID)
    journal = journal_of(run.path)
    synced = journal.read_bytes()
    torn = line("n1", {**GPU, "probe": "nvme"}).encode()[:37] + b"\0" * 4096
    journal.write_bytes(synced + torn)  # the run's RunDir is gone with the machine
    assert filed(run.path) == []
    assert [list(f.probes) for f in load_facts(run.path)] == [["gpu", "xid"]]
    (entry,) = list(iter_facts(run.path))
    assert entry.facts is not None and entry.facts.probes["xid"].error == "journalctl: no access"
    assert list(rundata.load(run.path).facts["n1"].probes) == ["gpu", "xid"]
    resumed = RunDir.reopen(run.path)
    assert probes_on_disk(run.path) == ["gpu", "xid"]
    assert not journal.exists()
    assert resumed.facts_of("n1").probes["gpu"].facts == GPU["facts"]


# --- one journal for the run: a sync for every record waiting, files removed once settled ---


def test_records_arriving_together_share_one_sync_and_each_is_on_disk_by_its_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sixteen nodes' threads recording at once (a fleet run's forks): fewer syncs than
    records, and when a thread's flush returns the journal's synced part holds its record. Each
    sync notes how much of the journal it covered (the real sync runs, then a pause, as a
    disk takes, so that records queue meanwhile)."""
    covered: list[int] = []
    real = os.fdatasync

    def sync(fd: int) -> None:
        real(fd)
        if mine(tmp_path, fd):
            covered.append(os.fstat(fd).st_size)
        time.sleep(0.01)

    monkeypatch.setattr(os, "fdatasync", sync)
    nodes = [f"n{i:02d}" for i in range(16)]
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    run.add_nodes(nodes)
    start = threading.Barrier(len(nodes))
    late: list[str] = []

    def node(name: str) -> None:
        run.journal(name)
        start.wait()
        for probe in ("gpu", "host", "nvme", "xid"):
            run.add_record(name, {**GPU, "probe": probe, "params": {"node": name}})
            run.flush()
            text = journal_of(run.path).read_bytes()[: max(covered)]
            synced = [json.loads(x) for x in text.splitlines()]
            if {
                "node": name,
                "record": record_json(run.facts_of(name).probes[probe]),
            } not in synced:
                late.append(f"{name} {probe}")

    threads = [threading.Thread(target=node, args=(name,)) for name in nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert late == []
    assert len(covered) < 4 * len(nodes)  # 64 records
    assert [list(f.probes) for f in load_facts(run.path)] == [["gpu", "host", "nvme", "xid"]] * 16


def test_records_within_the_batch_interval_wait_for_one_sync_a_lone_one_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record that comes after a quiet spell is synced at once; the ones that come less
    than BATCH_INTERVAL_S after a batch started wait for the interval's end and share one
    sync (a second here, so that four records surely come within it)."""
    synced: list[float] = []
    real = os.fdatasync

    def sync(fd: int) -> None:
        real(fd)
        if mine(tmp_path, fd):
            synced.append(time.monotonic())

    monkeypatch.setattr(os, "fdatasync", sync)
    monkeypatch.setattr(journal_module, "BATCH_INTERVAL_S", 1.0)
    nodes = [f"n{i}" for i in range(5)]
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    run.add_nodes(nodes)
    for name in nodes:
        run.journal(name)
    started = time.monotonic()
    run.add_record("n0", {**GPU, "params": {"node": "n0"}})
    run.flush()
    assert len(synced) == 1 and synced[0] - started < 0.5  # alone: not held back
    for name in nodes[1:]:
        run.add_record(name, {**GPU, "params": {"node": name}})
    run.flush()
    assert len(synced) == 2  # the four together, in one batch
    assert synced[1] - synced[0] >= 0.9  # not before the interval's end
    lines = journal_of(run.path).read_bytes().splitlines()
    assert [json.loads(line)["node"] for line in lines] == nodes


def test_a_journal_file_goes_once_every_node_in_it_has_settled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past SEGMENT_BYTES the journal goes on in a new file; the oldest file whose nodes
    have all settled is removed, and a reader folds only what came after each node's last
    settled line, across the files."""
    monkeypatch.setattr(journal_module, "SEGMENT_BYTES", 1)  # each batch in a new file
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    run.add_nodes(["n1", "n2"])
    run.journal("n1")
    run.journal("n2")
    for node, record in (("n1", GPU), ("n2", GPU), ("n1", XID)):  # files 1, 2 and 3
        run.add_record(node, dict(record))
        run.flush()
    files = journal_files(run.path)
    assert files == [f"facts/journal.00000{n}.jsonl" for n in (1, 2, 3)]
    run.settle("n1")  # its settled line goes with the next batch
    run.add_record("n2", dict(XID))  # file 4: n1 settled, file 1 had only n1: removed
    run.flush()
    assert journal_files(run.path) == [f"facts/journal.00000{n}.jsonl" for n in (2, 3, 4)]
    read = read_journal(run.path)
    assert {node: list(probes) for node, probes in read.records.items()} == {"n2": ["gpu", "xid"]}
    assert [list(f.probes) for f in load_facts(run.path)] == [["gpu", "xid"], ["gpu", "xid"]]
    run.settle("n2")
    run.finish("complete", 0)
    assert journal_files(run.path) == []


def test_a_line_that_is_no_record_in_an_earlier_file_refuses_the_journal(tmp_path: Path) -> None:
    run = journaled_run(tmp_path, GPU)
    journal_of(run.path).write_text(line("n1", GPU) + "not json\n")
    (run.path / "facts" / "journal.000002.jsonl").write_text(line("n1", XID))
    with pytest.raises(RunDirError, match=r"journal\.000001\.jsonl: line 2 is not a journal"):
        load_facts(run.path)


def test_a_failed_sync_acknowledges_nothing_and_takes_no_later_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk: the batch that holds the record fails, `flush` says so, and every
    later record of any node is refused at once (the run makes its node's ERROR): none
    goes after the torn tail the batch may have left."""
    run = journaled_run(tmp_path, GPU)

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fdatasync", full)
    run.add_record("n1", dict(XID))
    with pytest.raises(OSError, match="No space left"):
        run.flush()
    monkeypatch.undo()
    size = journal_of(run.path).stat().st_size
    run.journal("n2")
    with pytest.raises(OSError, match="No space left"):
        run.add_record("n2", dict(GPU))
    assert journal_of(run.path).stat().st_size == size
    run.settle("n1")  # judged from memory: its facts file holds both
    assert probes_on_disk(run.path) == ["gpu", "xid"]


def test_an_older_runs_journal_of_each_node_is_still_read_and_folded(tmp_path: Path) -> None:
    """A run made before the run's journal: facts/<node>.journal, a record a line."""
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    run.add_nodes(["n1", "n2"])
    run.settle("n1")  # such a run wrote each planned node's empty facts file first
    run.settle("n2")
    older = run.path / "facts" / "n1.journal"
    older.write_text(json.dumps(GPU) + "\n" + json.dumps(XID) + "\n" + '{"probe": "nv')
    assert [list(f.probes) for f in load_facts(run.path)] == [["gpu", "xid"], []]
    assert [list(e.facts.probes) for e in iter_facts(run.path) if e.facts] == [["gpu", "xid"], []]
    RunDir.reopen(run.path)
    assert probes_on_disk(run.path) == ["gpu", "xid"] and not older.exists()


@pytest.mark.parametrize("planted", ["journal.000001.jsonl", "n1.journal"])
def test_verify_names_a_journal_planted_in_a_finished_run(tmp_path: Path, planted: str) -> None:
    run = journaled_run(tmp_path, GPU)
    run.settle("n1")
    run.finish("complete", 0)
    record = {**XID, "ok": True, "error": None}
    text = line("n1", record) if planted.startswith("journal") else json.dumps(record) + "\n"
    (run.path / "facts" / planted).write_text(text)
    assert load_facts(run.path)[0].probes["xid"].ok  # what a reader would take in ...
    result = invoke("verify", run.path)
    assert result.exit_code == 1, result.output
    assert f"added: facts/{planted}" in result.stdout.splitlines()  # ... verify names


def test_finishing_while_a_record_is_written_to_a_planned_nodes_file_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record of a node that is not journaled rewrites its facts file under the node's
    lock; finish() holds the run's lock and takes the node's to write a planned node's
    file. The record's writer must not take the run's lock while it holds the node's: the
    two would wait on each other for ever (a burn-in's SIGTERM did)."""
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    run.add_nodes(["n1"])
    writing, go_on = threading.Event(), threading.Event()
    real = rundir_module.write_atomic

    def slow_write(*args: Any, **kwargs: Any) -> None:
        writing.set()
        go_on.wait(timeout=30)
        real(*args, **kwargs)

    monkeypatch.setattr(rundir_module, "write_atomic", slow_write)
    recorder = threading.Thread(target=run.add_record, args=("n1", dict(GPU)), daemon=True)
    recorder.start()
    assert writing.wait(timeout=30)  # the record's writer holds n1's lock now
    finisher = threading.Thread(target=run.finish, args=("complete", 0), daemon=True)
    finisher.start()
    time.sleep(0.2)  # finish() takes the run's lock, then waits for n1's
    go_on.set()
    recorder.join(timeout=30)
    finisher.join(timeout=30)
    assert not recorder.is_alive() and not finisher.is_alive(), "add_record and finish deadlocked"
    assert probes_on_disk(run.path) == ["gpu"]
