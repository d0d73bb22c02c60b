"""Fan-out speed: `bringup check --nodes` against `ansible -m shell` on a simulated cluster.

    sudo .venv/bin/python benchmarks/fanout.py [--sizes 1 8 32 64] [--wait 2]

The simulated nodes share this machine's CPUs, so the node-side work is a fixed wait and
what is measured is the controller. Each node gets its own `nvidia-smi` (first on its SSH
PATH) that sleeps `--wait` seconds, then prints the recorded B300 `nvidia-smi topo -m`
text; the suite runs only the `topology` probe, for real, on every node. Production code
has no hook for this: the node's tool is slow, as a real one can be. Ansible runs the same
wait (`ansible all -m shell -a 'sleep 2'`) with as many forks as nodes, as bringup does.

Printed per size: wall time of each, the ratio to one node's time, bringup's speed-up over
Ansible, the controller's CPU seconds per node (user + system of the command and its
children: Ansible's ssh clients count, the nodes' processes do not), and the node side's
CPU seconds per node, read from the nodes' own accounting: the kernel's user + system time
of each node's sshd and everything below it (its sessions' shells, python3, the probes and
their tools), alive or reaped, before and after the command. Then the real quick suite on
8 nodes with planted faults. Goals: 32 nodes within 1.5x and 64 within
2x of one node's time; at 32 and 64 nodes at least 3x faster than Ansible. Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from bringup.sim.cluster import SimCluster
from bringup.sim.demo import topo_text

REPO = Path(__file__).resolve().parents[1]
ALL_PROBES = ("gpu", "topology", "host", "nvme", "xid")  # live: no recording, no replay
EIGHT = {
    "node02": "missing_gpu",
    "node03": "no_nvlink",
    "node04": "node_pair",
    "node05": "row_remap",
    "node06": "xid79",
    "node07": "hw_slowdown",
}


@dataclass
class Timing:
    wall_s: float
    cpu_s: float
    code: int
    node_cpu_s: float = 0.0  # the nodes' CPU, all nodes together


def tree_cpu_s(pid: int) -> float:
    """User + system seconds of a process and everything below it: each living process's
    own time, plus what each has reaped (cutime, cstime) from the processes that ended.
    A process orphaned to init leaves the count; a node's sessions are waited for."""
    children: dict[int, list[int]] = {}
    times: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended while we looked
        proc = int(stat.parent.name)
        children.setdefault(int(fields[1]), []).append(proc)
        # fields after the name: state ppid ... utime(12) stime(13) cutime(14) cstime(15)
        times[proc] = sum(int(v) for v in fields[11:15])
    total, todo = 0, [pid]
    while todo:
        proc = todo.pop()
        total += times.get(proc, 0)
        todo += children.get(proc, [])
    return total / os.sysconf("SC_CLK_TCK")


def nodes_cpu_s(cluster: SimCluster) -> float:
    """The CPU seconds every simulated node has spent so far (its sshd's tree)."""
    return sum(tree_cpu_s(node.sshd.pid) for node in cluster.nodes.values() if node.sshd)


def timed_on(cluster: SimCluster, argv: list[str], env: dict[str, str] | None = None) -> Timing:
    """timed(), and the CPU the nodes spent meanwhile."""
    before = nodes_cpu_s(cluster)
    timing = timed(argv, env)
    time.sleep(0.5)  # the nodes' sshd sessions end just after the client's
    timing.node_cpu_s = nodes_cpu_s(cluster) - before
    return timing


def timed(argv: list[str], env: dict[str, str] | None = None) -> Timing:
    """Wall and CPU seconds (user + system, the command and its children) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO, env=env, check=False
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
        print(f"  ! {shlex.join(argv[:4])} ... exited {done.returncode}: {tail}", file=sys.stderr)
    return Timing(wall, cpu, done.returncode)


def slow_smi(wait_s: float, topo_file: Path) -> str:
    return f"#!/bin/sh\nsleep {wait_s:g}\nexec cat {shlex.quote(str(topo_file))}\n"


def wait_suite(path: Path) -> Path:
    suite = {
        "name": "fanout-wait",
        "description": "the topology probe only; the node's nvidia-smi waits (benchmark)",
        "budget_s": 60,
        "probes": [{"name": "topology", "timeout_s": 60}],
    }
    path.write_text(yaml.safe_dump(suite))
    return path


def measure(size: int, wait_s: float, base: Path) -> tuple[Timing, Timing]:
    """(bringup, ansible) on a fresh cluster of `size` nodes."""
    live = {f"node{i:02d}": ALL_PROBES for i in range(1, size + 1)}
    with SimCluster(size, base / f"c{size}", live=live) as cluster:
        topo = base / "topo.txt"
        topo.write_text(topo_text())
        for name in cluster.names:
            cluster.install_tool(name, "nvidia-smi", slow_smi(wait_s, topo))
        bringup = [sys.executable, "-m", "bringup.cli", "check", "--nodes"]
        bringup += [str(cluster.inventory), "--suite", str(wait_suite(base / "wait.yaml"))]
        bringup += ["--profile", str(cluster.profile_path), "--forks", str(size), "--json"]
        bringup += ["--out", str(base / f"run{size}")]
        ours = timed_on(cluster, bringup)
        ansible = [str(Path(sys.executable).with_name("ansible")), "all", "-i"]
        ansible += [str(cluster.inventory), "-m", "shell", "-a", f"sleep {wait_s:g}"]
        ansible += ["-f", str(size), "-o"]
        env = {**os.environ, "ANSIBLE_LOCAL_TEMP": str(base / "ansible-tmp")}
        theirs = timed_on(cluster, ansible, env)
    return ours, theirs


def quick_suite(base: Path) -> Timing:
    with SimCluster(8, base / "quick", faults=EIGHT) as cluster:
        argv = [sys.executable, "-m", "bringup.cli", "check", "--nodes", str(cluster.inventory)]
        argv += ["--suite", "quick", "--profile", str(cluster.profile_path), "--json"]
        argv += ["--out", str(base / "quick-run")]
        return timed_on(cluster, argv)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--wait", type=float, default=2.0, help="node-side wait, seconds")
    args = parser.parse_args()
    reason = SimCluster.available()
    if reason:
        sys.exit(f"cannot build a simulated cluster here: {reason}")
    print(f"fan-out: node-side work = a {args.wait:g} s wait; {os.cpu_count()} CPUs here")
    head = f"{'nodes':>5} {'bringup s':>10} {'x 1 node':>9} {'ansible s':>10} {'x 1 node':>9}"
    head += f" {'speed-up':>9} {'bringup cpu/node':>17} {'ansible cpu/node':>17}"
    print(head + f" {'bringup node cpu':>17} {'ansible node cpu':>17}")
    first: tuple[float, float] | None = None
    with tempfile.TemporaryDirectory(prefix="bringup-fanout-") as tmp:
        base = Path(tmp)
        for size in args.sizes:
            ours, theirs = measure(size, args.wait, base)
            first = first or (ours.wall_s, theirs.wall_s)
            print(
                f"{size:>5} {ours.wall_s:>10.2f} {ours.wall_s / first[0]:>9.2f} "
                f"{theirs.wall_s:>10.2f} {theirs.wall_s / first[1]:>9.2f} "
                f"{theirs.wall_s / ours.wall_s:>8.1f}x "
                f"{ours.cpu_s / size:>16.3f}s {theirs.cpu_s / size:>16.3f}s "
                f"{ours.node_cpu_s / size:>16.3f}s {theirs.node_cpu_s / size:>16.3f}s"
                + ("" if (ours.code, theirs.code) == (0, 0) else "  (a command failed)")
            )
        quick = quick_suite(base)
        print(
            f"quick suite on 8 nodes (6 planted faults): {quick.wall_s:.2f} s wall, "
            f"{quick.cpu_s / 8:.3f} CPU s per node on the controller, "
            f"{quick.node_cpu_s / 8:.3f} on the node, exit {quick.code}"
        )
    print("goals: 32 nodes <= 1.5x and 64 <= 2x one node's time; >= 3x faster than ansible")


if __name__ == "__main__":
    main()
