"""Read the IMEX service of this node (node side, standard library only).

What NVIDIA's IMEX guide tells an operator to look at on each compute tray of an NVLink
domain (docs/reference.md#imex): the `nvidia-imex` systemd service, the domain as
`nvidia-imex-ctl -N` reports it, the daemon's own state (`nvidia-imex-ctl -q`) and the node
list of nodes_config.cfg. Each part that cannot be read says why (the tool is missing, it
timed out, the file is not readable) and the others are still read; nothing here raises.
"""

from __future__ import annotations

import os
import socket
import time

from bringup.node.imex_facts import ImexFacts
from bringup.node.rendezvous import interface_addresses
from bringup.node.tool import CommandResult, run, which

CONFIG = "/etc/nvidia-imex/config.cfg"  # the service's configuration (IMEX guide)
NODES_CONFIG = "/etc/nvidia-imex/nodes_config.cfg"  # its default IMEX_NODE_CONFIG_FILE
_MAX_FILE = 1 << 20  # a configuration file larger than this is not one


def collect_imex(config: str, timeout_s: float, raw: dict[str, str]) -> ImexFacts:
    """The facts of this node's IMEX service; raw outputs are added to `raw`. `timeout_s`
    bounds all its commands together: a hung `nvidia-imex-ctl` must not take the gpu
    probe's whole deadline (and the GPUs' facts with it)."""
    if which("nvidia-imex-ctl") is None and not os.path.isdir(os.path.dirname(config)):
        # No IMEX here at all (an HGX board): said once, without asking systemd (the health
        # check runs this probe at every job start).
        missing = "nvidia-imex-ctl not found (the nvidia-imex package is not installed)"
        return ImexFacts(service_error=missing, domain_error=missing, config_error=missing)
    facts = ImexFacts(local_addresses=local_addresses())
    deadline = time.monotonic() + timeout_s
    _read_service(facts, timeout_s / 3)
    _read_ctl(facts, config, deadline, raw)
    _read_nodes_config(facts, config, raw)
    return facts


def _read_service(facts: ImexFacts, timeout_s: float) -> None:
    systemctl = which("systemctl")
    if systemctl is None:
        facts.service_error = "systemctl not found (not a systemd host)"
        return
    result = run([systemctl, "is-active", "nvidia-imex"], timeout_s)
    state = result.stdout.strip().splitlines()[:1]
    if result.timed_out:
        facts.service_error = f"`systemctl is-active nvidia-imex` timed out after {timeout_s:g} s"
    elif state:  # is-active prints the state and exits non-zero when it is not "active"
        facts.service_state = state[0]
    else:
        facts.service_error = f"`systemctl is-active nvidia-imex`: {_said(result)}"


def _read_ctl(facts: ImexFacts, config: str, deadline: float, raw: dict[str, str]) -> None:
    ctl = which("nvidia-imex-ctl")
    if ctl is None:
        facts.domain_error = "nvidia-imex-ctl not found (the nvidia-imex package is not installed)"
        return
    from bringup.node.parsers.imex_ctl import parse_imex_domain  # only where IMEX runs
    from bringup.node.result import ParseError

    # The domain report first: it is what the check judges; the daemon's own state after it.
    left = max(deadline - time.monotonic(), 0.1)
    result = run([ctl, "-N", "-c", config], left)
    raw["nvidia-imex-ctl-N.txt"] = result.stdout + (result.stderr or "")
    if result.timed_out:
        facts.domain_error = f"`nvidia-imex-ctl -N` timed out after {left:.1f} s"
        return
    status = run([ctl, "-q", "-c", config], max(deadline - time.monotonic(), 0.1))
    if not status.timed_out and status.returncode == 0 and status.stdout.strip():
        facts.daemon_status = status.stdout.strip().splitlines()[-1].strip().upper()
    try:
        facts.domain = parse_imex_domain(result.stdout)
    except ParseError:
        # Not a domain report: the tool's own words say why (service down, no config).
        facts.domain_error = f"`nvidia-imex-ctl -N`: {_said(result)}"


def _read_nodes_config(facts: ImexFacts, config: str, raw: dict[str, str]) -> None:
    path = NODES_CONFIG
    text, error = _read(config)
    if text is not None:
        raw["config.cfg"] = text
        path = _setting(text, "IMEX_NODE_CONFIG_FILE") or NODES_CONFIG
    elif facts.domain_error is None:
        facts.config_error = f"{config}: {error}"
    facts.config_path = path
    nodes, error = _read(path)
    if nodes is None:
        facts.config_error = f"{path}: {error}"
        return
    from bringup.node.parsers.imex_ctl import parse_nodes_config

    raw["nodes_config.cfg"] = nodes
    facts.config_nodes = parse_nodes_config(nodes)


def _read(path: str) -> tuple[str | None, str]:
    """A configuration file's text, or None and why it could not be read."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(_MAX_FILE + 1)
    except FileNotFoundError:
        return None, "not found"
    except PermissionError:
        return None, "permission denied (run as root)"
    except OSError as exc:
        return None, exc.strerror or str(exc)
    if len(data) > _MAX_FILE:
        return None, f"larger than {_MAX_FILE} bytes: not a configuration file"
    return data.decode("utf-8", errors="replace"), ""


def _setting(text: str, key: str) -> str | None:
    """The value of `KEY=value` in the IMEX config.cfg format."""
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.strip() == key and value.strip():
            return value.strip()
    return None


def _said(result: CommandResult) -> str:
    """The tool's first line of output, or its exit status when it said nothing."""
    for stream in (result.stdout, result.stderr):
        lines = [line.strip() for line in stream.splitlines() if line.strip()]
        if lines:
            return " ".join(lines[0].split())[:200]
    return f"exit status {result.returncode}, no output"


def local_addresses() -> list[str]:
    """This node's IPv4 addresses and host names: how nodes_config.cfg and the domain's
    node list can name it."""
    names = {socket.gethostname(), socket.getfqdn()}
    return sorted(names | set(_ipv4_addresses()))


def _ipv4_addresses() -> list[str]:
    try:
        return [ipv4 for _, ipv4 in interface_addresses()]
    except OSError:
        return []
