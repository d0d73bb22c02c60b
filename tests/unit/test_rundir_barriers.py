"""A running node's files put on disk by the run journal's barriers (RunJournal.barrier):
one sync of the file system for every thread waiting, where each node's thread synced
each raw file, its folder, its facts file and the facts folder (docs/scale.md). What the
disk holds after a crash is what it held before: a record's line goes on disk after its
raw files and their names, a `settled` line after the facts file and its name, and the
journal is removed only after the last facts files' names are synced.

Each test logs, in order, what the run puts on disk (the real calls run too): a sync of
the file system, a sync of a file or folder (by its path), a write of journal lines (by
what they hold)."""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bringup import files as files_module
from bringup import journal as journal_module
from bringup import rundir as rundir_module
from bringup.journal import journal_files
from bringup.rundir import RunDir, load_facts

GPU = {"probe": "gpu", "ok": True, "facts": {"driver_version": "580.65"}, "duration_s": 1.5}
TOPO = {
    "probe": "topology",
    "ok": True,
    "facts": {"gpus": 8},
    "duration_s": 0.4,
    "raw": {"nvidia-smi-topo-m.txt": "GPU0 X NV18\n", "lspci.txt": "17:00.0 3D controller\n"},
}


def _path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """What reaches the disk below this test's folder, in order: "syncfs", "sync <path>",
    "write <what>". Only this test's: the calls are patched for the whole process, and a
    run an earlier test left unflushed has a journal writer of its own that writes its
    last batch up to BATCH_INTERVAL_S later, into this test's log (a flake: its
    "write n1/gpu" read as this run's)."""
    events: list[str] = []
    mine = f"{tmp_path}/"

    def logged(real: Callable[[int], None]) -> Callable[[int], None]:
        def sync(fd: int) -> None:
            real(fd)
            if f"{_path(fd)}/".startswith(mine):
                events.append(f"sync {_path(fd)}")

        return sync

    def file_system(fd: int) -> None:
        files_module.sync_file_system(fd)
        if f"{_path(fd)}/".startswith(mine):
            events.append("syncfs")

    def write(fd: int, data: bytes) -> None:
        files_module.write_all(fd, data)
        path = _path(fd)
        if path.startswith(mine) and path.endswith(".jsonl") and "journal." in path:
            lines = [json.loads(x) for x in data.splitlines()]
            said = [x.get("settled") or f"{x['node']}/{x['record']['probe']}" for x in lines]
            events.append(f"write {' '.join(said)}")

    monkeypatch.setattr(os, "fsync", logged(os.fsync))
    monkeypatch.setattr(os, "fdatasync", logged(os.fdatasync))
    monkeypatch.setattr(journal_module, "sync_file_system", file_system)
    monkeypatch.setattr(journal_module, "write_all", write)
    return events


@pytest.fixture(autouse=True)
def _barriers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Barriers wherever syncfs works, whatever file system the tests' folder is on (a
    container's overlay, a tmpfs): the journal's choice is tested on its own below."""
    monkeypatch.setattr(rundir_module, "syncs_whole", lambda path: True)


def _run(tmp_path: Path, name: str = "run") -> RunDir:
    run = RunDir.create(tmp_path / name, "check", "b300", "quick")
    run.add_nodes(["n1", "n2"])
    run.journal("n1")
    run.journal("n2")
    return run


def _topology() -> dict[str, Any]:
    """A fresh copy of TOPO (add_record takes its raw files out of the record it is given)."""
    return json.loads(json.dumps(TOPO))


def _topology_after_gpu(run: RunDir, disk: list[str]) -> list[str]:
    """What reaches the disk for n1's topology record (raw files), its gpu record before;
    each record's line written and synced (flush) before the next step."""
    run.add_record("n1", dict(GPU))
    run.flush()
    disk.clear()
    run.add_record("n1", _topology())
    run.flush()
    return _relative(disk, run)


def _relative(events: list[str], run: RunDir) -> list[str]:
    """The events with paths below the run, a temporary's random part left out."""
    below = [e.replace(f"{run.path}/", "").replace(f" {run.path}", " .") for e in events]
    return [re.sub(r"\.[0-9a-f]+\.tmp$", ".tmp", e) for e in below]


@pytest.mark.skipif(not files_module.can_sync_file_system(), reason="no syncfs on this system")
def test_a_record_goes_on_disk_after_its_raw_files_and_a_facts_file_before_its_settled_line(
    tmp_path: Path, disk: list[str]
) -> None:
    run = _run(tmp_path)
    assert run._barriers()
    recorded = _topology_after_gpu(run, disk)
    # raw/ made, once a run (its name synced into the run, as a shard's folder is); the
    # raw files written, then one barrier (their bytes), then their names renamed in;
    # the record's batch syncs the file system (the names, the node's and the probe's new
    # folders) before it writes its line. No raw file or folder is synced on its own.
    assert recorded == [
        "sync .",
        "syncfs",
        "syncfs",
        "write n1/topology",
        "sync facts/journal.000001.jsonl",
    ]
    raw = run.path / "raw" / "n1" / "topology"
    assert sorted(p.name for p in raw.iterdir()) == ["lspci.txt", "nvidia-smi-topo-m.txt"]
    assert (raw / "lspci.txt").read_text() == "17:00.0 3D controller\n"
    disk.clear()
    run.settle("n1")
    # The facts file's bytes by a barrier, then its name; its settled line waits for the
    # next batch, which syncs the file system before it writes.
    assert _relative(disk, run) == ["syncfs"]
    assert list(json.loads((run.path / "facts" / "n1.json").read_text())["probes"]) == [
        "gpu",
        "topology",
    ]
    disk.clear()
    run.add_record("n2", dict(GPU))
    run.flush()
    assert _relative(disk, run) == [
        "syncfs",
        "write n1 n2/gpu",
        "sync facts/journal.000001.jsonl",
    ]
    disk.clear()
    run.finish("complete", 0)
    # n2 settled, and n2's name synced with the file system before the journal goes.
    closing = _relative(disk, run)
    assert closing.index("syncfs") < closing.index("sync facts")
    assert closing.count("syncfs") == 2
    assert journal_files(run.path) == []
    assert not any(e.startswith("sync raw") or e.endswith(".json") for e in disk)


def test_without_barriers_each_file_and_folder_is_synced_as_before(
    tmp_path: Path, disk: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where there is no syncfs (not Linux, a kernel before 5.8): each file and folder
    synced by the node's own thread, the journal's lines as before."""
    monkeypatch.setattr(rundir_module, "syncs_whole", lambda path: False)
    run = _run(tmp_path)
    assert not run._barriers()
    recorded = _topology_after_gpu(run, disk)
    # Each folder made synced into its parent (raw/, the node's, the probe's), each raw
    # file synced (under its temporary name, before its rename), its folder, then the
    # record's line; the facts file and the facts folder at settle.
    assert recorded == [
        "sync .",
        "sync raw",
        "sync raw/n1",
        "sync raw/n1/topology/.nvidia-smi-topo-m.txt.tmp",
        "sync raw/n1/topology/.lspci.txt.tmp",
        "sync raw/n1/topology",
        "write n1/topology",
        "sync facts/journal.000001.jsonl",
    ]
    disk.clear()
    run.settle("n1")
    assert _relative(disk, run) == ["sync facts/.n1.json.tmp", "sync facts"]


def test_without_barriers_a_new_folder_is_synced_into_its_parent(
    tmp_path: Path, disk: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record's raw files in folders the record made (raw/<node>/, raw/<node>/<probe>/):
    each folder's name synced into its parent before the record's line, or a power loss
    could keep the line and lose the folders that hold its files."""
    monkeypatch.setattr(rundir_module, "syncs_whole", lambda path: False)
    run = _run(tmp_path)
    disk.clear()
    run.add_record("n1", _topology())
    relative = _relative(disk, run)
    made = relative[: relative.index("sync raw/n1/topology/.nvidia-smi-topo-m.txt.tmp")]
    assert made == ["sync .", "sync raw", "sync raw/n1"]
    run.flush()
    disk.clear()
    run.add_record("n1", {**_topology(), "probe": "gpu"})  # raw/n1 there
    relative = _relative(disk, run)
    assert relative[: relative.index("sync raw/n1/gpu/.nvidia-smi-topo-m.txt.tmp")] == [
        "sync raw/n1"
    ]


def test_a_run_of_one_node_syncs_its_own_files(tmp_path: Path, disk: list[str]) -> None:
    """One node's thread has no other to share a sync of the file system with (a health
    check): its files are synced one by one, and the mount table is never read for it."""
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    run.add_nodes(["n1"])
    run.journal("n1")
    assert "syncfs" not in _topology_after_gpu(run, disk)
    assert not run._barriers()


def _tree(path: Path) -> dict[str, bytes]:
    return {
        p.relative_to(path).as_posix(): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and p.name != "manifest.json"
    }


@pytest.mark.skipif(not files_module.can_sync_file_system(), reason="no syncfs on this system")
def test_the_run_directory_is_the_same_with_barriers_or_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One clock for both runs: a facts file says when its run started.
    monkeypatch.setattr(rundir_module, "now", lambda: "2026-12-01T00:00:00+00:00")
    trees = []
    for barriers in (True, False):
        monkeypatch.setattr(rundir_module, "syncs_whole", lambda path, b=barriers: b)
        run = _run(tmp_path, f"run-{barriers}")
        assert run._barriers() is barriers
        for node in ("n1", "n2"):
            run.add_record(node, dict(GPU))
            run.add_record(node, _topology())
            run.settle(node)
        run.finish("complete", 0)
        trees.append(_tree(run.path))
    assert trees[0] == trees[1]
    assert sorted(trees[0]) == [
        "facts/n1.json",
        "facts/n2.json",
        "raw/n1/topology/lspci.txt",
        "raw/n1/topology/nvidia-smi-topo-m.txt",
        "raw/n2/topology/lspci.txt",
        "raw/n2/topology/nvidia-smi-topo-m.txt",
    ]


@pytest.mark.skipif(not files_module.can_sync_file_system(), reason="no syncfs on this system")
def test_a_failed_file_system_sync_acknowledges_nothing_and_the_facts_file_is_still_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An I/O error at the barrier: the record with raw files is refused (the run makes
    the node's ERROR), no later record is taken, and the node's facts file is written
    with what was judged, synced on its own."""
    run = _run(tmp_path)
    run.add_record("n1", dict(GPU))

    def failed(fd: int) -> None:
        raise OSError(errno.EIO, "cannot sync the file system: Input/output error")

    monkeypatch.setattr(journal_module, "sync_file_system", failed)
    with pytest.raises(OSError, match="Input/output error"):
        run.add_record("n1", _topology())
    with pytest.raises(OSError, match="Input/output error"):
        run.add_record("n2", dict(GPU))
    run.settle("n1")  # the barrier fails: the file and its folder synced one by one
    facts = json.loads((run.path / "facts" / "n1.json").read_text())
    assert list(facts["probes"]) == ["gpu", "topology"]


@pytest.mark.skipif(not files_module.can_sync_file_system(), reason="no syncfs on this system")
def test_the_journal_stays_when_the_last_sync_at_finish_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last facts files' names could not be synced: the journal that holds their
    records is kept, and every reader folds it (the records are read once)."""
    run = _run(tmp_path)
    run.add_record("n1", dict(GPU))
    run.add_record("n2", dict(GPU))
    run.flush()
    run.settle("n1")
    run.settle("n2")
    calls: list[int] = []

    def failed(fd: int) -> None:
        calls.append(fd)
        raise OSError(errno.EIO, "cannot sync the file system: Input/output error")

    monkeypatch.setattr(journal_module, "sync_file_system", failed)
    run._journal.close()
    assert calls and journal_files(run.path) == ["facts/journal.000001.jsonl"]
    assert [(f.node, list(f.probes)) for f in load_facts(run.path)] == [
        ("n1", ["gpu"]),
        ("n2", ["gpu"]),
    ]


@pytest.mark.parametrize(
    ("platform", "release", "expected"),
    [
        ("linux", "6.18.44-fc-v1147", True),
        ("linux", "5.8.0", True),
        ("linux", "5.4.0-150-generic", False),
        ("linux", "4.19.0", False),
        ("linux", "weird", False),
        ("darwin", "23.1.0", False),
    ],
)
def test_the_file_system_is_synced_whole_only_where_syncfs_reports_failures(
    monkeypatch: pytest.MonkeyPatch, platform: str, release: str, expected: bool
) -> None:
    """Before Linux 5.8 syncfs returned 0 after a failed writeback: files synced one by
    one there, and where there is no syncfs at all."""
    monkeypatch.setattr(files_module.sys, "platform", platform)
    uname = os.uname()
    fake: Any = type("U", (), {"release": release, "sysname": uname.sysname})
    monkeypatch.setattr(files_module.os, "uname", lambda: fake)
    monkeypatch.setattr(files_module, "_syncfs", lambda: lambda fd: 0)
    assert files_module.can_sync_file_system.__wrapped__() is expected


# Lines of /proc/self/mountinfo as proc(5) gives them: the third field the device, the type
# after " - ". The first two are this machine's own; the third is proc(5)'s example; the
# last a home directory on NFS, as a cluster's login node mounts it.
MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
41 27 0:52 / /home rw,relatime shared:30 - nfs4 filer:/export/home rw,vers=4.2
"""


@pytest.mark.parametrize(
    ("device", "kind", "whole"),
    [
        (os.makedev(254, 0), "ext4", True),
        (os.makedev(98, 0), "ext3", True),
        (os.makedev(0, 52), "nfs4", False),
        (os.makedev(0, 21), "proc", False),
        (os.makedev(8, 1), None, False),
    ],
)
def test_the_whole_file_system_is_synced_only_on_a_local_one(
    device: int, kind: str | None, whole: bool
) -> None:
    """On NFS (a home directory on a cluster) a sync of the file system would flush every
    client's data through the server: each file is synced on its own there."""
    assert files_module.file_system_type(device, MOUNTINFO) == kind
    assert (kind in files_module.LOCAL_FILE_SYSTEMS) is whole


def test_a_run_directory_here_is_judged_by_its_own_file_system(tmp_path: Path) -> None:
    with open("/proc/self/mountinfo", encoding="utf-8") as mounts:
        kind = files_module.file_system_type(os.stat(tmp_path).st_dev, mounts.read())
    assert kind is not None
    local = kind in files_module.LOCAL_FILE_SYSTEMS
    assert files_module.syncs_whole(tmp_path) is (local and files_module.can_sync_file_system())
