"""Private work directories on a node: made fresh for each run, mode 700, under a base no
other user can tamper with.

The burn-in writes its plan, its log and its checkpoints into its work directory, and
DeepSpeed loads those checkpoints back with pickle: a directory another local user could
prepare or swap would run their code as the user of the burn-in, usually root. So no fixed
name in a shared /tmp: every scratch directory is a new one with a random name, made with
`mkdir` relative to an opened, checked base (no symlink followed, no race between the check
and the mkdir), by default under this user's own cache,
`${XDG_CACHE_HOME:-~/.cache}/bringup/<kind>`.

A base is refused when it is a symlink, or when it or a directory above it could be changed
by someone else: owned by another user than this one or root, or writable by group or
others without the sticky bit (/tmp itself is fine: sticky, so nobody can rename what we
make in it).
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from pathlib import Path

from bringup.node.result import ProbeError


class UnsafeDirectory(ProbeError):
    """A directory others could tamper with; one line saying which and why."""


def cache_root() -> Path:
    """This user's cache for bringup: $XDG_CACHE_HOME/bringup (when absolute, as the XDG
    spec asks), else ~/.cache/bringup."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path(os.path.expanduser("~")) / ".cache"
    return base / "bringup"


def check_base(path: Path) -> Path:
    """The real path of `path` when it and every directory above it are safe to make
    private directories in; UnsafeDirectory otherwise."""
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            raise UnsafeDirectory(f"{path} is a symlink: refused as a work directory")
        real = Path(os.path.realpath(path))
        for directory in [real, *real.parents]:
            _check_directory(directory, os.lstat(directory))
    except OSError as exc:
        raise UnsafeDirectory(f"cannot check {path}: {exc.strerror}") from None
    return real


def _check_directory(path: Path, st: os.stat_result) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeDirectory(f"{path} is a symlink: refused as a work directory")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeDirectory(f"{path} is not a directory")
    user = os.geteuid()
    if st.st_uid not in (user, 0):
        raise UnsafeDirectory(
            f"{path} is owned by uid {st.st_uid}, not by this user (uid {user}) or root: "
            "refused as a work directory"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        raise UnsafeDirectory(
            f"{path} is writable by other users without the sticky bit "
            f"(mode {stat.S_IMODE(st.st_mode):o}): refused as a work directory"
        )


def _open_checked(real: Path) -> int:
    """An open descriptor of the checked directory `real` (not following a symlink put
    there since), checked again: the mkdir that follows is relative to it."""
    try:
        fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise UnsafeDirectory(f"cannot open {real}: {exc.strerror}") from None
    try:
        _check_directory(real, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    return fd


def private_dir(base: Path, prefix: str) -> Path:
    """A new directory `base/<prefix><random>`, mode 700, this user's; `base` checked first."""
    real = check_base(base)
    prefix = re.sub(r"[^A-Za-z0-9._-]", "_", prefix)
    fd = _open_checked(real)
    try:
        for _ in range(100):
            name = f"{prefix}{secrets.token_hex(6)}"
            try:
                os.mkdir(name, 0o700, dir_fd=fd)
            except FileExistsError:
                continue
            except OSError as exc:
                raise UnsafeDirectory(
                    f"cannot create a directory in {real}: {exc.strerror}"
                ) from None
            return real / name
        raise UnsafeDirectory(f"cannot create a directory in {real}: every name taken")
    finally:
        os.close(fd)


def new_dir(path: Path) -> Path:
    """Make exactly `path` (which must not exist yet), mode 700, in a checked parent."""
    parent = check_base(path.parent)
    fd = _open_checked(parent)
    try:
        try:
            os.mkdir(path.name, 0o700, dir_fd=fd)
        except FileExistsError:
            raise UnsafeDirectory(f"{path} exists already: a work directory must be new") from None
        except OSError as exc:
            raise UnsafeDirectory(f"cannot create {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    return parent / path.name


def work_dir(kind: str, base: str = "", prefix: str = "") -> Path:
    """A new private directory for one run of `kind` (burnin, nccl): under `base` when one
    is given, else under this user's cache; the base is made (mode 700) when missing."""
    root = Path(base).expanduser() if base else cache_root() / kind
    _make_missing(root)
    return private_dir(root, prefix or f"{kind}-")


def _make_missing(path: Path) -> None:
    """Create the missing directories of `path`, each mode 700 (os.makedirs would give the
    ones above the last the umask's mode, 777 under umask 0)."""
    missing: list[Path] = []
    while not os.path.lexists(path) and path != path.parent:
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            continue  # made meanwhile: check_base judges it
        except OSError as exc:
            raise UnsafeDirectory(f"cannot create {directory}: {exc.strerror}") from None
