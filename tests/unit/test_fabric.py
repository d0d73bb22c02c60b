"""The east-west fabric: the RDMA tool parsers pinned on real captures, the fabric probe's
sysfs reader on trees written from a real ibstat, and the fabric checks (issue 28)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bringup.checks import fabric as checks
from bringup.checks.catalog import judge_probe
from bringup.checks.consistency import node_fields
from bringup.checks.host import judge_ib_ports
from bringup.findings import Status
from bringup.node.fabric_facts import FabricFacts, GpuDirect
from bringup.node.parsers import perftest, rdma
from bringup.node.probes import fabric as probe
from bringup.node.probes.host import HostFacts, IbPort
from bringup.node.result import ParseError
from bringup.profile import load
from bringup.recognize import inspect_text
from bringup.suite import load as load_suite
from tests.support import FIXTURES
from tests.support.sysfs_fabric import write_tree

HERE = FIXTURES / "fabric"
B300 = load("b300")
A100 = load("a100")  # 8 rails of 200 Gb/s HDR: the rate of the ConnectX-6 capture below


def text(name: str) -> str:
    return (HERE / name).read_text()


# --- parsers, pinned on the captures ---------------------------------------------------------


def test_ibstat_of_a_connectx3_with_its_second_port_down() -> None:
    facts = rdma.parse_ibstat(text("ibstat-mlx4-cx3-qdr-port2-down.txt"))
    (device,) = facts.devices
    assert (device.name, device.hca_type, device.fw_ver) == ("mlx4_0", "MT4099", "2.42.5000")
    assert device.node_guid == "0xf45214030091ba10"
    one, two = facts.ports
    assert (one.state, one.phys_state, one.rate, one.rate_gbit_s) == (
        "ACTIVE",
        "LinkUp",
        "40",
        40.0,
    )
    assert (one.link_layer, one.lid, one.port_guid) == ("InfiniBand", 10, "0xf45214030091ba11")
    assert (two.state, two.phys_state, two.rate_gbit_s, two.link_layer) == (
        "DOWN",
        "Disabled",
        10.0,
        "Ethernet",
    )


def test_ibstat_of_connectx6_hdr_ports() -> None:
    facts = rdma.parse_ibstat(text("ibstat-mlx5-cx6-hdr-excerpt.txt"))
    assert [(d.name, d.fw_ver) for d in facts.devices] == [
        ("mlx5_4", "20.26.4012"),
        ("mlx5_2", "20.26.4012"),
    ]
    assert [(p.device, p.state, p.phys_state, p.rate_gbit_s, p.lid) for p in facts.ports] == [
        ("mlx5_4", "ACTIVE", "LinkUp", 200.0, 90),
        ("mlx5_2", "DOWN", "Disabled", 10.0, 65535),
    ]


def test_ibv_devinfo_plain_and_verbose() -> None:
    plain = rdma.parse_ibv_devinfo(text("ibv_devinfo-mlx4-cx3-qdr.txt"))
    (device,) = plain.devices
    assert (device.name, device.fw_ver, device.board_id) == ("mlx4_0", "2.42.5000", "MT_1090110018")
    assert [(p.port, p.state, p.phys_state, p.link_layer) for p in plain.ports] == [
        (1, "ACTIVE", None, "InfiniBand"),
        (2, "DOWN", None, "Ethernet"),
    ]
    verbose = rdma.parse_ibv_devinfo(text("ibv_devinfo-v-mlx4-port2-polling.txt"))
    (device,) = verbose.devices
    assert (device.name, device.board_id, device.node_guid) == (
        "mlx4_1",
        "MT_1090120019",
        "7cfe:9003:00a5:95c0",
    )
    (port,) = verbose.ports
    assert (port.port, port.state, port.phys_state, port.width, port.link_layer) == (
        2,
        "DOWN",
        "Polling",
        "4X",
        "InfiniBand",
    )


def test_perfquery_extended_counters() -> None:
    facts = rdma.parse_perfquery(text("perfquery-x-rhel75-zero.txt"))
    (port,) = facts.ports
    assert (port.device, port.port, port.lid, port.counters_end) == ("lid 10", 1, 10, None)
    assert len(port.counters) == 22
    assert set(port.counters.values()) == {0}
    assert {"symbol_error", "link_downed", "port_xmit_wait", "QP1_dropped"} <= set(port.counters)


def test_ib_write_bw_sweep_in_mib_per_second() -> None:
    run = perftest.parse(text("ib_write_bw-mlx4-qdr-sweep-mbs.txt"))
    assert (run.test, run.kind, run.device, run.link_type, run.mtu, run.unit) == (
        "RDMA_Write BW Test",
        "bw",
        "mlx4_0",
        "IB",
        "2048[B]",
        "MB/sec",
    )
    assert len(run.bw) == 23 and not run.use_cuda
    first, last = run.bw[0], run.bw[-1]
    assert (first.size_bytes, first.iterations, first.msg_rate_mpps) == (2, 20000, 5.128076)
    assert first.average_bytes_per_s == 9.78 * 2**20
    assert (last.size_bytes, last.peak_bytes_per_s, last.average_bytes_per_s) == (
        8388608,
        3665.51 * 2**20,
        3665.25 * 2**20,
    )
    assert run.best_average_bytes_per_s == 3666.12 * 2**20  # at 1048576 B


def test_ib_write_bw_in_gbit_per_second() -> None:
    run = perftest.parse(text("ib_write_bw-roce-postlist-gbits.txt"))
    assert (run.test, run.device, run.link_type, run.unit) == (
        "RDMA_Write Post List BW Test",
        "ib0",
        "Ethernet",
        "Gb/sec",
    )
    (row,) = run.bw
    assert (row.size_bytes, row.iterations, row.peak_bytes_per_s) == (8, 224958464, 0.0)
    assert row.average_bytes_per_s == 0.48 * 1e9 / 8
    assert row.msg_rate_mpps == 7.498617


def test_ib_write_lat_sweep() -> None:
    run = perftest.parse(text("ib_write_lat-mlx4-qdr-sweep.txt"))
    assert (run.test, run.kind, run.device, run.unit) == (
        "RDMA_Write Latency Test",
        "lat",
        "mlx4_0",
        None,
    )
    assert len(run.lat) == 23
    first, last = run.lat[0], run.lat[-1]
    assert (first.size_bytes, first.iterations) == (2, 20000)
    assert (first.t_min_us, first.t_max_us, first.t_typical_us, first.t_avg_us) == (
        0.88,
        6.84,
        0.98,
        1.03,
    )
    assert (first.t_stdev_us, first.p99_us, first.p999_us) == (0.20, 1.21, 5.42)
    assert (last.size_bytes, last.t_typical_us, last.t_avg_us) == (8388608, 2302.01, 2304.98)


def test_mlx5_link_lines_of_two_kernel_logs() -> None:
    up = rdma.parse_link_log(text("kernel-mlx5-cable-plugged-link-up.txt")).link_events
    assert [(e.state, e.pci, e.netdev, e.timestamp) for e in up] == [
        ("up", "0000:01:00.0", "enp1s0f0", "[32710.060490]"),
        ("up", "0000:01:00.1", "enp1s0f1", "[32710.060809]"),
    ]
    down = rdma.parse_link_log(text("kernel-mlx5-link-down-dmesg-tail.txt")).link_events
    # The ixgbe "NIC Link is Up" line beside them is another driver's: not read.
    assert [(e.state, e.pci, e.netdev) for e in down] == [
        ("down", "0000:01:00.0", "enp1s0f0np0"),
        ("down", "0000:01:00.1", "enp1s0f1np1"),
    ]


def test_sysfs_values() -> None:
    assert rdma.parse_rate("800 Gb/sec (4X XDR)") == (800.0, "4X")
    assert rdma.parse_rate("2.5 Gb/sec (1X SDR)") == (2.5, "1X")
    assert rdma.parse_rate("200") == (200.0, None)
    assert rdma.parse_sysfs_state("4: ACTIVE", rdma.PORT_STATES) == "ACTIVE"
    assert rdma.parse_sysfs_state("5: LinkUp", rdma.PHYS_STATES) == "LinkUp"
    for bad in ("fast", "Gb/sec", "400 Mb/sec (4X)", "nan Gb/sec"):
        with pytest.raises(ParseError):
            rdma.parse_rate(bad)
    with pytest.raises(ParseError):
        rdma.parse_counter("-1")


@pytest.mark.parametrize(
    "parse",
    [rdma.parse_ibstat, rdma.parse_ibv_devinfo, rdma.parse_perfquery, perftest.parse],
)
def test_text_of_no_such_tool_is_one_parse_error(parse) -> None:  # type: ignore[no-untyped-def]
    for garbage in ("", "\x00\xff binary", text("kernel-mlx5-link-down-dmesg-tail.txt")):
        with pytest.raises(ParseError):
            parse(garbage)


# --- inspect -----------------------------------------------------------------------------------


def _judged(name: str, profile: object = "auto") -> list[tuple[str, Status, str]]:
    result = inspect_text(text(name), profile)  # type: ignore[arg-type]
    return [(f.check, f.status, f.message) for f in result.findings]


def test_inspect_recognises_each_fabric_output() -> None:
    kinds = {
        "ibstat-mlx4-cx3-qdr-port2-down.txt": "ibstat",
        "ibstat-mlx5-cx6-hdr-excerpt.txt": "ibstat",
        "ibv_devinfo-mlx4-cx3-qdr.txt": "ibv-devinfo",
        "ibv_devinfo-v-mlx4-port2-polling.txt": "ibv-devinfo",
        "perfquery-x-rhel75-zero.txt": "perfquery",
        "ib_write_bw-mlx4-qdr-sweep-mbs.txt": "perftest",
        "ib_write_bw-roce-postlist-gbits.txt": "perftest",
        "ib_write_lat-mlx4-qdr-sweep.txt": "perftest",
        "kernel-mlx5-cable-plugged-link-up.txt": "link-log",
        "kernel-mlx5-link-down-dmesg-tail.txt": "link-log",
    }
    assert {name: inspect_text(text(name), "auto").kind for name in kinds} == kinds


def test_inspect_fails_the_down_ports() -> None:
    (found,) = _judged("ibstat-mlx4-cx3-qdr-port2-down.txt")
    assert found[:2] == ("fabric.ports", Status.FAIL)
    assert found[2] == "mlx4_0 port 2 (Ethernet): DOWN/Disabled, not ACTIVE/LinkUp"
    (found,) = _judged("ibv_devinfo-v-mlx4-port2-polling.txt")
    assert found == (
        "fabric.ports",
        Status.FAIL,
        "mlx4_1 port 2 (InfiniBand): DOWN/Polling, not ACTIVE/LinkUp",
    )


def test_inspect_judges_the_rate_only_with_a_profile() -> None:
    # The HDR capture's up port is at 200 Gb/s: an A100 rail's rate, a quarter of a B300
    # rail's, which FAILs it.
    facts = rdma.parse_ibstat(text("ibstat-mlx5-cx6-hdr-excerpt.txt"))
    facts.ports = [p for p in facts.ports if p.state == "ACTIVE"]
    assert judge_probe("fabric", facts, None, A100, {})[0].status is Status.PASS
    (slow,) = [f for f in judge_probe("fabric", facts, None, B300, {}) if f.check == "fabric.ports"]
    assert (slow.status, slow.value, slow.unit) == (Status.FAIL, 200.0, "Gb/s")
    assert slow.message == "mlx5_4 port 1 at 200, the b300 profile's compute rails run at 800 Gb/s"


def test_inspect_of_ib_write_bw_against_the_rail_rate() -> None:
    (found,) = _judged("ib_write_bw-mlx4-qdr-sweep-mbs.txt")
    assert found[:2] == ("fabric.write_bw", Status.PASS)
    assert "best average 30.75 Gb/s at 1048576 B (not judged: no profile" in found[2]
    (found,) = _judged("ib_write_bw-mlx4-qdr-sweep-mbs.txt", B300)
    assert found == (
        "fabric.write_bw",
        Status.FAIL,
        "RDMA_Write BW Test on mlx4_0 (IB): best average 30.75 Gb/s at 1048576 B, the b300 "
        "rail (800 Gb/s) needs >= 750",
    )
    # 8-byte messages measure the message rate: never a slow rail.
    (found,) = _judged("ib_write_bw-roce-postlist-gbits.txt", B300)
    assert found[:2] == ("fabric.write_bw", Status.PASS)
    assert "not judged: a message-rate run" in found[2]


def test_inspect_reports_latency() -> None:
    (found,) = _judged("ib_write_lat-mlx4-qdr-sweep.txt")
    assert found == (
        "fabric.write_bw",
        Status.PASS,
        "RDMA_Write Latency Test on mlx4_0: 2 B average 1.03 us, typical 0.98 (23 sizes; "
        "reported, no latency floor)",
    )


def test_inspect_of_counters_and_flaps() -> None:
    (found,) = _judged("perfquery-x-rhel75-zero.txt")
    assert found == (
        "fabric.counters",
        Status.PASS,
        "1 port(s): every error counter 0 (one reading, not a delta)",
    )
    flaps = _judged("kernel-mlx5-link-down-dmesg-tail.txt")
    assert flaps == [
        (
            "fabric.link_flaps",
            Status.WARN,
            "enp1s0f0np0, 0000:01:00.0: link down 1 time(s) in the kernel log",
        ),
        (
            "fabric.link_flaps",
            Status.WARN,
            "enp1s0f1np1, 0000:01:00.1: link down 1 time(s) in the kernel log",
        ),
    ]
    (found,) = _judged("kernel-mlx5-cable-plugged-link-up.txt")
    assert found == (
        "fabric.link_flaps",
        Status.PASS,
        "no mlx5 link down in the kernel log (2 link-up events: links training)",
    )


# --- the probe on sysfs trees written from a real ibstat ----------------------------------------

PCI = {"mlx5_4": "0000:01:00.0", "mlx5_2": "0000:41:00.0"}


def _tree(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "sys", text("ibstat-mlx5-cx6-hdr-excerpt.txt"), PCI)


def _proc(tmp_path: Path, modules: str, version: str, release: str = "6.8.0-84-generic") -> Path:
    proc = tmp_path / "proc"
    (proc / "driver" / "nvidia").mkdir(parents=True, exist_ok=True)
    (proc / "sys" / "kernel").mkdir(parents=True, exist_ok=True)
    (proc / "modules").write_text(modules)
    (proc / "driver" / "nvidia" / "version").write_text(version)
    (proc / "sys" / "kernel" / "osrelease").write_text(release + "\n")
    (proc / "cmdline").write_text("BOOT_IMAGE=/vmlinuz root=/dev/sda1 iommu=pt\n")
    return proc


# /proc/modules and /proc/driver/nvidia/version lines in the kernel's and the driver's format.
MODULES = (
    "nvidia_peermem 16384 0 - Live 0x0000000000000000\nnvidia 56512512 1 nvidia_peermem, Live 0x0\n"
)
PROPRIETARY = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.161.08  Thu Feb 15 2024\n"
OPEN = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build\n"


def test_the_probe_reads_the_tree(tmp_path: Path) -> None:
    facts = probe.read_fabric(_tree(tmp_path), _proc(tmp_path, MODULES, PROPRIETARY), None)
    assert [(d.name, d.fw_ver, d.board_id, d.pci_address, d.numa_node) for d in facts.devices] == [
        ("mlx5_2", "20.26.4012", "MT_0000000223", "0000:41:00.0", 0),
        ("mlx5_4", "20.26.4012", "MT_0000000223", "0000:01:00.0", 0),
    ]
    assert [
        (p.device, p.state, p.phys_state, p.rate, p.rate_gbit_s, p.width, p.lid, p.port_guid)
        for p in facts.ports
    ] == [
        (
            "mlx5_2",
            "DOWN",
            "Disabled",
            "10 Gb/sec (4X SDR)",
            10.0,
            "4X",
            None,
            "0x0c42a1030017bb48",
        ),
        (
            "mlx5_4",
            "ACTIVE",
            "LinkUp",
            "200 Gb/sec (4X HDR)",
            200.0,
            "4X",
            None,
            "0x0c42a1030017c078",
        ),
    ]
    assert facts.ports[1].counters["symbol_error"] == 0
    assert facts.ports[1].unread == {"lid": facts.ports[1].unread["lid"]}  # no lid file written
    assert facts.gpudirect == GpuDirect(
        nvidia_loaded=True,
        peermem_loaded=True,
        open_kernel_module=False,
        driver_version="535.161.08",
        kernel="6.8.0-84-generic",
        dmabuf_kernel=True,
    )
    assert facts.iommu == "passthrough"


def test_a_port_down_and_a_port_at_half_rate(tmp_path: Path) -> None:
    sys_root = _tree(tmp_path)
    # mlx5_4 trained at 2 lanes: 100 Gb/s instead of its 200.
    port = sys_root / "class" / "infiniband" / "mlx5_4" / "ports" / "1"
    (port / "rate").write_text("100 Gb/sec (2X HDR)\n")
    facts = probe.read_fabric(sys_root, _proc(tmp_path, MODULES, PROPRIETARY), None)
    found = [(f.status, f.message) for f in checks.judge_ports(facts, A100)]
    assert found == [
        (
            Status.FAIL,
            "mlx5_2 port 1 (0000:41:00.0) (InfiniBand): DOWN/Disabled, not ACTIVE/LinkUp",
        ),
        (
            Status.FAIL,
            "mlx5_4 port 1 (0000:01:00.0) at 100 Gb/sec (2X HDR), the a100 profile's compute "
            "rails run at 200 Gb/s",
        ),
    ]


def test_a_rail_at_its_rate_on_fewer_lanes(tmp_path: Path) -> None:
    sys_root = _tree(tmp_path)
    port = sys_root / "class" / "infiniband" / "mlx5_4" / "ports" / "1"
    (port / "rate").write_text("200 Gb/sec (2X NDR)\n")
    facts = probe.read_fabric(sys_root, _proc(tmp_path, MODULES, PROPRIETARY), None)
    facts.ports = [p for p in facts.ports if p.device == "mlx5_4"]
    (found,) = checks.judge_ports(facts, A100)
    assert (found.status, found.value, str(found.expected), found.unit) == (
        Status.FAIL,
        2,
        "4 lanes",
        "lanes",
    )
    assert "trained at 2X (200 Gb/sec (2X NDR)), a rail has 4X: lanes lost" in found.message


def test_a_counter_that_grows_fails_that_port(tmp_path: Path) -> None:
    sys_root = _tree(tmp_path)
    facts = probe.read_fabric(sys_root, _proc(tmp_path, MODULES, PROPRIETARY), None)
    counters = sys_root / "class" / "infiniband" / "mlx5_4" / "ports" / "1" / "counters"
    (counters / "symbol_error").write_text("12\n")  # the link counts errors during the run
    probe.read_again(facts, sys_root, started=0.0)
    (found,) = checks.judge_counters(facts, B300)
    assert (found.status, found.value, found.unit) == (Status.FAIL, 12, "errors")
    assert found.message.startswith("mlx5_4 port 1: symbol_error grew by 12 in ")
    assert found.message.endswith(" s (0 -> 12)")
    # Old counts, the same at both readings, are not blamed on the run.
    (counters / "link_downed").write_text("3\n")
    facts = probe.read_fabric(sys_root, _proc(tmp_path, MODULES, PROPRIETARY), None)
    probe.read_again(facts, sys_root, started=0.0)
    (found,) = checks.judge_counters(facts, B300)
    assert found.status is Status.PASS


def test_link_flaps_in_the_log_name_the_rail(tmp_path: Path) -> None:
    sys_root = _tree(tmp_path)
    log = text("kernel-mlx5-link-down-dmesg-tail.txt")
    facts = probe.read_fabric(sys_root, _proc(tmp_path, MODULES, PROPRIETARY), log)
    facts.log_source, facts.log_window_s = "dmesg", None
    assert [(e.device, e.pci) for e in facts.link_events] == [
        ("mlx5_4", "0000:01:00.0"),
        (None, "0000:01:00.1"),  # a function with no RDMA device in this tree
    ]
    found = [(f.status, f.message) for f in checks.judge_link_flaps(facts, B300)]
    assert found == [
        (
            Status.WARN,
            "mlx5_4 (enp1s0f0np0, 0000:01:00.0): link down 1 time(s) in the kernel log (dmesg)",
        ),
        (Status.WARN, "enp1s0f1np1, 0000:01:00.1: link down 1 time(s) in the kernel log (dmesg)"),
    ]
    # More than the profile's count on one port FAILs.
    facts.link_events = facts.link_events[:1] * (B300.network.link_flaps_fail_count + 1)
    (flapping,) = checks.judge_link_flaps(facts, B300)
    assert (flapping.status, flapping.value) == (Status.FAIL, 4)


def test_gpudirect_readiness(tmp_path: Path) -> None:
    sys_root = _tree(tmp_path)
    ready = probe.read_fabric(sys_root, _proc(tmp_path, MODULES, PROPRIETARY), None)
    (found,) = checks.judge_gpudirect(ready, B300)
    assert (found.status, found.message) == (
        Status.PASS,
        "nvidia_peermem loaded; IOMMU passthrough",
    )
    no_peermem = "nvidia 56512512 0 - Live 0x0\n"
    facts = probe.read_fabric(sys_root, _proc(tmp_path / "a", no_peermem, PROPRIETARY), None)
    (found,) = checks.judge_gpudirect(facts, B300)
    assert found.status is Status.WARN
    assert found.message == (
        "GPUDirect RDMA not ready: nvidia_peermem not loaded; driver 535.161.08 is the "
        "proprietary module (DMA-BUF needs the open one); IOMMU passthrough"
    )
    facts = probe.read_fabric(sys_root, _proc(tmp_path / "b", no_peermem, OPEN), None)
    (found,) = checks.judge_gpudirect(facts, B300)
    assert (found.status, found.message) == (
        Status.PASS,
        "DMA-BUF: kernel 6.8.0-84-generic with NVIDIA's open kernel module 570.86.15; "
        "IOMMU passthrough",
    )
    old = probe.read_fabric(sys_root, _proc(tmp_path / "c", no_peermem, OPEN, "5.4.0-150"), None)
    (found,) = checks.judge_gpudirect(old, B300)
    assert found.status is Status.WARN and "kernel 5.4.0-150 older than 5.12" in found.message


def test_roce_ports_say_which_settings_sysfs_shows(tmp_path: Path) -> None:
    sys_root = tmp_path / "sys"
    write_tree(sys_root, text("ibstat-mlx4-cx3-qdr-port2-down.txt"), {"mlx4_0": "0000:04:00.0"})
    (sys_root / "class" / "infiniband" / "mlx4_0" / "ports" / "2" / "gid_attrs" / "ndevs").mkdir(
        parents=True
    )
    (
        sys_root / "class" / "infiniband" / "mlx4_0" / "ports" / "2" / "gid_attrs" / "ndevs" / "0"
    ).write_text("enp4s0d1\n")
    enable = sys_root / "class" / "net" / "enp4s0d1" / "ecn" / "roce_np" / "enable"
    enable.mkdir(parents=True)
    for prio in range(8):
        (enable / str(prio)).write_text("1\n" if prio == 3 else "0\n")
    (sys_root / "class" / "net" / "enp4s0d1" / "address").write_text("f4:52:14:91:ba:12\n")
    facts = probe.read_fabric(sys_root, tmp_path, None)
    roce = facts.ports[1]
    assert roce.mac == "f4:52:14:91:ba:12"
    assert (roce.link_layer, roce.netdev, roce.roce) == (
        "Ethernet",
        "enp4s0d1",
        {"ecn.roce_np": "3"},
    )
    assert roce.unread["ecn.roce_rp"].endswith("absent (the driver does not expose ECN there)")
    assert roce.unread["trust"] == "not exposed in sysfs: `mlnx_qos -i enp4s0d1` shows it"


def test_a_node_without_rdma_devices(tmp_path: Path) -> None:
    facts = probe.read_fabric(tmp_path / "sys", tmp_path / "proc", "")
    facts.log_source = "journalctl -k"  # the kernel log was read: no rail in it to judge
    assert (facts.devices, facts.ports) == ([], [])
    assert facts.notes == [f"no RDMA devices under {tmp_path / 'sys' / 'class' / 'infiniband'}"]
    by_check = {f.check: f for f in judge_probe("fabric", facts, None, B300, {})}
    assert {c: f.status for c, f in by_check.items()} == {
        "fabric.ports": Status.SKIP,
        "fabric.counters": Status.SKIP,
        "fabric.link_flaps": Status.SKIP,
        "fabric.gpudirect": Status.SKIP,
        "fabric.write_bw": Status.SKIP,
        "fabric.acs": Status.SKIP,
    }
    # Never a PASS under a profile that expects rails: the SKIP says what was not measured.
    assert by_check["fabric.ports"].message.endswith(
        "the b300 profile expects 8 compute rails at 800 Gb/s, none measured here"
    )


def test_collect_here_finds_no_rdma_device(tmp_path: Path) -> None:
    """This machine has no RDMA device: the live probe says so, and waits for nothing."""
    if Path("/sys/class/infiniband").is_dir():
        pytest.skip("this machine has RDMA devices")
    output = probe.collect(probe.Params(interval_s=600))
    facts: FabricFacts = output.facts
    assert (facts.ports, facts.interval_s) == ([], None)
    assert facts.notes[0] == "no RDMA devices under /sys/class/infiniband"
    assert set(output.raw) == {"ports.txt", "counters.txt", "link-events.txt"}


# --- one fault, one finding; the fleet; the suites -----------------------------------------


def test_host_ib_ports_leaves_a_port_fault_to_fabric_ports(tmp_path: Path) -> None:
    down = IbPort("mlx5_2", 1, "DOWN", "Disabled", "10 Gb/sec (4X SDR)", 1.25e9, "InfiniBand")
    host = HostFacts(
        hostname="n", kernel="6.8", os_release=None, cpu_model=None, sockets=None, cores=None,
        threads=None, memory_total_bytes=None, numa_nodes=None, governors={}, cmdline=None,
        iommu=None, iommu_groups=None, iommu_group_types={}, acs_override=False,
        hugepages_total=None, hugepage_size_bytes=None, memlock_soft_bytes=None,
        memlock_hard_bytes=None, ib_ports=[down],
    )  # fmt: skip
    alone = judge_ib_ports(host, B300)
    assert [f.status for f in alone] == [Status.FAIL]
    fabric = probe.read_fabric(_tree(tmp_path), tmp_path, None)
    (deferred,) = judge_ib_ports(host, B300, fabric)
    assert deferred.status is Status.SKIP
    assert deferred.message.startswith(
        "judged by fabric.ports (the fabric probe read the same ports)"
    )


def test_the_fleet_compares_each_nics_psid(tmp_path: Path) -> None:
    facts = probe.read_fabric(_tree(tmp_path), tmp_path, None)
    assert node_fields({"fabric": facts})["fabric"] == {
        "psid.mlx5_2": "MT_0000000223",
        "psid.mlx5_4": "MT_0000000223",
    }


def test_the_suites_run_the_fabric_probe() -> None:
    assert "fabric" in [p.name for p in load_suite("acceptance").probes]
    assert [p.name for p in load_suite("fabric").probes] == ["gpu", "host", "topology", "fabric"]
