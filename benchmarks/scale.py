"""The controller's cost of a 1,000- or 10,000-node run, end to end, with no node and no
network.

    .venv/bin/python benchmarks/scale.py [--nodes 1000 [10000 ...]] [--forks 64] [--keep DIR]

A generated inventory (INI ranges in racks, `children`, group vars at three levels, every
address a Jinja template in group_vars/all.yml, a host_vars file with a literal address
every tenth node) is read as `check --nodes` reads it; every node gets its
plan from the acceptance-suite probes the demo fleet recorded, and an in-process transport
answers each request with the records of one of the six demo nodes (the healthy one and
the five faults, in turn), as a node side would stream them. `fleet.run` records every
probe into a run directory, judges each node as it finishes, the fleet checks run, and the
report (Markdown, JUnit, JSON, HTML) is built from the directory. Nothing is stubbed past the
transport: the figures are the controller's own. Before each size the file system is
synced, so that what an earlier run left to write back is not written on this one's CPU.

Printed: CPU seconds (user + system, all threads) of each phase, the check's CPU per node
(inventory to judged findings, as `bringup check --nodes` spends it), the same with
`bringup report` (run as its own process, as an operator runs it), the peak resident
memory of each process, the CPU of a fixed workload timed before each size (`this
machine`: how fast the machine was then), and each figure as a ratio of its target
(`targets`: at 10,000 nodes the inventory 1.5 s, the check 5 ms of CPU per node and
300 MB, the report 5 ms per node and 200 MB; at 1,000 the inventory 0.5 s and the report
150 MB). Several `--nodes` are measured one after the other in one run, side by side.
Exits 0 whatever the figures are; `--check` exits 1 when the check's figures are over
their targets. docs/scale.md reads these figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RACK = 40  # nodes per rack group


@dataclass(frozen=True)
class Targets:
    """What a run of this many nodes may cost the controller (issue "Ten thousand nodes")."""

    inventory_s: float  # CPU, templated addresses, Ansible's import included
    per_node_s: float  # the check's CPU per node, inventory to judged findings
    peak_mb: float  # the check's process
    report_per_node_s: float  # `bringup report` (md, junit, json), its own process
    report_peak_mb: float


TARGETS_10K = Targets(
    inventory_s=1.5, per_node_s=0.005, peak_mb=300.0, report_per_node_s=0.005, report_peak_mb=200.0
)
TARGETS_1K = Targets(
    inventory_s=0.5, per_node_s=0.005, peak_mb=300.0, report_per_node_s=0.005, report_peak_mb=150.0
)


def targets(nodes: int) -> Targets:
    """The 1,000-node targets up to 1,000 nodes, the 10,000-node ones past it."""
    return TARGETS_1K if nodes <= 1000 else TARGETS_10K


def write_inventory(folder: Path, nodes: int) -> Path:
    """An inventory of `nodes` hosts in racks of RACK, as sites write them: ranges,
    children, [group:vars], group_vars/ for all, a pod and a rack, some host_vars/."""
    racks = [range(start, min(start + RACK, nodes + 1)) for start in range(1, nodes + 1, RACK)]
    width = max(4, len(str(nodes)))
    lines = []
    for r, members in enumerate(racks):
        lines += [f"[rack{r:03d}]", f"node[{members[0]:0{width}d}:{members[-1]:0{width}d}]", ""]
    half = len(racks) // 2 or 1
    for pod, chosen in (("pod_a", racks[:half]), ("pod_b", racks[half:])):
        lines += [f"[{pod}:children]", *(f"rack{racks.index(r):03d}" for r in chosen), ""]
    lines += ["[gpu:children]", "pod_a", "pod_b", "", "[gpu:vars]", "ansible_port=22", ""]
    (folder / "group_vars").mkdir(parents=True, exist_ok=True)
    (folder / "host_vars").mkdir(exist_ok=True)
    (folder / "hosts.ini").write_text("\n".join(lines))
    (folder / "group_vars" / "all.yml").write_text(
        # One template for every address, as sites write a management domain: Ansible
        # renders it per host (bringup compiles it once: inventory.Templates).
        "ansible_host: '{{ inventory_hostname }}.mgmt.example'\n"
        "ansible_user: root\n"
        "ansible_ssh_common_args: '-o StrictHostKeyChecking=accept-new'\n"
        "bringup_data_dirs: [/data]\n"
    )
    (folder / "group_vars" / "pod_b.yml").write_text("bringup_uplink: 10.1.0.1:5201\n")
    (folder / "group_vars" / "rack000.yml").write_text(
        "bringup_profile_overrides: {gpu: {count: 8}}\n"
    )
    for n in range(1, nodes + 1, 10):
        name = f"node{n:0{width}d}"
        address = f"10.0.{n // 250}.{n % 250}"
        (folder / "host_vars" / f"{name}.yml").write_text(f"ansible_host: {address}\n")
    return folder / "hosts.ini"


def write_suite(path: Path, probes: list[str]) -> Path:
    """The acceptance suite's steps for the probes the demo fleet recorded, as a suite file
    (the report judges each node's completeness against it)."""
    import yaml

    from bringup import suite
    from bringup.schema import as_json

    steps = [as_json(s) for s in suite.load("acceptance").probes if s.name in probes]
    document = {
        "name": "demo-probes",
        "description": "the acceptance suite's probes the demo fleet recorded (benchmark)",
        "budget_s": 3600,
        "probes": steps,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def recorded_runner(
    records: list[dict[str, Any]], latency_s: float = 0.0
) -> Callable[..., Iterator[dict[str, Any]]]:
    """A transport (fleet.transport.Runner) that answers with recorded probe records: each
    asked-for probe's record, a fresh copy, as the node side prints them one by one, each
    `latency_s` after the one before (a real probe takes seconds: the controller's threads
    wait on their nodes rather than all run at once)."""
    by_probe = {r["probe"]: r for r in records}

    def runner(
        request: dict[str, Any], deadline_s: float, stop: threading.Event, on_stage: Any
    ) -> Iterator[dict[str, Any]]:
        on_stage("connecting")
        on_stage("running")
        for step in request["probes"]:
            stop.wait(latency_s)
            record = by_probe.get(step["name"])
            if record is None:
                yield {"probe": step["name"], "ok": False, "error": "not recorded"}
            else:
                yield {**record, "raw": dict(record.get("raw", {}))}

    return runner


def demo_records() -> list[list[dict[str, Any]]]:
    """The demo fleet's records, one list per demo node, with the topology tool text a
    live node sends alongside (so raw files are written as in a real run)."""
    from bringup.facts import record_json
    from bringup.sim.demo import demo_nodes, topo_text

    nodes = []
    for node in demo_nodes():
        records = [record_json(r) for r in node.probes.values()]
        for record in records:
            if record["probe"] == "topology":
                record["raw"] = {"nvidia-smi-topo-m.txt": topo_text()}
        nodes.append(records)
    return nodes


@dataclass
class Figures:
    nodes: int
    inventory_import_s: float = 0.0
    inventory_read_s: float = 0.0
    plan_s: float = 0.0
    run_s: float = 0.0
    fleet_checks_s: float = 0.0
    console_s: float = 0.0  # what `check` prints: the findings' tables and the verdict
    report_s: float = 0.0
    wall_s: float = 0.0
    peak_mb: float = 0.0  # the check's process
    report_peak_mb: float = 0.0  # the report's process
    findings: int = 0
    system_s: float = 0.0  # of all the phases: the kernel's share (file writes, mostly)
    pace_s: float = 0.0  # the fixed workload's CPU, timed before the size (pace())

    @property
    def inventory_s(self) -> float:
        return self.inventory_import_s + self.inventory_read_s

    @property
    def check_s(self) -> float:
        """`bringup check --nodes`: inventory to judged findings."""
        return self.inventory_s + self.plan_s + self.run_s + self.fleet_checks_s + self.console_s

    @property
    def per_node_s(self) -> float:
        return self.check_s / self.nodes

    @property
    def with_report_per_node_s(self) -> float:
        return (self.check_s + self.report_s) / self.nodes


def pace() -> float:
    """CPU seconds of a fixed piece of pure Python (dicts, strings, JSON: what reading and
    judging records does), the least of three tries: this machine's speed when a size is
    measured. On a shared VM it moves by a third within an hour (docs/scale.md), so two
    runs' figures compare only beside this one: a run whose workload took twice as long
    ran on a machine twice as slow, not on a slower tree."""
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        for i in range(20_000):
            record = {"probe": f"gpu{i % 8}", "value": i * 1.5, "tags": [str(i), "x" * (i % 7)]}
            json.loads(json.dumps(record))
        best = min(best, time.process_time() - start)
    return best


@contextmanager
def cpu(figures: Figures, name: str) -> Iterator[None]:
    """Add the CPU seconds (this process, every thread, user and system) the block takes
    to figures.name, and its system part to figures.system_s."""
    start = os.times()
    try:
        yield
    finally:
        end = os.times()
        user, system = end.user - start.user, end.system - start.system
        setattr(figures, name, getattr(figures, name) + user + system)
        figures.system_s += system


def measure(
    nodes: int, forks: int, out: Path, latency_s: float = 0.02, with_report: bool = True
) -> Figures:
    figures = Figures(nodes=nodes, pace_s=pace())
    from bringup.cli import collect_less

    collect_less()  # the garbage collector as the `bringup` command sets it
    started = time.perf_counter()
    with cpu(figures, "inventory_import_s"):
        from ansible.inventory.manager import InventoryManager  # noqa: F401
        from ansible.vars.manager import VariableManager  # noqa: F401

        from bringup.fleet import inventory
    path = write_inventory(out / "inventory", nodes)
    with cpu(figures, "inventory_read_s"):
        hosts = inventory.load(path)
    assert len(hosts) == nodes, f"the inventory gave {len(hosts)} hosts, not {nodes}"
    assert hosts[1].address == f"{hosts[1].name}.mgmt.example", hosts[1].address

    from rich.console import Console

    from bringup import profile, suite
    from bringup.commands import common
    from bringup.commands.check import _durations, judge_fleet
    from bringup.commands.common import finish_run, show_run
    from bringup.commands.report import WholeRunDigest, judge_whole
    from bringup.fleet.plan import plan_node
    from bringup.fleet.run import run
    from bringup.fleet.tally import Tally
    from bringup.rundir import RunDir

    recorded = demo_records()
    suite_file = write_suite(out / "demo-probes.yaml", [r["probe"] for r in recorded[0]])
    chosen = suite.load(str(suite_file))
    b300 = profile.load("b300")
    with cpu(figures, "plan_s"):
        plans = [
            plan_node(host, recorded_runner(recorded[i % len(recorded)], latency_s), chosen, b300)
            for i, host in enumerate(hosts)
        ]
    rundir = RunDir.create(out / "run", "check", "b300", chosen.name)
    rundir.manifest.suite_source = str(suite_file)  # as `check` records it: the report reads it
    rundir.save_manifest()
    tally = Tally()  # as `check` holds its findings: tallied, each on disk (fleet/tally.py)
    taken = WholeRunDigest.of_run(rundir.manifest)  # as `check` takes each node for its end
    with cpu(figures, "run_s"):
        outcomes = run(
            plans,
            rundir,
            forks=forks,
            console=Console(file=io.StringIO()),
            compare=True,
            tally=tally,
            digest=taken.take,
        )
    with cpu(figures, "fleet_checks_s"):
        # The end of `check` as it runs: the fleet checks, the whole run judged, the run
        # closed with its verdict's exit code; then the console's findings and verdict.
        tally.add(judge_fleet(rundir, tally.noted, None, None, outcomes))
        tally.add(judge_whole(rundir, tally, taken))
        finish_run(rundir, tally)
    with cpu(figures, "console_s"), open(os.devnull, "w") as devnull:
        console, common.out = common.out, Console(file=devnull)
        try:
            show_run(rundir, tally, "profile b300", _durations(rundir))
        finally:
            common.out = console
    figures.findings = tally.total
    # ru_maxrss is KiB on Linux: the process's peak, imports and all.
    figures.peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    del plans, outcomes, tally, rundir, taken
    if with_report:
        report(out / "run", figures)
    figures.wall_s = time.perf_counter() - started
    return figures


# `bringup report` as `python -m bringup.cli report ...` runs it, saying at the end the
# peak resident memory of its own program (VmHWM: the high-water mark of the memory it
# mapped since exec). The child's ru_maxrss is not that: Linux carries into it the peak of
# the process it was started from (the check's, here), so it read max(check, report).
_REPORT = """
import runpy, sys
sys.argv = ["bringup", *sys.argv[1:]]
try:
    runpy.run_module("bringup.cli", run_name="__main__")
finally:
    status = open("/proc/self/status").read().split("VmHWM:")[1].split()[0]
    print(f"VmHWM {status}", file=sys.stderr)
"""


def report(run_dir: Path, figures: Figures) -> None:
    """`bringup report RUN --format md,junit,json,html`, as an operator runs it: its own process
    (its CPU and peak memory are the child's, start-up and imports included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    argv = [sys.executable, "-c", _REPORT, "report", str(run_dir), "--format"]
    formats = "md,junit,json,html"
    done = subprocess.run([*argv, formats], capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"bringup report exited {done.returncode}: {done.stderr.strip()}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    figures.report_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    figures.system_s += after.ru_stime - before.ru_stime
    peak = done.stderr.rsplit("VmHWM ", 1)[1].split()[0]  # kB
    figures.report_peak_mb = int(peak) / 1024


def lines(f: Figures) -> list[str]:
    t = targets(f.nodes)

    def ratio(value: float, target: float) -> str:
        return f"{value / target:5.2f} x target" + ("  OVER" if value > target else "")

    report_per_node = f.report_s / f.nodes
    return [
        f"{f.nodes} nodes, {f.findings} findings, {f.wall_s:.1f} s wall",
        f"  inventory        {f.inventory_s:7.3f} s CPU  "
        f"({ratio(f.inventory_s, t.inventory_s)} of {t.inventory_s} s, templated addresses;"
        f" Ansible import {f.inventory_import_s:.3f} s,"
        f" read {f.inventory_read_s:.3f} s)",
        f"  plan             {f.plan_s:7.3f} s CPU",
        f"  run + record     {f.run_s:7.3f} s CPU  (fleet.run: transport, run directory, judging)",
        f"  fleet checks     {f.fleet_checks_s:7.3f} s CPU  (fleet, whole run, verdict, closing)",
        f"  console          {f.console_s:7.3f} s CPU  (`check`'s findings tables and verdict)",
        f"  report           {f.report_s:7.3f} s CPU  (`bringup report`: md, junit, json, html;"
        " its own process)",
        f"  of which system  {f.system_s:7.3f} s CPU  (the kernel: files of the run directory)",
        f"  controller/node  {f.per_node_s * 1000:7.2f} ms CPU "
        f"({ratio(f.per_node_s, t.per_node_s)} of {t.per_node_s * 1000:g} ms;"
        " the check, inventory to findings)",
        f"  report/node      {report_per_node * 1000:7.2f} ms CPU "
        f"({ratio(report_per_node, t.report_per_node_s)} of {t.report_per_node_s * 1000:g} ms)",
        f"  with the report  {f.with_report_per_node_s * 1000:7.2f} ms CPU",
        f"  peak memory      {f.peak_mb:7.1f} MB RSS  ({ratio(f.peak_mb, t.peak_mb)}"
        f" of {t.peak_mb:g} MB; the check)",
        f"                   {f.report_peak_mb:7.1f} MB RSS  "
        f"({ratio(f.report_peak_mb, t.report_peak_mb)} of {t.report_peak_mb:g} MB; the report)",
        f"  this machine     {f.pace_s:7.3f} s CPU  (a fixed workload, the least of three, timed"
        " before: compare runs beside it)",
    ]


def over_target(f: Figures) -> bool:
    """The check's figures over their targets (the report's are printed, not held to them)."""
    t = targets(f.nodes)
    return f.inventory_s > t.inventory_s or f.per_node_s > t.per_node_s or f.peak_mb > t.peak_mb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--nodes", type=int, nargs="+", default=[1000], help="one size or several, in turn"
    )
    parser.add_argument("--forks", type=int, default=64)
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=20.0,
        help="each record arrives this long after the one before (0: every node at once)",
    )
    parser.add_argument("--keep", type=Path, help="write the inventory and run here")
    parser.add_argument(
        "--no-report",
        action="store_true",
        help="the check alone: `bringup report` not run (its figures print as 0)",
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when over a target")
    parser.add_argument("--json", action="store_true", help="one size's figures as JSON")
    args = parser.parse_args(argv)
    if args.json:
        print(json.dumps(dataclasses.asdict(measure_one(args.nodes[0], args))))
        return 0
    over = False
    with scratch(args):
        for nodes in args.nodes:
            # What the size before left unwritten (its report: 500 MB at 10,000 nodes), or
            # another process, written back now: this size's barriers sync the whole file
            # system (docs/scale.md), and would otherwise write it back on its CPU.
            os.sync()
            figures = measure_one(nodes, args) if len(args.nodes) == 1 else in_child(nodes, args)
            print("\n".join(lines(figures)))
            over = over or over_target(figures)
            met = "OVER (see above)" if over_target(figures) else "all met"
            print(f"the check's targets: {met}")
    return 1 if over and args.check else 0


@contextmanager
def scratch(args: argparse.Namespace) -> Iterator[None]:
    """Several sizes and no --keep: every size's files in one temporary folder, removed
    once the last size is measured, not each size's as it ends. A size measured right
    after the removal of the one before pays for it: an ext4 without a journal (this
    VM's) scans past every inode freed in the last one to six minutes each time it makes
    a file (docs/scale.md), so the 10,000-node run would carry the 1,000-node run's."""
    if args.keep is not None or len(args.nodes) == 1:
        yield
        return
    folder = Path(tempfile.mkdtemp(prefix="bringup-scale-"))
    args.keep = folder
    try:
        yield
    finally:
        args.keep = None
        shutil.rmtree(folder, ignore_errors=True)


def in_child(nodes: int, args: argparse.Namespace) -> Figures:
    """One size measured in a child process (`--json`): its peak memory is its own, not
    that of the larger size before it (a process's peak never goes down)."""
    argv = [sys.executable, __file__, "--nodes", str(nodes), "--forks", str(args.forks)]
    argv += ["--latency-ms", str(args.latency_ms), "--json"]
    if args.no_report:
        argv.append("--no-report")
    if args.keep is not None:
        argv += ["--keep", str(args.keep / str(nodes))]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"scale.py --nodes {nodes} exited {done.returncode}: {done.stderr}")
    return Figures(**json.loads(done.stdout.splitlines()[-1]))


def measure_one(nodes: int, args: argparse.Namespace) -> Figures:
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        return measure(nodes, args.forks, args.keep, args.latency_ms / 1000, not args.no_report)
    with tempfile.TemporaryDirectory() as tmp:
        return measure(nodes, args.forks, Path(tmp), args.latency_ms / 1000, not args.no_report)


if __name__ == "__main__":
    sys.exit(main())
