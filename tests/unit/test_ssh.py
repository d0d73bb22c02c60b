"""The SSH transport against a real sshd on 127.0.0.1 (root only: sshd must run as root).

Each test module gets its own sshd on a free port with a generated host key and a
generated client key in a temporary authorized_keys. No mocks: paramiko talks to OpenSSH.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bringup.fleet.inventory import Host
from bringup.fleet.node_code import build_node_code, node_files
from bringup.fleet.ssh import UNKNOWN_HOST_KEY, Connector, SshSettings, run_ssh
from bringup.fleet.transport import Interrupted, TransportError, Unreachable

SSHD = "/usr/sbin/sshd"


def sshd_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root to run a real sshd on 127.0.0.1"
    if not Path(SSHD).exists():
        return "needs openssh-server (/usr/sbin/sshd)"
    if shutil.which("ssh-keygen") is None:
        return "needs ssh-keygen (openssh-client)"
    return None


needs_sshd = pytest.mark.skipif(sshd_unavailable() is not None, reason=str(sshd_unavailable()))


def keygen(path: Path) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", str(path)],
        check=True,
    )
    return path.with_name(path.name + ".pub").read_text().strip()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LocalSshd:
    """A real sshd on 127.0.0.1:port, root login with `key`, host key in `known_hosts`."""

    dir: Path
    port: int
    key: Path
    known_hosts: Path
    host_key: Path
    proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def create(cls, workdir: Path) -> LocalSshd:
        workdir.mkdir(parents=True, exist_ok=True)
        sshd = cls(
            dir=workdir,
            port=free_port(),
            key=workdir / "id_ed25519",
            known_hosts=workdir / "known_hosts",
            host_key=workdir / "host_ed25519",
        )
        (workdir / "authorized_keys").write_text(keygen(sshd.key) + "\n")
        keygen(sshd.host_key)
        sshd.write_known_hosts()
        (workdir / "sshd_config").write_text(
            "\n".join(
                [
                    f"ListenAddress 127.0.0.1:{sshd.port}",
                    f"HostKey {sshd.host_key}",
                    f"PidFile {workdir / 'sshd.pid'}",
                    f"AuthorizedKeysFile {workdir / 'authorized_keys'}",
                    "PermitRootLogin prohibit-password",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "StrictModes no",
                    "UseDNS no",
                    "MaxStartups 100",
                    "",
                ]
            )
        )
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
        sshd.start()
        return sshd

    def write_known_hosts(self) -> None:
        public = self.host_key.with_name(self.host_key.name + ".pub").read_text().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {public[0]} {public[1]}\n")

    def start(self) -> None:
        log = (self.dir / "sshd.log").open("ab")
        self.proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(self.dir / "sshd_config")],
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        end = time.monotonic() + 10
        while time.monotonic() < end:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    if s.recv(4).startswith(b"SSH-"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError((self.dir / "sshd.log").read_text()[-500:])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()

    def host(self, name: str = "n1", **changes: object) -> Host:
        host = Host(
            name=name,
            address="127.0.0.1",
            port=self.port,
            user="root",
            key_file=str(self.key),
            ssh_args=["-o", f"UserKnownHostsFile={self.known_hosts}"],
            vars={"ansible_port": self.port},
            python=sys.executable if not Path("/usr/bin/python3").exists() else "/usr/bin/python3",
        )
        for key, value in changes.items():
            setattr(host, key, value)
        return host


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSshd]:
    reason = sshd_unavailable()
    if reason:
        pytest.skip(reason)
    server = LocalSshd.create(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


def connector(**settings: object) -> Connector:
    """A connector that reads no ~/.ssh/config and records into no ~/.ssh/known_hosts."""
    return Connector(SshSettings(ssh_config=None, **settings))  # type: ignore[arg-type]


def run(host: Host, request: dict[str, object], **kwargs: object) -> list[dict[str, object]]:
    conn = kwargs.pop("conn", None) or connector()
    code = kwargs.pop("code", None) or build_node_code()
    return list(run_ssh(host, request, 60, connector=conn, code=code, **kwargs))  # type: ignore[arg-type]


XID_REQUEST = {"probes": [{"name": "xid", "params": {"window_s": 60}, "timeout_s": 30}]}


# --- the zip --------------------------------------------------------------------------


def test_node_code_is_deterministic_and_holds_only_the_node_side() -> None:
    first, second = build_node_code(), build_node_code()
    assert first.sha256 == second.sha256 and first.data == second.data
    names = zipfile.ZipFile(__import__("io").BytesIO(first.data)).namelist()
    assert names[0] == "__main__.py"
    assert "bringup/__init__.py" in names and "bringup/node/protocol.py" in names
    assert "bringup/node/burnin/trainer.py" in names and "bringup/node/burnin/flops.py" in names
    assert "bringup/commands/burnin.py" not in names  # the controller's
    assert "bringup/checks/burnin_run.py" not in names
    assert all(
        n in ("__main__.py", "bringup/__init__.py") or n.startswith("bringup/node/") for n in names
    )
    assert not any("__pycache__" in n for n in names)


def test_every_module_of_the_zip_imports_with_the_standard_library_alone(tmp_path: Path) -> None:
    """A bare node has python3 and nothing else: no site-packages (-S), no env (-I)."""
    code = build_node_code()
    zip_path = tmp_path / code.file_name
    zip_path.write_bytes(code.data)
    modules = [name.removesuffix(".py").replace("/", ".") for name, _ in node_files()]
    modules = [m.removesuffix(".__init__") for m in modules if not m.endswith("__main__")]
    # The burn-in trainer and its corpus need torch & co. by design: tests/burnin checks
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


def test_the_zip_runs_the_node_side_protocol_locally(tmp_path: Path) -> None:
    code = build_node_code()
    zip_path = tmp_path / code.file_name
    zip_path.write_bytes(code.data)
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    proc = subprocess.run(
        [python, str(zip_path)],
        input=__import__("json").dumps(XID_REQUEST),
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"]},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    record = __import__("json").loads(proc.stdout.splitlines()[0])
    assert record["probe"] == "xid" and record["params"] == {"window_s": 60}
    # It ran from an unpacked copy beside the zip, where Python cached the bytecode.
    unpacked = tmp_path / code.file_name.removesuffix(".zip")
    assert (unpacked / "bringup" / "node" / "protocol.py").is_file()
    assert any((unpacked / "bringup" / "node" / "__pycache__").glob("protocol.*.pyc"))


# --- over a real sshd -------------------------------------------------------------------


@needs_sshd
def test_first_run_uploads_the_zip_and_second_run_reuses_it(sshd: LocalSshd) -> None:
    code = build_node_code()
    cached = Path(f"/tmp/bringup-{os.getuid()}") / code.file_name
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


def test_refused_port_and_unknown_name_are_unreachable() -> None:
    port = free_port()  # bound then closed: nothing listens there
    host = Host(name="n", address="127.0.0.1", port=port, user="root", vars={"ansible_port": port})
    with pytest.raises(Unreachable) as info:
        run(host, XID_REQUEST)
    assert str(info.value) == f"connection refused by 127.0.0.1:{port} (is sshd running?)"
    host = Host(name="n", address="no-such-node.invalid", user="root")
    with pytest.raises(Unreachable) as info:
        run(host, XID_REQUEST)
    assert str(info.value).startswith("cannot resolve no-such-node.invalid: ")


def test_a_silent_server_times_out_at_the_banner() -> None:
    """A port that accepts TCP but never speaks SSH: Unreachable within the connect timeout."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    try:
        host = Host(name="n", address="127.0.0.1", port=port, vars={"ansible_port": port})
        with pytest.raises(Unreachable) as info:
            run(host, XID_REQUEST, conn=connector(connect_timeout_s=0.5))
        assert str(info.value).startswith("SSH handshake failed: ")
    finally:
        listener.close()


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


# --- settings: inventory, ssh args and ~/.ssh/config merged as OpenSSH does ---------------


def test_resolve_takes_inventory_then_ssh_args_then_ssh_config(tmp_path: Path) -> None:
    import paramiko

    from bringup.fleet.ssh import resolve

    config = paramiko.SSHConfig.from_text(
        "Host 10.0.0.*\n  HostName gpu-a.internal\n  User cfguser\n  Port 2200\n"
        "  IdentityFile ~/.ssh/cfg_key\n  ProxyJump cfgjump\n"
    )
    settings = SshSettings(known_hosts=tmp_path / "kh")
    plain = Host(name="a", address="10.0.0.1")
    endpoint = resolve(plain, config, settings)
    assert (endpoint.hostname, endpoint.port, endpoint.user) == ("gpu-a.internal", 2200, "cfguser")
    assert endpoint.key_files == [str(Path("~/.ssh/cfg_key").expanduser())]
    assert endpoint.proxy_jump == "cfgjump" and endpoint.known_hosts == [tmp_path / "kh"]
    assert endpoint.known_hosts_name == "[gpu-a.internal]:2200"
    assert endpoint.accept_new is False
    explicit = Host(
        name="a",
        address="10.0.0.1",
        port=22,
        user="root",
        key_file="/k",
        proxy_jump="invjump",
        ssh_args=["-o", "UserKnownHostsFile=/kh1 /kh2", "-o", "StrictHostKeyChecking=accept-new"],
        vars={"ansible_port": 22},
    )
    endpoint = resolve(explicit, config, settings)
    assert (endpoint.port, endpoint.user, endpoint.proxy_jump) == (22, "root", "invjump")
    assert endpoint.key_files == ["/k", str(Path("~/.ssh/cfg_key").expanduser())]
    assert endpoint.known_hosts == [Path("/kh1"), Path("/kh2")]
    assert endpoint.known_hosts_name == "gpu-a.internal" and endpoint.accept_new is True


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
