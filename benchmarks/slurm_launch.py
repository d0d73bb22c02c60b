"""Slurm launch at scale: one `srun` step per node against one step for the allocation.

    sudo .venv/bin/python benchmarks/slurm_launch.py [--nodes 64] [--baseline REV] [--repeat 1]

Starts a simulated cluster of `--nodes` nodes under a real Slurm (munge, slurmctld, one
slurmd per node: bringup/sim/slurm.py), takes one allocation of all of them (`salloc
--no-shell`) and, inside it, measures side by side:

- **`bringup check --slurm`**, this checkout: one step per wave of `--forks` nodes (here
  the node count: one wave), the real command end to end (fleet/slurm_step.py);
- **`bringup check --slurm` at `--baseline REV`** (when given; e.g. the commit before
  the wave design): one `srun --nodes=1` step per node, `--forks` the node count, from a
  private worktree of REV;
- **per-node steps, srun alone**: one `srun --nodes=1` per node, all at once, as the
  per-node design started them, and nothing of bringup around them;
- **one allocation step, srun alone**: one `srun --nodes=N --ntasks-per-node=1 --label`
  over the whole allocation running the same node code (the same zip from the node's
  cache, the same request on every task's stdin), every task's records back through it.

Both run the `host` probe alone (live on every node: this machine's CPU, memory and
disks), so what differs is the launch. Printed for each: wall seconds, the controller's
CPU (user + system of the command and everything it started: bringup, its srun
processes), slurmctld's CPU (its own process, read from /proc before and after), the
RPCs slurmctld served (`sdiag`: the count per message type, before and after) and the
same divided per node. The nodes' own CPU is not counted: they share this machine's cores
and run the same node side under both designs.

Before anything is measured, each `bringup check` runs once (not counted: it stores its
probe code in every node's cache), so all measure a run on a cluster that has run bringup
before. The srun columns are what the designs cost Slurm and the controller by
themselves; the bringup columns add the command (interpreter, plan, run directory,
judging, report).
Asserts nothing; needs root and Debian's slurm-wlm and munge.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bringup.fleet.node_code import build_node_code, remote_command, request_frame
from bringup.fleet.slurm import srun_argv
from bringup.sim.cluster import SimCluster

REPO = Path(__file__).resolve().parents[1]
SUITE = """\
name: launch
description: the host probe alone, live on every node (benchmarks/slurm_launch.py)
budget_s: 120
probes:
  - name: host
    timeout_s: 60
"""
REQUEST = {"probes": [{"name": "host", "params": {}, "timeout_s": 60}]}
_RPC = re.compile(r"^\s*(\S+)\s+\(\s*\d+\)\s+count:(\d+)")


@dataclass
class Measured:
    design: str
    wall_s: float
    cpu_s: float  # the controller: the command and its children
    ctld_cpu_s: float
    rpcs: Counter[str] = field(default_factory=Counter)
    answered: int = 0  # nodes whose host record came back
    code: int = 0


def sdiag_counts(cluster: SimCluster) -> Counter[str]:
    """slurmctld's RPC counts by message type (`sdiag`, both tables: by type and by user are
    the same calls; only the first is read)."""
    assert cluster.slurm is not None
    text = cluster.slurm.client("sdiag").stdout
    part = text.split("Remote Procedure Call statistics by message type", 1)[-1]
    part = part.split("Remote Procedure Call statistics by user", 1)[0]
    return Counter({m.group(1): int(m.group(2)) for m in map(_RPC.match, part.splitlines()) if m})


def ctld_pid(cluster: SimCluster) -> int:
    """slurmctld's pid (`ip netns exec` execs it: the Popen's own pid)."""
    assert cluster.slurm is not None
    for proc in cluster.slurm._procs:  # the benchmark reads the sim's daemons
        cmd = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        if any(part.endswith(b"slurmctld") for part in cmd):
            return proc.pid
    raise SystemExit("no slurmctld among the simulated cluster's daemons")


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:13]) / os.sysconf("SC_CLK_TCK")


def measured(
    design: str,
    cluster: SimCluster,
    argv: list[str],
    env: dict[str, str],
    stdin: bytes | None,
    cwd: Path = REPO,
) -> tuple[Measured, bytes]:
    """Run argv; its wall, its CPU and its children's, slurmctld's CPU and RPCs meanwhile."""
    ctld = ctld_pid(cluster)
    rpcs_before, ctld_before = sdiag_counts(cluster), proc_cpu_s(ctld)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        argv, input=stdin or b"", capture_output=True, cwd=cwd, env=env, check=False
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    time.sleep(1.0)  # the steps' completion messages reach slurmctld just after srun ends
    ctld_cpu = proc_cpu_s(ctld) - ctld_before
    rpcs = sdiag_counts(cluster)
    rpcs.subtract(rpcs_before)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
        print(f"  ! {design}: exit {done.returncode}: {tail}", file=sys.stderr)
    found = Measured(design, wall, cpu, ctld_cpu, +rpcs, code=done.returncode)
    return found, done.stdout


def raw_node_steps(cluster: SimCluster, job: str, env: dict[str, str]) -> Measured:
    """One `srun --nodes=1` per node, all at once, as the transport starts them (its own
    argv), with nothing of bringup around them: what the steps alone cost."""
    command = remote_command(build_node_code(), "python3")
    request = request_frame(REQUEST)
    ctld = ctld_pid(cluster)
    rpcs_before, ctld_before = sdiag_counts(cluster), proc_cpu_s(ctld)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            srun_argv(job, name, command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        for name in cluster.names
    ]
    outputs = [proc.communicate(request)[0] for proc in procs]
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    time.sleep(1.0)
    ctld_cpu = proc_cpu_s(ctld) - ctld_before
    rpcs = sdiag_counts(cluster)
    rpcs.subtract(rpcs_before)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    found = Measured("per-node steps, srun alone", wall, cpu, ctld_cpu, +rpcs)
    found.answered = sum(
        1 for out in outputs if any(_is_host_record(x) for x in out.decode().splitlines())
    )
    return found


def bringup_check(
    design: str, tree: Path, cluster: SimCluster, job: str, base: Path, env: dict[str, str]
) -> Measured:
    """`bringup check --slurm` of the checkout at `tree` inside the allocation, one wave."""
    suite = base / "launch.yaml"
    suite.write_text(SUITE)
    size = len(cluster.names)
    argv = [sys.executable, "-m", "bringup.cli", "check", "--slurm", "--json", "--suite"]
    argv += [str(suite), "--profile", str(cluster.profile_path), "--forks", str(size)]
    argv += ["--out", str(base / f"run-{time.monotonic_ns()}")]
    inside = {**env, "SLURM_JOB_ID": job, "SLURM_JOB_NODELIST": ",".join(cluster.names)}
    inside["PYTHONPATH"] = str(tree)
    found, stdout = measured(design, cluster, argv, inside, None, cwd=tree)
    doc = json.loads(stdout or b"{}")
    found.answered = sum(
        1
        for f in doc.get("findings", [])
        if f["check"] == "node.reachable" and f["status"] == "PASS"
    )
    return found


@contextlib.contextmanager
def tree_of(rev: str | None, base: Path) -> Iterator[Path]:
    """This checkout, or REV checked out in a private worktree (removed afterwards)."""
    if rev is None:
        yield REPO
        return
    path = base / f"tree-{rev.replace('/', '_')}"
    subprocess.run(
        ["git", "worktree", "add", "-q", "--detach", str(path), rev], cwd=REPO, check=True
    )
    try:
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=REPO, check=False)


def allocation_step_argv(job: str, size: int) -> list[str]:
    command = remote_command(build_node_code(), "python3")
    return [
        "srun",
        f"--jobid={job}",
        f"--nodes={size}",
        f"--ntasks={size}",
        "--ntasks-per-node=1",
        "--overlap",
        "--quiet",
        "--label",  # each line of a task's stdout comes back as "<task>: <line>"
        "--input=all",  # the request on every task's stdin
        "--job-name=bringup",
        "sh",
        "-c",
        command,
    ]


def allocation_step(cluster: SimCluster, job: str, env: dict[str, str]) -> Measured:
    argv = allocation_step_argv(job, len(cluster.names))
    request = request_frame(REQUEST)
    found, stdout = measured("one allocation step, srun alone", cluster, argv, env, request)
    answered = {label for label, line in labelled_lines(stdout) if _is_host_record(line)}
    found.answered = len(answered)
    return found


SRUN_CHUNK = 1024  # srun --label cuts a longer line into labelled pieces of this size


def labelled_lines(stdout: bytes) -> list[tuple[str, str]]:
    """(task label, line) from `srun --label` output, a long line's pieces joined again: srun
    cuts a line past 1 KiB into pieces, each on a line of its own under the task's label
    (so a line of exactly 1 KiB is taken for a piece here: good enough to count answers)."""
    lines: list[tuple[str, str]] = []
    partial: dict[str, str] = {}
    for raw in stdout.decode(errors="replace").splitlines():
        label, _, piece = raw.partition(": ")
        label = label.strip()
        text = partial.pop(label, "") + piece
        if len(piece) == SRUN_CHUNK:
            partial[label] = text
        else:
            lines.append((label, text))
    return lines


def _is_host_record(line: str) -> bool:
    try:
        return json.loads(line).get("probe") == "host"
    except ValueError:
        return False


def table(rows: list[Measured], size: int, load: str) -> str:
    types = sorted({t for r in rows for t in r.rpcs})
    lines = [
        f"{size} simulated nodes under a real Slurm; load before: {load}",
        "| | " + " | ".join(r.design for r in rows) + " |",
        "|---|" + "---|" * len(rows),
    ]

    def row(name: str, values: list[str]) -> None:
        lines.append(f"| {name} | " + " | ".join(values) + " |")

    row("nodes answered", [f"{r.answered} of {size}" for r in rows])
    row("wall s", [f"{r.wall_s:.2f}" for r in rows])
    row(
        "controller CPU s (per node ms)",
        [f"{r.cpu_s:.2f} ({r.cpu_s / size * 1e3:.1f})" for r in rows],
    )
    row(
        "slurmctld CPU s (per node ms)",
        [f"{r.ctld_cpu_s:.2f} ({r.ctld_cpu_s / size * 1e3:.1f})" for r in rows],
    )
    row(
        "slurmctld RPCs (per node)",
        [f"{sum(r.rpcs.values())} ({sum(r.rpcs.values()) / size:.2f})" for r in rows],
    )
    for name in types:
        row(f"  {name}", [str(r.rpcs.get(name, 0)) for r in rows])
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=1, help="measured runs of each design")
    parser.add_argument("--baseline", help="a commit whose check --slurm is measured beside")
    args = parser.parse_args()
    reason = SimCluster.available()
    if reason:
        sys.exit(f"cannot build a simulated cluster here: {reason}")
    with tempfile.TemporaryDirectory(prefix="bringup-slurm-launch-") as tmp:
        base = Path(tmp)
        started = time.monotonic()
        with SimCluster(args.nodes, base / "cluster", slurm=True) as cluster:
            print(
                f"cluster of {args.nodes} up in {time.monotonic() - started:.0f} s", file=sys.stderr
            )
            assert cluster.slurm is not None
            env = {**os.environ, **cluster.slurm_env(), "PYTHONPATH": str(REPO)}
            granted = cluster.slurm.client("salloc", "--no-shell", f"-N{args.nodes}", timeout_s=120)
            job = granted.stderr.split("Granted job allocation ")[1].split()[0]
            load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
            rows: list[Measured] = []
            try:
                with contextlib.ExitStack() as stack:
                    trees = {"bringup check --slurm, one step per wave": REPO}
                    if args.baseline:
                        name = f"bringup check --slurm at {args.baseline}, a step per node"
                        trees[name] = stack.enter_context(tree_of(args.baseline, base))
                    for name, tree in trees.items():  # warm-up: stores each one's code
                        bringup_check(name, tree, cluster, job, base, env)
                    for _ in range(args.repeat):
                        for name, tree in trees.items():
                            rows.append(bringup_check(name, tree, cluster, job, base, env))
                        rows.append(raw_node_steps(cluster, job, env))
                        rows.append(allocation_step(cluster, job, env))
            finally:
                cluster.slurm.client("scancel", job)
            print(table(rows, args.nodes, load))
            print(
                "controller CPU: bringup and its srun processes (user + system); "
                f"{os.cpu_count()} CPUs here, shared",
                file=sys.stderr,
            )
            print(shlex.join(allocation_step_argv(job, args.nodes)[:10]), file=sys.stderr)


if __name__ == "__main__":
    main()
