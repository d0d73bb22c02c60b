"""The `fabric` probe: every RDMA device and port of the east-west fabric, from sysfs.

For each device under /sys/class/infiniband: firmware, PSID (board_id), GUIDs, NUMA node and
PCI address; for each port: logical and physical state, rate and width, link layer, the
network interface, and the port counters (counters/ and the driver's hw_counters/) read
twice, `interval_s` apart, so that a check judges what grew while the node was measured,
not counts left from months ago. For RoCE ports, the ECN settings sysfs shows. Beside
them: GPUDirect RDMA readiness (nvidia_peermem, or DMA-BUF: kernel and open kernel
module), the IOMMU mode, the mlx5 link down/up lines of the kernel log window the xid
probe reads, and PCIe ACS on the switch ports between each GPU and the NIC on its switch
(the PCI tree from sysfs, the ACSCtl bits from `lspci -vvv`).

Nothing else is run: every other value is a file read, and one that cannot be read says why
in `unread` (or `notes`). A node without RDMA devices reports "no RDMA devices", never a
failure of the probe. The roots of /sys and /proc are parameters, so that tests run the
reader on trees written from real captures (tests/fixtures/fabric/sysfs/).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from bringup.node import pci_tree
from bringup.node.fabric_facts import (
    AcsFacts,
    FabricFacts,
    GpuDirect,
    GpuNicPath,
    PciBridgeAcs,
    RdmaDevice,
    RdmaPort,
)
from bringup.node.parsers import lspci, rdma
from bringup.node.probes import xid
from bringup.node.probes.host import iommu_flags, read_iommu_groups
from bringup.node.result import ParseError, ProbeError, ProbeOutput
from bringup.node.tool import run, which


@dataclass
class Params:
    """Parameters of the fabric probe (a suite sets them by name)."""

    interval_s: float = 10.0  # between the two counter readings (docs/fabric.md)
    window_s: float = 7 * 86400  # kernel log read for link flaps (the xid probe's window)
    timeout_s: float = 30.0  # per kernel-log command
    lspci_timeout_s: float = 10.0  # `lspci -vvv`, for ACS on the GPU-NIC paths
    sys_root: str = "/sys"
    proc_root: str = "/proc"


FACTS = FabricFacts

# DMA-BUF import of GPU memory by RDMA drivers (GPUDirect RDMA without nvidia_peermem)
# arrived in Linux 5.12 (docs/reference.md#fabric).
DMABUF_KERNEL = (5, 12)
_PCI_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


# --- reading one tree --------------------------------------------------------------------------


def read_devices(sys_root: Path) -> tuple[list[RdmaDevice], list[RdmaPort]]:
    """Every RDMA device and port under <sys_root>/class/infiniband (counters read once)."""
    root = sys_root / "class" / "infiniband"
    if not root.is_dir():
        return [], []
    devices: list[RdmaDevice] = []
    ports: list[RdmaPort] = []
    for path in sorted(root.iterdir(), key=lambda p: p.name):
        device = _read_device(path)
        devices.append(device)
        netdevs = _netdevs(path)
        port_dirs = [p for p in (path / "ports").glob("*") if p.name.isdigit()]
        for port_dir in sorted(port_dirs, key=lambda p: int(p.name)):
            port = _read_port(device.name, port_dir)
            port.netdev = _port_netdev(port_dir, netdevs, len(port_dirs))
            if port.link_layer == "Ethernet" and port.netdev:
                address = sys_root / "class" / "net" / port.netdev / "address"
                port.mac = _text(address, port.unread, "mac")
                port.roce = _read_roce(sys_root, port.netdev, port.unread)
            ports.append(port)
    return devices, ports


def read_counters(port_dir: Path, folder: str) -> tuple[dict[str, int], str | None]:
    """Counter name -> value of ports/<n>/<folder>/, and why some could not be read."""
    where = port_dir / folder
    if not where.is_dir():
        return {}, f"no {folder}/ folder"
    values: dict[str, int] = {}
    bad: list[str] = []
    for path in sorted(where.iterdir(), key=lambda p: p.name):
        try:
            values[path.name] = rdma.parse_counter(path.read_text())
        except (OSError, ParseError) as exc:
            bad.append(f"{path.name}: {getattr(exc, 'strerror', None) or exc}")
    return values, ("; ".join(bad) if bad else None)


def _read_device(path: Path) -> RdmaDevice:
    device = RdmaDevice(name=path.name)
    for attr in ("hca_type", "fw_ver", "board_id", "node_guid", "sys_image_guid"):
        setattr(device, attr, _text(path / attr, device.unread, attr))
    pci = _pci_address(path / "device")
    if pci is None:
        device.unread["pci_address"] = f"{path / 'device'} does not lead to a PCI function"
    device.pci_address = pci
    numa = _text(path / "device" / "numa_node", device.unread, "numa_node")
    if numa is not None:
        try:
            device.numa_node = int(numa)
        except ValueError:
            device.unread["numa_node"] = f"bad numa_node {numa[:20]!r}"
    return device


def _read_port(device: str, port_dir: Path) -> RdmaPort:
    port = RdmaPort(device=device, port=int(port_dir.name))
    unread = port.unread
    for attr, names in (("state", rdma.PORT_STATES), ("phys_state", rdma.PHYS_STATES)):
        text = _text(port_dir / attr, unread, attr)
        if text is not None:
            try:
                setattr(port, attr, rdma.parse_sysfs_state(text, names))
            except ParseError as exc:
                unread[attr] = str(exc)
    # `rate` fails with EINVAL on some ports that are down: the reason is kept.
    port.rate = _text(port_dir / "rate", unread, "rate")
    if port.rate is not None:
        try:
            port.rate_gbit_s, port.width = rdma.parse_rate(port.rate)
        except ParseError as exc:
            unread["rate"] = str(exc)
    port.link_layer = _text(port_dir / "link_layer", unread, "link_layer")
    lid = _text(port_dir / "lid", unread, "lid")
    if lid is not None:
        try:
            port.lid = int(lid, 16) if lid.lower().startswith("0x") else int(lid)
        except ValueError:
            unread["lid"] = f"bad lid {lid[:20]!r}"
    gid = _text(port_dir / "gids" / "0", unread, "port_guid")
    if gid is not None and port.link_layer == "InfiniBand":
        # GID 0 of an InfiniBand port is the subnet prefix and the port GUID (IBA 4.1.1).
        port.port_guid = "0x" + gid.replace(":", "")[-16:]
    port.counters, why = read_counters(port_dir, "counters")
    if why:
        unread["counters"] = why
    port.hw_counters, why = read_counters(port_dir, "hw_counters")
    if why and port.hw_counters:
        unread["hw_counters"] = why
    return port


def _netdevs(device_dir: Path) -> list[str]:
    """The network interfaces of the device's PCI function (device/net/*)."""
    try:
        return sorted(p.name for p in (device_dir / "device" / "net").iterdir())
    except OSError:
        return []


def _port_netdev(port_dir: Path, netdevs: list[str], ports: int) -> str | None:
    """A port's interface: its GID 0's (RoCE), else the function's own when it has one port."""
    named = _text(port_dir / "gid_attrs" / "ndevs" / "0", {}, "ndev")
    if named:
        return named
    return netdevs[0] if ports == 1 and len(netdevs) == 1 else None


def _read_roce(sys_root: Path, netdev: str, unread: dict[str, str]) -> dict[str, str]:
    """The RoCE congestion settings sysfs shows: ECN per priority, notification point
    (roce_np) and reaction point (roce_rp), /sys/class/net/<if>/ecn/ (mlx5)."""
    found: dict[str, str] = {}
    ecn = sys_root / "class" / "net" / netdev / "ecn"
    for role in ("roce_np", "roce_rp"):
        folder = ecn / role / "enable"
        if not folder.is_dir():
            unread[f"ecn.{role}"] = f"{folder} absent (the driver does not expose ECN there)"
            continue
        enabled = []
        for path in sorted(folder.iterdir(), key=lambda p: p.name):
            text = _text(path, unread, f"ecn.{role}.{path.name}")
            if text == "1":
                enabled.append(path.name)
        found[f"ecn.{role}"] = ",".join(enabled) or "none"
    # Trust mode and PFC are DCB settings read over netlink (`mlnx_qos -i IF`), not sysfs.
    for name in ("trust", "pfc"):
        unread[name] = f"not exposed in sysfs: `mlnx_qos -i {netdev}` shows it"
    return found


def _pci_address(link: Path) -> str | None:
    try:
        name = link.resolve(strict=True).name
    except OSError:
        return None
    return name if _PCI_ADDRESS.match(name) else None


def _text(path: Path, unread: dict[str, str], field: str) -> str | None:
    try:
        return path.read_text(errors="replace").strip() or None
    except OSError as exc:
        unread[field] = f"cannot read {path}: {exc.strerror or exc}"
        return None


# --- GPUDirect RDMA and the IOMMU ---------------------------------------------------------------


def read_gpudirect(sys_root: Path, proc_root: Path) -> GpuDirect:
    """Whether the GPU can be a target of RDMA: nvidia_peermem loaded, or DMA-BUF."""
    found = GpuDirect()
    modules = _text(proc_root / "modules", found.unread, "modules")
    if modules is not None:
        loaded = {line.split()[0] for line in modules.splitlines() if line.split()}
        found.nvidia_loaded = "nvidia" in loaded
        found.peermem_loaded = bool(loaded & {"nvidia_peermem", "nv_peer_mem"})
    elif (sys_root / "module").is_dir():  # /proc unreadable: /sys/module lists the same
        found.nvidia_loaded = (sys_root / "module" / "nvidia").is_dir()
        found.peermem_loaded = (sys_root / "module" / "nvidia_peermem").is_dir()
    version = proc_root / "driver" / "nvidia" / "version"
    text = _text(version, found.unread, "driver_version") if found.nvidia_loaded else None
    if text is not None:
        first = text.splitlines()[0] if text.splitlines() else ""
        found.open_kernel_module = "Open Kernel Module" in first
        match = re.search(r"\b([0-9]{3,}\.[0-9]+(?:\.[0-9]+)?)\b", first)
        found.driver_version = match.group(1) if match else None
    found.kernel = _text(proc_root / "sys" / "kernel" / "osrelease", found.unread, "kernel")
    if found.kernel is not None:
        release = _kernel_version(found.kernel)
        if release is None:
            found.unread["dmabuf_kernel"] = f"cannot read a version from {found.kernel[:40]!r}"
        else:
            found.dmabuf_kernel = release >= DMABUF_KERNEL
    return found


def _kernel_version(release: str) -> tuple[int, int] | None:
    match = re.match(r"^([0-9]+)\.([0-9]+)", release)
    return (int(match.group(1)), int(match.group(2))) if match else None


def read_iommu(sys_root: Path, proc_root: Path) -> str | None:
    """ "translated" when the IOMMU translates device DMA, "passthrough", "off", or None."""
    groups, types = read_iommu_groups(sys_root / "kernel" / "iommu_groups")
    if any(types.get(kind, 0) for kind in ("DMA", "DMA-FQ")):
        return "translated"
    if types:
        return "passthrough"
    try:
        cmdline = (proc_root / "cmdline").read_text()
    except OSError:
        return None if groups else "off"
    flags = (iommu_flags(cmdline) or "").split()
    if any(f in ("iommu=pt", "iommu.passthrough=1") for f in flags):
        return "passthrough"
    return "off" if not groups else None


# --- PCIe ACS on the GPU-NIC paths ---------------------------------------------------------------

# What lspci prints without root in place of the extended capabilities (ACS among them).
NOT_ROOT = (
    "lspci -vvv ran without root: the ACS capability shows as 'Capabilities: <access denied>'"
)


def gpu_nic_paths(sys_root: Path, devices: list[RdmaDevice]) -> AcsFacts:
    """Every NVIDIA GPU and RDMA device that share a PCIe switch, with the bridges between."""
    found = AcsFacts(gpus=pci_tree.nvidia_gpus(sys_root))
    nics = [(d.name, pci_tree.chain(sys_root, d.pci_address)) for d in devices if d.pci_address]
    for gpu in found.gpus:
        gpu_chain = pci_tree.chain(sys_root, gpu)
        if gpu_chain is None:
            continue
        for name, nic_chain in nics:
            between = pci_tree.bridges_between(gpu_chain, nic_chain) if nic_chain else None
            if between is not None:
                found.paths.append(GpuNicPath(gpu=gpu, nic=name, bridges=between))
    return found


def bridges_acs(wanted: list[str], lspci_text: str) -> list[PciBridgeAcs]:
    """The ACS control of each wanted bridge, from an `lspci -vvv` output."""
    functions = {f.address: f for f in lspci.parse_lspci(lspci_text)}
    found: list[PciBridgeAcs] = []
    for address in wanted:
        function = functions.get(address)
        if function is None:
            found.append(PciBridgeAcs(address, unread="not in the lspci -vvv output"))
        elif function.access_denied:
            found.append(PciBridgeAcs(address, function.name, unread=NOT_ROOT))
        else:
            found.append(PciBridgeAcs(address, function.name, acs_ctl=function.acs_ctl))
    return found


def read_acs(
    sys_root: Path, devices: list[RdmaDevice], timeout_s: float
) -> tuple[AcsFacts, str | None]:
    """ACS on the GPU-NIC paths, and the lspci output it was read from (None: not run)."""
    found = gpu_nic_paths(sys_root, devices)
    wanted = list(dict.fromkeys(b for path in found.paths for b in path.bridges))
    if not wanted:
        return found, None
    text, why = _lspci(timeout_s)
    if text is not None:
        try:
            found.bridges = bridges_acs(wanted, text)
        except ParseError as exc:
            why = f"lspci -vvv output not read: {exc}"
    if why is not None:
        found.unread = why
        found.bridges = [PciBridgeAcs(address, unread=why) for address in wanted]
    elif any(b.unread == NOT_ROOT for b in found.bridges):
        found.unread = NOT_ROOT
    return found, text


def _lspci(timeout_s: float) -> tuple[str | None, str | None]:
    path = which("lspci")
    if path is None:
        return None, "lspci not found (the pciutils package is not installed)"
    result = run([path, "-D", "-vvv"], timeout_s)
    if result.timed_out:
        return None, f"lspci -vvv did not finish in {timeout_s:g} s"
    if result.returncode != 0:
        first = (result.stderr.strip().splitlines() or ["no message"])[0]
        return None, f"lspci -vvv exited {result.returncode}: {first[:200]}"
    return result.stdout, None


# --- the probe ---------------------------------------------------------------------------------


def read_fabric(sys_root: Path, proc_root: Path, log_text: str | None) -> FabricFacts:
    """Everything but the second counter reading, from one tree and one kernel log."""
    devices, ports = read_devices(sys_root)
    facts = FabricFacts(source="sysfs", devices=devices, ports=ports)
    if not devices:
        facts.notes.append(f"no RDMA devices under {sys_root / 'class' / 'infiniband'}")
    if log_text is not None:
        by_pci = {d.pci_address: d.name for d in devices if d.pci_address}
        for line in log_text.splitlines():
            event = rdma.parse_link_line(line)
            if event is not None:
                event.device = by_pci.get(event.pci)
                facts.link_events.append(event)
    facts.gpudirect = read_gpudirect(sys_root, proc_root)
    facts.iommu = read_iommu(sys_root, proc_root)
    return facts


def read_again(facts: FabricFacts, sys_root: Path, started: float) -> None:
    """The second counter reading of every port, and the time between the two."""
    root = sys_root / "class" / "infiniband"
    for port in facts.ports:
        port_dir = root / port.device / "ports" / str(port.port)
        port.counters_end, why = read_counters(port_dir, "counters")
        if why:
            port.unread["counters_end"] = why
        port.hw_counters_end, _ = read_counters(port_dir, "hw_counters")
    facts.interval_s = round(time.monotonic() - started, 3)


def collect(params: Params) -> ProbeOutput:
    """Read the fabric, wait `interval_s`, read the counters again."""
    sys_root, proc_root = Path(params.sys_root), Path(params.proc_root)
    if not (proc_root / "self").exists() and not (sys_root / "class").is_dir():
        raise ProbeError(f"fabric probe: neither {proc_root} nor {sys_root}/class: not Linux?")
    started = time.monotonic()
    log_text: str | None = None
    log_problem: str | None = None
    try:
        log_text, log_source, window_s = xid.read_kernel_log(
            xid.Params(window_s=params.window_s, timeout_s=params.timeout_s)
        )
    except ProbeError as exc:
        log_source, window_s, log_problem = None, None, str(exc)
    facts = read_fabric(sys_root, proc_root, log_text)
    facts.log_source, facts.log_window_s = log_source, window_s
    if log_problem:
        facts.notes.append(f"link flaps not read: {log_problem}")
    lspci_text: str | None = None
    if facts.devices:
        facts.acs, lspci_text = read_acs(sys_root, facts.devices, params.lspci_timeout_s)
    if facts.ports:
        time.sleep(max(0.0, params.interval_s - (time.monotonic() - started)))
        read_again(facts, sys_root, started)
    raw = _raw(facts)
    if lspci_text is not None:
        raw["lspci-vvv.txt"] = lspci_text
    return ProbeOutput(facts=facts, raw=raw)


def _raw(facts: FabricFacts) -> dict[str, str]:
    ports = "".join(
        f"{p.name}: {p.state}/{p.phys_state} {p.rate} {p.link_layer} {p.netdev or '-'}\n"
        for p in facts.ports
    )
    counters = "".join(
        f"{p.name} {name} {value} -> {(p.counters_end or {}).get(name)}\n"
        for p in facts.ports
        for name, value in p.counters.items()
    )
    events = "".join(e.line + "\n" for e in facts.link_events)
    return {"ports.txt": ports, "counters.txt": counters, "link-events.txt": events}
