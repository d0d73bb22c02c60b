"""A /sys tree of RDMA devices written from a real `ibstat` capture, for the fabric probe.

`write_tree` turns every CA and port of the capture into the files the kernel exposes
under /sys/class/infiniband (Documentation/ABI/stable/sysfs-class-infiniband): state and
phys_state as "N: NAME", rate as "N Gb/sec (4X SPEED)", link_layer, fw_ver, node_guid,
gids/0, a device link to a PCI function, and the port counters at 0. Tests then change
what they study (a port at half rate, a counter that grows) and say so.
"""

from __future__ import annotations

from pathlib import Path

from bringup.node.fabric_facts import ERROR_COUNTERS
from bringup.node.parsers import rdma

# IBA speed names by lane rate (Gb/s): the kernel prints them after the width.
SPEEDS = {2.5: "SDR", 5.0: "DDR", 10.0: "QDR", 25.0: "EDR", 50.0: "HDR", 100.0: "NDR"}
STATE_NUMBERS = {name: number for number, name in rdma.PORT_STATES.items()}
PHYS_NUMBERS = {name: number for number, name in rdma.PHYS_STATES.items()}


def write_tree(root: Path, ibstat_text: str, pci: dict[str, str]) -> Path:
    """Write <root>/class/infiniband/... from an ibstat capture; `pci` gives each device's
    PCI address (ibstat prints none). Returns the sys root."""
    facts = rdma.parse_ibstat(ibstat_text)
    for device in facts.devices:
        function = root / "devices" / "pci0000:00" / pci[device.name]
        (function / "net").mkdir(parents=True)
        (function / "numa_node").write_text("0\n")
        base = root / "class" / "infiniband" / device.name
        base.mkdir(parents=True)
        (base / "device").symlink_to(function)
        for attr in ("hca_type", "fw_ver", "node_guid", "sys_image_guid"):
            value = getattr(device, attr)
            if value:
                (base / attr).write_text(value.removeprefix("0x") + "\n")
        (base / "board_id").write_text("MT_0000000223\n")  # ibstat prints no PSID
    for port in facts.ports:
        write_port(
            root,
            port.device,
            port.port,
            port.state or "DOWN",
            port.phys_state or "Disabled",
            _rate_text(port.rate_gbit_s or 0.0),
            port.link_layer or "InfiniBand",
            port.port_guid or "0x0",
        )
    return root


def write_port(
    root: Path,
    device: str,
    number: int,
    state: str,
    phys: str,
    rate: str,
    link_layer: str,
    guid: str,
) -> Path:
    path = root / "class" / "infiniband" / device / "ports" / str(number)
    (path / "counters").mkdir(parents=True, exist_ok=True)
    (path / "gids").mkdir(exist_ok=True)
    (path / "state").write_text(f"{STATE_NUMBERS[state]}: {state}\n")
    (path / "phys_state").write_text(f"{PHYS_NUMBERS[phys]}: {phys}\n")
    (path / "rate").write_text(rate + "\n")
    (path / "link_layer").write_text(link_layer + "\n")
    digits = guid.removeprefix("0x").rjust(16, "0")
    groups = ":".join(digits[i : i + 4] for i in range(0, 16, 4))
    (path / "gids" / "0").write_text(f"fe80:0000:0000:0000:{groups}\n")
    for counter in (*ERROR_COUNTERS, "port_xmit_data", "port_rcv_data"):
        (path / "counters" / counter).write_text("0\n")
    return path


def _rate_text(gbit: float) -> str:
    """The kernel's rate line for a 4X link of this rate ("200 Gb/sec (4X HDR)")."""
    lane = gbit / 4
    speed = SPEEDS.get(lane, "")
    shown = f"{gbit:g}"
    return f"{shown} Gb/sec (4X{' ' + speed if speed else ''})".replace("(4X )", "(4X)")


def write_pci_tree(root: Path, chains: list[list[str]], ids: dict[str, tuple[str, str]]) -> Path:
    """Write /sys/devices/pci<domain>:<bus>/<root port>/.../<function> for each chain (root
    port first, the function last) and the /sys/bus/pci/devices/<address> links into it, as
    the kernel lays them out; `ids` gives a function's vendor and class ("0x10de",
    "0x030200"). Returns the sys root."""
    links = root / "bus" / "pci" / "devices"
    links.mkdir(parents=True, exist_ok=True)
    for chain in chains:
        domain, bus = chain[0].split(":")[:2]
        path = root / "devices" / f"pci{domain}:{bus}"
        for address in chain:
            path = path / address
            path.mkdir(parents=True, exist_ok=True)
            link = links / address
            if not link.is_symlink():
                link.symlink_to(Path("..", "..", "..", *path.relative_to(root).parts))
            vendor, klass = ids.get(address, ("0x10b5", "0x060400"))  # a PLX bridge
            (path / "vendor").write_text(vendor + "\n")
            (path / "class").write_text(klass + "\n")
    return root
