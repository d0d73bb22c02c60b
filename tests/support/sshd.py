"""A real sshd on 127.0.0.1 for the SSH transport tests, and how the tests reach it.

Each test module gets its own sshd on a free port (tests/integration/ssh/conftest.py), with
generated host keys and a generated client key in a temporary authorized_keys. No mocks:
paramiko talks to OpenSSH. sshd must run as root. Its sessions have XDG_CACHE_HOME set to
a folder of its own, so the probe code it caches stays out of root's ~/.cache.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from bringup.fleet.inventory import Host
from bringup.fleet.node_code import NodeCode, build_node_code
from bringup.fleet.ssh import Connector, SshSettings, run_ssh
from tests.support.timing import scaled

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


def keygen(path: Path, key_type: str = "ed25519") -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", key_type, "-N", "", "-C", "test", "-f", str(path)],
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
    def create(cls, workdir: Path, host_key_types: tuple[str, ...] = ("ed25519",)) -> LocalSshd:
        """`host_key_types`: the host keys sshd offers; the first is `host_key` and the one
        known_hosts lists."""
        workdir.mkdir(parents=True, exist_ok=True)
        sshd = cls(
            dir=workdir,
            port=free_port(),
            key=workdir / "id_ed25519",
            known_hosts=workdir / "known_hosts",
            host_key=workdir / f"host_{host_key_types[0]}",
        )
        (workdir / "authorized_keys").write_text(keygen(sshd.key) + "\n")
        for key_type in host_key_types:
            keygen(workdir / f"host_{key_type}", key_type)
        sshd.write_known_hosts()
        (workdir / "sshd_config").write_text(
            "\n".join(
                [
                    f"ListenAddress 127.0.0.1:{sshd.port}",
                    *[f"HostKey {workdir / f'host_{t}'}" for t in host_key_types],
                    f"SetEnv XDG_CACHE_HOME={sshd.cache}",
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

    @property
    def cache(self) -> Path:
        """XDG_CACHE_HOME of the sessions: the probe code lands in bringup/code there."""
        return self.dir / "cache"

    def cached_zip(self, code: NodeCode) -> Path:
        return self.cache / "bringup" / "code" / code.file_name

    def known_hosts_line(self, key_type: str = "ed25519") -> str:
        public = (self.dir / f"host_{key_type}.pub").read_text().split()
        return f"[127.0.0.1]:{self.port} {public[0]} {public[1]}\n"

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
        end = time.monotonic() + scaled(10)
        while time.monotonic() < end:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=scaled(1)) as s:
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


def connector(**settings: object) -> Connector:
    """A connector that reads no ~/.ssh/config and records into no ~/.ssh/known_hosts."""
    return Connector(SshSettings(ssh_config=None, **settings))  # type: ignore[arg-type]


def run(host: Host, request: dict[str, object], **kwargs: object) -> list[dict[str, object]]:
    """The node side's records for `request`, run over SSH on `host` (conn, code: defaults)."""
    conn = kwargs.pop("conn", None) or connector()
    code = kwargs.pop("code", None) or build_node_code()
    return list(run_ssh(host, request, 60, connector=conn, code=code, **kwargs))  # type: ignore[arg-type]


XID_REQUEST = {"probes": [{"name": "xid", "params": {"window_s": 60}, "timeout_s": 30}]}
