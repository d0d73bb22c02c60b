"""The probe code's cache on a node: where it lives, that a zip cut short is never stored,
that a cached zip which is not the controller's (cut short, changed) is never run but
replaced, and that a version in use is never cleaned up. The start command runs for real
(sh here, and over a real sshd)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bringup.fleet.node_code import (
    NEED_CODE_EXIT,
    NodeCode,
    build_node_code,
    remote_command,
    request_frame,
)
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


def _store(code: NodeCode, env: dict[str, str], data: bytes) -> subprocess.CompletedProcess:
    """The start command with an empty request and `data` where the zip goes."""
    return _sh(remote_command(code, PYTHON), env, request_frame({"probes": []}) + data)


def _start(env: dict[str, str]) -> subprocess.CompletedProcess:
    """The start command with an empty request and no zip behind it."""
    return _sh(remote_command(CODE, PYTHON), env, request_frame({"probes": []}))


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []


# --- the commands, run by sh here -------------------------------------------------------


def test_the_cache_is_under_the_users_own_cache_directory(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home")}
    done = _store(CODE, env, CODE.data)
    assert done.returncode == 0, done.stderr
    code_dir = tmp_path / "home" / ".cache" / "bringup" / "code"
    assert (code_dir / CODE.file_name).read_bytes() == CODE.data
    assert oct(code_dir.stat().st_mode & 0o777) == "0o700"
    # XDG_CACHE_HOME counts when absolute; a relative one is ignored, as the spec asks.
    xdg = tmp_path / "xdg"
    done = _store(CODE, {**env, "XDG_CACHE_HOME": str(xdg)}, CODE.data)
    assert done.returncode == 0, done.stderr
    assert (xdg / "bringup" / "code" / CODE.file_name).is_file()
    done = _start({**env, "XDG_CACHE_HOME": "relative"})
    assert done.returncode == 0, done.stderr  # found under $HOME/.cache, and started
    assert done.stdout == b'{"bringup_code": "cached"}\n'
    assert not Path("relative").exists()


@pytest.mark.parametrize("cut", [1, len(CODE.data) // 2, len(CODE.data) - 1])
def test_a_zip_cut_short_is_not_stored(tmp_path: Path, cut: int) -> None:
    """What the node reads when the channel closes early: the end of its input."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    done = _store(CODE, env, CODE.data[:cut])
    assert done.returncode == 1
    assert done.stderr.decode().strip().splitlines()[-1] == (
        f"the probe code arrived incomplete: {cut} of {len(CODE.data)} bytes"
    )
    assert _leftovers(tmp_path / ".cache" / "bringup" / "code") == []  # no zip, no temp file
    assert _start(env).returncode == NEED_CODE_EXIT  # still "not cached"


def test_a_node_asking_for_the_zip_and_getting_none_says_so(tmp_path: Path) -> None:
    """Slurm's first step writes the request alone: a node without the zip exits 97."""
    done = _start({"PATH": os.environ["PATH"], "HOME": str(tmp_path)})
    assert done.returncode == NEED_CODE_EXIT, done.stderr
    assert done.stdout == b'{"bringup_code": "needed"}\n'


def test_a_damaged_zip_is_not_stored(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    damaged = bytes([CODE.data[0] ^ 0xFF]) + CODE.data[1:]
    done = _store(CODE, env, damaged)
    assert done.returncode == 1
    assert b"the probe code arrived damaged: its sha256 differs" in done.stderr
    assert _leftovers(tmp_path / ".cache" / "bringup" / "code") == []


def test_a_cache_directory_that_is_not_private_is_refused(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / ".cache" / "bringup").mkdir(parents=True)
    (tmp_path / ".cache" / "bringup" / "code").symlink_to(elsewhere)
    done = _store(CODE, env, CODE.data)
    assert done.returncode == 1
    assert b"is not a private directory of this user" in done.stderr
    assert _leftovers(elsewhere) == []
    (elsewhere / CODE.file_name).write_bytes(CODE.data)
    assert _start(env).returncode == NEED_CODE_EXIT  # never run from there


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
        channel.exec_command(remote_command(CODE, sshd.host().python))
        channel.sendall(request_frame({"probes": []}) + CODE.data[: len(CODE.data) // 2])
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


# A zip that is a node side, but not the controller's: it answers with forged facts.
FORGED_MAIN = """\
import json, sys
for step in json.load(sys.stdin)["probes"]:
    print(json.dumps({"probe": step["name"], "ok": True, "facts": {"forged": True}}))
"""


@needs_sshd
def test_a_changed_zip_in_the_cache_is_never_run_but_replaced(sshd: LocalSshd) -> None:
    """A valid zip under the cached name with other bytes (edited on the node, or left by
    anyone who could write there): the node checks the bytes at every start, not only at
    upload, so the forged node side never answers; the controller's zip replaces it."""
    cached = sshd.cached_zip(CODE)
    cached.parent.mkdir(parents=True, mode=0o700)
    with zipfile.ZipFile(cached, "w") as forged:
        forged.writestr("__main__.py", FORGED_MAIN)
    stages: list[str] = []
    records = run(sshd.host(), XID_REQUEST, code=CODE, on_stage=stages.append)
    assert [r["probe"] for r in records] == ["xid"]
    assert records[0]["facts"] != {"forged": True} and records[0]["ok"] is True
    assert stages == ["connecting", "running", "uploading probe code", "running"]
    assert cached.read_bytes() == CODE.data


@needs_sshd
def test_what_a_login_script_prints_before_the_node_side_is_skipped(
    sshd: LocalSshd, tmp_path: Path
) -> None:
    """A chatty profile prints before the command runs (here: before python3 starts), one
    line and one without its newline: the node's answer and its records are read after it."""
    chatty = tmp_path / "python3"
    chatty.write_text(
        f"#!/bin/sh\necho 'Welcome to node7'\nprintf 'MOTD: '\nexec {PYTHON} \"$@\"\n"
    )
    chatty.chmod(0o755)
    stages: list[str] = []
    records = run(sshd.host(python=str(chatty)), XID_REQUEST, code=CODE, on_stage=stages.append)
    assert [r["probe"] for r in records] == ["xid"] and records[0]["ok"] is True
    assert stages == ["connecting", "running", "uploading probe code", "running"]


@needs_sshd
def test_a_node_side_that_never_starts_is_reported_at_once(sshd: LocalSshd, tmp_path: Path) -> None:
    run(sshd.host(), XID_REQUEST, code=CODE)
    failing = tmp_path / "python3"
    failing.write_text("#!/bin/sh\necho boom >&2\nexit 1\n")
    failing.chmod(0o755)
    stages: list[str] = []
    with pytest.raises(TransportError) as info:
        run(sshd.host(python=str(failing)), XID_REQUEST, code=CODE, on_stage=stages.append)
    assert str(info.value) == "node side exited 1: boom"
    assert stages == ["connecting", "running"]  # the cached zip is the same: nothing to store


@needs_sshd
def test_reuse_touches_the_version_so_the_clean_up_keeps_it(sshd: LocalSshd) -> None:
    run(sshd.host(), XID_REQUEST, code=CODE)
    cached = sshd.cached_zip(CODE)
    _age(cached, seconds=2 * DAY_S)
    run(sshd.host(), XID_REQUEST, code=CODE)  # reused: no upload, but touched
    assert time.time() - cached.stat().st_mtime < 600
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
        channel.exec_command(remote_command(other, sshd.host().python))
        channel.sendall(request_frame({"probes": []}) + other.data)
        channel.shutdown_write()
        channel.recv_exit_status()  # stored, then run (that zip has a byte too many)
    finally:
        transport.close()
    assert sorted(_leftovers(cached.parent)) == sorted([CODE.file_name, other.file_name])
