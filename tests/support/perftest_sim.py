"""Rails for the simulated cluster: a sysfs tree of RDMA ports per node, and stand-in
`ib_write_bw` / `ib_write_lat` first on each node's PATH.

The stand-ins make pairing, ports, concurrency, deadlines and a firewalled node real: the
server listens on the TCP port it was given (inside the node's namespace), the client
connects to the server node's address, and the two exchange their rail's speed factor
over that connection (a real TCP handshake between the namespaces; nobody listening is
perftest's own "Couldn't connect to HOST:PORT", exit 1). Each then prints a recorded real
output (tests/fixtures/fabric/, an mlx4 QDR run), the -D run's one row at the --size
asked, scaled to the rail: the recording's share of its QDR data rate (32 Gb/s after
8b/10b) kept against the rail's rate, times the slower end's factor (a slowed rail is
0.5). The scripts name themselves `bringup.sim` in their first line, so a record read from
them is marked simulated and never ACCEPTED (bringup/node/simulated.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from bringup.checks.ibperf import RailResult
from bringup.node.parsers import perftest
from tests.support import REPO
from tests.support.sysfs_fabric import write_port

if TYPE_CHECKING:
    from bringup.sim.cluster import SimCluster

FIXTURES = REPO / "tests" / "fixtures" / "fabric"
BW_FIXTURE = FIXTURES / "ib_write_bw-mlx4-qdr-sweep-mbs.txt"
LAT_FIXTURE = FIXTURES / "ib_write_lat-mlx4-qdr-sweep.txt"
RECORDED_DATA_GBIT_S = 32.0  # the fixture's 4X QDR link: 40 Gb/s signalling, 8b/10b
RAIL_RATE_GBIT_S = 800.0  # a B300's ConnectX-8 rail
RAILS = 8


def pci_address(rail: int) -> str:
    """Where an HGX board puts rail i's NIC: a bus of its own per PCIe switch."""
    return f"0000:{0x18 + 0x10 * rail:02x}:00.0"


def write_rails(root: Path, node_index: int, rails: int = RAILS) -> Path:
    """A /sys tree of `rails` ConnectX ports, ACTIVE/LinkUp at 800 Gb/s 4X XDR, counters 0;
    returns the sys root to give the fabric probe (`sys_root`)."""
    for rail in range(rails):
        device = f"mlx5_{rail}"
        function = root / "devices" / "pci0000:00" / pci_address(rail)
        (function / "net").mkdir(parents=True, exist_ok=True)
        (function / "numa_node").write_text(f"{rail // 4}\n")
        base = root / "class" / "infiniband" / device
        base.mkdir(parents=True, exist_ok=True)
        (base / "device").symlink_to(function)
        (base / "hca_type").write_text("MT4131\n")  # ConnectX-8
        (base / "fw_ver").write_text("40.44.1036\n")
        (base / "board_id").write_text("MT_0000001093\n")
        guid = f"{node_index:04x}:{rail:04x}:0300:0001"
        (base / "node_guid").write_text(guid + "\n")
        write_port(
            root,
            device,
            1,
            "ACTIVE",
            "LinkUp",
            f"{RAIL_RATE_GBIT_S:g} Gb/sec (4X XDR)",
            "InfiniBand",
            "0x" + guid.replace(":", ""),
        )
    return root


def counter_file(sys_root: Path, device: str, counter: str) -> Path:
    return sys_root / "class" / "infiniband" / device / "ports" / "1" / "counters" / counter


_SCRIPT = r"""#!/usr/bin/python3
# bringup.sim stand-in perftest (tests/support/perftest_sim.py): real TCP, recorded output
import re, socket, sys, time

KIND = {kind!r}
CUDA = {cuda!r}
FACTORS = {factors!r}
RAIL_GBIT = {rail_gbit!r}
RECORDED_GBIT = {recorded_gbit!r}
FIXTURE = {fixture!r}
FLAGS = ("ib-dev", "ib-port", "port", "CPU-freq", "iters", "size", "duration",
         "report_gbits", "use_cuda")


def main(argv):
    opts, host = {{}}, None
    for arg in argv:
        if arg == "--help":
            shown = FLAGS if CUDA else FLAGS[:-1]  # --use_cuda: a CUDA build's help only
            print("Usage: stand-in ib_write_bw\n" + "\n".join("  --" + f for f in shown))
            return 0
        if arg.startswith("--"):
            name, _, value = arg[2:].partition("=")
            if name not in FLAGS:
                print(sys.argv[0] + ": unrecognized option '" + arg + "'", file=sys.stderr)
                return 1
            opts[name] = value
        else:
            host = arg
    device, port = opts.get("ib-dev", "mlx5_0"), int(opts.get("port", "18515"))
    mine = FACTORS.get(device, 1.0)
    if host is None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("0.0.0.0", port))
        server.listen(1)
        conn, _ = server.accept()
    else:
        try:
            conn = socket.create_connection((host, port))
        except ConnectionRefusedError:
            print("Couldn't connect to " + host + ":" + str(port), file=sys.stderr)
            print("Unable to open file descriptor for socket connection", file=sys.stderr)
            return 1
    conn.sendall(("%r\n" % mine).encode())
    theirs = float(conn.makefile().readline() or "nan")
    conn.close()
    time.sleep(0.1)
    text = FIXTURE.replace("mlx4_0", device)
    if CUDA and "use_cuda" in opts:  # what a CUDA build prints as it allocates (cuda_memory.c)
        text = "cuMemAlloc() of a %s bytes GPU buffer\n" % opts.get("size", "65536") + text
    if KIND == "lat":
        sys.stdout.write(text)
        return 0
    scale = RAIL_GBIT / RECORDED_GBIT * min(mine, theirs)
    size = opts.get("size", "65536")
    out = []
    for line in text.splitlines():
        row = re.match(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", line)
        if row is None:
            if "BW peak[MB/sec]" in line and "report_gbits" in opts:
                line = line.replace("[MB/sec]", "[Gb/sec]")
            out.append(line)
            continue
        if row.group(1) != size:
            continue
        peak, avg = float(row.group(3)) * scale, float(row.group(4)) * scale
        if "report_gbits" in opts:  # MiB/s -> Gb/s, as perftest's --report_gbits
            peak, avg = peak * 1048576 * 8 / 1e9, avg * 1048576 * 8 / 1e9
        cells = (size, row.group(2), peak, avg, row.group(5))
        out.append(" %-10s %-16s %-18.2f %-20.2f %s" % cells)
    sys.stdout.write("\n".join(out) + "\n")
    return 0


sys.exit(main(sys.argv[1:]))
"""


def standin(kind: str, factors: dict[str, float] | None = None, cuda: bool = False) -> str:
    """The script of a stand-in `ib_write_bw` (kind "bw") or `ib_write_lat` ("lat"); the
    rails of `factors` run at that share of their speed; `cuda`: as a perftest built with
    CUDA (--use_cuda in its --help)."""
    fixture = (BW_FIXTURE if kind == "bw" else LAT_FIXTURE).read_text()
    return _SCRIPT.format(
        kind=kind,
        cuda=cuda,
        factors=dict(factors or {}),
        rail_gbit=RAIL_RATE_GBIT_S,
        recorded_gbit=RECORDED_DATA_GBIT_S,
        fixture=fixture,
    )


def recorded_gbit_s(slow: float = 1.0) -> float:
    """What the stand-in prints for an 800 Gb/s rail: the recording's 8 MiB average at its
    share of the QDR data rate, times `slow`."""
    facts = perftest.parse(BW_FIXTURE.read_text())
    row = next(r for r in facts.bw if r.size_bytes == 8388608)
    return row.average_bytes_per_s * 8 / 1e9 * RAIL_RATE_GBIT_S / RECORDED_DATA_GBIT_S * slow


def rail_results(
    pairs: list[tuple[str, str]], slow: dict[str, int], stage: str = "pairs"
) -> list[RailResult]:
    """Both nodes' 8 rails of each pair as the job records them, at the stand-in's figure;
    half of it on a rail either node of the pair has slowed (`slow`: node -> rail)."""
    found = []
    for a, b in pairs:
        for rail in range(RAILS):
            speed = recorded_gbit_s(0.5 if rail in (slow.get(a), slow.get(b)) else 1.0)
            for node, partner in ((a, b), (b, a)):
                for mode in ("single", "all"):
                    found.append(
                        RailResult(
                            node,
                            partner,
                            rail,
                            f"mlx5_{rail}",
                            1,
                            rail,
                            RAIL_RATE_GBIT_S,
                            mode,
                            speed,
                            None,
                            False,
                            None,
                            stage,
                            f"ibperf-{stage}-1",
                        )
                    )
    return found


def with_rails(
    cluster: SimCluster,
    tmp_path: Path,
    slow: dict[str, dict[str, float]],
    flaps: dict[str, str] | None = None,
    *,
    interval_s: float = 3,
    connect_timeout_s: float = 20,
) -> dict[str, Path]:
    """Every node of the cluster: its own sysfs tree of 8 rails (the fabric and ibperf
    probes' sys_root, a host variable), stand-in perftest (`slow`: node -> {device: factor}), and a
    stand-in journalctl (the kernel log window: empty, or one mlx5 link-down line).

    `interval_s` is the fabric probe's counter window; `connect_timeout_s` how long an ibperf
    client asks its server again (a test whose peer never answers waits that long)."""
    roots: dict[str, Path] = {}
    host_vars: dict[str, dict[str, str]] = {}
    for name in cluster.names:
        node = cluster.node(name)
        roots[name] = write_rails(tmp_path / "rails" / name / "sys", node.index)
        cluster.install_tool(name, "ib_write_bw", standin("bw", slow.get(name)))
        cluster.install_tool(name, "ib_write_lat", standin("lat"))
        log = (flaps or {}).get(name, "")
        cluster.install_tool(name, "journalctl", f"#!/bin/sh\nprintf '%s' {json.dumps(log)}\n")
        params = {
            "fabric": {"sys_root": str(roots[name]), "interval_s": interval_s},
            "ibperf": {
                "connect_timeout_s": connect_timeout_s,
                "duration_s": 1,
                "sys_root": str(roots[name]),
            },
        }
        host_vars[name] = {"bringup_probe_params": json.dumps(params)}
    cluster.write_inventory(host_vars=host_vars)
    return roots
