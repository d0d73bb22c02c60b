"""The probe code's cache on a node: where it lives, that a zip cut short is never stored,
that a cached copy which cannot start is replaced, and that a version in use is never
cleaned up. The shell commands run for real (sh here, and over a real sshd)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bringup.fleet.node_code import NodeCode, build_node_code, remote_command, upload_command
from bringup.fleet.transport import TransportError
from tests.support.sshd import XID_REQUEST, LocalSshd, connector, needs_sshd, run
from tests.support.timing import scaled

PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
CODE = build_node_code()
DAY_S = 24 * 3600


@pytest.fixture(autouse=True)
def empty_cache(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test starts with no probe code cached on the module's sshd."""
    if "sshd" in request.fixturenames:
        sshd: LocalSshd = request.getfixturevalue("sshd")
        shutil.rmtree(sshd.cache, ignore_errors=True)
    yield


def _sh(command: str, env: dict[str, str], data: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run(
        ["sh", "-c", command], input=data, capture_output=True, env=env, timeout=scaled(60)
    )


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []


# --- the commands, run by sh here -------------------------------------------------------


def test_the_cache_is_under_the_users_own_cache_directory(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home")}
    done = _sh(upload_command(CODE, PYTHON), env, CODE.data)
    assert done.returncode == 0, done.stderr
    code_dir = tmp_path / "home" / ".cache" / "bringup" / "code"
    assert (code_dir / CODE.file_name).read_bytes() == CODE.data
    assert oct(code_dir.stat().st_mode & 0o777) == "0o700"
    # XDG_CACHE_HOME counts when absolute; a relative one is ignored, as the spec asks.
    xdg = tmp_path / "xdg"
    done = _sh(upload_command(CODE, PYTHON), {**env, "XDG_CACHE_HOME": str(xdg)}, CODE.data)
    assert done.returncode == 0, done.stderr
    assert (xdg / "bringup" / "code" / CODE.file_name).is_file()
    done = _sh(remote_command(CODE, PYTHON), {**env, "XDG_CACHE_HOME": "relative"})
    assert done.returncode != 97  # found under $HOME/.cache, and started
    assert not Path("relative").exists()


@pytest.mark.parametrize("cut", [0, len(CODE.data) // 2, len(CODE.data) - 1])
def test_a_zip_cut_short_is_not_stored(tmp_path: Path, cut: int) -> None:
    """What `cat` sees when the channel closes early: end of input, exit status 0."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    done = _sh(upload_command(CODE, PYTHON), env, CODE.data[:cut])
    assert done.returncode == 1
    assert done.stderr.decode().strip().splitlines()[-1] == (
        f"the probe code arrived incomplete: {cut} of {len(CODE.data)} bytes"
    )
    assert _leftovers(tmp_path / ".cache" / "bringup" / "code") == []  # no zip, no temp file
    assert _sh(remote_command(CODE, PYTHON), env).returncode == 97  # still "not cached"


def test_a_damaged_zip_is_not_stored(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    damaged = bytes([CODE.data[0] ^ 0xFF]) + CODE.data[1:]
    done = _sh(upload_command(CODE, PYTHON), env, damaged)
    assert done.returncode == 1
    assert b"the probe code arrived damaged: its sha256 differs" in done.stderr
    assert _leftovers(tmp_path / ".cache" / "bringup" / "code") == []


def test_a_cache_directory_that_is_not_private_is_refused(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / ".cache" / "bringup").mkdir(parents=True)
    (tmp_path / ".cache" / "bringup" / "code").symlink_to(elsewhere)
    done = _sh(upload_command(CODE, PYTHON), env, CODE.data)
    assert done.returncode == 1
    assert b"is not a private directory of this user" in done.stderr
    assert _leftovers(elsewhere) == []
    assert _sh(remote_command(CODE, PYTHON), env).returncode == 97  # never run from there


# --- over a real sshd -------------------------------------------------------------------


def _age(*paths: Path, seconds: float) -> None:
    then = time.time() - seconds
    for path in paths:
        os.utime(path, (then, then))


@needs_sshd
def test_an_upload_cut_short_over_ssh_is_refused_then_the_next_run_stores_it(
    sshd: LocalSshd,
) -> None:
    conn = connector()
    transport = conn.connect(sshd.host())
    try:
        channel = transport.open_session(timeout=scaled(30))
        channel.exec_command(upload_command(CODE, sshd.host().python))
        channel.sendall(CODE.data[: len(CODE.data) // 2])
        channel.close()  # the link goes mid-upload
    finally:
        transport.close()
    code_dir = sshd.cached_zip(CODE).parent
    for _ in range(100):  # sh on the node sees the end of its input, checks, removes
        if not [p for p in _leftovers(code_dir) if p.startswith(CODE.file_name)]:
            break
        time.sleep(0.05)
    assert _leftovers(code_dir) == []
    stages: list[str] = []
    records = run(sshd.host(), XID_REQUEST, code=CODE, conn=conn, on_stage=stages.append)
    assert [r["probe"] for r in records] == ["xid"]
    assert stages == ["connecting", "running", "uploading probe code", "running"]
    assert sshd.cached_zip(CODE).read_bytes() == CODE.data


@needs_sshd
def test_a_truncated_zip_in_the_cache_is_replaced_and_the_run_recovers(sshd: LocalSshd) -> None:
    """A zip an older upload cut short, under its hash name: Python cannot start it."""
    cached = sshd.cached_zip(CODE)
    cached.parent.mkdir(parents=True, mode=0o700)
    cached.write_bytes(CODE.data[: len(CODE.data) // 2])
    stages: list[str] = []
    records = run(sshd.host(), XID_REQUEST, code=CODE, on_stage=stages.append)
    assert [r["probe"] for r in records] == ["xid"]
    assert stages == ["connecting", "running", "uploading probe code", "running"]
    assert cached.read_bytes() == CODE.data
    stages.clear()
    assert [r["probe"] for r in run(sshd.host(), XID_REQUEST, on_stage=stages.append)]
    assert stages == ["connecting", "running"]  # healed for good


@needs_sshd
def test_a_damaged_unpacked_copy_is_replaced_with_the_zip(sshd: LocalSshd) -> None:
    run(sshd.host(), XID_REQUEST, code=CODE)
    unpacked = sshd.cached_zip(CODE).with_suffix("")
    (unpacked / "bringup" / "node" / "protocol.py").write_text("raise ImportError('damaged')\n")
    stages: list[str] = []
    records = run(sshd.host(), XID_REQUEST, code=CODE, on_stage=stages.append)
    assert [r["probe"] for r in records] == ["xid"]
    assert stages == ["connecting", "running", "uploading probe code", "running"]
    assert "damaged" not in (unpacked / "bringup" / "node" / "protocol.py").read_text()


@needs_sshd
def test_a_node_side_that_never_starts_is_reported_after_one_replacement(
    sshd: LocalSshd, tmp_path: Path
) -> None:
    run(sshd.host(), XID_REQUEST, code=CODE)
    failing = tmp_path / "python3"
    failing.write_text(f'#!/bin/sh\n[ "$1" = -I ] && exec {PYTHON} "$@"\necho boom >&2\nexit 1\n')
    failing.chmod(0o755)
    stages: list[str] = []
    with pytest.raises(TransportError) as info:
        run(sshd.host(python=str(failing)), XID_REQUEST, code=CODE, on_stage=stages.append)
    assert str(info.value) == "node side exited 1: boom"
    assert stages == ["connecting", "running", "uploading probe code", "running"]  # once


@needs_sshd
def test_reuse_touches_the_version_so_the_clean_up_keeps_it(sshd: LocalSshd) -> None:
    run(sshd.host(), XID_REQUEST, code=CODE)
    cached = sshd.cached_zip(CODE)
    unpacked = cached.with_suffix("")
    _age(cached, unpacked, seconds=2 * DAY_S)
    run(sshd.host(), XID_REQUEST, code=CODE)  # reused: no upload, but touched
    assert time.time() - cached.stat().st_mtime < 600
    assert time.time() - unpacked.stat().st_mtime < 600
    # Another version is uploaded: an old unused version goes, the one in use stays.
    stale = cached.parent / ("0" * 32 + ".zip")
    stale.write_bytes(b"old")
    stale_dir = cached.parent / ("0" * 32)
    stale_dir.mkdir()
    _age(stale, stale_dir, seconds=2 * DAY_S)
    data = CODE.data + b"\0"
    other = NodeCode(data=data, sha256=hashlib.sha256(data).hexdigest())
    conn = connector()
    transport = conn.connect(sshd.host())
    try:
        channel = transport.open_session(timeout=scaled(30))
        channel.exec_command(upload_command(other, sshd.host().python))
        channel.sendall(other.data)
        channel.shutdown_write()
        assert channel.recv_exit_status() == 0, channel.recv_stderr(4096)
    finally:
        transport.close()
    assert sorted(_leftovers(cached.parent)) == sorted(
        [CODE.file_name, unpacked.name, other.file_name]
    )
