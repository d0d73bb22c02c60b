"""The SSH transport (paramiko): reach a node, ship the probe code, stream its records back.

One node, one connection:

1. connect: TCP (directly, or as a `direct-tcpip` channel of one shared connection to
   the ProxyJump bastion), SSH banner, host key verified against known_hosts, then
   authentication (identity files, agent, default keys, password);
2. one session: the node side's start command (fleet/node_code.py) with the request on
   stdin; its first line says whether the node's cached zip is the controller's (size and
   sha256, checked at every start); when it is not, the zip follows on the same stdin and
   the node stores it and runs it in the same Python;
3. yield one record per probe as its JSON line arrives, reading stderr alongside so a
   chatty node side cannot fill a pipe and stall, and enforce the deadlines: each probe
   must answer within its own `timeout_s` (+ grace), the node within `deadline_s`.

Every failure before the node side starts is `Unreachable` with a one-line reason; a
failure after it is a `TransportError` (the records already yielded are kept by the caller).

Why not `SSHClient`: it re-reads known_hosts for every connection (a thousand nodes
against a thousand-line file), and its host key policy cannot tell "unknown" from the
other `SSHException`s reliably; `Transport` with our own checks is as short and clearer.
"""

from __future__ import annotations

import contextlib
import getpass
import select
import shlex
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paramiko

from bringup.fleet.inventory import Host, ssh_options
from bringup.fleet.known_hosts import KnownHosts, preferred_key_types
from bringup.fleet.node_code import NodeCode, code_answer, remote_command, request_frame
from bringup.fleet.transport import (
    PROBE_GRACE_S,
    STOP_POLL_S,
    Interrupted,
    LineBuffer,
    ProbeWatch,
    Runner,
    Stage,
    TransportError,
    Unreachable,
    decode_line,
)

STDERR_KEPT = 16 * 1024  # bytes of the node side's stderr kept for error messages
HANG_UP_S = 2.0  # how long a closing connection waits for the node to close its side


# --- connection settings -------------------------------------------------------------------


@dataclass
class SshSettings:
    """Run-wide SSH options (the CLI flags)."""

    connect_timeout_s: float = 10.0
    accept_new_hostkeys: bool = False
    ssh_config: Path | None = field(default_factory=lambda: Path("~/.ssh/config").expanduser())
    known_hosts: Path = field(default_factory=lambda: Path("~/.ssh/known_hosts").expanduser())


@dataclass
class Endpoint:
    """Where and as whom to connect, after inventory, ssh args and ~/.ssh/config are merged."""

    hostname: str
    port: int
    user: str
    key_files: list[str]
    known_hosts: list[Path]
    accept_new: bool
    proxy_jump: str | None
    password: str | None = field(default=None, repr=False)

    @property
    def known_hosts_name(self) -> str:
        """The name known_hosts lists the node under (OpenSSH: [host]:port off port 22)."""
        return self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"


def load_ssh_config(path: Path | None) -> paramiko.SSHConfig:
    config = paramiko.SSHConfig()
    if path is not None and path.is_file():
        try:
            config = paramiko.SSHConfig.from_path(str(path))
        except (OSError, paramiko.ConfigParseError) as exc:
            raise TransportError(f"{path}: cannot read ssh config: {exc}") from None
    return config


def resolve(host: Host, config: paramiko.SSHConfig, settings: SshSettings) -> Endpoint:
    """Inventory first, then `-o` options in ansible_ssh_common_args, then ~/.ssh/config."""
    options = ssh_options(host.ssh_args)
    found = config.lookup(host.address)
    explicit_port = "ansible_port" in host.vars or "ansible_ssh_port" in host.vars
    port = host.port if explicit_port else int(options.get("port") or found.get("port") or 22)
    keys = [k for k in [host.key_file, options.get("identityfile")] if k]
    keys += list(found.get("identityfile") or [])
    files = options.get("userknownhostsfile") or found.get("userknownhostsfile")
    known = [Path(f).expanduser() for f in shlex.split(files)] if files else [settings.known_hosts]
    strict = options.get("stricthostkeychecking") or found.get("stricthostkeychecking") or ""
    jump = host.proxy_jump or found.get("proxyjump")
    return Endpoint(
        hostname=found.get("hostname", host.address),
        port=port,
        user=host.user or options.get("user") or found.get("user") or getpass.getuser(),
        key_files=[str(Path(k).expanduser()) for k in keys],
        known_hosts=known,
        # OpenSSH's "accept-new" and "no" both trust a first key; a changed key never is.
        accept_new=settings.accept_new_hostkeys or strict.lower() in ("accept-new", "no"),
        proxy_jump=None if (jump or "").lower() == "none" else jump,
        password=host.password,
    )


# --- connecting ----------------------------------------------------------------------------


class Connector:
    """Opens authenticated connections to nodes; shares one connection per bastion."""

    def __init__(self, settings: SshSettings) -> None:
        self.settings = settings
        self.config = load_ssh_config(settings.ssh_config)
        self.known_hosts = KnownHosts()
        self._bastions: dict[str, paramiko.Transport] = {}
        self._bastion_locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def connect(self, host: Host) -> paramiko.Transport:
        endpoint = resolve(host, self.config, self.settings)
        sock = self._socket(endpoint)
        return self._handshake(endpoint, sock)

    def close(self) -> None:
        with self._lock:
            for transport in self._bastions.values():
                transport.close()
            self._bastions.clear()

    def _socket(self, endpoint: Endpoint) -> socket.socket | paramiko.Channel:
        timeout = self.settings.connect_timeout_s
        if endpoint.proxy_jump:
            bastion = self._bastion(endpoint.proxy_jump)
            try:
                return bastion.open_channel(
                    "direct-tcpip",
                    (endpoint.hostname, endpoint.port),
                    ("127.0.0.1", 0),
                    timeout=timeout,
                )
            except (paramiko.SSHException, OSError) as exc:
                raise Unreachable(
                    f"bastion {endpoint.proxy_jump} cannot reach "
                    f"{endpoint.hostname}:{endpoint.port}: {_reason(exc)}"
                ) from None
        where = f"{endpoint.hostname}:{endpoint.port}"
        try:
            return socket.create_connection((endpoint.hostname, endpoint.port), timeout=timeout)
        except socket.gaierror as exc:
            raise Unreachable(f"cannot resolve {endpoint.hostname}: {exc.strerror}") from None
        except ConnectionRefusedError:
            raise Unreachable(f"connection refused by {where} (is sshd running?)") from None
        except TimeoutError:
            raise Unreachable(f"no answer from {where} within {timeout:g} s") from None
        except OSError as exc:
            raise Unreachable(f"cannot connect to {where}: {exc.strerror or exc}") from None

    def _bastion(self, spec: str) -> paramiko.Transport:
        """The one shared connection to a ProxyJump host (`[user@]host[:port]`)."""
        if "," in spec:
            raise Unreachable(f"ProxyJump chains are not supported ({spec}): use one bastion")
        first = spec
        with self._lock:
            lock = self._bastion_locks.setdefault(first, threading.Lock())
        with lock:  # one connection per bastion even when 64 nodes ask at once
            transport = self._bastions.get(first)
            if transport is not None and transport.is_active():
                return transport
            user, _, rest = first.rpartition("@")
            name, _, port = rest.partition(":")
            jump_host = Host(name=name, address=name, user=user or None)
            if port:
                jump_host.port = int(port)
                jump_host.vars["ansible_port"] = int(port)
            endpoint = resolve(jump_host, self.config, self.settings)
            endpoint.proxy_jump = None  # a bastion behind a bastion: not supported (docs)
            try:
                transport = self._handshake(endpoint, self._socket(endpoint))
            except Unreachable as exc:
                raise Unreachable(f"bastion {first}: {exc}") from None
            self._bastions[first] = transport
            return transport

    def _handshake(
        self, endpoint: Endpoint, sock: socket.socket | paramiko.Channel
    ) -> paramiko.Transport:
        timeout = self.settings.connect_timeout_s
        transport = paramiko.Transport(sock)
        transport.banner_timeout = timeout
        transport.handshake_timeout = timeout
        transport.auth_timeout = timeout
        try:
            # The key types known for the node first: a node known by its ECDSA key only
            # must not be asked for its Ed25519 key and then be called unknown.
            options = transport.get_security_options()
            known = self.known_hosts.key_types(endpoint.known_hosts, endpoint.known_hosts_name)
            options.key_types = preferred_key_types(known, options.key_types)
            try:
                transport.start_client(timeout=timeout)
            except (paramiko.SSHException, EOFError, OSError) as exc:
                raise Unreachable(f"SSH handshake failed: {_reason(exc)}") from None
            # start_client returns quietly when its timeout passes mid-handshake.
            if not transport.is_active() or not transport.initial_kex_done:
                raise Unreachable(
                    f"SSH handshake failed: no SSH banner and key exchange within {timeout:g} s"
                )
            key = transport.get_remote_server_key()
            self.known_hosts.verify(
                endpoint.known_hosts, endpoint.known_hosts_name, key, endpoint.accept_new
            )
            _authenticate(transport, endpoint)
        except BaseException:
            transport.close()
            raise
        return transport


def _authenticate(transport: paramiko.Transport, endpoint: Endpoint) -> None:
    """Identity files, then agent keys, then default keys, then a password (as OpenSSH)."""
    agent = paramiko.Agent()  # SSH_AUTH_SOCK; no agent gives no keys
    try:
        _try_credentials(transport, endpoint, agent)
    finally:
        agent.close()


def _try_credentials(
    transport: paramiko.Transport, endpoint: Endpoint, agent: paramiko.Agent
) -> None:
    tried: list[str] = []
    keys: list[tuple[str, paramiko.PKey]] = []
    for path in endpoint.key_files:
        try:
            keys.append((path, paramiko.PKey.from_path(path)))
        except FileNotFoundError:
            tried.append(f"{path} (missing)")
        except paramiko.PasswordRequiredException:
            tried.append(f"{path} (encrypted: load it into ssh-agent)")
        except (OSError, paramiko.SSHException, ValueError) as exc:
            tried.append(f"{path} (unreadable: {_reason(exc)})")
    keys += [("agent", k) for k in agent.get_keys()]
    if not endpoint.key_files:
        for name in ("id_ed25519", "id_ecdsa", "id_rsa"):
            path = Path("~/.ssh").expanduser() / name
            if path.is_file():
                try:
                    keys.append((str(path), paramiko.PKey.from_path(path)))
                except (OSError, paramiko.SSHException, ValueError):
                    continue
    for label, key in keys:
        try:
            transport.auth_publickey(endpoint.user, key)
        except paramiko.BadAuthenticationType:
            tried.append("publickey (not allowed by the node)")
            break
        except paramiko.AuthenticationException:
            tried.append(label)
            continue
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise Unreachable(f"authentication aborted: {_reason(exc)}") from None
        if transport.is_authenticated():
            return
    if endpoint.password is not None:
        try:
            transport.auth_password(endpoint.user, endpoint.password)
            if transport.is_authenticated():
                return
        except paramiko.AuthenticationException:
            tried.append("password")
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise Unreachable(f"authentication aborted: {_reason(exc)}") from None
    what = ", ".join(dict.fromkeys(tried)) or "no key: no identity file, agent or ~/.ssh/id_*"
    raise Unreachable(f"authentication failed for user {endpoint.user} (tried: {what})")


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:200]


# --- running the node side -----------------------------------------------------------------


def run_ssh(
    host: Host,
    request: dict[str, Any],
    deadline_s: float,
    *,
    connector: Connector,
    code: NodeCode,
    stop: threading.Event | None = None,
    on_stage: Stage | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield each probe record of `request` as the node prints it (see the module doc)."""
    stage = on_stage or (lambda _: None)
    end = time.monotonic() + deadline_s
    stage("connecting")
    transport = connector.connect(host)
    try:
        stage("running")
        session = _Session(transport, code, host.python, request, host.name, stage)
        yield from session.records(end, deadline_s, stop)
        session.raise_for_status()
    finally:
        _hang_up(transport)


def _hang_up(transport: paramiko.Transport, wait_s: float = HANG_UP_S) -> None:
    """Close the connection so that the node learns of it even over a lossy link.

    A socket closed with data unread sends a reset, which TCP never sends again: one lost
    reset leaves the node's sshd session waiting for a client that is gone (until TCP
    keepalive, hours). A half-close sends a FIN instead, retransmitted until the node has
    it; its sshd then ends the session and closes its side, which ends paramiko's reader.
    Bounded by wait_s: a frozen node never answers.
    """
    sock = transport.sock
    try:
        if isinstance(sock, socket.socket):
            sock.shutdown(socket.SHUT_WR)
        else:  # a direct-tcpip channel through a bastion
            sock.shutdown_write()
    except (OSError, EOFError, paramiko.SSHException):
        pass  # already closed
    end = time.monotonic() + wait_s
    while transport.is_active() and time.monotonic() < end:
        time.sleep(0.02)
    transport.close()


def _open(transport: paramiko.Transport) -> paramiko.Channel:
    try:
        return transport.open_session(timeout=30)
    except (paramiko.SSHException, EOFError, OSError) as exc:
        raise TransportError(f"the node refused a session: {_reason(exc)}") from None


class _Session:
    """One run of the node side: request in (and the zip, when the node asks for it),
    records out, deadlines enforced."""

    def __init__(
        self,
        transport: paramiko.Transport,
        code: NodeCode,
        python: str,
        request: dict[str, Any],
        node: str,
        stage: Stage,
    ):
        self.transport = transport
        self.node = node
        self.code = code
        self.request = request
        self.stage = stage
        self.channel = _open(transport)
        self.watch = ProbeWatch(request, PROBE_GRACE_S)
        self.answer: str | None = None  # the node's first line: "cached" or "needed"
        self.exit_status: int | None = None
        self.stderr = b""
        try:
            self.channel.exec_command(remote_command(code, python))
        except (paramiko.SSHException, EOFError, OSError) as exc:
            self.channel.close()
            raise TransportError(f"the node refused to run a command: {_reason(exc)}") from None
        # The command may have ended already (no python3): its exit status says so.
        with contextlib.suppress(paramiko.SSHException, OSError):
            self.channel.sendall(request_frame(request))

    def records(
        self, end: float, deadline_s: float, stop: threading.Event | None
    ) -> Iterator[dict[str, Any]]:
        channel = self.channel
        lines = LineBuffer(self.node)
        try:
            while True:
                now = time.monotonic()
                if stop is not None and stop.is_set():
                    raise Interrupted("interrupted")
                if now >= end:
                    raise TransportError(f"node did not finish within {deadline_s:g} s")
                self.watch.check(now, "node hung or network down")
                # paramiko's timeouts are per read; select with a short wait and recheck.
                select.select([channel], [], [], 0.2)
                while channel.recv_stderr_ready():
                    self.stderr = (self.stderr + channel.recv_stderr(1 << 16))[-STDERR_KEPT:]
                received: list[bytes] = []
                while channel.recv_ready():
                    received += lines.feed(channel.recv(1 << 16))
                for line in received:
                    if self.answer is None:
                        self._code_line(line, end, stop)
                        continue
                    record = decode_line(line)
                    self.watch.saw(record)
                    yield record
                if channel.eof_received and not channel.recv_ready():
                    break
                if channel.closed and not channel.recv_ready():
                    break  # closed with data still buffered: read it first (the last record)
            # The node closed its output: its exit status follows, unless the link died
            # (then paramiko closes the channel and leaves exit_status at -1).
            channel.status_event.wait(5.0)
            if channel.exit_status_ready():
                self.exit_status = channel.exit_status
            while channel.recv_stderr_ready():
                self.stderr = (self.stderr + channel.recv_stderr(1 << 16))[-STDERR_KEPT:]
        finally:
            channel.close()

    def _code_line(self, line: bytes, end: float, stop: threading.Event | None) -> None:
        """The node's answer about its cached zip; a line before it is the login shell's
        (a profile that prints), skipped. "needed": the zip follows the request."""
        self.answer = code_answer(line)
        if self.answer == "needed":
            self.stage("uploading probe code")
            self._send(self.code.data, end, stop)
            self.stage("running")
            self.watch = ProbeWatch(self.request, PROBE_GRACE_S)  # the upload is no probe's
        if self.answer is not None:
            with contextlib.suppress(paramiko.SSHException, OSError, EOFError):
                self.channel.shutdown_write()

    def _send(self, data: bytes, end: float, stop: threading.Event | None) -> None:
        """All of `data` to the node's stdin, in steps short enough to see Ctrl-C and the
        deadline: a node that stops reading fills the channel's window, and paramiko's
        sendall would wait for it without end."""
        channel = self.channel
        channel.settimeout(STOP_POLL_S)
        sent = 0
        try:
            while sent < len(data):
                if stop is not None and stop.is_set():
                    raise Interrupted("interrupted")
                if time.monotonic() >= end:
                    raise TransportError("storing the probe code on the node took too long")
                try:
                    sent += channel.send(data[sent : sent + 32768])
                except TimeoutError:
                    continue
                except (paramiko.SSHException, OSError) as exc:
                    raise TransportError(
                        f"storing the probe code on the node failed: {_reason(exc)}"
                    ) from None
        finally:
            channel.settimeout(None)

    def raise_for_status(self) -> None:
        last = self._last_stderr_line()
        if self.exit_status is None or self.exit_status == -1:
            # No exit status: the connection dropped, or (link still up) the node side was
            # killed by a signal, which sshd reports as exit-signal and paramiko ignores.
            what = "node side was killed" if self.transport.is_active() else "connection lost"
            raise TransportError(f"{what}{': ' + last if last else ''}")
        if self.exit_status == 127:
            raise TransportError(f"python3 not found on the node: {last}")
        if self.exit_status != 0 and self.answer == "needed" and not self.watch.answered:
            raise TransportError(f"cannot store the probe code on the node: {last}")
        if self.exit_status != 0:
            raise TransportError(f"node side exited {self.exit_status}: {last}")
        if (missing := self.watch.unanswered()) is not None:
            raise TransportError(f"node side ended before probe {missing} answered")

    def _last_stderr_line(self) -> str:
        lines = self.stderr.decode(errors="replace").strip().splitlines()
        return lines[-1][:200] if lines else ""


def ssh_runner(host: Host, connector: Connector, code: NodeCode) -> Runner:
    """A node reached over SSH (bringup.fleet.ssh), sharing one connector and one code zip."""

    def runner(
        request: dict[str, Any], deadline_s: float, stop: threading.Event, on_stage: Stage
    ) -> Iterator[dict[str, Any]]:
        return run_ssh(
            host, request, deadline_s, connector=connector, code=code, stop=stop, on_stage=on_stage
        )

    return runner
