"""What a node is, for a hardware dispute: serials, BIOS, BMC, Fabric Manager and NIC firmware.

The host probe calls `read_identity`. Each source is read at the edge with a deadline and
parsed by a small pure function (tested on real recorded output). A source that is missing
(no DMI in a VM, no `ipmitool`, no InfiniBand) leaves its fields None and says why in
`unavailable`: the report then prints "not measured: <why>", never a guess.

Sources (docs/reference.md#node-identity):
  - /sys/class/dmi/id/*: the SMBIOS strings the kernel exports; the serials are readable by
    root only (0400), so `dmidecode -s KEYWORD` is the fallback when root and installed;
  - `ipmitool mc info`: the BMC's "Firmware Revision" (IPMI Get Device ID);
  - `nv-fabricmanager --version`: "Fabric Manager version is : 450.102.04";
  - /sys/class/infiniband/<dev>/{fw_ver,board_id,hca_type}: RDMA NIC firmware, PSID, model;
  - `ethtool -i IFACE`: driver and firmware of every network interface with a PCI device.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bringup.node.tool import CommandResult, run, which

SYS_DMI = Path("/sys/class/dmi/id")
SYS_INFINIBAND = Path("/sys/class/infiniband")
SYS_NET = Path("/sys/class/net")
MACHINE_ID = Path("/etc/machine-id")

NVSWITCH_FIRMWARE = "not read by bringup (needs NVIDIA's NSCQ library or DCGM)"

# identity field -> (DMI sysfs file, dmidecode -s keyword); dmidecode(8) lists the keywords.
DMI_FIELDS: dict[str, tuple[str, str]] = {
    "system_vendor": ("sys_vendor", "system-manufacturer"),
    "product_name": ("product_name", "system-product-name"),
    "system_serial": ("product_serial", "system-serial-number"),
    "baseboard_vendor": ("board_vendor", "baseboard-manufacturer"),
    "baseboard_product": ("board_name", "baseboard-product-name"),
    "baseboard_serial": ("board_serial", "baseboard-serial-number"),
    "chassis_serial": ("chassis_serial", "chassis-serial-number"),
    "bios_vendor": ("bios_vendor", "bios-vendor"),
    "bios_version": ("bios_version", "bios-version"),
    "bios_date": ("bios_date", "bios-release-date"),
}

# Placeholders firmware writes where the vendor left a field empty: not an identity.
_PLACEHOLDERS = {
    "",
    "0",
    "none",
    "n/a",
    "na",
    "not specified",
    "not applicable",
    "to be filled by o.e.m.",
    "default string",
    "system serial number",
    "chassis serial number",
    "0123456789",
}


@dataclass
class Nic:
    """One network adapter: an RDMA device (/sys/class/infiniband) or an interface (ethtool)."""

    name: str  # "mlx5_0" or "eth0"
    kind: str  # "rdma" or "ethernet"
    model: str | None = None  # hca_type ("MT4123") or the ethtool driver ("mlx5_core")
    firmware: str | None = None  # fw_ver or ethtool "firmware-version"
    psid: str | None = None  # board_id: the Mellanox/NVIDIA PSID ("MT_0000000222")
    bus_info: str | None = None  # PCI address from ethtool ("0000:00:03.0")


@dataclass
class SystemIdentity:
    """The node's identity beyond the GPUs. None: not measured, `unavailable` says why."""

    system_vendor: str | None = None
    product_name: str | None = None
    system_serial: str | None = None
    baseboard_vendor: str | None = None
    baseboard_product: str | None = None
    baseboard_serial: str | None = None
    chassis_serial: str | None = None
    bios_vendor: str | None = None
    bios_version: str | None = None
    bios_date: str | None = None
    bmc_firmware: str | None = None  # `ipmitool mc info` "Firmware Revision"
    bmc_manufacturer: str | None = None
    fabric_manager_version: str | None = None
    # Never read: no tool on a stock node prints it without NSCQ/DCGM (reference, node
    # identity); kept so that a report says so instead of leaving it out.
    nvswitch_firmware: str | None = None
    nics: list[Nic] = field(default_factory=list)
    # /etc/machine-id: the installation's own id (systemd, machine-id(5)); two nodes that
    # show one are one installation (fleet.identity).
    machine_id: str | None = None
    # field name ("bmc_firmware", "system_serial", "nics") -> why it was not measured
    unavailable: dict[str, str] = field(default_factory=dict)


# --- parsers: pure functions over a tool's text ---------------------------------------------


def clean_dmi(text: str) -> str | None:
    """A DMI string, or None when it is a placeholder ("To Be Filled By O.E.M.", "0")."""
    value = text.strip()
    return None if value.lower() in _PLACEHOLDERS else value


def parse_colon_fields(text: str) -> dict[str, str]:
    """`Key : value` lines (ipmitool mc info, ethtool -i) as a dict; other lines are ignored."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() and not line.startswith((" ", "\t")):
            fields.setdefault(key.strip(), value.strip())
    return fields


def parse_mc_info(text: str) -> tuple[str | None, str | None]:
    """(firmware revision, manufacturer name) of `ipmitool mc info`; None where not printed."""
    fields = parse_colon_fields(text)
    return fields.get("Firmware Revision") or None, fields.get("Manufacturer Name") or None


def parse_fabric_manager_version(text: str) -> str | None:
    """The version of `nv-fabricmanager --version` ("Fabric Manager version is : 450.102.04")."""
    for line in text.splitlines():
        head, sep, version = line.partition(":")
        if sep and "fabric manager version" in head.lower() and version.strip():
            return version.strip().split()[0]
    return None


def parse_ethtool_info(name: str, text: str) -> Nic:
    """One interface from `ethtool -i IFACE` (driver, firmware-version, bus-info)."""
    fields = parse_colon_fields(text)
    return Nic(
        name=name,
        kind="ethernet",
        model=fields.get("driver") or None,
        firmware=fields.get("firmware-version") or None,
        bus_info=fields.get("bus-info") or None,
    )


# --- readers: the I/O at the edge ------------------------------------------------------------


def read_identity(timeout_s: float = 10.0, raw: dict[str, str] | None = None) -> SystemIdentity:
    """Everything this node says about itself; never raises. Tool outputs go to `raw`."""
    raw = raw if raw is not None else {}
    ident = SystemIdentity()
    ident.unavailable["nvswitch_firmware"] = NVSWITCH_FIRMWARE
    _read_dmi(ident, timeout_s, raw)
    ident.machine_id, why = read_machine_id()
    if why is not None:
        ident.unavailable["machine_id"] = why
    _read_bmc(ident, timeout_s, raw)
    _read_fabric_manager(ident, timeout_s, raw)
    ident.nics = read_rdma_nics() + _read_ethtool(ident, timeout_s, raw)
    if not ident.nics:
        ident.unavailable.setdefault("nics", f"no RDMA device under {SYS_INFINIBAND}")
    return ident


def read_machine_id(path: Path = MACHINE_ID) -> tuple[str | None, str | None]:
    """(the machine id, None) or (None, why not): 32 lowercase hex digits, machine-id(5);
    an empty or "uninitialized" file (an image not booted yet) is no id."""
    try:
        text = path.read_text(errors="replace").strip().lower()
    except OSError as exc:
        return None, f"cannot read {path}: {exc.strerror or exc}"
    if len(text) != 32 or any(c not in "0123456789abcdef" for c in text):
        return None, f"{path} holds no machine id"
    return text, None


def read_dmi(root: Path = SYS_DMI) -> tuple[dict[str, str | None], dict[str, str]]:
    """(field -> value, field -> why not) from the DMI sysfs files."""
    values: dict[str, str | None] = {}
    missing: dict[str, str] = {}
    for name, (sysfs, _keyword) in DMI_FIELDS.items():
        try:
            values[name] = clean_dmi((root / sysfs).read_text(errors="replace"))
        except OSError as exc:
            missing[name] = f"cannot read {root / sysfs}: {exc.strerror or exc}"
            continue
        if values[name] is None:
            missing[name] = "the firmware left it empty (placeholder value)"
    return values, missing


def _read_dmi(ident: SystemIdentity, timeout_s: float, raw: dict[str, str]) -> None:
    values, missing = read_dmi()
    dmidecode = which("dmidecode") if os.geteuid() == 0 else None
    lines: list[str] = []
    for name, (_sysfs, keyword) in DMI_FIELDS.items():
        value = values.get(name)
        if value is None and dmidecode and name in missing and "cannot read" in missing[name]:
            result = run([dmidecode, "-s", keyword], timeout_s)
            problem = _problem(result)
            value = clean_dmi(result.stdout) if problem is None else None
            if value is None:
                missing[name] += f"; dmidecode -s {keyword}: {problem or 'empty'}"
        if value is None:
            ident.unavailable[name] = missing.get(name, "not reported")
        setattr(ident, name, value)
        lines.append(f"{name}: {value if value is not None else '(not measured)'}\n")
    raw["dmi.txt"] = "".join(lines)


def _read_bmc(ident: SystemIdentity, timeout_s: float, raw: dict[str, str]) -> None:
    text = _tool_output(["ipmitool", "mc", "info"], timeout_s, ident, "bmc_firmware")
    if text is None:
        return
    raw["ipmitool-mc-info.txt"] = text
    ident.bmc_firmware, ident.bmc_manufacturer = parse_mc_info(text)
    if ident.bmc_firmware is None:
        ident.unavailable["bmc_firmware"] = "ipmitool mc info printed no 'Firmware Revision'"


def _read_fabric_manager(ident: SystemIdentity, timeout_s: float, raw: dict[str, str]) -> None:
    argv = ["nv-fabricmanager", "--version"]
    text = _tool_output(argv, timeout_s, ident, "fabric_manager_version")
    if text is None:
        return
    raw["nv-fabricmanager-version.txt"] = text
    ident.fabric_manager_version = parse_fabric_manager_version(text)
    if ident.fabric_manager_version is None:
        ident.unavailable["fabric_manager_version"] = "nv-fabricmanager printed no version"


def read_rdma_nics(root: Path = SYS_INFINIBAND) -> list[Nic]:
    """Every RDMA device's model (hca_type), firmware (fw_ver) and PSID (board_id)."""
    if not root.is_dir():
        return []
    return [
        Nic(
            name=device.name,
            kind="rdma",
            model=_sysfs_text(device / "hca_type"),
            firmware=_sysfs_text(device / "fw_ver"),
            psid=_sysfs_text(device / "board_id"),
        )
        for device in sorted(root.iterdir())
    ]


def _read_ethtool(ident: SystemIdentity, timeout_s: float, raw: dict[str, str]) -> list[Nic]:
    """`ethtool -i` of every interface backed by a device (not lo, bridges, veth)."""
    try:
        names = sorted(p.name for p in SYS_NET.iterdir() if (p / "device").exists())
    except OSError:
        names = []
    if not names:
        return []
    ethtool = which("ethtool")
    if ethtool is None:
        ident.unavailable["ethernet_nics"] = "ethtool not installed (apt-get install ethtool)"
        return []
    nics: list[Nic] = []
    for name in names:
        result = run([ethtool, "-i", name], timeout_s)
        raw[f"ethtool-i-{name}.txt"] = result.stdout + result.stderr
        if _problem(result) is None:
            nics.append(parse_ethtool_info(name, result.stdout))
    return nics


def _tool_output(
    argv: list[str], timeout_s: float, ident: SystemIdentity, field_name: str
) -> str | None:
    """The tool's stdout, or None with the reason in `unavailable[field_name]`."""
    path = which(argv[0])
    if path is None:
        ident.unavailable[field_name] = f"{argv[0]} not installed"
        return None
    result = run([path, *argv[1:]], timeout_s)
    problem = _problem(result)
    if problem is not None:
        ident.unavailable[field_name] = f"{' '.join(argv)}: {problem}"
        return None
    return result.stdout


def _problem(result: CommandResult) -> str | None:
    if result.timed_out:
        return "timed out"
    if result.returncode != 0:
        stderr = " ".join(result.stderr.split())[:200]
        return stderr or f"exit status {result.returncode}"
    return None


def _sysfs_text(path: Path, clean: Callable[[str], str | None] = clean_dmi) -> str | None:
    try:
        return clean(path.read_text(errors="replace"))
    except OSError:
        return None
