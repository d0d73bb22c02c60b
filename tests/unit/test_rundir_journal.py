"""A running node's records go to its journal (facts/<node>.journal) as they arrive; its
facts file is written once when it ends. Every record that arrived is kept whatever
stops the run, and every reader of a run directory reads the journal a crash left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from bringup.report import rundata
from bringup.rundir import RunDir, RunDirError, iter_facts, load_facts

GPU = {"probe": "gpu", "ok": True, "facts": {"driver_version": "580.65"}, "duration_s": 1.5}
XID = {"probe": "xid", "ok": False, "error": "journalctl: no access", "duration_s": 0.2}


def journaled_run(tmp_path: Path, *records: dict[str, object]) -> RunDir:
    """A run whose node n1 is running (journaled) with these records, not yet settled."""
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    run.add_nodes(["n1", "n2"])
    run.journal("n1")
    for record in records:
        run.add_record("n1", dict(record))
    return run


def probes_on_disk(run: Path, node: str = "n1") -> list[str]:
    return list(json.loads((run / "facts" / f"{node}.json").read_text())["probes"])


def test_a_running_nodes_records_are_appended_and_its_file_written_once(tmp_path: Path) -> None:
    run = journaled_run(tmp_path, GPU, XID)
    journal = run.path / "facts" / "n1.journal"
    assert probes_on_disk(run.path) == []  # the file as the node started: written once, later
    lines = journal.read_text().splitlines()
    assert [json.loads(line)["probe"] for line in lines] == ["gpu", "xid"]
    run.settle("n1")
    assert probes_on_disk(run.path) == ["gpu", "xid"]
    assert not journal.exists()
    assert run.facts_of("n1").probes["xid"].error == "journalctl: no access"


def test_every_reader_reads_the_journal_a_crash_left(tmp_path: Path) -> None:
    """Killed mid-node (no settle): the records in its journal are the node's."""
    run = journaled_run(tmp_path, GPU, XID)
    (entry_n1, entry_n2) = list(iter_facts(run.path))
    assert entry_n1.facts is not None and list(entry_n1.facts.probes) == ["gpu", "xid"]
    assert entry_n2.facts is not None and entry_n2.facts.probes == {}
    assert [list(f.probes) for f in load_facts(run.path)] == [["gpu", "xid"], []]
    assert list(rundata.load(run.path).facts["n1"].probes) == ["gpu", "xid"]


def test_a_resumed_run_folds_the_journal_into_the_facts_file(tmp_path: Path) -> None:
    path = journaled_run(tmp_path, GPU).path
    reopened = RunDir.reopen(path)
    assert probes_on_disk(path) == ["gpu"]
    assert not (path / "facts" / "n1.journal").exists()
    assert list(reopened.facts_of("n1").probes) == ["gpu"]


def test_a_process_killed_mid_node_keeps_every_record(tmp_path: Path) -> None:
    """A real crash: the process that records is SIGKILLed with the node unsettled."""
    path = tmp_path / "run"
    script = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from bringup.rundir import RunDir
        run = RunDir.create(Path({str(path)!r}), "check", "b300", "quick")
        run.add_nodes(["n1"])
        run.journal("n1")
        run.add_record("n1", {GPU!r})
        run.add_record("n1", {XID!r})
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert [list(f.probes) for f in load_facts(path)] == [["gpu", "xid"]]


def test_a_cut_short_last_line_is_left_out_the_rest_kept(tmp_path: Path) -> None:
    run = journaled_run(tmp_path, GPU)
    journal = run.path / "facts" / "n1.journal"
    with journal.open("ab") as out:  # a crash mid-append, and zeros a machine crash leaves
        out.write(b'{"probe": "xid", "ok": tr' + b"\0" * 64)
    assert [list(f.probes) for f in load_facts(run.path)] == [["gpu"], []]


def test_a_line_that_is_no_record_before_one_that_is_refuses_the_node(tmp_path: Path) -> None:
    run = journaled_run(tmp_path, GPU)
    journal = run.path / "facts" / "n1.journal"
    journal.write_text('{"probe": "gpu"}\n' + json.dumps(XID) + "\n")
    with pytest.raises(RunDirError, match=r"n1\.journal: not a facts journal"):
        load_facts(run.path)
    (entry, _) = list(iter_facts(run.path))
    assert entry.facts is None and entry.problem


def test_a_journal_that_is_a_symlink_is_refused_not_followed(tmp_path: Path) -> None:
    run = journaled_run(tmp_path)
    (tmp_path / "elsewhere").write_text(json.dumps(GPU) + "\n")
    os.symlink(tmp_path / "elsewhere", run.path / "facts" / "n1.journal")
    with pytest.raises(RunDirError, match=r"n1\.journal"):
        load_facts(run.path)


def test_a_released_node_is_read_back_and_keeps_its_records_when_recorded_again(
    tmp_path: Path,
) -> None:
    run = journaled_run(tmp_path, GPU)
    before = run.facts_of("n1")
    run.release("n1")
    assert run.facts_of("n1") == before  # read back from its file
    assert [f.node for f in run.recorded()] == ["n1", "n2"]
    assert run.recorded_headers()[0].probes["gpu"].duration_s == 1.5
    run.add_record("n1", dict(XID))  # a later job's record: the earlier ones stay
    assert probes_on_disk(run.path) == ["gpu", "xid"]


def test_finishing_a_run_settles_a_node_its_runner_never_did(tmp_path: Path) -> None:
    run = journaled_run(tmp_path, GPU)
    run.finish("complete", 0)
    assert probes_on_disk(run.path) == ["gpu"]
    assert "facts/n1.journal" not in (run.manifest.files_sha256 or {})


def test_each_record_is_synced_to_disk_before_add_record_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Main's guarantee, kept: a record is on disk before the run goes on with its node.
    Each sync is logged with the file it synced (the real sync runs too)."""
    synced: list[str] = []

    def logged(real: Any) -> Any:
        def sync(fd: int) -> None:
            real(fd)
            synced.append(os.readlink(f"/proc/self/fd/{fd}"))

        return sync

    monkeypatch.setattr(os, "fdatasync", logged(os.fdatasync))
    monkeypatch.setattr(os, "fsync", logged(os.fsync))
    run = journaled_run(tmp_path)
    journal = str(run.path / "facts" / "n1.journal")
    run.add_record("n1", dict(GPU))
    # The journal's name into its folder once, then its first record.
    assert synced[-2:] == [str(run.path / "facts"), journal]
    synced.clear()
    run.add_record("n1", dict(XID))
    assert synced == [journal]  # the second record: its own sync, before the call returned


def test_a_power_loss_keeps_every_synced_record_and_leaves_out_the_torn_tail(
    tmp_path: Path,
) -> None:
    """What a machine's crash can leave of a running node: its facts file as the node
    started, the journal's records every one synced, and after them the part of an append
    that had not returned (a cut line, then the zeros of blocks never written). Every
    reader keeps the synced records, and a resumed run starts from them."""
    run = journaled_run(tmp_path, GPU, XID)
    journal = run.path / "facts" / "n1.journal"
    synced = journal.read_bytes()
    torn = json.dumps({**GPU, "probe": "nvme"}).encode()[:37] + b"\0" * 4096
    journal.write_bytes(synced + torn)  # the run's RunDir is gone with the machine
    assert probes_on_disk(run.path) == []
    assert [list(f.probes) for f in load_facts(run.path)] == [["gpu", "xid"], []]
    (entry, _) = list(iter_facts(run.path))
    assert entry.facts is not None and entry.facts.probes["xid"].error == "journalctl: no access"
    assert list(rundata.load(run.path).facts["n1"].probes) == ["gpu", "xid"]
    resumed = RunDir.reopen(run.path)
    assert probes_on_disk(run.path) == ["gpu", "xid"]
    assert not journal.exists()
    assert resumed.facts_of("n1").probes["gpu"].facts == GPU["facts"]
