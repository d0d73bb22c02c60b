"""known_hosts, read as OpenSSH reads it, and the host-key check of every connection.

Each file is read once per run, line by line: a line that cannot be parsed (not UTF-8, too
few fields, bad base64, a key that does not load) is skipped, and the run says so once on
stderr, naming the file and the lines; the other lines still count. One broken line must
not make every node "host key unknown". Names match as OpenSSH matches them: exact,
hashed (`|1|salt|hash`), `*` and `?` patterns, `!` negation, comma-separated lists.
`@revoked` keys are refused; `@cert-authority` lines are ignored (no host certificates).

The key types known for a host go first in the key exchange (OpenSSH does the same): a
host known only by its ECDSA key must not be asked for its Ed25519 one and then be called
unknown.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import paramiko

from bringup.fleet.transport import Unreachable

UNKNOWN_HOST_KEY = "host key unknown, run with --accept-new-hostkeys to trust on first use"
SYSTEM_KNOWN_HOSTS = Path("/etc/ssh/ssh_known_hosts")
SKIPPED_SHOWN = 10  # line numbers named in the warning; the count says the rest
# The signature algorithms of an RSA host key (the key itself is `ssh-rsa`).
RSA_ALGORITHMS = ("rsa-sha2-512", "rsa-sha2-256", "ssh-rsa")


@dataclass(frozen=True)
class KnownKey:
    """One usable line: the host patterns, the key, and whether it is marked @revoked."""

    patterns: tuple[str, ...]
    key: paramiko.PKey
    revoked: bool = False


class Unparsable(ValueError):
    """A line that is not a known_hosts entry."""


# --- parsing (pure) ------------------------------------------------------------------------


def parse(data: bytes) -> tuple[list[KnownKey], list[int]]:
    """The entries of a known_hosts file, and the numbers of the lines that cannot be parsed.

    Lines with a key type paramiko does not know (security keys, DSA) are valid and unused,
    as are @cert-authority lines: they are neither entries nor errors.
    """
    keys: list[KnownKey] = []
    skipped: list[int] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            skipped.append(number)
            continue
        if not line or line.startswith("#"):
            continue
        try:
            entry = parse_line(line)
        except Unparsable:
            skipped.append(number)
            continue
        if entry is not None:
            keys.append(entry)
    return keys, skipped


def parse_line(line: str) -> KnownKey | None:
    """`[@marker] patterns keytype base64 [comment]`; None for a valid line of no use here."""
    fields = line.split()
    marker = None
    if fields[0].startswith("@"):
        marker, fields = fields[0], fields[1:]
        if marker not in ("@revoked", "@cert-authority"):
            raise Unparsable(f"unknown marker {marker}")
    if len(fields) < 3:
        raise Unparsable("too few fields")
    names, key_type, blob = fields[:3]
    patterns = tuple(p for p in names.split(",") if p)
    if not patterns or not all(_valid_pattern(p) for p in patterns):
        raise Unparsable("bad host name pattern")
    try:
        data = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        raise Unparsable("bad base64") from None
    if marker == "@cert-authority":
        return None
    try:
        key = paramiko.PKey.from_type_string(key_type, data)
    except paramiko.UnknownKeyType:
        return None
    except Exception:  # whatever garbage makes the key loaders raise
        raise Unparsable("key does not load") from None
    if key.get_name() != key_type:
        raise Unparsable("key type differs from the key's own")
    return KnownKey(patterns=patterns, key=key, revoked=marker == "@revoked")


def _valid_pattern(pattern: str) -> bool:
    if pattern.startswith("|1|"):
        return _hashed_parts(pattern) is not None
    return True


def _hashed_parts(pattern: str) -> tuple[bytes, bytes] | None:
    parts = pattern.split("|")
    if len(parts) != 4:
        return None
    try:
        salt = base64.b64decode(parts[2], validate=True)
        digest = base64.b64decode(parts[3], validate=True)
    except (binascii.Error, ValueError):
        return None
    return (salt, digest) if len(digest) == hashlib.sha1().digest_size else None


def host_matches(name: str, patterns: Sequence[str]) -> bool:
    """OpenSSH's match: any pattern matches and no negated one does (case-insensitive)."""
    name = name.lower()
    hit = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        pattern = pattern[1:] if negated else pattern
        if pattern.startswith("|1|"):
            parts = _hashed_parts(pattern)
            matched = parts is not None and hmac.compare_digest(
                hmac.new(parts[0], name.encode(), hashlib.sha1).digest(), parts[1]
            )
        else:
            matched = _glob(pattern.lower()).fullmatch(name) is not None
        if matched and negated:
            return False
        hit = hit or matched
    return hit


def _glob(pattern: str) -> re.Pattern[str]:
    """`*` and `?` only, as OpenSSH (`[` is literal: `[host]:port` names a port)."""
    return re.compile(
        "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    )


def preferred_key_types(known: Sequence[str], offered: Sequence[str]) -> list[str]:
    """The client's host-key algorithms with those of the known key types first (in the
    client's own order), then the rest: `ssh-rsa` keys stand for their RSA algorithms."""
    wanted = set(known)

    def is_known(algorithm: str) -> bool:
        return ("ssh-rsa" if algorithm in RSA_ALGORITHMS else algorithm) in wanted

    first = [a for a in offered if is_known(a)]
    return first + [a for a in offered if not is_known(a)]


# --- the files of a run --------------------------------------------------------------------


def _warn_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class KnownHosts:
    """known_hosts files, each read once per run, and appended to on trust-on-first-use."""

    def __init__(self, warn: Callable[[str], None] = _warn_stderr) -> None:
        self._lock = threading.Lock()
        self._files: dict[Path, list[KnownKey]] = {}
        self._warn = warn

    def _keys(self, path: Path) -> list[KnownKey]:
        with self._lock:
            if path not in self._files:
                self._files[path] = self._read(path)
            return self._files[path]

    def _read(self, path: Path) -> list[KnownKey]:
        try:
            data = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise Unreachable(f"cannot read known hosts {path}: {exc.strerror}") from None
        keys, skipped = parse(data)
        if skipped:
            shown = ", ".join(str(n) for n in skipped[:SKIPPED_SHOWN])
            more = (
                f" and {len(skipped) - SKIPPED_SHOWN} more" if len(skipped) > SKIPPED_SHOWN else ""
            )
            self._warn(
                f"warning: {path}: skipped {len(skipped)} line(s) that cannot be parsed "
                f"(line {shown}{more}); the other lines are used"
            )
        return keys

    def entries(self, files: Sequence[Path], name: str) -> list[KnownKey]:
        """Every entry for `name` in `files` and the system-wide file."""
        found: list[KnownKey] = []
        for path in [*files, SYSTEM_KNOWN_HOSTS]:
            found += [k for k in self._keys(path) if host_matches(name, k.patterns)]
        return found

    def key_types(self, files: Sequence[Path], name: str) -> list[str]:
        """The key types known (not revoked) for `name`, e.g. ["ecdsa-sha2-nistp256"]."""
        types = [k.key.get_name() for k in self.entries(files, name) if not k.revoked]
        return list(dict.fromkeys(types))

    def verify(
        self, files: Sequence[Path], name: str, key: paramiko.PKey, accept_new: bool
    ) -> None:
        """Pass when known_hosts has this key; Unreachable when it has another or none, or
        marks it revoked. With `accept_new`, a first key is appended to the first file."""
        entries = self.entries(files, name)
        if any(k.revoked and k.key == key for k in entries):
            raise Unreachable(
                f"host key revoked: {name} presented {key.get_name()} {fingerprint(key)}, "
                "which known_hosts marks @revoked; refused"
            )
        known = [k.key for k in entries if not k.revoked]
        if any(k.get_name() == key.get_name() and k == key for k in known):
            return
        if any(k.get_name() == key.get_name() for k in known):
            raise Unreachable(
                f"host key mismatch: {name} presented {key.get_name()} "
                f"{fingerprint(key)}, known_hosts has another; refused (was the node "
                "reinstalled? otherwise suspect a man in the middle)"
            )
        if not accept_new:
            raise Unreachable(UNKNOWN_HOST_KEY)
        self._append(files[0], name, key)

    def _append(self, path: Path, name: str, key: paramiko.PKey) -> None:
        """Trust on first use: add one line (under a lock: many nodes accept at once)."""
        with self._lock:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            with path.open("ab+") as out:
                # A last line without its newline must not swallow the new one.
                size = out.seek(0, 2)
                ends_open = False
                if size:
                    out.seek(size - 1)
                    ends_open = out.read(1) != b"\n"
                line = f"{name} {key.get_name()} {key.get_base64()}\n".encode()
                out.write((b"\n" if ends_open else b"") + line)
            self._files.setdefault(path, []).append(KnownKey(patterns=(name,), key=key))


def fingerprint(key: paramiko.PKey) -> str:
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")
