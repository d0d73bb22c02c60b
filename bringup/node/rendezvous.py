"""Where a node's ranks meet the others (node side, standard library only).

Shared by the jobs that span nodes through torch.distributed: the `nccl` probe's torch
engine (collective/launcher.py) and the `burnin` probe's trainer launch.
"""

from __future__ import annotations

import socket


def free_port(address: str) -> int:
    """A TCP port free on `address` now (the rendezvous binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def interface_towards(address: str) -> str | None:
    """Name of the interface this host would use to reach `address` (Linux), or None.

    gloo otherwise picks the address its hostname resolves to, which in a container or a
    network namespace is often not the one the other nodes can reach.
    """
    try:
        target = socket.gethostbyname(address)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((target, 9))  # UDP connect sends nothing: it only picks a route
            local = probe.getsockname()[0]
    except OSError:
        return None
    for name, ipv4 in interface_addresses():
        if ipv4 == local:
            return name
    return None


def interface_addresses() -> list[tuple[str, str]]:
    """Each interface with an IPv4 address, and that address (Linux, SIOCGIFADDR)."""
    import fcntl  # Linux only, like the rest of the node side
    import struct

    siocgifaddr = 0x8915  # <linux/sockios.h>
    found = []
    for _, name in socket.if_nameindex():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            try:
                packed = fcntl.ioctl(
                    sock.fileno(), siocgifaddr, struct.pack("256s", name[:15].encode())
                )
            except OSError:
                continue
        found.append((name, socket.inet_ntoa(packed[20:24])))
    return found
