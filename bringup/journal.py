"""The run's journal: every running node's records, each on disk within a batch of its
arrival, and every one before its node is judged.

A fleet run takes records from many nodes at once (64 forks, each node's probes
reporting as they end). Each node used to have its own journal (facts/<node>.journal),
each record one write and one fdatasync of it. Now one journal for the whole run takes
the records of every node, and one fdatasync covers every record waiting (group commit):
a record's append queues its line and returns, and the journal's writer (a thread of its
own, started by the first append to find none) writes every line queued so far in one
write, syncs once, and goes on with the lines queued meanwhile (a batch no sooner than
BATCH_INTERVAL_S after the one before, so that more lines share it). A node's thread never
waits for its record's sync: it waited for each one before (five a node, each a wake
and a hand-over of the interpreter's lock among 64 threads: a seventh of the check's
CPU, docs/scale.md). It waits only where an order on disk needs it: a barrier (the
files of a node put on disk, below) and `flush`.

What a crash can lose is what it lost before: the records that arrived since the last
batch was synced (before, the node's thread had not read them yet; now they wait in
memory, up to BATCH_INTERVAL_S more). A node is judged only once its facts file, which
holds every record it sent, is on disk (bringup/rundir.py, `settle`), whatever its
journal lines are doing.

    facts/journal.000001.jsonl   {"node": "node0001", "record": {...}}   a record, as it came
                                 {"settled": "node0001"}                 the node's facts file
                                                                         holds every record above

When a node ends its facts file is written and synced (bringup/rundir.py), then a
`settled` line says so: a reader after a crash folds into each node's facts the records
that came after its last `settled` line, and no others, so what it holds is what the
running nodes sent. Past SEGMENT_BYTES the journal goes on in a new file; the oldest file
whose every node has settled since is removed, so the journal stays about the size of
what the running nodes sent, never the whole run's. The run removes it when it finishes;
`--resume` first folds it into the facts files.

A line the crash cut short (a line without its end, or the zeros a machine's crash can
leave where the system had not written yet) is an append that had not been synced:
left out. A line that is not a journal line before one that is was not written by a
run: the journal is refused (JournalError), and with it every node's facts: which node's
record it was cannot be known.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from bringup import jsondata
from bringup.facts import ProbeRecord
from bringup.files import (
    InputError,
    open_folder,
    read_lines_in,
    sync_dir,
    sync_file_system,
    write_all,
)

SEGMENT_BYTES = 8 * 1024 * 1024  # far below the 64 MiB any reader takes (files.MAX_BYTES)
# How long the writer waits for a line before it ends: a fleet run's records come many a
# second and keep it, a run whose probes take minutes starts one for each batch.
WRITER_IDLE_S = 5.0
# The least time from one batch's start to the next one's: lines that come closer
# together wait for it and share its write and sync. Thousands of nodes' records a second
# cost a sync each few lines otherwise, and each sync its CPU (docs/scale.md); a line
# that comes alone is written at once.
BATCH_INTERVAL_S = 0.03
_SEGMENT = re.compile(r"journal\.(\d{6})\.jsonl")
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def segment_name(number: int) -> str:
    """A journal file's name below facts/: never a node's (those end in .json or .journal)."""
    return f"journal.{number:06d}.jsonl"


class JournalError(InputError):
    """The run's journal is not one a run wrote (or cannot be read); one line."""


# --- writing ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Entry:
    """One thing queued for the next batch: a record's line (node), a `settled` line
    (settled), or a barrier (neither: no line). `after_files`: the batch syncs the file
    system before it writes."""

    node: str | None
    settled: str | None
    line: bytes
    after_files: bool


@dataclass
class _Segment:
    name: str
    # Nodes with a record in this file and no `settled` line since: it is removed once
    # there are none (and every file before it is gone).
    unsettled: set[str] = field(default_factory=set)


class RunJournal:
    """The journal of a run being written into the directory `folder` (the run's facts/,
    below `root`, the run directory). Made when the first record comes; shared by the
    run's threads."""

    def __init__(self, root: Path, folder: Path) -> None:
        self.root = root
        self.folder = folder
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # a batch synced: its waiters go on
        self._work = threading.Condition(lock)  # a line queued: the writer writes it
        self._writer: threading.Thread | None = None  # the writer, while it runs
        self._closed = False  # close() was called and no record came since
        self._queue: list[_Entry] = []
        self._queued = 0  # lines queued so far (each waiter waits for its own number)
        # A record among them, for the writer: a `settled` line alone waits for the next
        # record's batch, as it always did, rather than cost a sync of its own.
        self._record_queued = False
        self._synced = 0  # lines written and synced so far
        self._batch_started = -BATCH_INTERVAL_S  # time.monotonic() of the last batch
        self._writing = False  # a batch is being written (outside the lock)
        self._failed: OSError | None = None  # a write or sync failed: no line is taken since
        self._folder_fd: int | None = None
        self._fd: int | None = None
        self._size = 0
        self._segments: list[_Segment] = []  # oldest first, the last one written to
        self._next = 1
        # A barrier or a line after files was taken: the files' names may be on disk by
        # no batch yet, and close() syncs the file system before the journal goes.
        self._after_files = False

    def append(self, node: str, record_json: str, after_files: bool = False) -> None:
        """Queue one record of `node` (ProbeRecord JSON) for the writer, which writes and
        syncs it with every other line queued then; returns at once (`flush` waits for
        it). OSError when an earlier batch could not be written (a full disk): no record
        is taken after it. `after_files`: the files written before the call (the
        record's raw output, not synced) are put on disk before its line is written
        (files.syncs_whole only)."""
        line = f'{{"node":{json.dumps(node)},"record":{record_json}}}\n'.encode()
        with self._cond:
            self._raise_if_failed()
            self._closed = False
            self._enqueue(_Entry(node, None, line, after_files))
            self._record_queued = True
            if self._writer is None:
                self._writer = threading.Thread(
                    target=self._write_behind, name="bringup-journal", daemon=True
                )
                self._writer.start()
            else:
                self._work.notify()

    def flush(self) -> None:
        """Returns once every line queued before the call is written and synced. OSError
        as a failed batch's."""
        with self._cond:
            self._wait_for(self._queued)

    def barrier(self) -> None:
        """Returns once every file written before the call is on disk, names and data: the
        next batch syncs the file system before its lines, for every thread waiting then.
        What a run's threads wait on rather than each syncing its own files and folders
        (where files.syncs_whole). OSError as append's."""
        self._commit(_Entry(None, None, b"", True))

    def _commit(self, entry: _Entry) -> None:
        with self._cond:
            self._wait_for(self._enqueue(entry))

    def _wait_for(self, mine: int) -> None:
        """Under the lock: returns once the first `mine` lines are synced. A waiter that
        finds no batch being written writes one itself (the writer may be waiting to be
        woken, or gone): its wait is then its own write, not a hand-over."""
        while self._synced < mine:
            self._raise_if_failed()
            if self._writing:
                self._cond.wait()
            else:
                self._write_queued()

    def _raise_if_failed(self) -> None:
        if self._failed is not None:
            raise OSError(self._failed.errno, self._failed.strerror)

    def _write_behind(self) -> None:
        """The writer: every queued line written, batch after batch, until none has come
        for WRITER_IDLE_S or the journal is closed; a failed batch ends it (its waiters
        raise). The next append starts another."""
        with self._cond:
            try:
                while self._failed is None:
                    if self._record_queued and not self._writing:
                        self._write_queued()
                    elif self._closed or (
                        not self._work.wait(WRITER_IDLE_S) and not self._record_queued
                    ):
                        break
            except BaseException:
                return  # the batch's failure is _failed, and its waiters were woken to it
            finally:
                self._writer = None

    def settled(self, node: str, after_files: bool = False) -> None:
        """Say that `node`'s facts file, synced, holds every record it sent so far: its
        lines need not be read again. Written with the next batch (not waited for: a
        `settled` line the disk did not get only makes a reader fold records its facts
        file already holds). `after_files`: the facts file's new name is not yet synced;
        the batch that writes the line syncs the file system first (files.syncs_whole
        only)."""
        with self._cond:
            if self._failed is None:
                line = f'{{"settled":{json.dumps(node)}}}\n'.encode()
                self._enqueue(_Entry(None, node, line, after_files))

    def close(self) -> None:
        """Every node has settled (the run is finishing): the journal's files are removed;
        a later record starts a new one."""
        with self._cond:
            self._closed = True
            self._work.notify()  # the writer ends rather than wait for lines that will not come
            while self._writing:
                self._cond.wait()
            if self._failed is None and any(entry.node for entry in self._queue):
                # A record still waiting (none should be, once every node has settled):
                # its append returns once it is written, as ever.
                with contextlib.suppress(OSError):
                    self._write_queued()
            self._queue.clear()  # settled lines: the journal they speak of goes now
            self._record_queued = False
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            if self._folder_fd is not None and self._after_files:
                # The last facts files' names, put on disk by no batch yet, before the
                # journal that holds their records goes. It cannot be: the journal stays,
                # and a reader folds its records into the files (which may hold them).
                try:
                    sync_file_system(self._folder_fd)
                except OSError:
                    os.close(self._folder_fd)
                    self._folder_fd = None
            if self._folder_fd is not None:
                for segment in self._segments:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(segment.name, dir_fd=self._folder_fd)
                sync_dir(self._folder_fd)
                os.close(self._folder_fd)
                self._folder_fd = None
            self._segments.clear()

    def __del__(self) -> None:  # a run never finished (a test, a refused run): its descriptors
        for fd in (self._fd, self._folder_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _enqueue(self, entry: _Entry) -> int:
        self._after_files = self._after_files or entry.after_files
        self._queue.append(entry)
        self._queued += 1
        return self._queued

    def _write_queued(self) -> None:
        """Under the lock: write every queued line in one write and one sync, the lock let
        go of meanwhile (other appends queue theirs for the next batch), and no sooner
        than BATCH_INTERVAL_S after the batch before: the lines that come meanwhile join."""
        wait = self._batch_started + BATCH_INTERVAL_S - time.monotonic()
        if wait > 0 and not self._closed:
            self._writing = True  # whoever comes meanwhile waits for this batch
            self._cond.release()
            try:
                time.sleep(wait)
            finally:
                self._cond.acquire()
                self._writing = False
        self._batch_started = time.monotonic()
        batch, self._queue = self._queue, []
        upto = self._queued
        self._record_queued = False
        self._writing = True
        self._cond.release()
        failed: BaseException | None = None
        try:
            self._write(batch)
        except BaseException as exc:  # its lines are not on disk, whatever stopped it
            failed = exc
        finally:
            self._cond.acquire()
            self._writing = False
            self._cond.notify_all()
            self._work.notify()  # lines queued meanwhile: the writer's next batch
        if failed is not None:
            # What was written of the batch is a torn tail at most: nothing goes after it,
            # and no append waiting on it returns as if it were synced.
            self._failed = (
                failed
                if isinstance(failed, OSError)
                else OSError(errno.EIO, f"the journal's write stopped: {type(failed).__name__}")
            )
            raise failed
        self._synced = max(self._synced, upto)

    def _write(self, batch: list[_Entry]) -> None:
        """One batch: the file system synced first when an entry needs it (a barrier, a
        line written after files of its own), so each line goes on disk after what it
        speaks of; then its lines into the current file (a new one past SEGMENT_BYTES),
        synced; then the files every node has settled since removed, oldest first."""
        if any(entry.after_files for entry in batch):
            sync_file_system(self._open_folder())
        data = b"".join(entry.line for entry in batch)
        if not data:
            return  # barriers alone
        if self._fd is None or self._size >= SEGMENT_BYTES:
            self._start_segment()
        assert self._fd is not None
        write_all(self._fd, data)
        os.fdatasync(self._fd)
        self._size += len(data)
        for entry in batch:
            if entry.node is not None:
                self._segments[-1].unsettled.add(entry.node)
            elif entry.settled is not None:
                for segment in self._segments:
                    segment.unsettled.discard(entry.settled)
        self._remove_settled()

    def _open_folder(self) -> int:
        if self._folder_fd is None:
            self._folder_fd = open_folder(self.root, self.folder)
        return self._folder_fd

    def _start_segment(self) -> None:
        folder = self._open_folder()
        name = segment_name(self._next)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_NOFOLLOW | _CLOEXEC
        fd = os.open(name, flags, 0o666, dir_fd=folder)
        # Its name on disk before any line in it is acknowledged.
        sync_dir(folder)
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._size = fd, 0
        self._next += 1
        self._segments.append(_Segment(name))

    def _remove_settled(self) -> None:
        """The oldest files whose nodes have all settled (never the one written to): in
        order, each removal synced before the next, so a crash never brings back an older
        file without the newer ones."""
        assert self._folder_fd is not None
        while len(self._segments) > 1 and not self._segments[0].unsettled:
            try:
                os.unlink(self._segments[0].name, dir_fd=self._folder_fd)
            except OSError:
                return  # kept: a reader folds records its facts files hold, no more
            self._segments.pop(0)
            sync_dir(self._folder_fd)


# --- reading ---------------------------------------------------------------------------------


@dataclass
class JournalRead:
    """What a run's journal holds: each node's records since its facts file last settled,
    later ones last (node -> probe -> record)."""

    records: dict[str, dict[str, ProbeRecord]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)  # its files, relative to the run directory
    where: dict[str, str] = field(default_factory=dict)  # node -> the file of its last record

    def of(self, node: str) -> dict[str, ProbeRecord]:
        return self.records.get(node, {})


def journal_files(run: Path) -> list[str]:
    """The run journal's files (`facts/journal.NNNNNN.jsonl`), oldest first, relative to
    the run directory `run`; none when facts/ is not a folder."""
    folder = run / "facts"
    if folder.is_symlink() or not folder.is_dir():
        return []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    found = sorted((int(m.group(1)), name) for name in names if (m := _SEGMENT.fullmatch(name)))
    return [f"facts/{name}" for _, name in found]


def read_journal(run: Path) -> JournalRead:
    """The records the run journal at `run` (a run directory) holds, or JournalError."""
    read = JournalRead(files=journal_files(run))
    problem: str | None = None
    for relative, number, line in _lines(run, read.files):
        entry = _entry(line)
        if entry is None:
            problem = problem or f"{run / relative}: line {number} is not a journal line"
            continue
        if problem is not None:
            raise JournalError(f"{problem} (a record follows it: not a journal a run wrote)")
        node, record = entry
        if record is None:  # settled: its records are in its facts file
            read.records.pop(node, None)
            read.where.pop(node, None)
        else:
            read.records.setdefault(node, {})[record.probe] = record
            read.where[node] = relative
    return read


def _lines(run: Path, files: list[str]) -> Iterator[tuple[str, int, str]]:
    """(file, line number, line) of every line of the journal's files in order; the text
    after a file's last newline only where it is not empty."""
    for relative in files:
        held: str | None = None  # each line is given once the next is read
        number = 0
        try:
            for line in read_lines_in(run, relative, "facts journal"):
                if held is not None:
                    yield relative, number, held
                held, number = line, number + 1
        except InputError as exc:
            raise JournalError(str(exc)) from None
        if held:
            yield relative, number, held


class _RecordLine(msgspec.Struct, forbid_unknown_fields=True):
    """A record's line: `{"node": ..., "record": {...}}`, no other key."""

    node: str
    record: ProbeRecord


class _SettledLine(msgspec.Struct, forbid_unknown_fields=True):
    """A node's `{"settled": ...}` line, no other key."""

    settled: str


def _entry(line: str) -> tuple[str, ProbeRecord | None] | None:
    """(node, its record) or (node, None) for a `settled` line; None: not a journal line
    (its JSON, its keys, or its record not what a run writes: bringup/jsondata.py)."""
    try:
        entry = jsondata.load(line, _RecordLine)
    except jsondata.Invalid:
        try:
            return jsondata.load(line, _SettledLine).settled, None
        except jsondata.Invalid:
            return None
    return entry.node, entry.record
