"""RDMA tool outputs and sysfs values, as FabricFacts: `ibstat`, `ibv_devinfo [-v]`,
`perfquery [-x]`, the mlx5 driver's link lines in a kernel log, and the sysfs port files.

Each source spells a port state its own way ("Active", "PORT_ACTIVE (4)", "4: ACTIVE");
all are read into the sysfs names (bringup/node/fabric_facts.py), so one check judges them.
"""

from __future__ import annotations

import re

from bringup.node.fabric_facts import FabricFacts, LinkEvent, RdmaDevice, RdmaPort
from bringup.node.result import ParseError

# Logical port states by their IBA number (ibv_port_state, the sysfs "N: NAME" files).
PORT_STATES = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
# ibstat's words for them (infiniband-diags ibstat.c, port_state_str).
_IBSTAT_STATES = {"down": "DOWN", "initializing": "INIT", "armed": "ARMED", "active": "ACTIVE"}
# Physical port states by number (IBA PortPhysicalState; sysfs phys_state, ibv_devinfo).
PHYS_STATES = {
    1: "Sleep",
    2: "Polling",
    3: "Disabled",
    4: "PortConfigurationTraining",
    5: "LinkUp",
    6: "LinkErrorRecovery",
    7: "Phy Test",
}
# perfquery's counter names -> the sysfs counters/ file names.
PERFQUERY_COUNTERS = {
    "SymbolErrorCounter": "symbol_error",
    "LinkErrorRecoveryCounter": "link_error_recovery",
    "LinkDownedCounter": "link_downed",
    "PortRcvErrors": "port_rcv_errors",
    "PortRcvRemotePhysicalErrors": "port_rcv_remote_physical_errors",
    "PortRcvSwitchRelayErrors": "port_rcv_switch_relay_errors",
    "PortXmitDiscards": "port_xmit_discards",
    "PortXmitConstraintErrors": "port_xmit_constraint_errors",
    "PortRcvConstraintErrors": "port_rcv_constraint_errors",
    "LocalLinkIntegrityErrors": "local_link_integrity_errors",
    "ExcessiveBufferOverrunErrors": "excessive_buffer_overrun_errors",
    "VL15Dropped": "VL15_dropped",
    "PortXmitData": "port_xmit_data",
    "PortRcvData": "port_rcv_data",
    "PortXmitPkts": "port_xmit_packets",
    "PortRcvPkts": "port_rcv_packets",
    "PortXmitWait": "port_xmit_wait",
    "PortUnicastXmitPkts": "unicast_xmit_packets",
    "PortUnicastRcvPkts": "unicast_rcv_packets",
    "PortMulticastXmitPkts": "multicast_xmit_packets",
    "PortMulticastRcvPkts": "multicast_rcv_packets",
    "QP1Dropped": "QP1_dropped",
}

_RATE = re.compile(
    r"^(?P<gbit>[0-9]+(?:\.[0-9]+)?)\s*(?:Gb/sec)?(?:\s*\((?P<width>[0-9]+X)\s*(?P<speed>[A-Z]*)\))?$"
)
_NUMBERED = re.compile(r"^(?P<name>[A-Za-z_ ]+?)\s*\((?P<number>[0-9]+)\)$")
_PERFQUERY_HEADER = re.compile(
    r"^# Port (?:extended )?counters: Lid (?P<lid>[0-9]+) port (?P<port>[0-9]+)", re.M
)
_PERFQUERY_LINE = re.compile(r"^(?P<name>[A-Za-z0-9]+):\.+(?P<value>\S+)\s*$")
# "mlx5_core 0000:01:00.0 enp1s0f0np0: Link down" (the netdev name is absent in a line
# printed before the interface was named).
_LINK_LINE = re.compile(
    r"mlx5_core (?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])"
    r"(?: (?P<netdev>[^\s:]+))?: Link (?P<state>up|down)\b",
    re.ASCII,
)
_TIMESTAMP = re.compile(
    r"\[[^\]]*\]|^[0-9]{4}-[0-9]{2}-[0-9]{2}T\S+|^[A-Z][a-z]{2} [ 0-9][0-9] [0-9:]{8}"
)


# --- sysfs values -----------------------------------------------------------------------------


def parse_sysfs_state(text: str, names: dict[int, str]) -> str:
    """The name in a sysfs state file ("4: ACTIVE" -> "ACTIVE"), checked against its number."""
    number, sep, name = text.strip().partition(":")
    if not sep or not number.strip().isdigit() or not name.strip():
        raise ParseError(f"bad sysfs state {text.strip()[:40]!r}: expected 'N: NAME'")
    return names.get(int(number), name.strip())


def parse_rate(text: str) -> tuple[float, str | None]:
    """(Gb/s, width) of a port rate: sysfs "400 Gb/sec (4X NDR)" -> (400.0, "4X"), ibstat's
    "400" -> (400.0, None). The kernel prints "%d%s Gb/sec (%dX%s)" (drivers/infiniband/core/
    sysfs.c, rate_show); Gb is 1e9 bits."""
    match = _RATE.match(" ".join(text.split()))
    if match is None:
        raise ParseError(f"bad port rate {text.strip()[:40]!r}: expected 'N Gb/sec (4X ...)'")
    return float(match.group("gbit")), match.group("width")


def parse_counter(text: str) -> int:
    """A sysfs counter file's value ("0\\n")."""
    value = text.strip()
    if not value.isascii() or not value.isdigit():
        raise ParseError(f"bad counter value {value[:20]!r}")
    return int(value)


# --- ibstat ------------------------------------------------------------------------------------


def detect_ibstat(text: str) -> bool:
    return bool(re.search(r"^CA '[^']+'", text, re.M)) and "Physical state:" in text


def parse_ibstat(text: str) -> FabricFacts:
    """Every CA and port of an `ibstat` output."""
    facts = FabricFacts(source="ibstat")
    device: RdmaDevice | None = None
    port: RdmaPort | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if match := re.match(r"^CA '(?P<name>[^']+)'$", line):
            device = RdmaDevice(name=match.group("name"))
            facts.devices.append(device)
            port = None
            continue
        if device is None:
            continue
        if match := re.match(r"^Port (?P<port>[0-9]+):$", line):
            port = RdmaPort(device=device.name, port=int(match.group("port")))
            facts.ports.append(port)
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if port is None:
            _ibstat_device_field(device, key, value)
        else:
            _ibstat_port_field(port, key, value)
    if not facts.devices:
        raise ParseError("no \"CA '<name>'\" line: not ibstat output")
    return facts


def _ibstat_device_field(device: RdmaDevice, key: str, value: str) -> None:
    fields = {
        "CA type": "hca_type",
        "Firmware version": "fw_ver",
        "Node GUID": "node_guid",
        "System image GUID": "sys_image_guid",
    }
    if key in fields and value:
        setattr(device, fields[key], value)


def _ibstat_port_field(port: RdmaPort, key: str, value: str) -> None:
    if key == "State":
        port.state = _IBSTAT_STATES.get(value.lower(), value.upper() or None)
    elif key == "Physical state":
        port.phys_state = value or None
    elif key == "Rate":
        port.rate = value
        try:
            port.rate_gbit_s, port.width = parse_rate(value)
        except ParseError as exc:
            port.unread["rate"] = str(exc)
    elif key == "Link layer":
        port.link_layer = value or None
    elif key == "Port GUID":
        port.port_guid = value or None
    elif key == "Base lid" and value.isdigit():
        port.lid = int(value)


# --- ibv_devinfo --------------------------------------------------------------------------------


def detect_ibv_devinfo(text: str) -> bool:
    return bool(re.search(r"^hca_id:\s*\S+", text, re.M)) and "state:" in text


def parse_ibv_devinfo(text: str) -> FabricFacts:
    """Every device and port of `ibv_devinfo` (with or without -v)."""
    facts = FabricFacts(source="ibv_devinfo")
    device: RdmaDevice | None = None
    port: RdmaPort | None = None
    for raw in text.splitlines():
        key, sep, value = raw.strip().partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "hca_id":
            device = RdmaDevice(name=value)
            facts.devices.append(device)
            port = None
        elif device is None:
            continue
        elif key == "port" and value.isdigit():
            port = RdmaPort(device=device.name, port=int(value))
            facts.ports.append(port)
        elif port is None:
            fields = {
                "fw_ver": "fw_ver",
                "board_id": "board_id",
                "node_guid": "node_guid",
                "sys_image_guid": "sys_image_guid",
            }
            if key in fields and value:
                setattr(device, fields[key], value)
        else:
            _devinfo_port_field(port, key, value)
    if not facts.devices:
        raise ParseError("no 'hca_id:' line: not ibv_devinfo output")
    return facts


def _devinfo_port_field(port: RdmaPort, key: str, value: str) -> None:
    if key == "state":
        port.state = _numbered(value, PORT_STATES)
    elif key == "phys_state":
        port.phys_state = _numbered(value, PHYS_STATES)
    elif key == "active_width":
        port.width = value.split()[0] if value else None
    elif key == "link_layer":
        port.link_layer = value or None
    elif key == "port_lid" and value.isdigit():
        port.lid = int(value)


def _numbered(value: str, names: dict[int, str]) -> str | None:
    """ "PORT_ACTIVE (4)" -> "ACTIVE" by its number; the text itself when unnumbered."""
    match = _NUMBERED.match(value)
    if match is None:
        return value or None
    return names.get(int(match.group("number")), match.group("name").strip())


# --- perfquery ---------------------------------------------------------------------------------


def detect_perfquery(text: str) -> bool:
    return bool(re.search(r"^SymbolErrorCounter:\.+", text, re.M)) and "PortSelect:" in text


def parse_perfquery(text: str) -> FabricFacts:
    """The counters of one port from `perfquery` or `perfquery -x` (one reading: no delta)."""
    header = _PERFQUERY_HEADER.search(text)
    counters: dict[str, int] = {}
    select: int | None = None
    for raw in text.splitlines():
        match = _PERFQUERY_LINE.match(raw.strip())
        if match is None:
            continue
        name, value = match.group("name"), match.group("value")
        if name == "PortSelect" and value.isdigit():
            select = int(value)
        elif name in PERFQUERY_COUNTERS and value.isdigit():
            counters[PERFQUERY_COUNTERS[name]] = int(value)
    if "symbol_error" not in counters:
        raise ParseError("no SymbolErrorCounter line: not perfquery output")
    lid = int(header.group("lid")) if header else None
    number = int(header.group("port")) if header else (select or 1)
    where = f"lid {lid}" if lid is not None else "perfquery"
    port = RdmaPort(device=where, port=number, lid=lid, counters=counters)
    return FabricFacts(source="perfquery", ports=[port])


# --- kernel log ---------------------------------------------------------------------------------


def parse_link_line(line: str) -> LinkEvent | None:
    """The mlx5 link transition of one kernel-log line, or None."""
    match = _LINK_LINE.search(line)
    if match is None:
        return None
    stamp = _TIMESTAMP.search(line[: match.start()].strip())
    return LinkEvent(
        state=match.group("state"),
        pci=match.group("pci").lower(),
        netdev=match.group("netdev"),
        timestamp=stamp.group(0) if stamp else None,
        line=line.strip(),
    )


def detect_link_log(text: str) -> bool:
    return any(_LINK_LINE.search(line) for line in text.splitlines())


def parse_link_log(text: str) -> FabricFacts:
    """Every mlx5 link down/up line of a kernel log (dmesg, journalctl, syslog)."""
    events = [event for line in text.splitlines() if (event := parse_link_line(line))]
    return FabricFacts(source="kernel log", link_events=events)
