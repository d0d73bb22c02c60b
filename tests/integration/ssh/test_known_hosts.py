"""known_hosts against a real sshd offering two host keys (Ed25519 and ECDSA): a host known
by one key type only is reached with that type, and a broken line costs nothing but a
warning."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bringup.fleet.inventory import Host
from bringup.fleet.known_hosts import UNKNOWN_HOST_KEY
from bringup.fleet.transport import Unreachable
from tests.support.sshd import XID_REQUEST, LocalSshd, connector, needs_sshd, run, sshd_unavailable


@pytest.fixture(scope="module")
def two_keys(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSshd]:
    if sshd_unavailable():
        pytest.skip(str(sshd_unavailable()))
    server = LocalSshd.create(tmp_path_factory.mktemp("sshd2"), host_key_types=("ed25519", "ecdsa"))
    yield server
    server.stop()


def _with_known_hosts(sshd: LocalSshd, path: Path, text: bytes) -> Host:
    path.write_bytes(text)
    return sshd.host(ssh_args=["-o", f"UserKnownHostsFile={path}"])


@needs_sshd
def test_a_host_known_only_by_its_ecdsa_key_is_reached(two_keys: LocalSshd, tmp_path: Path) -> None:
    host = _with_known_hosts(two_keys, tmp_path / "kh", two_keys.known_hosts_line("ecdsa").encode())
    assert [r["probe"] for r in run(host, XID_REQUEST)] == ["xid"]


@needs_sshd
def test_a_host_known_only_by_its_ed25519_key_is_reached(
    two_keys: LocalSshd, tmp_path: Path
) -> None:
    line = two_keys.known_hosts_line("ed25519").encode()
    host = _with_known_hosts(two_keys, tmp_path / "kh", line)
    assert [r["probe"] for r in run(host, XID_REQUEST)] == ["xid"]


@needs_sshd
def test_accept_new_records_the_first_key_type_the_client_prefers(
    two_keys: LocalSshd, tmp_path: Path
) -> None:
    path = tmp_path / "kh"
    host = _with_known_hosts(two_keys, path, b"")
    with pytest.raises(Unreachable) as info:
        run(host, XID_REQUEST)
    assert str(info.value) == UNKNOWN_HOST_KEY
    run(host, XID_REQUEST, conn=connector(accept_new_hostkeys=True))
    assert path.read_text() == two_keys.known_hosts_line("ed25519")


@needs_sshd
def test_a_garbage_line_is_skipped_with_one_warning(
    two_keys: LocalSshd, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "kh"
    garbage = b"\x00\xff\xfe binary \x80\x81 junk\n"
    host = _with_known_hosts(two_keys, path, garbage + two_keys.known_hosts_line("ecdsa").encode())
    conn = connector()
    for _ in range(2):  # two nodes of one run: one warning
        assert [r["probe"] for r in run(host, XID_REQUEST, conn=conn)] == ["xid"]
    assert capsys.readouterr().err == (
        f"warning: {path}: skipped 1 line(s) that cannot be parsed (line 1); "
        "the other lines are used\n"
    )
