"""Files the command line reads and writes: one reader for every file a user names, one
atomic writer for the run directory.

Every file the CLI reads (profiles, suites, recipes, baselines, facts, manifests, tool
outputs for `inspect`) goes through `read_text`, so a wrong file fails the same way
everywhere: an `InputError` with one line naming the file and what is wrong with it,
which the command prints and exits 2 with. What is refused:

    not there, unreadable       "cannot read PATH: Permission denied"
    not a regular file          a directory, a FIFO, a device such as /dev/urandom, a socket
    larger than MAX_BYTES       64 MiB: no input bringup takes comes near it, and a read
                                never runs without end
    not UTF-8 text              a binary file given where text is expected

The parsers above then turn malformed content (YAML, JSON, schema) into the same
exception type, or a subclass of it.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

MAX_BYTES = 64 * 1024 * 1024  # the cap on any file the command line reads (docs/troubleshooting)


class InputError(Exception):
    """A file (or option) the user gave cannot be used; the message is one line."""


def read_bytes(path: Path, what: str, limit: int = MAX_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; `what` names it in errors."""
    try:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{path}: {_kind(info.st_mode)}, not a {what} file")
        if info.st_size > limit:
            raise InputError(f"{path}: {_size(info.st_size)}, over the {_size(limit)} cap")
        os.set_blocking(fd, True)
        data = _read_at_most(fd, limit + 1)  # the file may grow while it is read
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise InputError(f"{path}: over the {_size(limit)} cap")
    return data


def read_text(path: Path, what: str, limit: int = MAX_BYTES, lenient: bool = False) -> str:
    """The UTF-8 text of a file (see read_bytes); `lenient` replaces undecodable bytes
    instead of refusing them (tool outputs that may carry a stray byte)."""
    data = read_bytes(path, what, limit)
    if lenient:
        return data.decode("utf-8", errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}),"
            f" not a {what} file"
        ) from None


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` in one step: a reader sees the old or the new content.

    The temporary file gets a fresh random name and is created with O_EXCL|O_NOFOLLOW, so a
    symlink planted under the name it will take is never followed.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        fd = os.open(tmp, flags, 0o666)
    except FileNotFoundError:  # the folder is made on first use (a run writes it often)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, flags, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def append_lines(path: Path, text: str) -> None:
    """Append whole lines to a regular file, never through a symlink."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    with os.fdopen(os.open(path, flags, 0o666), "a", encoding="utf-8") as out:
        out.write(text)


def _read_at_most(fd: int, count: int) -> bytes:
    chunks = []
    while count > 0:
        chunk = os.read(fd, min(count, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _size(count: int) -> str:
    return f"{count / (1 << 20):.0f} MiB" if count >= 1 << 20 else f"{count} bytes"
