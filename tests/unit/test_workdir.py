"""Private work directories on a node (bringup/node/workdir.py), on real files: a base that
is a symlink, owned by another user, or writable by others without the sticky bit is
refused, and every directory made is new, random and mode 700."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from bringup.node.workdir import (
    UnsafeDirectory,
    cache_root,
    check_base,
    new_dir,
    private_dir,
    work_dir,
)

NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_cache_is_the_users_own(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_root() == tmp_path / ".cache" / "bringup"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # not absolute: ignored
    assert cache_root() == tmp_path / ".cache" / "bringup"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "bringup"


def test_a_work_dir_is_new_private_and_random(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    old = os.umask(0)  # the most permissive umask still gives 700
    try:
        first = work_dir("burnin", prefix="run1-gpu/01-")
        second = work_dir("burnin", prefix="run1-gpu/01-")
    finally:
        os.umask(old)
    base = tmp_path / "cache" / "bringup" / "burnin"
    assert first.parent == second.parent == base and first != second
    assert first.name.startswith("run1-gpu_01-")  # no path separator from a node name
    for path in (first, second, base, base.parent):
        assert _mode(path) == 0o700, path
    assert first.stat().st_uid == os.geteuid()


def test_a_symlinked_base_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "bringup-burnin"
    link.symlink_to(real)
    with pytest.raises(UnsafeDirectory, match=r"bringup-burnin is a symlink: refused"):
        work_dir("burnin", base=str(link))
    assert list(real.iterdir()) == []


@needs_root
def test_a_base_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    planted = tmp_path / "bringup-burnin"  # as a local user would plant it in /tmp
    planted.mkdir(mode=0o755)
    os.chown(planted, NOBODY, NOBODY)
    with pytest.raises(UnsafeDirectory) as info:
        work_dir("burnin", base=str(planted))
    assert str(info.value) == (
        f"{planted} is owned by uid {NOBODY}, not by this user (uid 0) or root: "
        "refused as a work directory"
    )
    assert list(planted.iterdir()) == []


@needs_root
def test_a_directory_above_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    """Its owner could rename our base away and put their own in its place."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, NOBODY, NOBODY)
    ours = theirs / "ours"
    ours.mkdir(mode=0o700)
    with pytest.raises(UnsafeDirectory, match=rf"^{theirs} is owned by uid {NOBODY}"):
        check_base(ours)


def test_a_base_writable_by_others_needs_the_sticky_bit(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(UnsafeDirectory) as info:
        private_dir(shared, "x-")
    assert str(info.value) == (
        f"{shared} is writable by other users without the sticky bit (mode 777): "
        "refused as a work directory"
    )
    shared.chmod(0o1777)  # as /tmp: nobody can rename what we make in it
    made = private_dir(shared, "x-")
    assert made.parent == shared and _mode(made) == 0o700
    group = tmp_path / "group"
    group.mkdir()
    group.chmod(0o2775)
    with pytest.raises(UnsafeDirectory, match="mode 2775"):
        check_base(group)


def test_a_base_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(UnsafeDirectory, match=r"file is not a directory$"):
        check_base(tmp_path / "file")


def test_an_exact_work_dir_must_be_new(tmp_path: Path) -> None:
    made = new_dir(tmp_path / "work")
    assert made == tmp_path / "work" and _mode(made) == 0o700
    with pytest.raises(UnsafeDirectory, match=r"work exists already: a work directory must be new"):
        new_dir(tmp_path / "work")
    (tmp_path / "link").symlink_to(made)
    with pytest.raises(UnsafeDirectory, match="exists already"):
        new_dir(tmp_path / "link")
