"""The run directory: everything a run measured and decided, written as the run goes.

    manifest.json        what ran: version, command, profile, suite, start/end, nodes, status;
                         how (provenance: live, demo, replay, resume; the command line) and,
                         once finished, the SHA-256 of every file below (bringup/provenance.py)
    facts/<node>.json    every probe record of the node (written when the node ends; a
                         fleet run's planned node has none before: the manifest names it)
    facts/journal.NNNNNN.jsonl
                         while a fleet run runs: each record of every running node
                         appended, and synced to disk, as it arrives (bringup/journal.py);
                         folded into <node>.json, written once and synced, when the node
                         ends (a crash leaves it: every reader here reads it in, a node
                         with records there and no facts file yet too)
    facts/<node>.journal the same, one per node, in runs made before the run's journal
    findings.jsonl       one finding per line, appended as nodes are judged
    raw/<node>/<probe>/  the tool outputs the facts came from

A run of more than SHARD_ABOVE nodes is sharded: `facts/<shard>/<node>.json` and
`raw/<shard>/<node>/<probe>/`, the shard two hex digits of the SHA-256 of the node's name
(`shard_of`). The manifest says which (`layout`); every reader here reads either.

Every write is atomic (temp file + rename) or an append of whole lines, so a crash or
Ctrl-C leaves a directory that `--replay` and `report` can still read. A RunDir is shared
by the threads of a fleet run: every write holds its lock.

Why a journal (docs/scale.md#the-facts-files): each probe's record rewrote the node's
whole facts file and synced it and its folder: the node's file grew with every record
and was written again each time. A record is now appended to the run's journal and
synced there by the journal's writer (fdatasync: its data, and the file's length; one
sync for every record waiting then, bringup/journal.py); the facts file is written and
synced once, when the node ends, before the node is judged. A crash, of the process or
the whole machine, keeps every record the writer synced, and loses only those that came
since its last batch (a torn last line is a batch that had not been synced, left out),
as a run that waited for each sync lost those not yet read. `--resume` measures what a
node lacks.

Why a fleet run's planned node has no facts file of its own (docs/scale.md, "The planned
nodes have no file"): each was written empty when the run started and replaced when the
node ended, and on ext4 each replaced file is a freed inode that every file made after it
in the next minutes scans past (0.6 ms of the check's CPU a node at 10,000 nodes). The
manifest, synced before any node is asked, names every planned node; a node's records
are in the journal, which every reader reads, until its one facts file is written.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import json
import os
import re
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from bringup import __version__, jsondata
from bringup.facts import (
    Journaled,
    NodeFacts,
    ProbeRecord,
    node_facts_text,
    read_node_facts,
    read_record,
    record_text,
)
from bringup.files import (
    InputError,
    copy_tree,
    is_link,
    open_append,
    open_folder,
    open_folder_in,
    read_bytes_in,
    read_in,
    read_text,
    syncs_whole,
    write_all,
    write_atomic,
    write_atomic_at,
    write_files_at,
)
from bringup.findings import Finding, finding_line
from bringup.journal import JournalError, JournalRead, RunJournal, journal_files, read_journal
from bringup.provenance import Provenance, Resumed, Source, evidence_hashes


@dataclass(frozen=True, slots=True, kw_only=True)
class Override:
    """One profile field a node was judged by that its profile does not say: a host's
    `bringup_profile_overrides` ("gpu.count 8 -> 7")."""

    field: str
    profile: Any = None  # the profile's value (None: the profile has no such field)
    value: Any = None  # the node's

    def line(self) -> str:
        return f"{self.field} {_shown(self.profile)} -> {_shown(self.value)}"


def _shown(value: Any) -> str:
    """A profile value as a person reads it: 7, 1000, "NVIDIA B300", unset."""
    if value is None:
        return "unset"
    if isinstance(value, float):
        return f"{value:g}"
    return json.dumps(value) if isinstance(value, dict | list | str) else str(value)


@dataclass(slots=True, kw_only=True)
class Manifest:
    """manifest.json: what ran, how, and (once finished) the hash of every evidence file.

    A plain dataclass, changed in place as the run goes (its nodes, status, hashes):
    written by `manifest_text` byte for byte as the pydantic model wrote it (its SHA-256
    is the run's evidence chain), read by `read_manifest`, strictly (bringup/jsondata.py).
    """

    version: str = __version__
    command: str
    profile: str | None = None
    suite: str | None = None
    started_at: str
    ended_at: str | None = None
    status: str = "running"  # running, complete, interrupted, refused (bad input, exit 2)
    exit_code: int | None = None
    # FAIL, ERROR and UNREACHABLE findings the run wrote (set when it finishes): what its
    # findings.jsonl must still hold (bringup/checks/completeness.py). None: not recorded.
    findings_bad: int | None = None
    nodes: list[str] = field(default_factory=list)
    # Fleet runs: what `--resume` needs to reach the same nodes with the same request.
    inventory: str | None = None
    limit: str | None = None
    data_dirs: list[str] = field(default_factory=list)
    suite_source: str | None = None  # the suite's name or absolute path, as given
    # The probes every node was asked for: what completeness is judged against (a replay
    # keeps the original run's). None: not known (a run from before it was recorded).
    probes: list[str] | None = None
    provenance: Provenance | None = None  # None: a run from before it was recorded
    files_sha256: dict[str, str] | None = None  # evidence file -> SHA-256, set by finish()
    # --slurm runs: the job whose nodes ran the probes, and those nodes (Slurm's names).
    slurm_job_id: str | None = None
    slurm_nodes: list[str] = field(default_factory=list)
    # Nodes judged with their own profile overrides: node -> each field changed.
    overrides: dict[str, list[Override]] = field(default_factory=dict)
    # Nodes that ran one job together (`burnin --joint`), first node first: the job's
    # verdict (`burnin.job`, on the first node) is each of its nodes' verdict.
    jobs: list[list[str]] = field(default_factory=list)
    # Where each node's files are: facts/<node>.json, or facts/<shard>/<node>.json for a
    # run of more than SHARD_ABOVE nodes (a run from before it was recorded: flat).
    layout: Layout = "flat"


Layout = Literal["flat", "sharded"]


def manifest_text(manifest: Manifest) -> str:
    """manifest.json's text: `model_dump_json(indent=2)` of the model, and a newline."""
    return jsondata.dumps(manifest, indent=True) + "\n"


def parse_manifest(text: bytes | str) -> Manifest:
    """A manifest.json someone gives, strict: jsondata.Invalid naming where it does not fit."""
    return jsondata.load(text, Manifest)


class RunDirError(InputError):
    """A directory is not a readable run directory; the message is one line."""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# Characters a file name keeps as they are; a '.' only after the first character.
_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_LONGEST = 120  # beyond this a name is cut and a hash of the whole name added


def file_name(name: str) -> str:
    """A file name from text a node (or a facts file) sent: one path component, different
    for different names.

    Plain names stay as they are (`node-01`, `gpu1.example.com`); every other character is
    %-encoded as its UTF-8 bytes, so `a/b`, `a_b`, `x` and `.x` get four different files and
    none can leave its directory. A long name is cut and a hash of the whole name added
    after a `~` (a character the encoding never leaves): still one file per name.
    """
    encoded = "".join(
        char
        if char in _PLAIN or (char == "." and index > 0)
        else "".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
        for index, char in enumerate(name)
    )
    if len(encoded) > _LONGEST:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        encoded = f"{encoded[:100]}~{digest}"
    return encoded or "%"


# --- where a node's files are: flat for a run a person reads by hand, sharded past that ----
#
# Ten thousand entries in one folder work on ext4 and XFS, but `ls`, a file manager and a
# copy crawl through them. Past SHARD_ABOVE nodes each node's files go one folder down, in
# one of 256 shards named by the first two hex digits of the SHA-256 of its name: node
# names share their first characters (node0001 ... node9999), so a prefix would put them
# all in one folder, while the hash spreads them evenly (about 40 a shard at 10,000 nodes,
# 400 at 100,000) and depends on the name alone. Smaller runs, and every run from before,
# stay flat: `facts/node01.json` is where a person looks.

SHARD_ABOVE = 512
_SHARD = re.compile(r"[0-9a-f]{2}")


def shard_of(node: str) -> str:
    """The shard of a node's files in a sharded run: two lowercase hex digits, whatever
    the name holds (so no name can choose where its folder lands)."""
    return hashlib.sha256(node.encode("utf-8", "surrogatepass")).hexdigest()[:2]


def layout_for(nodes: int) -> Layout:
    return "sharded" if nodes > SHARD_ABOVE else "flat"


@functools.lru_cache(maxsize=4096)
def node_folder(node: str, layout: Layout) -> str:
    """The relative folder of a node's files below facts/ or raw/: `<node>`, or
    `<shard>/<node>` in a sharded run (each part one path component). Kept for the last
    few thousand nodes: a running node asks for it with each of its files."""
    name = file_name(node)
    return f"{shard_of(node)}/{name}" if layout == "sharded" else name


def facts_files(path: Path) -> list[str]:
    """Every facts file of a run (or snapshot) directory, as POSIX paths relative to it,
    in node-file-name order: `facts/<node>.json` and `facts/<shard>/<node>.json` both, so a
    run of either layout reads the same. A symbolic link is listed as itself (reading it is
    then refused by name), never followed; a shard that is a link is listed as one entry."""
    folder = path / "facts"
    if _lstat_kind(folder) == "link":
        return ["facts"]  # never listed through: reading it is refused, naming it
    found: list[tuple[str, str]] = []  # (file name, relative path)
    for entry in _entries(folder):
        kind = _lstat_kind(folder / entry)
        shard = _SHARD.fullmatch(entry) is not None
        # Whatever is named *.json is listed, a folder too: reading it is then refused by
        # name (fail closed), never skipped.
        if entry.endswith(".json") or (shard and kind == "link"):
            found.append((entry, f"facts/{entry}"))
        elif shard and kind == "dir":
            found += [
                (name, f"facts/{entry}/{name}")
                for name in _entries(folder / entry)
                if name.endswith(".json")
            ]
    return [relative for _, relative in sorted(found)]


def raw_folder(path: Path, node: str) -> Path | None:
    """The folder of a node's raw tool outputs in the run at `path`, in whichever layout
    it is (a replay reads runs of both); None when the run holds none for the node."""
    for layout in ("sharded", "flat"):
        folder = path / "raw" / node_folder(node, layout)  # type: ignore[arg-type]
        if os.path.lexists(folder):
            return folder
    return None


def node_file(relative: str) -> str | None:
    """The file name (`file_name(node)`) of the node an evidence file of a run belongs to,
    from its path alone: facts/<node>.json, raw/<node>/<probe>/<file>, and the sharded
    facts/<shard>/<node>.json, raw/<shard>/<node>/<probe>/<file>; None for the run's own
    files (findings.jsonl). A raw output is always <probe>/<file> below its node's folder,
    so the number of parts tells the layouts apart."""
    parts = relative.split("/")
    sharded = len(parts) > 2 and _SHARD.fullmatch(parts[1]) is not None
    facts_file = len(parts) == 2 or (len(parts) == 3 and sharded)
    if parts[0] == "facts" and parts[-1].endswith(".json") and facts_file:
        return parts[-1][: -len(".json")]
    if parts[0] == "raw" and len(parts) == 5 and sharded:
        return parts[2]
    if parts[0] == "raw" and len(parts) > 2:
        return parts[1]
    return None


def _entries(folder: Path) -> list[str]:
    """The names in a folder; none when it is not there, or not a folder."""
    try:
        return os.listdir(folder)
    except OSError:  # absent, not a folder, unreadable: no file of it is read
        return []


def _lstat_kind(path: Path) -> str:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "gone"
    return "link" if stat.S_ISLNK(mode) else "dir" if stat.S_ISDIR(mode) else "file"


# What the end of a run reads of each probe record of a node: its name, whether it was
# replayed (its time is not the run's), where its facts came from.
Shape = tuple[tuple[str, bool, tuple[Source, ...]], ...]


@dataclass(frozen=True, slots=True)
class Kept:
    """What a run keeps of a node it has let go of (RunDir.release): what the end of the
    run reads of every node, each probe's seconds (the probe times) and its record's
    provenance (the run's origin), nothing else. The shape, which probes and where each
    came from, is held once for every node that has the same: at ten thousand nodes the
    records' headers kept before were 60 MB, these are a few (docs/scale.md)."""

    shape: Shape
    seconds: tuple[float, ...]


class RunDir:
    """A run directory being written."""

    def __init__(self, path: Path, manifest: Manifest) -> None:
        self.path = path
        self.manifest = manifest
        self._facts: dict[str, NodeFacts] = {}
        self._lock = threading.RLock()
        self._node_locks: dict[str, threading.Lock] = {}  # one per node: its facts file
        # Nodes whose records go to the run's journal until settle(), and those with
        # records not in their facts file yet.
        self._journaled: set[str] = set()
        self._unsaved: set[str] = set()
        # Planned nodes (add_nodes) whose facts file is not written yet: settle() writes it.
        self._unfiled: set[str] = set()
        self._journal = RunJournal(path, path / "facts")
        # Whether the running nodes' files are put on disk by the journal's barriers:
        # decided at the first file that needs it (_barriers).
        self._syncs_whole: bool | None = None
        # Each unsaved node's records with the texts the journal took (facts.Journaled):
        # its facts file is laid out from them at settle(), not encoded again.
        self._texts: dict[str, dict[str, Journaled]] = {}
        # The facts folders written into (facts/, or each facts/<shard>/), each opened once.
        self._folders: dict[str, int] = {}
        # Nodes let go of once judged (release): their probe times and provenance (Kept),
        # the rest on disk; each distinct shape held once.
        self._released: dict[str, Kept] = {}
        self._shapes: dict[Shape, Shape] = {}
        # findings.jsonl, opened once for the run's appends (add_findings), under a lock
        # of its own: a node's findings written never hold the run's lock.
        self._findings_fd: int | None = None
        self._findings_lock = threading.Lock()
        # The lines this run wrote to findings.jsonl since it made it or started it afresh;
        # None: a reopened run's file holds lines of before (findings_written).
        self._findings_written: int | None = None

    @classmethod
    def create(
        cls,
        path: Path,
        command: str,
        profile: str | None,
        suite: str | None,
        provenance: Provenance | None = None,
        probes: list[str] | None = None,
    ) -> RunDir:
        try:
            if is_link(path):
                raise RunDirError(f"{path} is a symbolic link; choose another --out")
            if path.exists() and not path.is_dir():
                raise RunDirError(f"{path} exists and is not a directory; choose another --out")
            if path.exists() and any(path.iterdir()):
                raise RunDirError(f"{path} exists and is not empty; choose another --out")
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunDirError(f"cannot create {path}: {exc.strerror}") from None
        manifest = Manifest(
            command=command,
            profile=profile,
            suite=suite,
            started_at=now(),
            probes=probes,
            provenance=provenance or Provenance(),
        )
        run = cls(path, manifest)
        run._findings_written = 0  # an empty folder: no findings.jsonl yet
        run.save_manifest()
        return run

    @classmethod
    def reopen(cls, path: Path, resumed: Resumed | None = None) -> RunDir:
        """An existing run directory, to be continued (`--resume`): its facts are kept,
        each with the time the node measured it."""
        manifest, recorded = load_resumable(path)
        run = cls(path, manifest)
        journal = read_journal(path)  # read whole by load_resumable: JournalError there
        for facts in recorded:
            run._facts[facts.node] = facts
            older = os.path.lexists(run._journal_path(facts.node))  # an older run's
            if journal.of(facts.node) or older:
                # Records a crash left in the journal (read in by load_resumable): into
                # the facts file now, so the resumed run starts from one file per node.
                run._save_facts(facts)
            if older:
                os.unlink(run._journal_path(facts.node))
        # The run journal's records are in the facts files now, each synced.
        for relative in journal.files:
            os.unlink(path / relative)
        manifest.status = "running"
        manifest.ended_at = None
        manifest.exit_code = None
        manifest.files_sha256 = None  # the files change again: hashed when it finishes
        manifest.provenance = manifest.provenance or Provenance()
        manifest.provenance.mode = "resume"
        manifest.provenance.resumed.append(resumed or Resumed(at=now()))
        run.save_manifest()
        return run

    def save_manifest(self) -> None:
        with self._lock:
            text = manifest_text(self.manifest)
            write_atomic(self.path / "manifest.json", text)

    def add_node(self, node: str) -> NodeFacts:
        with self._lock:
            facts = NodeFacts(node=node, bringup_version=__version__, collected_at=now())
            self._facts[node] = facts
            if node not in self.manifest.nodes:
                self.manifest.nodes.append(node)
                self.save_manifest()
            self._save_facts(facts)
            return facts

    def expect(self, nodes: int) -> None:
        """Lay the run out for this many nodes (sharded past SHARD_ABOVE) while no node's
        file is written yet; later, the layout stays (a resumed run keeps its own)."""
        with self._lock:
            if not self._facts and not self.manifest.nodes and layout_for(nodes) == "sharded":
                self.manifest.layout = "sharded"
                self.save_manifest()

    def add_nodes(self, nodes: list[str]) -> None:
        """Every node of a fleet run, in inventory order, before any answers: one write,
        the manifest naming them. A node's facts file is written when it settles (or when
        the run finishes), not now: until then its records are in the run's journal."""
        with self._lock:
            self.expect(len(nodes))
            planned = now()
            for node in nodes:
                if node not in self._facts:
                    facts = NodeFacts(node=node, bringup_version=__version__, collected_at=planned)
                    self._facts[node] = facts
                    self._unfiled.add(node)
                if node not in self.manifest.nodes:
                    self.manifest.nodes.append(node)
            self.save_manifest()

    def add_recorded(self, facts: NodeFacts, source: Path | None = None) -> None:
        """A node's facts as another run recorded them (a replay): every record with the
        time it was measured, and the node's raw tool outputs copied from `source`."""
        with self._lock:
            self._facts[facts.node] = copy.deepcopy(facts)
            if facts.node not in self.manifest.nodes:
                self.manifest.nodes.append(facts.node)
                self.save_manifest()
            self._save_facts(facts)
        folder = raw_folder(source, facts.node) if source is not None else None
        if folder is not None and folder.is_dir() and not is_link(folder):
            # Regular files only: a link, FIFO or device in a directory someone sent must
            # not copy what it points to (any file of this machine) into the evidence, nor
            # hang the replay.
            copy_tree(folder, self._raw_path(facts.node))

    def facts_of(self, node: str) -> NodeFacts:
        """A copy of what is recorded for a node so far. Its own map of probe records:
        add_record replaces a record and never changes one, so records need no copy."""
        with self._lock:
            if node in self._released:  # read back, and let go of again once used
                return self._read_node(node)
            facts = self._held(node)
            return replace(facts, probes=dict(facts.probes))

    def recorded(self, skip: set[str] | frozenset[str] = frozenset()) -> list[NodeFacts]:
        """Every node's facts as load_facts() would read them back (in file-name order):
        those held in memory as they are, a node let go of (release) read from its file;
        none of the nodes in `skip`."""
        with self._lock:
            held = [
                replace(f, probes=dict(f.probes))
                for f in self._facts.values()
                if f.node not in skip
            ]
            released = [node for node in self._released if node not in skip]
        held += [self._read_node(node) for node in released]
        return sorted(held, key=lambda f: file_name(f.node))

    def probe_times(self) -> dict[str, dict[str, float]]:
        """node -> probe -> seconds it ran, in file-name order, records replayed from
        another run left out (their time is not this run's); a node with none absent.
        What `check` prints of how long each probe took (commands/show.py)."""
        found: dict[str, dict[str, float]] = {}
        for node, kept in self._every_kept():
            times = {
                name: seconds
                for (name, replayed, _), seconds in zip(kept.shape, kept.seconds, strict=True)
                if not replayed
            }
            if times:
                found[node] = times
        return found

    def record_chains(self) -> Iterator[tuple[str, tuple[Source, ...]]]:
        """(node, provenance) of every record of every node, in file-name order: what
        the run's origin is judged from (provenance.origin_of)."""
        for node, kept in self._every_kept():
            for _, _, chain in kept.shape:
                yield node, chain

    def _every_kept(self) -> list[tuple[str, Kept]]:
        with self._lock:
            found = [(node, self._keep(facts)) for node, facts in self._facts.items()]
            found += self._released.items()
        return sorted(found, key=lambda entry: file_name(entry[0]))

    def _keep(self, facts: NodeFacts) -> Kept:
        """What release keeps of a node, its shape shared with every node that has the
        same. Under the run's lock."""
        shape = tuple(
            (name, bool(record.params.get("replayed")), tuple(record.provenance))
            for name, record in facts.probes.items()
        )
        shape = self._shapes.setdefault(shape, shape)
        return Kept(shape, tuple(record.duration_s for record in facts.probes.values()))

    def journal(self, node: str) -> None:
        """From now on each record of the node is appended to the run's journal as it
        arrives (synced by the journal's writer with the records of other nodes: `flush`
        waits for them), and its facts file is written (and synced) once, by settle():
        what a fleet run does for each node it runs. Without it, each record rewrites the
        node's file."""
        with self._lock:
            self._held(node)
            self._journaled.add(node)

    def settle(self, node: str) -> None:
        """The node's facts file written, and synced, with every record the run's journal
        took of it, then a line in the journal saying so (a crash between the two leaves
        both: the same records, read once); a planned node's first file, records or none.
        Nothing to do for a node whose file holds every record already."""
        with self._lock:
            self._journaled.discard(node)
            journaled = node in self._unsaved
            if not journaled and node not in self._unfiled:
                return
            self._unsaved.discard(node)
            facts = self._facts[node]
            texts = self._texts.pop(node, None)
        # Written even when the journal could not be (a full disk, a planted link): the
        # record was judged from memory, so the file holds it too. A journaled node's
        # file is put on disk by the journal's barrier, its name by the sync of the batch
        # that writes its `settled` line; a node without records is synced as ever.
        barrier = journaled and self._barriers()
        self._save_facts(facts, texts, barrier)
        if journaled:
            # Its lines in the journal need not be read again.
            self._journal.settled(node, after_files=barrier)

    def flush(self) -> None:
        """Returns once every record taken so far is in the run's journal on disk (its
        writer syncs them without the nodes' threads waiting: bringup/journal.py). OSError
        when they could not be (a full disk)."""
        self._journal.flush()

    def release(self, node: str) -> None:
        """Let go of a judged node's facts: its probe times and provenance stay (Kept:
        probe_times, record_chains), the rest is read back from its file by whoever asks
        again (facts_of, recorded). A fleet of ten thousand nodes is then never all in
        memory at once."""
        self.settle(node)
        with self._lock:
            facts = self._facts.pop(node, None)
            if facts is not None:
                self._released[node] = self._keep(facts)

    def reset_findings(self) -> None:
        """Start findings.jsonl afresh (a resumed run judges every node again)."""
        with self._findings_lock:
            self._close_findings()  # the next findings go to the new file, not the old
            write_atomic(self.path / "findings.jsonl", "")
            self._findings_written = 0

    def add_record(self, node: str, record: dict[str, object]) -> ProbeRecord:
        """Store one probe's result as it arrives: raw files first, then the facts file."""
        raw = record.pop("raw", None) or {}
        parsed = read_record(record)  # jsondata.Invalid: not stored, the node not judged on it
        barrier = None
        if raw:
            # A journaled node's raw files are put on disk by the journal's barrier, one
            # sync of the file system for every thread waiting (RunJournal.barrier), and
            # their names by the sync of the batch that writes the record's line: not a
            # sync of each file and folder by each node's thread (docs/scale.md).
            with self._lock:
                journaled_now = node in self._journaled
            if journaled_now and self._barriers():
                barrier = self._journal.barrier
            # The probe's folder opened once for its files, their names synced at once;
            # from raw/ (or raw/<shard>/), held open for the run as the facts folders are.
            parent, _, leaf = f"raw/{node_folder(node, self.manifest.layout)}".rpartition("/")
            probe = (leaf, file_name(parsed.probe))
            shown = self.path / parent  # its new folders' names synced by the barrier's batch
            folder = open_folder_in(self._folder(parent), probe, shown, True, barrier is None)
            try:
                files = {file_name(str(name)): str(text) for name, text in dict(raw).items()}
                write_files_at(folder, files, barrier=barrier)
            finally:
                os.close(folder)
        # Its journal line made before the run's lock is taken: every node's thread takes
        # that lock for each record, and a thread holding it while it encodes (and the
        # interpreter switches threads meanwhile) made the others queue behind it.
        line = record_text(parsed)
        with self._lock:
            facts = self._held(node)
            facts.probes[parsed.probe] = parsed
            journaled = node in self._journaled
            if journaled:
                text = line
                self._unsaved.add(node)
                self._texts.setdefault(node, {})[parsed.probe] = (parsed, line)
            else:
                text = node_facts_text(facts)
            # The file is written outside the run's lock, so nodes write theirs side by
            # side; the node's own lock, taken before the run's is let go, keeps two
            # writes of one node in the order their texts were made.
            node_lock = self._node_locks.setdefault(node, threading.Lock())
            node_lock.acquire()
        try:
            if journaled:
                # Queued for the journal's writer, which puts it on disk after its raw
                # files' names (not waited for: RunDir.flush waits).
                self._journal.append(node, text, after_files=barrier is not None)
            else:
                if barrier is not None:  # settled meanwhile: its raw files' names synced
                    self._journal.barrier()
                write_atomic(self._facts_path(node), text, root=self.path)
        finally:
            node_lock.release()
        if not journaled:
            # Its file is written. Taken once the node's lock is let go: finish() holds the
            # run's lock while it takes a node's (settle), never the other way round.
            with self._lock:
                self._unfiled.discard(node)
        return parsed

    def record_overrides(self, node: str, changes: list[Override]) -> None:
        """The profile fields a node was judged with that its profile does not say."""
        if not changes:
            return
        with self._lock:
            self.manifest.overrides[node] = changes
            self.save_manifest()

    def add_findings(self, findings: list[Finding], data: bytes | None = None) -> None:
        """Append the findings' lines to findings.jsonl (made if missing): one write under
        the file's own lock, so nodes finishing together never interleave, and no node's
        record waits on the run's lock meanwhile. The file is opened once for the run: an
        open, a write and a close per node under the run's lock made every other thread
        queue (docs/scale.md, "Fewer calls a node, none of them under the run's lock").
        `data`: their lines, made by findings_bytes before a lock of the caller's."""
        if data is None:
            data = findings_bytes(findings)
        with self._findings_lock:
            if self._findings_fd is None:
                self._findings_fd = open_append(self.path / "findings.jsonl")
            if data:
                write_all(self._findings_fd, data)
            if self._findings_written is not None:
                self._findings_written += len(findings)

    def findings_written(self) -> int | None:
        """How many lines findings.jsonl holds, as this run wrote them since it made the
        file or started it afresh (one a finding); None for a reopened run that has not
        started it afresh (its lines of before are the file's to count)."""
        with self._findings_lock:
            return self._findings_written

    def _close_findings(self) -> None:
        """findings.jsonl's descriptor closed (under the file's lock, or with none left)."""
        if self._findings_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._findings_fd)
            self._findings_fd = None

    def finish(self, status: str, exit_code: int) -> None:
        """Close the run: its status, and the hash of every evidence file as it is now."""
        with self._lock:
            # A node its runner never settled; a planned node never run (a replay's
            # unrecorded nodes, Ctrl-C before it started): every node has its file.
            for node in sorted(self._unsaved | self._unfiled):
                self.settle(node)
            self._journal.close()  # every record is in its node's facts file, synced
            self._close_folders()
            with self._findings_lock:
                self._close_findings()
            self.manifest.status = status
            self.manifest.exit_code = exit_code
            self.manifest.ended_at = now()
            self.manifest.files_sha256 = evidence_hashes(self.path)
            self.save_manifest()

    def _barriers(self) -> bool:
        """Whether the running nodes' files are put on disk by the journal's barriers: a
        run of more than one node (one node's thread has no other to share a sync with)
        in a directory files.syncs_whole. Decided once, when a file first needs it: a
        command that writes no record, or a run of one node (a health check), never loads
        ctypes nor reads the mount table for it."""
        if self._syncs_whole is None:
            self._syncs_whole = len(self.manifest.nodes) > 1 and syncs_whole(self.path)
        return self._syncs_whole

    def _save_facts(
        self, facts: NodeFacts, texts: dict[str, Journaled] | None = None, barrier: bool = False
    ) -> None:
        """The node's facts file written, synced, and its name synced into its folder
        (`texts`: its records as the journal took them, laid out rather than encoded).
        `barrier`: the file synced by the journal's barrier, its name left to the caller."""
        relative = node_folder(facts.node, self.manifest.layout)
        folder, _, name = f"facts/{relative}".rpartition("/")
        with self._node_locks.setdefault(facts.node, threading.Lock()):
            text = node_facts_text(facts, texts)
            synced_by = self._journal.barrier if barrier else None
            write_atomic_at(self._folder(folder), f"{name}.json", text, barrier=synced_by)
        with self._lock:
            self._unfiled.discard(facts.node)

    def _close_folders(self) -> None:
        with self._lock:
            for fd in self._folders.values():
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._folders.clear()

    def __del__(self) -> None:  # a RunDir never finished (a test, a refused run)
        with contextlib.suppress(Exception):
            self._close_folders()
            self._close_findings()

    def _folder(self, relative: str) -> int:
        """The descriptor of a facts or raw folder of the run, opened (or made) once: no
        symbolic link followed below the run directory, then or later."""
        with self._lock:
            fd = self._folders.get(relative)
        if fd is not None:
            return fd
        # Opened outside the run's lock (a call per component, each letting go of the
        # interpreter's lock): the first node of each shard opens it, and the others do
        # not queue behind it. Two opening it at once keep the first; the other closes.
        opened = open_folder(self.path, self.path / relative)
        with self._lock:
            fd = self._folders.setdefault(relative, opened)
        if fd != opened:
            os.close(opened)
        return fd

    def _held(self, node: str) -> NodeFacts:
        """The node's facts in memory: read back from its file when it was let go of,
        made (and written) when the run has none yet. Under the run's lock."""
        facts = self._facts.get(node)
        if facts is None and node in self._released:
            facts = self._facts[node] = self._read_node(node)
            del self._released[node]
        return facts or self.add_node(node)

    def _read_node(self, node: str) -> NodeFacts:
        """A settled node's facts as its file holds them: every record the run took of it
        (settle wrote them; a journal of an older run was folded in by reopen)."""
        relative = f"facts/{node_folder(node, self.manifest.layout)}.json"
        try:
            return read_node_facts(read_bytes_in(self.path, relative, "facts"))
        except (InputError, ValueError) as exc:  # jsondata.Invalid is a ValueError
            raise RunDirError(f"{self.path / relative}: {_one_line(exc)}") from None

    def _facts_path(self, node: str) -> Path:
        return self.path / "facts" / f"{node_folder(node, self.manifest.layout)}.json"

    def _journal_path(self, node: str) -> Path:
        return self.path / "facts" / f"{node_folder(node, self.manifest.layout)}{JOURNAL}"

    def _raw_path(self, node: str) -> Path:
        return self.path / "raw" / node_folder(node, self.manifest.layout)


def findings_bytes(findings: list[Finding]) -> bytes:
    """The findings' lines as add_findings appends them to findings.jsonl."""
    return "".join(finding_line(f) + "\n" for f in findings).encode("utf-8")


# --- the journals: running nodes' records, until their facts files are written ------------

JOURNAL = ".journal"  # an older run's facts/<node>.journal beside facts/<node>.json


def with_journal(
    path: Path, relative: str, facts: NodeFacts, journal: JournalRead | None = None
) -> NodeFacts:
    """A node's facts (read from `relative`, a facts file of the run at `path`) with the
    records a crash left of it in the run's journal (bringup/journal.py; `journal`: read
    already, once for every node) or, in a run made before it, in the node's own journal:
    the journal's are the later ones. A journal that is not one a run wrote refuses the
    node's facts (JournalError, jsondata.Invalid or InputError)."""
    facts = _with_node_journal(path, relative, facts)
    records = (journal or read_journal(path)).of(facts.node)
    if not records:
        return facts
    return replace(facts, probes={**facts.probes, **records})


def _with_node_journal(path: Path, relative: str, facts: NodeFacts) -> NodeFacts:
    """The records of an older run's facts/<node>.journal, if a crash left one.

    Each line is one record, whole. The lines after the last record that reads are an
    append a crash cut short (a line without its end, or the zeros a machine's crash can
    leave where the system had not written yet): never stored, left out. A line that is
    not a record before one that is was not written by a run: the node's facts are refused
    (jsondata.Invalid or InputError), never read without it."""
    journal = relative.removesuffix(".json") + JOURNAL
    if not os.path.lexists(path / journal):
        return facts
    data = read_bytes_in(path, journal, "facts journal")
    records: list[ProbeRecord] = []
    problem: Exception | None = None
    for line in data.split(b"\n"):
        try:
            record = jsondata.load(line, ProbeRecord)
        except jsondata.Invalid as exc:
            problem = problem or exc
            continue
        if problem is not None:
            raise problem  # a record after a line that is none: not a journal a run wrote
        records.append(record)
    if not records:
        return facts
    probes = dict(facts.probes)
    probes.update((record.probe, record) for record in records)
    return replace(facts, probes=probes)


def journal_only(path: Path, journal: JournalRead, filed: set[str]) -> list[NodeFacts]:
    """The nodes of the run at `path` with records in its journal and no facts file among
    `filed` (file names, file_name(node)): a fleet run's node has no file until it ends,
    so a crash can leave its records there alone. Each as its records say, with the
    run's version and start as the manifest gives them (its file would have: add_nodes),
    in file-name order."""
    nodes = sorted(
        (node for node in journal.records if file_name(node) not in filed), key=file_name
    )
    if not nodes:
        return []
    try:
        manifest = load_manifest(path)
        version, started = manifest.version, manifest.started_at
    except RunDirError:  # said by every reader of the manifest; the records still count
        version, started = "unknown", ""
    return [
        NodeFacts(
            node=node, bringup_version=version, collected_at=started, probes={**journal.of(node)}
        )
        for node in nodes
    ]


@dataclass(frozen=True)
class FactsEntry:
    """One node's facts file of a run directory, as read: its facts, or why not."""

    name: str  # the file's stem: the node's name as file_name() wrote it
    relative: str  # where it is, relative to the run directory ("facts/node01.json")
    facts: NodeFacts | None
    problem: str | None = None  # why `facts` is None: the file's fault, in one line


def iter_facts(path: Path) -> Iterator[FactsEntry]:
    """Every node's facts of a run directory, one node at a time, in file-name order: each
    facts file with the records a crash left of its node in the run's journal, and each
    node with records there and no file yet (journal_only).

    A reader keeps what it needs of a node and lets the rest go before the next is read:
    a report at ten thousand nodes never holds every node's facts at once. No symbolic
    link inside the run is followed, no FIFO waited on, no file read past the size cap
    (files.read_bytes_in); an unreadable or invalid file is an entry with its problem. A
    run journal that is not one a run wrote is the problem of every node, with a file or
    planned (the manifest's): whose record the line that is none was cannot be known."""
    files = facts_files(path)
    names = [relative.rsplit("/", 1)[-1].removesuffix(".json") for relative in files]
    try:
        journal = read_journal(path)
    except JournalError as exc:
        refused = _one_line(exc)
        where = (journal_files(path) or ["facts"])[0]
        planned = {file_name(node) for node in _planned(path)} - set(names)
        listed = [*zip(names, files, strict=True), *((name, where) for name in planned)]
        for name, relative in sorted(listed, key=lambda entry: entry[0]):
            yield FactsEntry(name, relative, None, refused)
        return
    entries: list[tuple[str, str, NodeFacts | None]] = [
        (name, relative, None) for name, relative in zip(names, files, strict=True)
    ]
    entries += [
        (file_name(facts.node), journal.where[facts.node], facts)
        for facts in journal_only(path, journal, set(names))
    ]
    # In file-name order (a stable sort: two files of one name stay in facts_files' order).
    for name, relative, alone in sorted(entries, key=lambda entry: entry[0]):
        if alone is not None:
            yield FactsEntry(name, relative, alone)
            continue
        try:
            node = read_node_facts(read_bytes_in(path, relative, "facts"))
            node = with_journal(path, relative, node, journal)
        except (InputError, ValueError) as exc:  # jsondata.Invalid is a ValueError
            yield FactsEntry(name, relative, None, _one_line(exc))
            continue
        yield FactsEntry(name, relative, node)


def _planned(path: Path) -> list[str]:
    """The nodes the manifest of the run at `path` names; none when it cannot be read."""
    try:
        return load_manifest(path).nodes
    except RunDirError:
        return []


def load_facts(path: Path) -> list[NodeFacts]:
    """Every node's facts from a run (or snapshot) directory, or from one facts file:
    RunDirError at the first file that is not one."""
    if path.is_dir():
        folder = path / "facts"
        if folder.exists() and not folder.is_dir():
            raise RunDirError(f"{folder}: not a directory (not a run or snapshot directory)")
        files = [path / relative for relative in facts_files(path)]
    else:
        files = [path]
    journal = JournalRead()
    if path.is_dir():
        try:
            journal = read_journal(path)
        except JournalError as exc:
            raise RunDirError(_one_line(exc)) from None
    if not files and not journal.records:
        raise RunDirError(f"{path}: no facts/<node>.json found (not a run or snapshot directory)")
    nodes: list[NodeFacts] = []
    where: dict[str, Path] = {}
    for file in files:
        text = _read(file, "facts", path if path.is_dir() else None)
        try:
            facts = read_node_facts(text)
        except jsondata.Invalid as exc:
            raise RunDirError(f"{file}: not a facts file ({exc})") from None
        if path.is_dir():
            facts = _journaled(path, file, facts, journal)
        if facts.node in where:
            # Two files of one node (flat and sharded, or two shards): which one was
            # measured is not for a reader to guess.
            raise RunDirError(f"{file}: node {facts.node!r} already has {where[facts.node]}")
        where[facts.node] = file
        nodes.append(facts)
    if not path.is_dir():
        return nodes
    filed = {file.name.removesuffix(".json") for file in files}
    alone = journal_only(path, journal, filed)
    for facts in alone:
        if facts.node in where:  # a file named for another node holds this one's facts
            raise RunDirError(f"{where[facts.node]}: node {facts.node!r} also has records alone")
    return sorted([*nodes, *alone], key=lambda facts: file_name(facts.node)) if alone else nodes


def _journaled(path: Path, file: Path, facts: NodeFacts, journal: JournalRead) -> NodeFacts:
    """load_facts' facts of one node with its journals' records; RunDirError naming it."""
    try:
        return with_journal(path, file.relative_to(path).as_posix(), facts, journal)
    except jsondata.Invalid as exc:
        older = file.with_suffix(JOURNAL)
        raise RunDirError(f"{older}: not a facts journal ({exc})") from None
    except (InputError, ValueError) as exc:
        raise RunDirError(f"{file.with_suffix(JOURNAL)}: {_one_line(exc)}") from None


def load_manifest(path: Path) -> Manifest:
    """The manifest of a run directory, or RunDirError saying why there is none."""
    file = path / "manifest.json"
    if not path.is_dir():
        raise RunDirError(f"{path}: not a directory (not a run directory)")
    if not file.exists() and not file.is_symlink():
        raise RunDirError(f"{path}: no manifest.json (not a run directory)")
    text = _read(file, "manifest", path)
    try:
        return parse_manifest(text)
    except jsondata.Invalid as exc:
        raise RunDirError(f"{file}: not a run manifest ({exc})") from None


def load_resumable(path: Path) -> tuple[Manifest, list[NodeFacts]]:
    """A run directory to continue: its manifest and the facts recorded so far, or
    RunDirError when one of them, or its findings.jsonl, is not what a run wrote."""
    manifest = load_manifest(path)
    findings = path / "findings.jsonl"
    if findings.is_symlink() or (findings.exists() and not findings.is_file()):
        raise RunDirError(f"{findings}: not a regular file (not a run directory)")
    recorded = load_facts(path) if (path / "facts").exists() else []
    return manifest, recorded


def _read(file: Path, what: str, run: Path | None) -> str:
    """A file of a run directory `run` (no symlink followed inside it), or one file given."""
    try:
        if run is not None:
            return read_in(run, file.relative_to(run).as_posix(), what)
        return read_text(file, what)
    except InputError as exc:
        raise RunDirError(str(exc)) from None


def _one_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def default_path(command: str) -> Path:
    """runs/<UTC time>-<command> under the current directory."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return Path("runs") / f"{stamp}-{command}"
