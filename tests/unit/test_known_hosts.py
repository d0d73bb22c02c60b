"""known_hosts read line by line as OpenSSH reads it: what is skipped, what matches, which
key types go first, and the one warning a broken file gives."""

from __future__ import annotations

import base64
from pathlib import Path

import paramiko
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from bringup.fleet.known_hosts import (
    UNKNOWN_HOST_KEY,
    KnownHosts,
    host_matches,
    parse,
    preferred_key_types,
)
from bringup.fleet.transport import Unreachable


def _ed25519() -> paramiko.Ed25519Key:
    raw = (
        ed25519.Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )
    blob = paramiko.Message()
    blob.add_string("ssh-ed25519")
    blob.add_string(raw)
    return paramiko.Ed25519Key(data=blob.asbytes())


ED = _ed25519()
OTHER_ED = _ed25519()
ECDSA = paramiko.ECDSAKey.generate()


def _line(names: str, key: paramiko.PKey, marker: str = "") -> str:
    return f"{marker}{names} {key.get_name()} {key.get_base64()}"


def test_a_binary_line_is_skipped_and_the_valid_line_still_counts() -> None:
    data = b"\xff\xfe\x00garbage\x80\n" + _line("gpu-a", ED).encode() + b"\n"
    keys, skipped = parse(data)
    assert skipped == [1]
    assert [(k.patterns, k.key) for k in keys] == [(("gpu-a",), ED)]


def test_what_cannot_be_parsed_is_skipped_by_line_number() -> None:
    junk_key = base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x01x").decode()
    lines = [
        "# a comment",  # 1: not an entry, not an error
        "",  # 2
        "gpu-a ssh-ed25519",  # 3: too few fields
        "gpu-a ssh-ed25519 !!!notbase64!!!",  # 4: bad base64
        f"gpu-a ssh-ed25519 {junk_key}",  # 5: a key that does not load
        f"gpu-a ecdsa-sha2-nistp256 {ED.get_base64()}",  # 6: type differs from the key's own
        _line("gpu-a", ED, marker="@bogus "),  # 7: unknown marker
        f"|1|bad|hash ssh-ed25519 {ED.get_base64()}",  # 8: broken hashed name
        f"gpu-a sk-ssh-ed25519@openssh.com {ED.get_base64()}",  # 9: a type paramiko lacks
        _line("*.example.com", ED, marker="@cert-authority "),  # 10: no host certificates
        _line("gpu-b", ED) + " a comment\r",  # 11: valid, with a comment and CRLF
        _line("gpu-c", ECDSA, marker="@revoked "),  # 12: valid, revoked
    ]
    keys, skipped = parse("\n".join(lines).encode())
    assert skipped == [3, 4, 5, 6, 7, 8]
    assert [(k.patterns, k.key, k.revoked) for k in keys] == [
        (("gpu-b",), ED, False),
        (("gpu-c",), ECDSA, True),
    ]


def test_names_match_as_openssh_matches_them() -> None:
    hashed = paramiko.HostKeys.hash_host("gpu-a.internal")
    assert host_matches("gpu-a.internal", [hashed])
    assert not host_matches("gpu-b.internal", [hashed])
    assert host_matches("GPU-A", ["gpu-a"])  # case-insensitive
    assert host_matches("[10.0.0.1]:2222", ["[10.0.0.1]:2222"])  # brackets are literal
    assert not host_matches("10.0.0.1", ["[10.0.0.1]:2222"])
    assert host_matches("gpu-17.dc1", ["gpu-*.dc?"])
    assert not host_matches("gpu-17.dc1", ["gpu-*.dc?", "!gpu-17.*"])  # negation wins
    assert host_matches("a", ["b", "a"])
    assert not host_matches("a", ["!a"])  # a negation alone matches nothing


def test_known_key_types_go_first_in_the_clients_order() -> None:
    offered = ["ssh-ed25519", "ecdsa-sha2-nistp256", "rsa-sha2-512", "rsa-sha2-256"]
    assert preferred_key_types(["ecdsa-sha2-nistp256"], offered) == [
        "ecdsa-sha2-nistp256",
        "ssh-ed25519",
        "rsa-sha2-512",
        "rsa-sha2-256",
    ]
    assert preferred_key_types(["ssh-rsa"], offered) == [
        "rsa-sha2-512",
        "rsa-sha2-256",
        "ssh-ed25519",
        "ecdsa-sha2-nistp256",
    ]
    assert preferred_key_types([], offered) == offered


def test_a_broken_file_warns_once_naming_it_and_its_lines(tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    path.write_bytes(b"\x80\x81\n" + _line("gpu-a", ED).encode() + b"\ngpu-b x\n")
    warnings: list[str] = []
    known = KnownHosts(warn=warnings.append)
    for _ in range(3):  # every node of a run looks it up; one warning
        known.verify([path], "gpu-a", ED, accept_new=False)
    assert warnings == [
        f"warning: {path}: skipped 2 line(s) that cannot be parsed (line 1, 3); "
        "the other lines are used"
    ]
    assert known.key_types([path], "gpu-a") == ["ssh-ed25519"]


def test_verify_refuses_another_key_a_revoked_key_and_an_unknown_one(tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    path.write_text(_line("gpu-a", ED) + "\n" + _line("*", OTHER_ED, marker="@revoked ") + "\n")
    known = KnownHosts(warn=lambda _: None)
    with pytest.raises(Unreachable, match=r"^host key mismatch: gpu-a presented ssh-ed25519"):
        known.verify([path], "gpu-a", _ed25519(), accept_new=True)
    with pytest.raises(Unreachable, match=r"^host key revoked: gpu-b presented ssh-ed25519"):
        known.verify([path], "gpu-b", OTHER_ED, accept_new=True)
    with pytest.raises(Unreachable) as info:
        known.verify([path], "gpu-c", ECDSA, accept_new=False)
    assert str(info.value) == UNKNOWN_HOST_KEY
    assert known.key_types([path], "gpu-b") == []  # the revoked key is no preference


def test_trust_on_first_use_appends_on_a_line_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    path.write_text(_line("gpu-a", ED))  # no newline at the end
    known = KnownHosts(warn=lambda _: None)
    known.verify([path], "gpu-b", ECDSA, accept_new=True)
    assert path.read_text().splitlines() == [_line("gpu-a", ED), _line("gpu-b", ECDSA)]
    known.verify([path], "gpu-b", ECDSA, accept_new=False)  # known from now on
    fresh = KnownHosts(warn=lambda _: None)
    fresh.verify([path], "gpu-b", ECDSA, accept_new=False)  # and in the next run
