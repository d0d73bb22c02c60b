"""The SSH transport against a real sshd on 127.0.0.1 (root only: sshd must run as root),
and the zip it ships run by a bare python3 in a child process.

Each test module gets its own sshd (conftest.py). No mocks: paramiko talks to OpenSSH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bringup.fleet import local, transport
from bringup.fleet.known_hosts import UNKNOWN_HOST_KEY
from bringup.fleet.local import run_local
from bringup.fleet.node_code import (
    NodeCode,
    build_node_code,
    node_files,
    remote_command,
    request_frame,
)
from bringup.fleet.transport import Interrupted, TransportError, Unreachable
from tests.support.sshd import XID_REQUEST, LocalSshd, connector, keygen, needs_sshd, run
from tests.support.timing import scaled

# --- the zip, run by a bare python3 -----------------------------------------------------


def test_every_module_of_the_zip_imports_with_the_standard_library_alone(tmp_path: Path) -> None:
    """A bare node has python3 and nothing else: no site-packages (-S), no env (-I)."""
    code = build_node_code()
    zip_path = tmp_path / code.file_name
    zip_path.write_bytes(code.data)
    modules = [name.removesuffix(".py").replace("/", ".") for name, _ in node_files()]
    modules = [m.removesuffix(".__init__") for m in modules if not m.endswith("__main__")]
    # The burn-in trainer and its corpus need torch & co. by design: integration/burnin checks
    # that they import from the zip without the controller's packages.
    needs_torch = ("bringup.node.burnin.trainer", "bringup.node.burnin.corpus")
    modules = [m for m in modules if m not in needs_torch]
    script = (
        f"import sys; sys.path.insert(0, {str(zip_path)!r})\n"
        f"import importlib\nfor m in {modules!r}: importlib.import_module(m)\n"
        "print('ok', len(sys.modules))"
    )
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    proc = subprocess.run([python, "-I", "-S", "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok")


def _start(code: NodeCode, home: Path, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    """The node side's start command run by sh, as sshd runs it, for a user at `home`."""
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    return subprocess.run(
        ["sh", "-c", remote_command(code, python)],
        input=stdin,
        capture_output=True,
        env={"PATH": os.environ["PATH"], "HOME": str(home)},
        cwd=home,
        timeout=scaled(60),
    )


IMPORT = "import bringup.node.protocol as m; print(m.__file__)"


def test_the_start_command_stores_the_zip_then_runs_its_bytecode(tmp_path: Path) -> None:
    code = build_node_code()
    done = _start(code, tmp_path, request_frame(XID_REQUEST) + code.data)
    assert done.returncode == 0, done.stderr
    answer, line = done.stdout.splitlines()
    assert json.loads(answer) == {"bringup_code": "needed"}
    record = json.loads(line)
    assert record["probe"] == "xid" and record["params"] == {"window_s": 60}
    cached = tmp_path / ".cache" / "bringup" / "code" / code.file_name
    assert cached.read_bytes() == code.data
    done = _start(code, tmp_path, request_frame(XID_REQUEST))  # no zip on stdin this time
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0]) == {"bringup_code": "cached"}
    assert json.loads(done.stdout.splitlines()[1])["probe"] == "xid"
    # Run from the zip itself, from the bytecode compiled into it: nothing unpacked, nothing
    # compiled on the node (zipimport names a module loaded from bytecode by its .pyc).
    assert sorted(p.name for p in cached.parent.iterdir()) == [code.file_name]
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    shown = subprocess.run(
        [python, "-I", "-c", f"import sys; sys.path.insert(0, {str(cached)!r})\n{IMPORT}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout.strip() == f"{cached}/bringup/node/protocol.pyc"


def test_a_python_of_another_version_runs_an_unpacked_copy_it_compiles_once(
    tmp_path: Path,
) -> None:
    """Bytecode for another Python (another magic number) is never loaded: the sources,
    unpacked beside the zip, where this Python keeps its own bytecode for the next run."""
    built = build_node_code()
    code = NodeCode(data=built.data, sha256=built.sha256, magic="0d0d0d0a")
    done = _start(code, tmp_path, request_frame(XID_REQUEST) + code.data)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[1])["probe"] == "xid"
    unpacked = tmp_path / ".cache" / "bringup" / "code" / code.file_name.removesuffix(".zip")
    assert (unpacked / "bringup" / "node" / "protocol.py").is_file()
    assert not (unpacked / "bringup" / "node" / "protocol.pyc").exists()
    assert any((unpacked / "bringup" / "node" / "__pycache__").glob("protocol.*.pyc"))
    done = _start(code, tmp_path, request_frame(XID_REQUEST))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0]) == {"bringup_code": "cached"}


# --- over a real sshd -------------------------------------------------------------------


@needs_sshd
def test_first_run_uploads_the_zip_and_second_run_reuses_it(sshd: LocalSshd) -> None:
    code = build_node_code()
    cached = sshd.cached_zip(code)
    cached.unlink(missing_ok=True)
    stages: list[str] = []
    records = run(sshd.host(), XID_REQUEST, code=code, on_stage=stages.append)
    assert [r["probe"] for r in records] == ["xid"]
    assert stages == ["connecting", "running", "uploading probe code", "running"]
    assert cached.read_bytes() == code.data
    assert oct(cached.parent.stat().st_mode & 0o777) == "0o700"
    stages.clear()
    records = run(sshd.host(), XID_REQUEST, code=code, on_stage=stages.append)
    assert [r["probe"] for r in records] == ["xid"]
    assert stages == ["connecting", "running"]  # no upload the second time


@needs_sshd
def test_records_stream_as_each_probe_finishes(sshd: LocalSshd) -> None:
    request = {
        "probes": [
            {"name": "xid", "params": {"window_s": 60}, "timeout_s": 30},
            {"name": "host", "params": {"paths": ["/tmp"]}, "timeout_s": 30},
            {"name": "nosuch", "params": {}, "timeout_s": 5},
        ]
    }
    records = run(sshd.host(), request)
    assert [r["probe"] for r in records] == ["xid", "host", "nosuch"]
    assert records[1]["ok"] is True
    assert records[2]["error"] == "unknown probe 'nosuch'"


@needs_sshd
@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_a_long_probes_progress_lines_come_between_the_records(
    sshd: LocalSshd, tmp_path: Path
) -> None:
    """The nvme probe says which fio test runs (1/5 ... 5/5) before its record comes; a
    progress line is not a record, so the next probe's answer is still awaited."""
    small = {"size_bytes": 1 << 20, "checkpoint_bytes": 1 << 20, "runtime_s": 1, "ramp_s": 0}
    request = {
        "probes": [
            {"name": "nvme", "params": {"paths": [str(tmp_path)], **small}, "timeout_s": 120},
            {"name": "xid", "params": {"window_s": 60}, "timeout_s": 30},
        ]
    }
    records = run(sshd.host(), request)
    shown = [(r["probe"], r["progress"]) for r in records if transport.is_progress(r)]
    tests = ["seq read", "seq write", "rand read", "concurrent read", "checkpoint"]
    assert shown == [
        ("nvme", {"phase": f"{tmp_path} {name}", "index": i, "of": 5})
        for i, name in enumerate(tests, start=1)
    ]
    answers = [r for r in records if not transport.is_progress(r)]
    assert [r["probe"] for r in answers] == ["nvme", "xid"]
    assert records.index(answers[0]) == len(shown)  # every progress line before its record


@needs_sshd
def test_unknown_host_key_is_unreachable_with_the_advice(sshd: LocalSshd, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    host = sshd.host(ssh_args=["-o", f"UserKnownHostsFile={empty}"])
    with pytest.raises(Unreachable) as info:
        run(host, XID_REQUEST)
    assert str(info.value) == UNKNOWN_HOST_KEY
    assert empty.read_text() == ""


@needs_sshd
def test_accept_new_hostkeys_records_the_key_then_verifies_it(
    sshd: LocalSshd, tmp_path: Path
) -> None:
    fresh = tmp_path / "known_hosts"
    host = sshd.host(ssh_args=["-o", f"UserKnownHostsFile={fresh}"])
    assert [r["probe"] for r in run(host, XID_REQUEST, conn=connector(accept_new_hostkeys=True))]
    public = sshd.host_key.with_name(sshd.host_key.name + ".pub").read_text().split()
    assert fresh.read_text() == f"[127.0.0.1]:{sshd.port} {public[0]} {public[1]}\n"
    assert [r["probe"] for r in run(host, XID_REQUEST)]  # now known, without the flag


@needs_sshd
def test_a_changed_host_key_is_refused_even_with_accept_new(
    sshd: LocalSshd, tmp_path: Path
) -> None:
    other = tmp_path / "other_key"
    keygen(other)
    public = other.with_name(other.name + ".pub").read_text().split()
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[127.0.0.1]:{sshd.port} {public[0]} {public[1]}\n")
    host = sshd.host(ssh_args=["-o", f"UserKnownHostsFile={wrong}"])
    with pytest.raises(Unreachable) as info:
        run(host, XID_REQUEST, conn=connector(accept_new_hostkeys=True))
    assert str(info.value).startswith(f"host key mismatch: [127.0.0.1]:{sshd.port} presented ")
    assert str(info.value).endswith(
        "refused (was the node reinstalled? otherwise suspect a man in the middle)"
    )
    assert len(wrong.read_text().splitlines()) == 1  # nothing added


@needs_sshd
def test_wrong_key_and_wrong_user_are_clear_auth_errors(sshd: LocalSshd, tmp_path: Path) -> None:
    stranger = tmp_path / "stranger"
    keygen(stranger)
    with pytest.raises(Unreachable) as info:
        run(sshd.host(key_file=str(stranger)), XID_REQUEST)
    assert str(info.value).startswith("authentication failed for user root (tried: ")
    assert str(stranger) in str(info.value)
    with pytest.raises(Unreachable) as info:
        run(sshd.host(user="nobody"), XID_REQUEST)
    assert str(info.value).startswith("authentication failed for user nobody (tried: ")
    with pytest.raises(Unreachable) as info:
        run(sshd.host(key_file=str(tmp_path / "missing")), XID_REQUEST)
    assert f"{tmp_path / 'missing'} (missing)" in str(info.value)


@needs_sshd
def test_a_stop_request_ends_the_node_run(sshd: LocalSshd, tmp_path: Path) -> None:
    slow = {
        "probes": [
            {
                "name": "nvme",
                "params": {"paths": [str(tmp_path)], "runtime_s": 30, "size_bytes": 1 << 20},
                "timeout_s": 60,
            }
        ]
    }
    stop = threading.Event()
    timer = threading.Timer(1.0, stop.set)
    timer.start()
    with pytest.raises(Interrupted):
        run(sshd.host(), slow, stop=stop)


@needs_sshd
def test_a_node_side_that_is_killed_is_a_transport_error_not_unreachable(
    sshd: LocalSshd, tmp_path: Path
) -> None:
    """python3 replaced by a script that dies: the node was reached, the run failed."""
    dying = tmp_path / "python3"
    dying.write_text("#!/bin/sh\necho 'Segmentation fault' >&2\nkill -9 $$\n")
    dying.chmod(0o755)
    run(sshd.host(), XID_REQUEST)  # make sure the zip is cached
    with pytest.raises(TransportError) as info:
        run(sshd.host(python=str(dying)), XID_REQUEST)
    assert not isinstance(info.value, Unreachable)
    assert "Segmentation fault" in str(info.value)


@needs_sshd
def test_agent_keys_authenticate(sshd: LocalSshd, tmp_path: Path, monkeypatch) -> None:
    """No identity file: the key comes from a real ssh-agent (SSH_AUTH_SOCK)."""
    if shutil.which("ssh-agent") is None or shutil.which("ssh-add") is None:
        pytest.skip("needs ssh-agent and ssh-add (openssh-client)")
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if sock.exists():
                break
            time.sleep(0.05)
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        subprocess.run(["ssh-add", str(sshd.key)], env=env, check=True, capture_output=True)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/id_* to fall back on
        records = run(sshd.host(key_file=None), XID_REQUEST)
        assert [r["probe"] for r in records] == ["xid"]
        monkeypatch.delenv("SSH_AUTH_SOCK")
        with pytest.raises(Unreachable) as info:
            run(sshd.host(key_file=None), XID_REQUEST)
        assert str(info.value) == (
            "authentication failed for user root (tried: no key: no identity file, agent or "
            "~/.ssh/id_*)"
        )
    finally:
        agent.terminate()
        agent.wait()


# --- a node side that sends a line without end ------------------------------------------


def _flood(tmp_path: Path) -> Path:
    """A python3 that prints 3 MB and no newline (a node side gone wrong)."""
    flood = tmp_path / "python3"
    flood.write_text("#!/bin/sh\nexec head -c 3000000 /dev/zero\n")
    flood.chmod(0o755)
    return flood


@needs_sshd
def test_a_line_past_the_cap_ends_the_node_naming_it(
    sshd: LocalSshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transport, "MAX_LINE_BYTES", 1 << 20)
    run(sshd.host(), XID_REQUEST)  # make sure the zip is cached
    with pytest.raises(TransportError) as info:
        run(sshd.host(name="gpu-017", python=str(_flood(tmp_path))), XID_REQUEST)
    assert str(info.value) == (
        "gpu-017 sent a line of over 1 MiB without its end (node side gone wrong?); "
        "stopped reading it"
    )


def test_the_local_node_side_has_the_same_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local node side is a fork of this process: one gone wrong writes 3 MB and no
    newline on its stdout, as the python3 above does."""

    def flood(request: object, out: int) -> None:
        for _ in range(30):
            os.write(out, b"\0" * 100_000)

    monkeypatch.setattr(transport, "MAX_LINE_BYTES", 1 << 20)
    monkeypatch.setattr(local, "serve", flood)
    with pytest.raises(TransportError) as info:
        list(run_local(XID_REQUEST, 30))
    assert str(info.value).startswith("this machine's node side sent a line of over 1 MiB")
