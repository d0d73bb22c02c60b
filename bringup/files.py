"""Files the command line reads and writes: one reader for every file a user names, one
reader for the files inside a run directory, and one atomic writer for every file bringup
writes.

Every file the CLI reads (profiles, suites, recipes, baselines, facts, manifests, tool
outputs for `inspect`) goes through `read_text`, so a wrong file fails the same way
everywhere: an `InputError` with one line naming the file and what is wrong with it,
which the command prints and exits 2 with. What is refused:

    not there, unreadable       "cannot read PATH: Permission denied"
    not a regular file          a directory, a FIFO, a device such as /dev/urandom, a socket
    larger than MAX_BYTES       64 MiB: no input bringup takes comes near it, and a read
                                never runs without end
    not UTF-8 text              a binary file given where text is expected

A run directory may come from someone else (a provider's handover, a copied bundle), so a
file inside one is read with `read_in`: every path component below the run directory is
opened without following a symbolic link (bringup never writes one there), so a planted
`raw -> /etc` or `findings.jsonl -> /dev/zero` is refused, naming the file, and never read.
`walk_files` lists a run directory's files the same way, without descending a link.

Every file bringup writes goes through `write_atomic`: a fresh random temporary name
created with O_CREAT|O_EXCL|O_NOFOLLOW in the target's own directory, written, fsynced and
renamed over the final name. A symlink planted at the final name is replaced, one planted
at a temporary name is never hit (the name is random and O_EXCL refuses what exists), and
the directory written into is opened with O_NOFOLLOW: a symlinked output directory is
refused (`make_dir`), never followed.

The parsers above then turn malformed content (YAML, JSON, schema) into the same
exception type, or a subclass of it.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import os
import secrets
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

MAX_BYTES = 64 * 1024 * 1024  # the cap on any file the command line reads (docs/troubleshooting)

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC


class InputError(Exception):
    """A file (or option) the user gave cannot be used; the message is one line."""


class OutputError(OSError):
    """A place bringup was asked to write to cannot be used safely; the message is one line."""


# --- reading ---------------------------------------------------------------------------------


def read_bytes(path: Path, what: str, limit: int = MAX_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; `what` names it in errors."""
    try:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    return _read_fd(fd, path, what, limit)


def read_text(path: Path, what: str, limit: int = MAX_BYTES, lenient: bool = False) -> str:
    """The UTF-8 text of a file (see read_bytes); `lenient` replaces undecodable bytes
    instead of refusing them (tool outputs that may carry a stray byte)."""
    return _decode(read_bytes(path, what, limit), path, what, lenient)


def read_in(
    root: Path, relative: str, what: str, limit: int = MAX_BYTES, lenient: bool = False
) -> str:
    """The UTF-8 text of the file `relative` (a POSIX path) inside the run directory `root`,
    refused (InputError naming it) when any component below `root` is a symbolic link, or
    the file is not a regular file, larger than `limit`, or not UTF-8 (unless `lenient`)."""
    return _decode(read_bytes_in(root, relative, what, limit), root / relative, what, lenient)


def read_bytes_in(root: Path, relative: str, what: str, limit: int = MAX_BYTES) -> bytes:
    """The bytes of `relative` inside `root`, read as `read_in` says."""
    return _read_fd(_open_in(root, relative), root / relative, what, limit)


def read_lines_in(
    root: Path,
    relative: str,
    what: str,
    limit: int = MAX_BYTES,
    line_limit: int | None = None,
) -> Iterator[str]:
    """The lines of `relative` inside `root`, each without its "\n" (and the text after the
    last one, "" when the file ends with one), as `read_in(..., lenient=True).split("\n")`
    gives them, but read a chunk at a time: a large findings.jsonl is never one string.

    Refused as `read_in` refuses, with the same InputError: before the first line, or,
    for a file that grows past `limit` while it is read, after the lines before the cap
    (the caller drops them: the file was refused). `line_limit`: no line may be longer
    (in bytes), so that what is held of one line is bounded too; refused the same way."""
    path = root / relative
    fd = _open_in(root, relative)
    try:
        _check_readable(fd, path, what, limit)
        left = limit + 1  # the file may grow while it is read
        pending = b""
        while left > 0:
            try:
                chunk = os.read(fd, min(left, 1 << 20))
            except OSError as exc:
                raise InputError(f"cannot read {path}: {exc.strerror}") from None
            if not chunk:
                break
            left -= len(chunk)
            if left <= 0:
                raise InputError(f"{path}: over the {_size(limit)} cap")
            # "\n" is never part of a longer UTF-8 sequence: each line decodes as the whole
            # text would.
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                _check_line(line, path, line_limit)
                yield line.decode("utf-8", errors="replace")
            _check_line(pending, path, line_limit)
        yield pending.decode("utf-8", errors="replace")
    finally:
        os.close(fd)


def _check_line(line: bytes, path: Path, limit: int | None) -> None:
    if limit is not None and len(line) > limit:
        raise InputError(f"{path}: a line over the {_size(limit)} cap on one line")


def _open_in(root: Path, relative: str) -> int:
    """`relative` inside `root` opened for reading (O_NONBLOCK), no link followed."""
    path = root / relative
    parts = Path(relative).parts
    if not parts or any(part in ("..", "/") for part in parts):
        raise InputError(f"{path}: not a path inside {root}")
    try:
        folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    except OSError as exc:
        raise InputError(f"cannot read {root}: {exc.strerror}") from None
    try:
        for index, part in enumerate(parts[:-1]):
            try:
                inner = os.open(part, _DIR_FLAGS, dir_fd=folder)
            except OSError as exc:
                where = root.joinpath(*parts[: index + 1])
                raise InputError(f"cannot read {path}: {_why(exc, where)}") from None
            os.close(folder)
            folder = inner
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | _CLOEXEC
        try:
            fd = os.open(parts[-1], flags, dir_fd=folder)
        except OSError as exc:
            raise InputError(f"cannot read {path}: {_why(exc, path)}") from None
    finally:
        os.close(folder)
    return fd


def is_link(path: Path) -> bool:
    """Whether `path` itself is a symbolic link (False when it is not there)."""
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def walk_files(root: Path, folder: str) -> Iterator[tuple[str, os.stat_result]]:
    """(relative POSIX path, lstat) of every entry below `root/folder` that is not a
    directory, without following a symbolic link: a link (to a file or a directory) is
    listed as itself, never descended, so a planted `raw -> /usr` lists one entry. In
    each folder: the links to folders, then the other entries, each by name; then its
    folders, by name. A folder that cannot be listed is passed over (as os.walk does)."""
    base = root / folder
    try:
        info = os.lstat(base)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        yield folder, info
        return
    yield from _walk(str(base), folder)


def _walk(path: str, relative: str) -> Iterator[tuple[str, os.stat_result]]:
    # An entry's kind is the listing's (no call a file); only a link is looked through, to
    # list a link to a folder first, as os.walk did. At ten thousand nodes the run's
    # evidence is 20,000 files in 10,000 folders: os.walk and a check of each folder for
    # a link were two calls a folder more.
    try:
        with os.scandir(path) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError:
        return
    folders, linked, others = [], [], []
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            folders.append(entry)
        elif entry.is_symlink() and entry.is_dir():
            linked.append(entry)
        else:
            others.append(entry)
    for entry in [*linked, *others]:
        yield f"{relative}/{entry.name}", entry.stat(follow_symlinks=False)
    for entry in folders:
        yield from _walk(entry.path, f"{relative}/{entry.name}")


def _check_readable(fd: int, path: Path, what: str, limit: int) -> None:
    """What read_in and read_lines_in refuse before the first byte, in the same words."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{path}: {_kind(info.st_mode)}, not a {what} file")
    if info.st_size > limit:
        raise InputError(f"{path}: {_size(info.st_size)}, over the {_size(limit)} cap")
    os.set_blocking(fd, True)


def _read_fd(fd: int, path: Path, what: str, limit: int) -> bytes:
    try:
        _check_readable(fd, path, what, limit)
        data = _read_at_most(fd, limit + 1)  # the file may grow while it is read
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise InputError(f"{path}: over the {_size(limit)} cap")
    return data


def _decode(data: bytes, path: Path, what: str, lenient: bool) -> str:
    if lenient:
        return data.decode("utf-8", errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}),"
            f" not a {what} file"
        ) from None


def _why(exc: OSError, where: Path) -> str:
    """Why opening a component without following links failed, in words."""
    if exc.errno in (errno.ELOOP, errno.ENOTDIR) and is_link(where):
        return f"{where} is a symbolic link (not followed in a run directory)"
    return exc.strerror or str(exc)


# --- writing ---------------------------------------------------------------------------------


def make_dir(path: Path) -> None:
    """Create the directory `path` (and its parents) if missing; an existing `path` that is
    a symbolic link, or not a directory, is refused (OutputError, one line)."""
    if is_link(path):
        raise OutputError(
            errno.ELOOP, f"{path} is a symbolic link; give the directory it points to"
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise OutputError(errno.ENOTDIR, f"{path} exists and is not a directory") from None


def _chunks(data: Iterable[str], size: int = 1 << 16) -> Iterator[bytes]:
    """Text in pieces as UTF-8 in chunks of about `size` characters: a template yields a
    piece per tag and value (715,000 for the Markdown of a thousand nodes), and encoding
    and writing each alone was a tenth of the report's CPU."""
    held: list[str] = []
    count = 0
    for piece in data:
        held.append(piece)
        count += len(piece)
        if count >= size:
            yield "".join(held).encode("utf-8")
            held.clear()
            count = 0
    if held:
        yield "".join(held).encode("utf-8")


def write_atomic(
    path: Path, data: str | bytes | Iterable[str], mode: int = 0o666, root: Path | None = None
) -> None:
    """Replace `path` with `data` (text is written as UTF-8) in one step: a reader sees the
    old or the new content, and after a crash one of them is on disk. `data` may be text
    in pieces (an iterable of str), written as they come: a report of ten thousand nodes
    is never one string in memory.

    The temporary file gets a fresh random name in the same directory and is created with
    O_EXCL|O_NOFOLLOW; the directory is opened with O_NOFOLLOW and every step is made
    relative to it, so no symlink planted at the directory, the temporary or the final name
    is followed: one at the final name is replaced by the file. With `root` (a run
    directory), every directory between it and `path` is opened (or made) the same way.
    """
    folder = _open_dir(path.parent) if root is None else _open_dir_under(root, path.parent)
    try:
        write_atomic_at(folder, path.name, data, mode)
    finally:
        os.close(folder)


def write_atomic_at(
    folder: int,
    name: str,
    data: str | bytes | Iterable[str],
    mode: int = 0o666,
    sync_folder: bool = True,
    barrier: Callable[[], None] | None = None,
) -> None:
    """write_atomic's file `name` in the directory open at `folder` (open_folder): a
    writer of many files in one directory opens it once, not once a file.
    `sync_folder=False` leaves the new name's sync to the caller (sync_folder(), once for
    many files): the file's own bytes are synced before the rename either way, so the
    name, once on disk, never points at a file without them.

    `barrier`: the file's bytes are put on disk by it (a call that returns once every
    file written before it is on disk: RunJournal.barrier, one sync of the file system
    shared by the run's threads) rather than by a sync of their own; the new name is then
    the caller's to put on disk (it is not synced here, whatever `sync_folder` says). A
    barrier that fails (OSError) leaves the file to its own sync, and its name to this
    call's, as without one."""
    write_files_at(folder, {name: data}, mode, sync_folder, barrier)


def write_files_at(
    folder: int,
    files: Mapping[str, str | bytes | Iterable[str]],
    mode: int = 0o666,
    sync_folder: bool = True,
    barrier: Callable[[], None] | None = None,
) -> None:
    """Each file of `files` (name -> data) written as write_atomic_at writes it, and
    their names synced once (`sync_folder`). With a `barrier`, one for them all: every
    file written, the barrier, then every rename."""
    written: list[tuple[str, str]] = []  # (temporary, name) of each file made so far
    open_fds: list[int] = []  # their descriptors not yet closed
    synced = False  # by the barrier
    try:
        for name, data in files.items():
            tmp, fd = _create_temporary(folder, name, mode)
            written.append((tmp, name))
            open_fds.append(fd)
            _write_pieces(fd, data)
        if barrier is not None:
            with contextlib.suppress(OSError):  # then each file synced on its own
                barrier()
                synced = True
        while open_fds:
            fd = open_fds.pop(0)  # in the order written
            try:
                if not synced:
                    os.fsync(fd)
            finally:
                os.close(fd)
        for tmp, name in written:
            os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        for fd in open_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        for tmp, _ in written:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)
        raise
    if sync_folder and not synced:
        sync_dir(folder)


def _write_pieces(fd: int, data: str | bytes | Iterable[str]) -> None:
    # The descriptor written directly, not through a file object: each piece is one
    # write (text comes in chunks: _chunks), and a file object's own calls (a stat, a
    # terminal check, a seek) were a fifth of a fleet run's calls for its files.
    pieces: Iterable[bytes]
    if isinstance(data, bytes):
        pieces = (data,)
    elif isinstance(data, str):
        pieces = (data.encode("utf-8"),)
    else:
        pieces = _chunks(data)
    for piece in pieces:
        write_all(fd, piece)


def sync_dir(folder: int) -> None:
    """The names in the directory open at `folder` put on disk (fsync of the directory)."""
    with contextlib.suppress(OSError):  # some file systems cannot sync a directory
        os.fsync(folder)


def sync_file_system(fd: int) -> None:
    """Every file written on the file system that holds `fd` put on disk, data and names
    (Linux's syncfs(2)): one call where a writer of many files would sync each file and
    each folder. OSError when it fails (the kernel reports writeback errors to it since
    5.8: can_sync_file_system). By hand, through ctypes: the os module has no syncfs."""
    import ctypes

    call = _syncfs()
    if call is None:
        raise OSError(errno.ENOSYS, "cannot sync the file system: no syncfs here")
    if call(fd) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"cannot sync the file system: {os.strerror(code)}")


@functools.cache
def can_sync_file_system() -> bool:
    """Whether sync_file_system is there and says when it failed: Linux 5.8 or later (an
    older kernel's syncfs returns 0 after a failed writeback) with a C library that has
    syncfs. Elsewhere a writer syncs each file and folder."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        major, minor = (int(part) for part in os.uname().release.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (5, 8) and _syncfs() is not None


# File systems on the machine's own disks (or memory), where syncing the whole file
# system writes what this machine's processes wrote there. Not a network or cluster file
# system (nfs, cifs, lustre, gpfs, fuse...): there it would flush every client's data
# held here through one server, and each file is synced on its own instead.
LOCAL_FILE_SYSTEMS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "zfs", "tmpfs", "overlay"}
)


def syncs_whole(path: Path) -> bool:
    """Whether a writer of many files under the directory `path` syncs them with one
    sync_file_system: there is one that reports failures (can_sync_file_system) and the
    directory is on a local file system (LOCAL_FILE_SYSTEMS)."""
    if not can_sync_file_system():
        return False
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as mounts:
            return file_system_type(os.stat(path).st_dev, mounts.read()) in LOCAL_FILE_SYSTEMS
    except OSError:
        return False


def file_system_type(device: int, mountinfo: str) -> str | None:
    """The type of the file system on `device` (a stat's st_dev) by the lines of
    /proc/self/mountinfo (its third field the device, "major:minor"; the type the first
    field after " - "); None when no line names it."""
    wanted = f"{os.major(device)}:{os.minor(device)}"
    for line in mountinfo.splitlines():
        mount, _, tail = line.partition(" - ")
        fields = mount.split()
        if len(fields) >= 3 and fields[2] == wanted and tail:
            return tail.split()[0]
    return None


@functools.cache
def _syncfs() -> Callable[[int], int] | None:
    """The C library's syncfs, loaded once, the first time a run syncs (ctypes is not
    loaded by a command that never does)."""
    import ctypes

    try:
        call = ctypes.CDLL(None, use_errno=True).syncfs  # the interpreter's own C library
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int]
    call.restype = ctypes.c_int
    return call  # type: ignore[no-any-return]


def open_folder(root: Path, path: Path) -> int:
    """A descriptor of the directory `path`, at or below the directory `root`, opened (or
    made) as write_atomic opens it: no symbolic link followed below `root`. The caller
    closes it."""
    return _open_dir_under(root, path)


def copy_tree(
    source: Path, target: Path, strict: bool = False, limit: int = MAX_BYTES
) -> list[str]:
    """Copy the regular files below `source` into `target` (made as write_atomic makes a
    directory), never following a symbolic link nor opening a FIFO or device: those are
    left out and returned (their paths relative to `source`); with `strict`, any of them
    is an InputError naming them, before anything is copied. A file that cannot be read
    (over `limit`, gone) is an InputError naming it."""
    entries = [
        (Path(relative).relative_to(source.name).as_posix(), info)
        for relative, info in walk_files(source.parent, source.name)
    ]
    left_out = [relative for relative, info in entries if not stat.S_ISREG(info.st_mode)]
    if strict and left_out:
        more = f" and {len(left_out) - 3} more" if len(left_out) > 3 else ""
        raise InputError(
            f"{source}: {', '.join(left_out[:3])}{more}: not a regular file"
            " (a symlink, FIFO or device), refused"
        )
    make_dir(target)
    for relative, info in entries:
        if stat.S_ISREG(info.st_mode):
            data = read_bytes_in(source, relative, "run", limit)
            write_atomic(target / relative, data, root=target)
    return left_out


_TEMPORARY = secrets.token_hex(4)
_TEMPORARIES = itertools.count()


def _create_temporary(folder: int, name: str, mode: int) -> tuple[str, int]:
    """A new file beside `name` in the directory `folder`, under a random name: (name, fd).
    O_EXCL|O_NOFOLLOW: whatever already stands at a name (a symlink planted there) is never
    opened; another random name is drawn instead."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
    for attempt in range(8):
        # This process's random prefix and its next number: no two of its temporaries
        # share a name, and none is drawn from the system's random source each time (a
        # call a file, at two files a node). A name taken (a planted file, a forked
        # process's) draws a random one.
        unique = f"{_TEMPORARY}{next(_TEMPORARIES):x}" if attempt == 0 else secrets.token_hex(6)
        tmp = f".{name[:200]}.{unique}.tmp"
        try:
            return tmp, os.open(tmp, flags, mode, dir_fd=folder)
        except FileExistsError:
            if attempt == 7:
                raise
    raise AssertionError("unreachable")


def open_append(path: Path) -> int:
    """A descriptor that appends to the file `path` (made when missing), never opened
    through a symlink: a writer that appends often holds it, not one open a write."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | _CLOEXEC, 0o666)


def write_all(fd: int, data: bytes) -> None:
    """Every byte of `data` written to `fd` (one write takes all of it on a local file;
    the loop is for one that takes part)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _open_dir(path: Path) -> int:
    """A file descriptor of the directory `path`, made (with its parents) on first use; a
    symlink at `path` itself is refused, never followed."""
    try:
        return os.open(path, _DIR_FLAGS)
    except FileNotFoundError:  # the folder is made on first use (a run writes it often)
        make_dir(path)
        return os.open(path, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and is_link(path):
            raise OutputError(
                errno.ELOOP, f"{path} is a symbolic link; give the directory it points to"
            ) from None
        raise


def _open_dir_under(root: Path, path: Path) -> int:
    """A file descriptor of `path`, a directory at or below `root`: each component below
    `root` opened with O_NOFOLLOW, or made when missing; a symlink among them is refused."""
    folder = _open_dir(root)
    try:
        return open_folder_in(folder, path.relative_to(root).parts, root)
    finally:
        os.close(folder)


def open_folder_in(
    folder: int,
    parts: Sequence[str],
    shown: Path,
    new_last: bool = False,
    sync_made: bool = True,
) -> int:
    """A descriptor of the directory `parts` below the directory open at `folder` (shown
    as `shown` in errors): each component opened with O_NOFOLLOW, made when missing, a
    symlink among them refused. `folder` stays open; the caller closes the one returned.
    A writer of many folders below one keeps that one open (RunDir: raw/<shard>/).
    `new_last`: the last component is most likely not there yet (a probe's raw folder), so
    it is made before it is opened, not after an open that fails. A folder made is synced
    into its parent (its name on disk before anything in it is relied on), unless
    `sync_made` is False: the caller syncs the file system after (RunJournal.barrier)."""
    current = folder  # the caller's: never closed here
    try:
        for index, part in enumerate(parts):
            make_first = new_last and index == len(parts) - 1
            try:
                inner, made = _open_or_make(current, part, make_first)
                if made and sync_made:
                    sync_dir(current)
            except OSError as exc:
                where = shown.joinpath(*parts[: index + 1])
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and is_link(where):
                    raise OutputError(
                        errno.ELOOP, f"{where} is a symbolic link (not followed in a run)"
                    ) from None
                raise
            if current != folder:
                os.close(current)
            current = inner
    except BaseException:
        if current != folder:
            os.close(current)
        raise
    return current if current != folder else os.dup(folder)


def _open_or_make(folder: int, part: str, make_first: bool = False) -> tuple[int, bool]:
    """The directory `part` in `folder`, opened with O_NOFOLLOW, and whether this call
    made it; made first when missing (or, with `make_first`, made, then opened whether it
    was there or not)."""
    if not make_first:
        try:
            return os.open(part, _DIR_FLAGS, dir_fd=folder), False
        except FileNotFoundError:  # opened first: in a run most of them are there already
            pass
    made = True
    try:
        os.mkdir(part, 0o777, dir_fd=folder)
    except FileExistsError:
        made = False
    return os.open(part, _DIR_FLAGS, dir_fd=folder), made


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
