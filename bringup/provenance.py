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
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import socket
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from bringup.files import walk_files

Mode = Literal["live", "demo", "replay", "resume"]

# What a run writes as evidence; reports, the manifest and its signature are not evidence.
EVIDENCE_DIRS = ("raw", "facts")
EVIDENCE_FILES = ("findings.jsonl", "baseline.json", "pairs.json")
MANIFEST = "manifest.json"
SIGNATURE = "manifest.json.sig"
REDACTED = "<redacted>"


class Resumed(BaseModel):
    """One `--resume` of a run: when, from where, with which command line."""

    at: str
    argv: list[str] = Field(default_factory=list)
    controller: str = ""


class Provenance(BaseModel):
    """How a run came to be: what a report states at its top."""

    mode: Mode = "live"  # live: measured by this run; demo: the embedded demo fleet
    argv: list[str] = Field(default_factory=list)  # after `bringup`, secrets redacted
    controller: str = ""  # host name of the machine bringup ran on
    replay_of: str | None = None  # replay: the run directory (or facts file) judged again
    replay_manifest_sha256: str | None = None  # its manifest.json as it was replayed
    resumed: list[Resumed] = Field(default_factory=list)  # each --resume, in order


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
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
        digest = hashlib.sha256()
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
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
    found = [name for name in EVIDENCE_FILES if os.path.lexists(run_path / name)]
    for folder in EVIDENCE_DIRS:
        found += [name for name, _ in walk_files(run_path, folder)]
    # A file an interrupted atomic write left (bringup/files.py): not part of the record.
    return sorted(f for f in found if not Path(f).name.endswith(".tmp"))


def evidence_hashes(run_path: Path) -> dict[str, str]:
    """Relative path -> SHA-256 of every evidence file of the run; a symlink or a file
    that is no regular file (FIFO, device) maps to a NOT_REGULAR mark, never read."""
    hashes = {}
    for name in evidence_files(run_path):
        mode = os.lstat(run_path / name).st_mode
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


def is_demo(made: Provenance | None) -> bool:
    """Demo data: never ACCEPTED, whatever its findings (the report, the console, --json)."""
    return made is not None and made.mode == "demo"


def verdict_note(made: Provenance | None) -> str | None:
    """What a verdict must say beside ACCEPTED / NOT ACCEPTED about where its facts came
    from: demo data, or a replay of which run; None for a run that measured its nodes."""
    if made is None:
        return None
    if made.mode == "demo":
        return "demo data"
    if made.mode == "replay":
        sha = made.replay_manifest_sha256
        which = f"manifest sha256 {sha[:16]}…" if sha else "no manifest"
        return f"replay of {made.replay_of}, {which}"
    return None
