"""Where a run's facts came from, and the hashes that show they are what was measured.

A report is evidence only if both sides can tell how it was made and check that nothing
changed since. So every run directory's manifest.json records:

    provenance      the mode (live, demo, replay, resume), the command line (values of
                    options that look secret redacted), the controller's host name, and
                    for a replay the directory replayed with the SHA-256 of its manifest
    files_sha256    the SHA-256 of every evidence file (raw/, facts/, findings.jsonl and
                    the run's own result files), written when the run finishes

`bringup verify RUN_DIR` recomputes the hashes (`compare`); the report prints the SHA-256
of manifest.json itself, one string a renter and a provider can both quote. The time each
record was measured is the node's own (`started_at` of each record, from the node's clock)
and is kept through replay and resume.

Each probe record also carries its own chain of `Source`s (facts.ProbeRecord.provenance):
every step between a measurement and the record, oldest first. An empty chain is a live
measurement by this run; `demo` (the embedded demo fleet), `replayed` (judged again from
another run, named with the SHA-256 of its manifest), `file` (answered from a facts file
by the host variable `bringup_replay`, with the file's SHA-256) and `simulated` (the NVML
simulator or a stand-in tool said so to the probe) each add one link, and nothing removes
one. A run's `Origin` is derived from every record it judges: live only if every record
is, and only a live run can be ACCEPTED (`accepted`, the one rule of every output).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import socket
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from bringup.files import walk_files
from bringup.findings import Finding

Mode = Literal["live", "demo", "replay", "resume"]

# What a run writes as evidence; reports, the manifest and its signature are not evidence.
EVIDENCE_DIRS = ("raw", "facts")
EVIDENCE_FILES = ("findings.jsonl", "baseline.json", "pairs.json")
MANIFEST = "manifest.json"
SIGNATURE = "manifest.json.sig"
REDACTED = "<redacted>"


# Plain dataclasses, as the manifest that holds them (rundir.Manifest): built by the tool
# as they are, read from a manifest strictly by msgspec (bringup/jsondata.py).


@dataclass(frozen=True, slots=True, kw_only=True)
class Resumed:
    """One `--resume` of a run: when, from where, with which command line."""

    at: str
    argv: list[str] = field(default_factory=list)
    controller: str = ""


@dataclass(slots=True, kw_only=True)
class Provenance:
    """How a run came to be: what a report states at its top. Changed in place by a
    `--resume` (its mode, one more `resumed`)."""

    mode: Mode = "live"  # live: measured by this run; demo: the embedded demo fleet
    argv: list[str] = field(default_factory=list)  # after `bringup`, secrets redacted
    controller: str = ""  # host name of the machine bringup ran on
    replay_of: str | None = None  # replay: the run directory (or facts file) judged again
    replay_manifest_sha256: str | None = None  # its manifest.json as it was replayed
    resumed: list[Resumed] = field(default_factory=list)  # each --resume, in order


def controller_host() -> str:
    return socket.gethostname()


# An option (or a KEY=VALUE word, as `-e` and `--env` take) whose name says its value is a
# secret. No bringup option takes one today; a future one, or an Ansible extra variable
# such as ansible_become_password, must still never reach a manifest.
_SECRET_OPTION = re.compile(r"(password|passwd|passphrase|secret|token|api-?key|credential)$")
_SECRET_WORD = re.compile(r"(pass|secret|token|api_?key|credential)", re.IGNORECASE)


def redact(argv: Iterable[str]) -> list[str]:
    """The command line with the values of secret-looking options replaced by REDACTED."""
    out: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if word.startswith("--"):
            name, eq, _ = word[2:].partition("=")
            if _SECRET_OPTION.search(name.lower()):
                out.append(f"--{name}={REDACTED}" if eq else word)
                hide_next = not eq
                continue
        elif "=" in word and not word.startswith("-"):
            key = word.partition("=")[0]
            if _SECRET_WORD.search(key):
                out.append(f"{key}={REDACTED}")
                continue
        out.append(word)
    return out


# --- integrity ------------------------------------------------------------------------------


def sha256_file(path: Path) -> str:
    """The SHA-256 of the regular file `path`, read without following a symlink at it nor
    waiting on a FIFO (OSError naming it, otherwise)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:  # the descriptor read directly: a file object adds a stat, a seek and more
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        # Read as opened: O_NONBLOCK kept a FIFO from hanging the open, and a regular
        # file's reads do not heed it (two calls a file less than setting it back).
        digest = hashlib.sha256()
        while block := os.read(fd, 1 << 20):
            digest.update(block)
    finally:
        os.close(fd)
    return digest.hexdigest()


def manifest_sha256(run_path: Path) -> str:
    """The SHA-256 of a run's manifest.json (OSError when it cannot be read)."""
    return sha256_file(run_path / MANIFEST)


# In place of a hash: what an evidence entry is when it is no regular file. Never a
# SHA-256, so it never matches a recorded one (`compare` names it).
NOT_REGULAR = {"symlink": "!symlink", "other": "!not-a-regular-file"}


def evidence_files(run_path: Path) -> list[str]:
    """The run's evidence entries, as POSIX paths relative to the run directory, sorted:
    every file below raw/ and facts/, and the evidence files, none reached through a
    symbolic link (a link is listed as itself, and `evidence_hashes` marks it)."""
    return [name for name, _ in _evidence_entries(run_path)]


def _evidence_entries(run_path: Path) -> list[tuple[str, int]]:
    """evidence_files with each entry's mode as it was listed (lstat)."""
    found = []
    for name in EVIDENCE_FILES:
        with contextlib.suppress(FileNotFoundError):
            found.append((name, os.lstat(run_path / name).st_mode))
    for folder in EVIDENCE_DIRS:
        found += [(name, info.st_mode) for name, info in walk_files(run_path, folder)]
    # A file an interrupted atomic write left (bringup/files.py): not part of the record.
    return sorted(entry for entry in found if not entry[0].endswith(".tmp"))


def evidence_hashes(run_path: Path) -> dict[str, str]:
    """Relative path -> SHA-256 of every evidence file of the run; a symlink or a file
    that is no regular file (FIFO, device) maps to a NOT_REGULAR mark, never read. An
    entry is judged by its mode as listed; a file then swapped for a link or a FIFO
    fails sha256_file's own checks when it is opened, never followed or waited on."""
    hashes = {}
    for name, mode in _evidence_entries(run_path):
        if stat.S_ISLNK(mode):
            hashes[name] = NOT_REGULAR["symlink"]
        elif not stat.S_ISREG(mode):
            hashes[name] = NOT_REGULAR["other"]
        else:
            hashes[name] = sha256_file(run_path / name)
    return hashes


@dataclass(frozen=True)
class Change:
    """One evidence file that differs from what the manifest recorded."""

    # "symlink": a link stands where evidence goes (never followed: it is no evidence);
    # "not a regular file": a FIFO, device or socket does (never read).
    kind: Literal["modified", "missing", "added", "symlink", "not a regular file"]
    path: str

    def line(self) -> str:
        return f"{self.kind}: {self.path}"


def compare(recorded: dict[str, str], now: dict[str, str]) -> list[Change]:
    """What changed between the recorded hashes and the files now, by path."""
    changes = []
    marks = {mark: kind for kind, mark in NOT_REGULAR.items()}
    for path in sorted(set(recorded) | set(now)):
        if now.get(path) in marks:
            kind = marks[now[path]]
            changes.append(Change("symlink" if kind == "symlink" else "not a regular file", path))
        elif path not in now:
            changes.append(Change("missing", path))
        elif path not in recorded:
            changes.append(Change("added", path))
        elif recorded[path] != now[path]:
            changes.append(Change("modified", path))
    return changes


# --- where each record's facts came from -----------------------------------------------------

SourceKind = Literal["demo", "replayed", "file", "simulated"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Source:
    """One step between a measurement and a probe record (a record's chain, oldest first)."""

    kind: SourceKind
    # replayed: the run directory replayed; file: the facts file; simulated: what was
    # simulated ("GPUs" for the NVML simulator, "dcgmi" for the stand-in); demo: None.
    of: str | None = None
    sha256: str | None = None  # replayed: of the run's manifest.json; file: of the file


def demo_source() -> Source:
    return Source(kind="demo")


def replayed_source(run: str, manifest_sha256: str | None) -> Source:
    return Source(kind="replayed", of=run, sha256=manifest_sha256)


def file_source(path: str, sha256: str | None) -> Source:
    return Source(kind="file", of=path, sha256=sha256)


@dataclass(frozen=True)
class Origin:
    """Where a run's facts came from, derived from every record it judges.

    `reasons` says, in the order first met, each way a record was not measured live by
    this run ("demo data", "replayed from d", "simulated GPUs", "facts from files on
    node03"); none: every record is live. `kinds` are the Source kinds met.
    """

    reasons: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()

    @property
    def live(self) -> bool:
        return not self.reasons

    @property
    def mode(self) -> str:
        """ "live", or the kinds met joined by "+" ("demo+replayed"): the run's mode."""
        return "+".join(self.kinds) if self.kinds else "live"

    @property
    def note(self) -> str | None:
        """What the verdict line says in brackets: None for a live run."""
        return ", ".join(self.reasons) or None


def origin_of(
    chains: Iterable[tuple[str, Sequence[Source]]], made: Provenance | None = None
) -> Origin:
    """The run's Origin from (node, chain) of every record it judges.

    `made`, the run's manifest provenance, covers records written before records carried
    a chain: a demo or replay run says so whatever its records hold (fail closed).
    """
    reasons: dict[str, str] = {}
    kinds: dict[str, None] = {}
    files: dict[str, None] = {}  # nodes with records from a bringup_replay file
    simulated: dict[str, None] = {}
    for node, chain in chains:
        for link in chain:
            kinds[link.kind] = None
            if link.kind == "demo":
                reasons.setdefault("demo", "demo data")
            elif link.kind == "replayed":
                reasons.setdefault(f"replayed {link.of}", f"replayed from {link.of}")
            elif link.kind == "file":
                reasons.setdefault("file", "")
                files[node] = None
            else:
                reasons.setdefault("simulated", "")
                simulated[link.of or "hardware"] = None
    if made is not None and made.mode == "demo" and "demo" not in reasons:
        kinds["demo"] = None
        reasons = {"demo": "demo data", **reasons}
    if made is not None and made.mode == "replay" and f"replayed {made.replay_of}" not in reasons:
        kinds["replayed"] = None
        reasons[f"replayed {made.replay_of}"] = f"replayed from {made.replay_of}"
    if "file" in reasons:
        reasons["file"] = f"facts from files on {', '.join(files)}"
    if "simulated" in reasons:
        reasons["simulated"] = f"simulated {', '.join(simulated)}"
    return Origin(tuple(reasons.values()), tuple(kinds))


LIVE = Origin()


def accepted(findings: Sequence[Finding], origin: Origin) -> bool:
    """The one rule of ACCEPTED: something was judged, nothing was bad, and every record
    was measured live by this run."""
    return accepted_counted(len(findings), sum(1 for f in findings if f.status.bad), origin)


def accepted_counted(judged: int, bad: int, origin: Origin) -> bool:
    """The same rule over the counts of the findings judged and of the bad ones (the
    report's, whose findings are on disk: bringup/report/findingstore.py)."""
    return judged > 0 and bad == 0 and origin.live


def verdict_word(findings: Sequence[Finding], origin: Origin) -> str:
    """ "ACCEPTED", "NOT ACCEPTED", with the origin's note in brackets when not live."""
    word = "ACCEPTED" if accepted(findings, origin) else "NOT ACCEPTED"
    return f"{word} ({origin.note})" if origin.note else word


def verdict_exit_code(findings: Sequence[Finding], origin: Origin) -> int:
    """The exit status of a command that judges: 0 only for ACCEPTED, else 1."""
    return 0 if accepted(findings, origin) else 1
