"""The SSH transport without an sshd: the zip it ships, the errors of a node it cannot
reach, and the settings merged as OpenSSH does (tests/integration/ssh talks to a real sshd).
"""

from __future__ import annotations

import io
import socket
import zipfile
from pathlib import Path

import pytest

from bringup.fleet.inventory import Host
from bringup.fleet.node_code import build_node_code
from bringup.fleet.ssh import SshSettings
from bringup.fleet.transport import Unreachable
from tests.support.sshd import XID_REQUEST, connector, free_port, run

# --- the zip --------------------------------------------------------------------------


def test_node_code_is_deterministic_and_holds_only_the_node_side(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # built here, not read from a cache
    first = build_node_code()
    (built,) = (tmp_path / "bringup" / "node-code").iterdir()
    built.unlink()
    second = build_node_code()  # built again, in another interpreter: the same bytes
    assert first.sha256 == second.sha256 and first.data == second.data
    names = zipfile.ZipFile(io.BytesIO(first.data)).namelist()
    assert names[0] == "__main__.py"
    assert "bringup/__init__.py" in names and "bringup/node/protocol.py" in names
    assert "bringup/node/burnin/trainer.py" in names and "bringup/node/burnin/flops.py" in names
    assert "bringup/commands/burnin.py" not in names  # the controller's
    assert "bringup/checks/burnin_run.py" not in names
    # pynvml travels too: a bare node reads NVML with the bindings bringup was tested with.
    assert "pynvml.py" in names
    assert all(
        n.removesuffix("c") in ("__main__.py", "bringup/__init__.py", "pynvml.py")
        or n.startswith("bringup/node/")
        for n in names
    )
    assert not any("__pycache__" in n for n in names)
    # Each module's bytecode beside its source, where zipimport looks for it.
    sources = [n for n in names if n.endswith(".py") and n != "__main__.py"]
    assert sorted(n for n in names if n.endswith(".pyc")) == sorted(n + "c" for n in sources)


def test_the_controller_reuses_its_build_only_while_its_bytes_are_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    code = build_node_code()
    cache = tmp_path / "bringup" / "node-code"
    (built,) = cache.iterdir()
    assert oct(cache.stat().st_mode & 0o777) == "0o700" and built.read_bytes() == code.data
    built.write_bytes(code.data[:-1] + b"\0")  # damaged on disk: not what its name says
    assert build_node_code() == code  # built again, and kept in its place
    assert [p.read_bytes() == code.data for p in cache.iterdir()] == [True]


# --- a node that cannot be reached --------------------------------------------------------


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
