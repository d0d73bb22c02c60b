"""The `host` probe: the operating system, CPUs, memory, limits, disks and fabric ports.

Everything here is read from /proc, /sys, /etc/os-release and a few system calls; no
tool is run. Each file has a small pure parse function (tested on real text) and the
reading happens at the edge, in `collect`. A file that is missing (a VM without cpufreq,
a node without InfiniBand) leaves its fields None or empty and adds a note: the probe
reports what it could see rather than failing as a whole.
"""

from __future__ import annotations

import os
import resource
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from bringup.node.identity import SystemIdentity, read_identity
from bringup.node.result import ParseError, ProbeError, ProbeOutput

# Where the probe reads; module constants so that tests can point readers at a copy.
PROC = Path("/proc")
SYS_CPU = Path("/sys/devices/system/cpu")
SYS_NODE = Path("/sys/devices/system/node")
SYS_INFINIBAND = Path("/sys/class/infiniband")
SYS_IOMMU_GROUPS = Path("/sys/kernel/iommu_groups")
SYS_DMI = Path("/sys/class/dmi/id")
OS_RELEASE = Path("/etc/os-release")

# The most CPUs or NUMA nodes a kernel list may name: Linux's NR_CPUS tops out at 8192
# (x86 MAXSMP); a bigger range is garbage, not a machine, and must not allocate a huge list.
MAX_LIST_LENGTH = 65536

T = TypeVar("T")

# Kernel command-line parameters that turn the IOMMU on or put it in passthrough
# (Documentation/admin-guide/kernel-parameters.txt: intel_iommu, amd_iommu, iommu).
IOMMU_PARAMS = ("intel_iommu", "amd_iommu", "iommu", "iommu.passthrough", "iommu.strict")
ACS_OVERRIDE_PARAM = "pcie_acs_override"  # the out-of-tree ACS override patch's parameter


@dataclass
class Params:
    """Parameters of the host probe (a suite sets them by name)."""

    paths: list[str] = field(default_factory=lambda: ["/tmp"])  # data/checkpoint paths
    timeout_s: float = 10.0  # per path (statvfs on a hung mount never returns) and per tool


@dataclass
class CpuInfo:
    """What /proc/cpuinfo says about the processors."""

    model: str | None  # "model name"; None on architectures that do not print it (arm64)
    sockets: int | None  # distinct "physical id"; None when not printed
    cores: int | None  # distinct (physical id, core id) pairs; None when not printed
    threads: int  # "processor" entries: the online logical CPUs


@dataclass
class MemInfo:
    """The /proc/meminfo fields the host checks use."""

    memory_total_bytes: int
    hugepages_total: int | None
    hugepage_size_bytes: int | None


@dataclass
class PathSpace:
    """Free space of one data or checkpoint path; `error` says why it was not measured."""

    path: str
    free_bytes: int | None = None  # available to an unprivileged user (f_bavail)
    total_bytes: int | None = None
    mount_point: str | None = None
    error: str | None = None


@dataclass
class IbPort:
    """One port of an RDMA device, as /sys/class/infiniband/<device>/ports/<port>/ shows it."""

    device: str  # "mlx5_0"
    port: int
    state: str | None  # "ACTIVE", "DOWN", "INIT", ... (logical state)
    phys_state: str | None  # "LinkUp", "Polling", "Disabled", ...
    rate: str | None  # as sysfs prints it, e.g. "400 Gb/sec (4X NDR)"
    rate_bytes_per_s: float | None
    link_layer: str | None  # "InfiniBand" or "Ethernet" (RoCE)


@dataclass
class HostFacts:
    """Everything the host probe saw on one node. None: the source was missing or unreadable."""

    hostname: str
    kernel: str
    os_release: str | None  # PRETTY_NAME
    cpu_model: str | None
    sockets: int | None
    cores: int | None
    threads: int | None
    memory_total_bytes: int | None
    numa_nodes: int | None
    governors: dict[str, int]  # governor -> CPUs using it; empty when cpufreq is absent (VMs)
    cmdline: str | None
    iommu: str | None  # the IOMMU parameters found on the command line, e.g. "intel_iommu=on"
    iommu_groups: int | None  # None: /sys/kernel/iommu_groups absent
    iommu_group_types: dict[str, int]  # "identity" (passthrough), "DMA", "DMA-FQ", ... -> groups
    acs_override: bool
    hugepages_total: int | None
    hugepage_size_bytes: int | None
    memlock_soft_bytes: int | None  # None = unlimited
    memlock_hard_bytes: int | None  # None = unlimited
    free_space: list[PathSpace] = field(default_factory=list)
    ib_ports: list[IbPort] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what could not be read, and why
    # Firmware versions: "bios" (DMI bios_version) and each RDMA device's fw_ver ("mlx5_0").
    firmware: dict[str, str] = field(default_factory=dict)
    # Serials, BIOS, BMC, Fabric Manager and NIC firmware/PSID (bringup/node/identity.py).
    identity: SystemIdentity = field(default_factory=SystemIdentity)


FACTS = HostFacts


# --- parsers: pure functions over a file's text -------------------------------------------


def parse_cpuinfo(text: str) -> CpuInfo:
    """Model, sockets, cores and threads from /proc/cpuinfo."""
    threads = 0
    model: str | None = None
    sockets: set[str] = set()
    cores: set[tuple[str, str]] = set()
    physical_id: str | None = None
    for line in [*text.splitlines(), ""]:
        key, sep, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if not sep:
            physical_id = None  # a blank line ends one processor's block
        elif key == "processor":
            threads += 1
        elif key == "model name" and model is None:
            model = value
        elif key == "physical id":
            physical_id = value
            sockets.add(value)
        elif key == "core id" and physical_id is not None:
            cores.add((physical_id, value))
    if threads == 0:
        raise ParseError("no 'processor' entries: not /proc/cpuinfo output")
    return CpuInfo(
        model=model or None,
        sockets=len(sockets) or None,
        cores=len(cores) or None,
        threads=threads,
    )


def first_processor_block(text: str) -> str:
    """The first processor's block of /proc/cpuinfo: the others repeat it on a uniform host."""
    return text.split("\n\n", 1)[0] + "\n"


def parse_meminfo(text: str) -> MemInfo:
    """Total memory and hugepages from /proc/meminfo ("MemTotal:  24684096 kB")."""
    fields: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        parts = value.split()
        if not sep or not parts or not _is_number(parts[0]):
            continue
        # The kernel's "kB" is KiB (fs/proc/meminfo.c shifts by 10); counts have no unit.
        scale = 1024 if parts[1:] == ["kB"] else 1
        fields[key.strip()] = int(parts[0]) * scale
    if "MemTotal" not in fields:
        raise ParseError("no 'MemTotal' line: not /proc/meminfo output")
    return MemInfo(
        memory_total_bytes=fields["MemTotal"],
        hugepages_total=fields.get("HugePages_Total"),
        hugepage_size_bytes=fields.get("Hugepagesize"),
    )


def parse_os_release(text: str) -> str | None:
    """PRETTY_NAME from /etc/os-release (shell-style KEY="value"); None when absent."""
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key == "PRETTY_NAME":
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            return value or None
    return None


def parse_cpulist(text: str) -> list[int]:
    """A kernel CPU/node list ("0-3,8,10-11") as numbers; empty text is an empty list."""
    numbers: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        first, sep, last = part.partition("-")
        if not _is_number(first) or (sep and not _is_number(last)):
            raise ParseError(f"bad CPU list element {part[:40]!r}")
        low, high = int(first), int(last) if sep else int(first)
        if high < low or len(numbers) + high - low >= MAX_LIST_LENGTH:
            raise ParseError(f"bad CPU list range {part[:40]!r}")
        numbers.extend(range(low, high + 1))
    return numbers


def _is_number(text: str) -> bool:
    # str.isdigit alone accepts "²", which int() rejects.
    return text.isascii() and text.isdigit()


def iommu_flags(cmdline: str) -> str | None:
    """The IOMMU parameters on a kernel command line, in order ("intel_iommu=on iommu=pt")."""
    found = [arg for arg in _kernel_args(cmdline) if arg.partition("=")[0] in IOMMU_PARAMS]
    return " ".join(found) or None


def has_acs_override(cmdline: str) -> bool:
    """True when the ACS override patch's parameter is on the kernel command line."""
    return any(arg.partition("=")[0] == ACS_OVERRIDE_PARAM for arg in _kernel_args(cmdline))


def _kernel_args(cmdline: str) -> list[str]:
    # Arguments after "--" go to init, not the kernel (kernel-parameters.txt).
    args = cmdline.split()
    return args[: args.index("--")] if "--" in args else args


def parse_sysfs_state(text: str) -> str:
    """The name in an InfiniBand sysfs state file: "4: ACTIVE" -> "ACTIVE", "5: LinkUp"."""
    number, sep, name = text.strip().partition(":")
    if not sep or not number.strip().isdigit() or not name.strip():
        raise ParseError(f"bad sysfs state {text.strip()[:40]!r}: expected 'N: NAME'")
    return name.strip()


def parse_ib_rate(text: str) -> float:
    """Bytes/s of an InfiniBand sysfs rate ("400 Gb/sec (4X NDR)" -> 5e10).

    The kernel prints "%d%s Gb/sec (%dX%s)" (drivers/infiniband/core/sysfs.c, rate_show),
    with ".5" for SDR 1X's 2.5 Gb/s; Gb is 1e9 bits.
    """
    parts = text.split()
    if len(parts) < 2 or parts[1] != "Gb/sec":
        raise ParseError(f"bad rate {text.strip()[:40]!r}: expected 'N Gb/sec (...)'")
    try:
        gbit = float(parts[0])
    except ValueError:
        raise ParseError(f"bad rate number {parts[0][:20]!r}") from None
    if not gbit >= 0 or gbit == float("inf"):  # also rejects nan
        raise ParseError(f"bad rate number {parts[0][:20]!r}")
    return gbit * 1e9 / 8


# --- readers: the I/O at the edge ----------------------------------------------------------


class _Notes:
    """Collects what could not be read, so the facts say why a field is None."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def read(self, path: Path) -> str | None:
        try:
            return path.read_text(errors="replace")
        except OSError as exc:
            self.lines.append(f"cannot read {path}: {exc.strerror or exc}")
            return None

    def parse(self, what: str, func: Callable[[str], T], text: str | None) -> T | None:
        """func(text), or None with a note when the text is missing or malformed."""
        if text is None:
            return None
        try:
            return func(text)
        except ParseError as exc:
            self.lines.append(f"{what}: {exc}")
            return None


def read_governors(cpu_root: Path = SYS_CPU) -> dict[str, int]:
    """Governor -> number of CPUs, from cpu*/cpufreq/scaling_governor; empty without cpufreq."""
    counts: dict[str, int] = {}
    for path in sorted(cpu_root.glob("cpu[0-9]*/cpufreq/scaling_governor")):
        try:
            governor = path.read_text().strip()
        except OSError:
            continue  # an offline CPU's cpufreq directory can vanish while we read
        if governor:
            counts[governor] = counts.get(governor, 0) + 1
    return counts


def read_iommu_groups(root: Path = SYS_IOMMU_GROUPS) -> tuple[int | None, dict[str, int]]:
    """(number of IOMMU groups, default-domain type -> groups); (None, {}) without the folder.

    The per-group `type` file (Linux >= 5.11) says "identity" for passthrough and "DMA" or
    "DMA-FQ" when the IOMMU translates device DMA.
    """
    if not root.is_dir():
        return None, {}
    groups = [p for p in root.iterdir() if p.is_dir()]
    types: dict[str, int] = {}
    for group in groups:
        try:
            kind = (group / "type").read_text().strip()
        except OSError:
            continue  # older kernels have no type file
        if kind:
            types[kind] = types.get(kind, 0) + 1
    return len(groups), types


def read_ib_ports(root: Path = SYS_INFINIBAND) -> list[IbPort]:
    """Every port of every RDMA device under /sys/class/infiniband; empty when there is none."""
    if not root.is_dir():
        return []
    ports: list[IbPort] = []
    for device in sorted(root.iterdir()):
        port_dirs = [p for p in (device / "ports").glob("*") if _is_number(p.name)]
        for port_dir in sorted(port_dirs, key=lambda p: int(p.name)):
            ports.append(_read_ib_port(device.name, port_dir))
    return ports


def _read_ib_port(device: str, port_dir: Path) -> IbPort:
    def text(name: str) -> str | None:
        try:
            return (port_dir / name).read_text().strip() or None
        except OSError:
            return None  # e.g. `rate` returns EINVAL on some ports that are down

    rate = text("rate")
    return IbPort(
        device=device,
        port=int(port_dir.name),
        state=_or_none(parse_sysfs_state, text("state")),
        phys_state=_or_none(parse_sysfs_state, text("phys_state")),
        rate=rate,
        rate_bytes_per_s=_or_none(parse_ib_rate, rate),
        link_layer=text("link_layer"),
    )


def read_firmware(dmi: Path = SYS_DMI, ib_root: Path = SYS_INFINIBAND) -> dict[str, str]:
    """The system firmware (DMI bios_version) and every RDMA device's firmware (fw_ver)."""
    found: dict[str, str] = {}
    sources = [("bios", dmi / "bios_version")]
    if ib_root.is_dir():
        sources += [(d.name, d / "fw_ver") for d in sorted(ib_root.iterdir())]
    for name, path in sources:
        try:
            text = path.read_text().strip()
        except OSError:
            continue  # no DMI in many VMs and containers; a NIC without fw_ver
        if text:
            found[name] = text
    return found


def _or_none(func: Callable[[str], T], text: str | None) -> T | None:
    """func(text), or None when the text is missing or malformed (an IB port must not abort)."""
    if text is None:
        return None
    try:
        return func(text)
    except ParseError:
        return None


def memlock_limits() -> tuple[int | None, int | None]:
    """(soft, hard) RLIMIT_MEMLOCK of this process in bytes; None means unlimited."""
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return _limit(soft), _limit(hard)


def _limit(value: int) -> int | None:
    return None if value == resource.RLIM_INFINITY else value


def path_space(path: str, timeout_s: float) -> PathSpace:
    """Free and total bytes of the filesystem holding `path`, within a deadline.

    statvfs on a hung NFS or Lustre mount blocks in the kernel and cannot be interrupted,
    so it runs in a daemon thread that we stop waiting for at the deadline.
    """
    result: list[PathSpace] = []
    worker = threading.Thread(target=lambda: result.append(_statvfs(path)), daemon=True)
    worker.start()
    worker.join(timeout_s)
    if not result:
        error = f"statvfs did not return within {timeout_s:g} s (hung network mount?)"
        return PathSpace(path=path, error=error)
    return result[0]


def _statvfs(path: str) -> PathSpace:
    try:
        st = os.statvfs(path)
    except OSError as exc:
        return PathSpace(path=path, error=exc.strerror or str(exc))
    return PathSpace(
        path=path,
        free_bytes=st.f_bavail * st.f_frsize,
        total_bytes=st.f_blocks * st.f_frsize,
        mount_point=_mount_point(path),
    )


def _mount_point(path: str) -> str:
    current = os.path.realpath(path)
    while not os.path.ismount(current):
        current = os.path.dirname(current)
    return current


# --- the probe ------------------------------------------------------------------------------


def collect(params: Params) -> ProbeOutput:
    """Read the host's facts; raises ProbeError only when this is not a Linux host at all."""
    notes = _Notes()
    raw: dict[str, str] = {}
    cpuinfo_text = notes.read(PROC / "cpuinfo")
    meminfo_text = notes.read(PROC / "meminfo")
    if cpuinfo_text is None and meminfo_text is None:
        raise ProbeError("host probe: /proc/cpuinfo and /proc/meminfo unreadable (not Linux?)")
    cmdline = notes.read(PROC / "cmdline")
    os_release_text = notes.read(OS_RELEASE)
    nodes_text = notes.read(SYS_NODE / "online")

    cpu = notes.parse("/proc/cpuinfo", parse_cpuinfo, cpuinfo_text)
    mem = notes.parse("/proc/meminfo", parse_meminfo, meminfo_text)
    nodes = notes.parse(str(SYS_NODE / "online"), parse_cpulist, nodes_text)
    governors = read_governors()
    if not governors:
        notes.lines.append("cpufreq not exposed (no scaling_governor files): a VM, or no driver")
    groups, group_types = read_iommu_groups()
    ib_ports = read_ib_ports()
    soft, hard = memlock_limits()
    uname = os.uname()
    identity = read_identity(params.timeout_s, raw)

    facts = HostFacts(
        hostname=uname.nodename,
        kernel=uname.release,
        os_release=parse_os_release(os_release_text) if os_release_text is not None else None,
        cpu_model=cpu.model if cpu else None,
        sockets=cpu.sockets if cpu else None,
        cores=cpu.cores if cpu else None,
        threads=cpu.threads if cpu else None,
        memory_total_bytes=mem.memory_total_bytes if mem else None,
        numa_nodes=len(nodes) if nodes else None,
        governors=governors,
        cmdline=cmdline.strip() if cmdline is not None else None,
        iommu=iommu_flags(cmdline) if cmdline is not None else None,
        iommu_groups=groups,
        iommu_group_types=group_types,
        acs_override=has_acs_override(cmdline) if cmdline is not None else False,
        hugepages_total=mem.hugepages_total if mem else None,
        hugepage_size_bytes=mem.hugepage_size_bytes if mem else None,
        memlock_soft_bytes=soft,
        memlock_hard_bytes=hard,
        free_space=[path_space(p, params.timeout_s) for p in params.paths],
        ib_ports=ib_ports,
        notes=notes.lines,
        firmware=read_firmware(),
        identity=identity,
    )

    if cpuinfo_text is not None:
        raw["cpuinfo.txt"] = first_processor_block(cpuinfo_text)
    for name, text in [
        ("meminfo.txt", meminfo_text),
        ("cmdline.txt", cmdline),
        ("os-release.txt", os_release_text),
        ("node-online.txt", nodes_text),
    ]:
        if text is not None:
            raw[name] = text
    raw["governors.txt"] = "".join(f"{g}: {n} CPUs\n" for g, n in governors.items())
    raw["infiniband.txt"] = "".join(_ib_line(p) for p in ib_ports)
    raw["memlock.txt"] = f"soft {_show_limit(soft)}\nhard {_show_limit(hard)}\n"
    return ProbeOutput(facts=facts, raw=raw)


def _ib_line(p: IbPort) -> str:
    return f"{p.device}/{p.port}: {p.state} {p.phys_state} {p.rate} {p.link_layer}\n"


def _show_limit(value: int | None) -> str:
    return "unlimited" if value is None else str(value)
