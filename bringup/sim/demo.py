"""The demo fleet: six B300 nodes for `bringup check --demo` (`make demo`).

Not a measurement. Identity and capacity come from the published B300 figures
(docs/reference.md#gpu-identity: name "NVIDIA B300 SXM6 AC", 275040 MiB, 1100 W default
limit, PCI device 0x3182, compute capability 10.3, NVLink 5 with 18 links at 53.125 GB/s,
NV18 between every pair). Readings no public source gives for a B300 — temperatures,
clocks, disk and host figures — are illustrative values of an idle node. Node 01 is
healthy; each other node carries one fault, patterned on a real output:

- b300-node02: 7 GPUs, all NV18 (a B300 log with one GPU missing, docs/reference.md#nvlink)
- b300-node03: GPU 2 without NVLink, NODE/SYS to every other GPU (vllm-project/vllm#16336)
- b300-node04: GPU 3 with a pending row remap (`Pending : Yes`, ml-engineering debug.md)
- b300-node05: XID 79, GPU 6 fell off the bus (NVIDIA XID catalogue wording)
- b300-node06: GPU 5 with HW slowdown active (nvidia-smi `HW Slowdown : Active`)

The topology and kernel log are built as tool text and go through the real parsers, so
the demo exercises the same path as a live node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from bringup import __version__
from bringup.facts import NodeFacts, ProbeRecord
from bringup.node.gpu_facts import Gpu, GpuFacts, NvLink, RemappedRows
from bringup.node.identity import NVSWITCH_FIRMWARE, Nic, SystemIdentity
from bringup.node.probes.host import HostFacts, IbPort, PathSpace
from bringup.node.probes.nvme import NvmeFacts, NvmePath
from bringup.node.probes.topology import TopologyFacts, parse_topo
from bringup.node.probes.xid import XidFacts, parse_kernel_log
from bringup.provenance import demo_source

COLLECTED_AT = "2026-11-29T12:00:00+00:00"  # fixed, so two demo runs judge identical facts
GPUS = 8
MIB = 1 << 20
# PCI bus ids of an 8-GPU HGX baseboard (the layout of the 8-GPU topo fixtures).
BUS_IDS = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]


def _gpu(index: int) -> Gpu:
    bus = BUS_IDS[index]
    return Gpu(
        index=index,
        name="NVIDIA B300 SXM6 AC",
        uuid=f"GPU-00000000-0000-0000-0000-0000000000{index:02d}",
        serial=f"DEMO0000000{index}",
        pci_bus_id=f"00000000:{bus}:00.0",
        pci_device_id="0x3182",
        vbios_version="97.10.00.00.01",  # illustrative
        compute_capability="10.3",
        memory_total_bytes=275040 * MIB,
        persistence_mode=True,
        mig_mode=False,
        ecc_mode=True,
        ecc_uncorrected_volatile=0,
        ecc_uncorrected_aggregate=0,
        ecc_corrected_volatile=0,
        remapped_rows=RemappedRows(correctable=0, uncorrectable=0, pending=False, failure=False),
        pcie_gen_current=6,  # as the b300 profile expects (Gen6 host interface)
        pcie_gen_max=6,
        pcie_width_current=16,
        pcie_width_max=16,
        power_draw_w=190.0,  # illustrative idle draw
        power_limit_w=1100.0,
        power_default_limit_w=1100.0,
        temperature_c=34.0,  # illustrative idle temperatures and thresholds
        memory_temperature_c=38.0,
        slowdown_temperature_c=90.0,
        shutdown_temperature_c=95.0,
        memory_max_temperature_c=95.0,
        gpu_max_operating_temperature_c=88.0,
        sm_clock_hz=345_000_000,
        sm_clock_max_hz=2_032_000_000,
        memory_clock_hz=3_996_000_000,
        memory_clock_max_hz=3_996_000_000,
        clock_event_reasons=["gpu_idle"],
        nvlink_version=5,
        nvlinks=[NvLink(link=n, active=True, speed_bytes_per_s=53.125e9) for n in range(18)],
        fabric_state="completed",
        fabric_status="success",
    )


def _gpu_facts(count: int = GPUS) -> GpuFacts:
    return GpuFacts(
        source="nvml",
        driver_version="580.95.05",  # an R580 release, the branch DGX OS 7 pins for B300
        cuda_driver_version="13.0",
        attached_gpus=count,
        gpus=[_gpu(i) for i in range(count)],
    )


def topo_text(count: int = GPUS, no_nvlink_gpu: int | None = None) -> str:
    """`nvidia-smi topo -m` as a B300 HGX prints it: NV18 everywhere, a NIC per GPU."""
    names = [f"GPU{i}" for i in range(count)] + [f"NIC{i}" for i in range(count)]
    header = "\t" + "\t".join(names) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
    lines = [header]
    half = count // 2
    for i in range(count):
        cells = []
        for j in range(count):
            if i == j:
                cells.append(" X ")
            elif no_nvlink_gpu in (i, j):
                cells.append("NODE" if (i < half) == (j < half) else "SYS")
            else:
                cells.append("NV18")
        for j in range(count):
            cells.append("PIX" if i == j else ("NODE" if (i < half) == (j < half) else "SYS"))
        socket = 0 if i < half else 1
        cpus = "0-55,112-167" if socket == 0 else "56-111,168-223"
        lines.append(f"GPU{i}\t" + "\t".join(cells) + f"\t{cpus}\t{socket}\t\tN/A")
    for i in range(count):
        to_gpus = [
            "PIX" if i == j else ("NODE" if (i < half) == (j < half) else "SYS")
            for j in range(count)
        ]
        to_nics = [
            " X " if i == j else ("NODE" if (i < half) == (j < half) else "SYS")
            for j in range(count)
        ]
        lines.append(f"NIC{i}\t" + "\t".join(to_gpus + to_nics) + "\t\t\t\t")
    lines += [
        "",
        "Legend:",
        "",
        "  X    = Self",
        "  NV#  = Connection traversing a bonded set of # NVLinks",
    ]
    lines += ["", "NIC Legend:", ""] + [f"  NIC{i}: mlx5_{i}" for i in range(count)]
    return "\n".join(lines) + "\n"


def _host(node: str) -> HostFacts:
    ports = [
        # HGX B300: one ConnectX-8 at 800 Gb/s XDR per GPU (docs/reference.md#nic-rates).
        IbPort(f"mlx5_{i}", 1, "ACTIVE", "LinkUp", "800 Gb/sec (4X XDR)", 100e9, "InfiniBand")
        for i in range(GPUS)
    ]
    return HostFacts(
        hostname=node,
        kernel="6.8.0-60-generic",
        os_release="Ubuntu 24.04.2 LTS",
        cpu_model="Intel(R) Xeon(R) 6 (illustrative)",
        sockets=2,
        cores=112,
        threads=224,
        memory_total_bytes=2048 * 1024**3,
        numa_nodes=2,
        governors={"performance": 224},
        cmdline="BOOT_IMAGE=/vmlinuz-6.8.0-60-generic root=/dev/md0 ro iommu=pt",
        iommu="iommu=pt",
        iommu_groups=None,
        iommu_group_types={},
        acs_override=False,
        hugepages_total=0,
        hugepage_size_bytes=2 * MIB,
        memlock_soft_bytes=None,
        memlock_hard_bytes=None,
        free_space=[
            PathSpace("/data", free_bytes=28 * 10**12, total_bytes=30 * 10**12, mount_point="/data")
        ],
        ib_ports=ports,
        identity=_identity(node),
    )


def _identity(node: str) -> SystemIdentity:
    # Made-up serials and versions marked DEMO: a demo report must not look like a real node.
    number = node.rsplit("node", 1)[-1]
    return SystemIdentity(
        system_vendor="DEMO",
        product_name="DEMO B300 HGX system",
        system_serial=f"DEMO-SYS-{number}",
        machine_id=f"de{number:0>30}",  # machine-id(5): 32 hex digits, made up
        baseboard_serial=f"DEMO-BB-{number}",
        chassis_serial=f"DEMO-CH-{number}",
        bios_version="DEMO-BIOS-1.0",
        bios_date="11/01/2026",
        fabric_manager_version="580.95.05",  # Fabric Manager runs only at the driver's version
        nics=[Nic(f"mlx5_{i}", "rdma", firmware="DEMO-FW", psid="DEMO-PSID") for i in range(8)],
        unavailable={
            "bmc_firmware": "ipmitool not installed",
            "nvswitch_firmware": NVSWITCH_FIRMWARE,
        },
    )


def _nvme() -> NvmeFacts:
    # Illustrative Gen5 RAID-0 figures, under a Gen5 x4 drive's ~15.8 GB/s link rate
    # (docs/reference.md#pcie).
    return NvmeFacts(
        paths=[
            NvmePath(
                path="/data",
                mount_point="/data",
                mount_device="/dev/md0",
                filesystem="xfs",
                free_bytes=28 * 10**12,
                engine="libaio",
                seq_read_bytes_per_s=24.1e9,
                seq_write_bytes_per_s=17.8e9,
                rand_read_iops=2.9e6,
                rand_read_p99_s=0.00031,
                concurrent_read_bytes_per_s=23.6e9,
                concurrent_readers=8,
                checkpoint_bytes=32_000_000_000,
                checkpoint_seconds=2.2,
                checkpoint_bytes_per_s=14.5e9,
            )
        ]
    )


QUIET_LOG = "[    5.120331] nvidia-nvlink: Nvlink Core is being initialized\n"
# The demo nodes booted at 2026-11-27 14:10:00 UTC (/proc/stat btime), so the Xid below,
# 86021.44 s after boot, happened at 2026-11-28 14:03:41 UTC.
BOOT_TIME_S = 1_795_788_600.0
# The wording of XID 79 as NVIDIA's XID catalogue and real kernel logs print it.
XID79_LOG = (
    QUIET_LOG + "[86021.442918] NVRM: Xid (PCI:0000:ba:00): 79, pid='<unknown>', "
    "name=<unknown>, GPU has fallen off the bus.\n"
)


@dataclasses.dataclass
class DemoNode:
    """The facts of every probe of one demo node, before they become records."""

    gpu: GpuFacts
    topology: TopologyFacts
    host: HostFacts
    xid: XidFacts
    nvme: NvmeFacts


def _node(name: str, fault: Callable[[DemoNode], None] | None = None) -> NodeFacts:
    demo = DemoNode(
        gpu=_gpu_facts(),
        topology=parse_topo(topo_text()),
        host=_host(name),
        xid=_kernel_log(QUIET_LOG),
        nvme=_nvme(),
    )
    if fault:
        fault(demo)
    own_identity(demo.gpu, _number(name))
    node = NodeFacts(node=name, bringup_version=__version__, collected_at=COLLECTED_AT)
    for field in dataclasses.fields(demo):
        facts = dataclasses.asdict(getattr(demo, field.name))
        # Labelled at the source: whatever carries these facts on says they are the demo's.
        node.probes[field.name] = ProbeRecord(
            probe=field.name,
            ok=True,
            facts=facts,
            started_at=COLLECTED_AT,
            provenance=[demo_source()],
        )
    return node


def _number(name: str) -> int:
    """The node's number in its name ("b300-node04": 4), 0 where it has none."""
    digits = name.rsplit("node", 1)[-1]
    return int(digits) if digits.isdigit() else 0


def own_identity(gpu: GpuFacts, number: int) -> None:
    """Serials and UUIDs of the node's own (node 4, GPU 3: DEMO00040003): every machine's
    GPUs are its own, and fleet.identity FAILs two nodes that show one."""
    for g in gpu.gpus:
        g.serial, g.uuid = gpu_identity(number, g.index)


def gpu_identity(number: int, index: int) -> tuple[str, str]:
    """(serial, UUID) of GPU `index` of node `number`: DEMO00040003, GPU-...-000000040003."""
    return f"DEMO{number:04d}{index:04d}", f"GPU-00000000-0000-0000-0000-{number:08d}{index:04d}"


def _missing_gpu(demo: DemoNode) -> None:
    demo.gpu = _gpu_facts(count=GPUS - 1)
    demo.topology = parse_topo(topo_text(count=GPUS - 1))


def _gpu2_without_nvlink(demo: DemoNode) -> None:
    demo.topology = parse_topo(topo_text(no_nvlink_gpu=2))
    demo.gpu.gpus[2].nvlinks = [NvLink(link=n, active=False) for n in range(18)]


def _pending_row_remap(demo: DemoNode) -> None:
    demo.gpu.gpus[3].remapped_rows = RemappedRows(1, 0, pending=True, failure=False)


def _kernel_log(text: str) -> XidFacts:
    facts = parse_kernel_log(text)
    facts.boot_time_s, facts.utc_offset_s = BOOT_TIME_S, 0
    return facts


def _xid79(demo: DemoNode) -> None:
    demo.xid = _kernel_log(XID79_LOG)


def _hw_slowdown(demo: DemoNode) -> None:
    demo.gpu.gpus[5].clock_event_reasons = ["hw_slowdown"]
    demo.gpu.gpus[5].sm_clock_hz = 1_050_000_000


def demo_nodes() -> list[NodeFacts]:
    """The six demo nodes, healthy first."""
    return [
        _node("b300-node01"),
        _node("b300-node02", _missing_gpu),
        _node("b300-node03", _gpu2_without_nvlink),
        _node("b300-node04", _pending_row_remap),
        _node("b300-node05", _xid79),
        _node("b300-node06", _hw_slowdown),
    ]


def demo_fleet(size: int) -> list[NodeFacts]:
    """A fleet of `size` nodes (at least the demo's six): the six demo nodes, then healthy
    ones (b300-node07, ...), for what a report of a whole fleet looks like."""
    nodes = demo_nodes()
    return nodes + [_node(f"b300-node{i:02d}") for i in range(len(nodes) + 1, size + 1)]
