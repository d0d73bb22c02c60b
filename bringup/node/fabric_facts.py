"""The facts of the east-west fabric: RDMA devices, their ports and counters, link events,
GPUDirect RDMA readiness. One schema for the `fabric` probe (sysfs, the kernel log) and for
the tool outputs `inspect` reads (ibstat, ibv_devinfo, perfquery, mlx5 kernel lines), so
that one set of checks judges both.

Names follow sysfs (Documentation/ABI/stable/sysfs-class-infiniband): port states "ACTIVE",
"DOWN", "INIT", "ARMED"; physical states "LinkUp", "Polling", "Disabled", ...; counters as
the files under ports/<n>/counters/ ("symbol_error", "link_downed", ...). Every value that
could not be read is None, with the reason in `unread` ("rate": "cannot read ...").
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The port error counters of the InfiniBand PortCounters attribute (IBA vol. 1, 16.1.3.5),
# sysfs names: each counts a fault of the link or the port, never normal traffic. A count
# that grows while the node is measured FAILs (bringup.checks.fabric).
ERROR_COUNTERS = (
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_xmit_discards",
    "port_xmit_constraint_errors",
    "port_rcv_constraint_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
)


@dataclass
class RdmaPort:
    """One port of an RDMA device."""

    device: str  # "mlx5_0"
    port: int
    state: str | None = None  # "ACTIVE", "DOWN", "INIT", "ARMED"
    phys_state: str | None = None  # "LinkUp", "Polling", "Disabled", ...
    rate: str | None = None  # as the source printed it: "400 Gb/sec (4X NDR)", ibstat's "400"
    rate_gbit_s: float | None = None  # signalling rate, Gb/s = 1e9 bits
    width: str | None = None  # active lanes: "4X" ("1X" on a link that lost lanes)
    link_layer: str | None = None  # "InfiniBand" or "Ethernet" (RoCE)
    port_guid: str | None = None  # InfiniBand; a RoCE port's GID embeds its MAC instead
    lid: int | None = None
    netdev: str | None = None  # the network interface of the port ("ibp26s0", "enp1s0f0np0")
    mac: str | None = None  # a RoCE port's interface address (its identity on Ethernet)
    # Counter name -> value at the first reading, and at the second (None: read once, so
    # no delta: a count since the last clear, which may be months old).
    counters: dict[str, int] = field(default_factory=dict)
    counters_end: dict[str, int] | None = None
    hw_counters: dict[str, int] = field(default_factory=dict)  # driver counters (hw_counters/)
    hw_counters_end: dict[str, int] | None = None
    # RoCE settings the system exposes: "ecn" (/sys/class/net/<if>/ecn/roce_np/enable/<prio>),
    # "trust" and "pfc" where a driver shows them; name -> value as read.
    roce: dict[str, str] = field(default_factory=dict)
    unread: dict[str, str] = field(default_factory=dict)  # field -> why it was not read

    @property
    def name(self) -> str:
        return f"{self.device} port {self.port}"


@dataclass
class RdmaDevice:
    """One RDMA device (an HCA / NIC function)."""

    name: str  # "mlx5_0"
    hca_type: str | None = None  # "MT4129"
    fw_ver: str | None = None  # "28.39.1002"
    board_id: str | None = None  # the PSID ("MT_0000000838")
    node_guid: str | None = None
    sys_image_guid: str | None = None
    numa_node: int | None = None  # -1 when the platform does not say
    pci_address: str | None = None  # "0000:1a:00.0"
    unread: dict[str, str] = field(default_factory=dict)


@dataclass
class LinkEvent:
    """One mlx5 link transition in the kernel log ("mlx5_core 0000:01:00.0 enp1s0f0np0: Link
    down", printed by mlx5e_update_carrier in drivers/net/ethernet/mellanox/mlx5/core/en_main.c)."""

    state: str  # "down" or "up"
    pci: str  # "0000:01:00.0"
    netdev: str | None  # "enp1s0f0np0"
    timestamp: str | None  # as printed
    line: str
    device: str | None = None  # the RDMA device on that PCI function, where the probe knows it


@dataclass
class GpuDirect:
    """What GPUDirect RDMA needs on this node: the nvidia_peermem module, or DMA-BUF (Linux
    5.12 or later with NVIDIA's open kernel modules)."""

    nvidia_loaded: bool | None = None  # the nvidia module is loaded (no driver: no GPUDirect)
    peermem_loaded: bool | None = None  # nvidia_peermem (or the legacy nv_peer_mem)
    open_kernel_module: bool | None = None  # /proc/driver/nvidia/version names the open module
    driver_version: str | None = None
    kernel: str | None = None  # uname -r
    dmabuf_kernel: bool | None = None  # the kernel is 5.12 or later
    unread: dict[str, str] = field(default_factory=dict)


# The ACS control bits that send a peer-to-peer request or completion up towards the root
# complex instead of across the switch: Request Redirect, Completion Redirect, Egress
# Control, as lspci names them (ACSCtl). Linux's own P2P DMA code refuses a path through a
# bridge with any of them set (drivers/pci/p2pdma.c, pci_bridge_has_acs_redir); NVIDIA's NCCL
# troubleshooting guide asks for the whole ACS control register cleared on bare metal
# (docs/reference.md#fabric).
ACS_REDIRECT = ("ReqRedir", "CmpltRedir", "EgressCtrl")


@dataclass
class PciBridgeAcs:
    """One PCIe bridge (a switch port, a root port) on a GPU-NIC path, and its ACS control."""

    address: str  # "0000:05:08.0"
    description: str | None = None  # lspci's "PCI bridge: PLX Technology, Inc. PEX 8747 ..."
    # ACSCtl flag -> set ("SrcValid": True, "ReqRedir": False, ...); None: no ACS
    # capability (the bridge cannot redirect), or not read (`unread` says why).
    acs_ctl: dict[str, bool] | None = None
    unread: str | None = None

    @property
    def redirect(self) -> list[str]:
        """The redirecting ACS bits set on this bridge."""
        return [f for f in ACS_REDIRECT if (self.acs_ctl or {}).get(f)]

    @property
    def enabled(self) -> list[str]:
        """Every ACS control bit set on this bridge."""
        return [f for f, on in (self.acs_ctl or {}).items() if on]


@dataclass
class GpuNicPath:
    """The PCIe bridges between a GPU and an RDMA NIC that share a switch (PIX/PXB): the
    ports below their common switch, where ACS decides whether P2P goes across or up."""

    gpu: str  # the GPU's PCI address ("0000:1b:00.0")
    nic: str  # the RDMA device ("mlx5_0")
    bridges: list[str] = field(default_factory=list)  # PCI addresses, GPU side then NIC side


@dataclass
class AcsFacts:
    """ACS on the GPU-NIC paths: the PCI tree from sysfs, ACSCtl from `lspci -vvv`."""

    gpus: list[str] = field(default_factory=list)  # NVIDIA GPUs (display/3D class) in sysfs
    paths: list[GpuNicPath] = field(default_factory=list)  # GPU-NIC pairs under one switch
    bridges: list[PciBridgeAcs] = field(default_factory=list)  # every bridge of every path
    # Why ACS was not read at all: lspci missing, timed out, or run without root (the ACS
    # capability is then "<access denied>"). None: read, or nothing to read.
    unread: str | None = None


@dataclass
class BwRow:
    """One message size of a bandwidth test; bandwidths in bytes per second."""

    size_bytes: int
    iterations: int
    peak_bytes_per_s: float
    average_bytes_per_s: float
    msg_rate_mpps: float | None  # None: an old release without the column


@dataclass
class LatRow:
    """One message size of a latency test, microseconds as perftest prints them."""

    size_bytes: int
    iterations: int
    t_min_us: float | None
    t_max_us: float | None
    t_typical_us: float | None
    t_avg_us: float
    t_stdev_us: float | None
    p99_us: float | None
    p999_us: float | None


@dataclass
class PerftestFacts:
    """What one ib_write_bw or ib_write_lat run printed."""

    test: str  # the banner: "RDMA_Write BW Test", "RDMA_Write Latency Test"
    kind: str  # "bw" or "lat"
    device: str | None  # "mlx5_0"
    link_type: str | None  # "IB" or "Ethernet" (RoCE)
    mtu: str | None  # "4096[B]"
    unit: str | None  # the bandwidth header's unit ("Gb/sec"); None for latency
    use_cuda: bool  # the run allocated its buffers on a GPU (GPUDirect RDMA)
    bw: list[BwRow] = field(default_factory=list)
    lat: list[LatRow] = field(default_factory=list)

    @property
    def best_average_bytes_per_s(self) -> float | None:
        """The highest average bandwidth over the sizes: the plateau a link reaches."""
        return max((r.average_bytes_per_s for r in self.bw), default=None)


@dataclass
class FabricFacts:
    """The east-west fabric of one node, or what one tool output showed of it."""

    source: str  # "sysfs", "ibstat", "ibv_devinfo", "perfquery", "kernel log"
    devices: list[RdmaDevice] = field(default_factory=list)
    ports: list[RdmaPort] = field(default_factory=list)
    interval_s: float | None = None  # seconds between the two counter readings
    link_events: list[LinkEvent] = field(default_factory=list)
    log_source: str | None = None  # where link events were read ("journalctl -k", "dmesg")
    log_window_s: float | None = None  # the period of kernel log read; None: since boot
    gpudirect: GpuDirect | None = None  # None: not looked at (a tool output)
    iommu: str | None = None  # "passthrough", "translated", "off", or None: unknown
    # perftest runs someone sent (ib_write_bw / ib_write_lat) that `inspect` read; the
    # per-rail job between nodes records its runs as the ibperf probe's facts instead.
    runs: list[PerftestFacts] = field(default_factory=list)
    # PCIe ACS on the bridges between each GPU and the NIC on its switch; None: not looked
    # at (a tool output someone sent).
    acs: AcsFacts | None = None
    notes: list[str] = field(default_factory=list)  # what could not be read, and why
