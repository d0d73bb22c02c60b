"""The Slurm transport: the allocation, and one node reached with its own `srun` step.

Allocation (`--slurm`):

- inside an allocation (`SLURM_JOB_ID` set: an `salloc` shell, an `sbatch` script) the
  run uses it: its nodes, or those of `--nodelist` among them; it is never released;
- otherwise the run asks for one as `salloc --no-shell` does (waiting in the queue like
  any job; `--partition`, `--nodelist`, `--nodes-count`, `--account`, `--time`), and
  releases it (`scancel`) when the run ends, also on Ctrl-C or an error.

Nodes are named by their Slurm node names (`scontrol show hostnames`), never by hostname:
in containers and at some sites every node has the same hostname.

A run reaches its nodes in waves, one step per wave of `--forks` nodes
(fleet/slurm_step.py: measured cheaper by far than a step per node,
docs/scale.md#slurm-launch). `srun_argv` is the one-node step, kept for the benchmark
that measures the two side by side (benchmarks/slurm_launch.py).

The node code travels as over SSH (fleet/node_code.py): a step runs the zip cached on the
node under its hash once its bytes are checked, and where it is not there (or not the
same bytes) one more step brings it on stdin behind the request, and those nodes store it
(size and sha256 checked) and run it, once per node and version. Two steps, not one
session as over SSH: srun's stdin is written before a node can say what it holds. Real
sites do not always share a filesystem between the controller and the nodes, and `srun
--bcast` copies to a path per step (every run would copy it again); the cache makes the
second run start at once.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from bringup.fleet.transport import (
    TransportError,
)

STDERR_KEPT = 16 * 1024
STOP_WAIT_S = 5.0  # srun forwards SIGTERM to the step's task; then it is killed
ALLOCATE_TIMEOUT_S = 24 * 3600.0  # salloc waits in the queue; Ctrl-C withdraws the request


class SlurmError(TransportError):
    """An allocation could not be had or used; one line."""


@dataclass(frozen=True)
class SlurmChoice:
    """The command line's `--slurm` options."""

    partition: str | None = None
    nodelist: str | None = None
    nodes_count: int | None = None
    account: str | None = None
    time: str | None = None


@dataclass
class Allocation:
    """A Slurm job whose nodes the run uses; `owned` when this run asked for it."""

    job_id: str
    nodes: list[str]
    owned: bool

    @property
    def nodelist(self) -> str:
        return ",".join(self.nodes)


# --- pure: command lines and what Slurm prints --------------------------------------------


def salloc_argv(choice: SlurmChoice, nodes: Sequence[str], job_name: str) -> list[str]:
    """`salloc --no-shell` for the choice; `nodes` (named nodes) win over --nodelist."""
    argv = ["salloc", "--no-shell", f"--job-name={job_name}"]
    named = ",".join(nodes) if nodes else choice.nodelist
    count = choice.nodes_count or (len(nodes) if nodes else None)
    if named:
        argv.append(f"--nodelist={named}")
    if count:
        argv.append(f"--nodes={count}")
    if choice.partition:
        argv.append(f"--partition={choice.partition}")
    if choice.account:
        argv.append(f"--account={choice.account}")
    if choice.time:
        argv.append(f"--time={choice.time}")
    return argv


_GRANTED = re.compile(r"Granted job allocation (\d+)")
_ANY_JOB = re.compile(r"job allocation (\d+)")


def granted_job(stderr: str) -> str | None:
    """The job id of `salloc: Granted job allocation 123`; None when none was granted."""
    match = _GRANTED.search(stderr)
    return match.group(1) if match else None


def node_addresses(scontrol_oneliners: str) -> dict[str, str]:
    """NodeName -> NodeAddr from `scontrol show node -o` (one node per line): where a
    rendezvous on the node is reached, as Slurm itself reaches it."""
    found = {}
    for line in scontrol_oneliners.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if fields.get("NodeName"):
            found[fields["NodeName"]] = fields.get("NodeAddr") or fields["NodeName"]
    return found


def srun_argv(job_id: str, node: str, command: str) -> list[str]:
    """One step of one task on one node, running `command` under sh."""
    return [
        "srun",
        f"--jobid={job_id}",
        f"--nodelist={node}",
        "--nodes=1",
        "--ntasks=1",
        "--ntasks-per-node=1",
        "--overlap",
        "--quiet",
        "--job-name=bringup",
        "sh",
        "-c",
        command,
    ]


_TASK_LINE = re.compile(r"^srun: error: \S+: task \d+: ")


def launch_failure(stderr: str) -> str | None:
    """Slurm's own error (step not created, node not answering), not the task's exit."""
    for line in stderr.splitlines():
        if line.startswith("srun: error:") and not _TASK_LINE.match(line):
            return line.removeprefix("srun: error:").strip()
    return None


# --- the allocation: the I/O edge -----------------------------------------------------------


def available() -> str | None:
    """None when Slurm's client commands are here, else the reason."""
    for tool in ("srun", "salloc", "scontrol", "scancel", "squeue"):
        if shutil.which(tool) is None:
            return f"no `{tool}` on PATH: --slurm needs Slurm's client commands"
    return None


def _client(argv: Sequence[str], timeout_s: float = 30.0) -> str:
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        raise SlurmError(f"`{' '.join(argv[:3])}` did not answer within {timeout_s:g} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise SlurmError(f"{argv[0]}: {last}")
    return done.stdout


def hostnames(nodelist: str) -> list[str]:
    """The node names of a Slurm node list (`node[01-04]`), as `scontrol` expands it."""
    return _client(["scontrol", "show", "hostnames", nodelist]).split()


def addresses(nodes: Sequence[str]) -> dict[str, str]:
    """Each node's address as Slurm knows it (NodeAddr); its name where Slurm says none."""
    listed = _client(["scontrol", "show", "node", "-o", ",".join(nodes)])
    return {name: node_addresses(listed).get(name, name) for name in nodes}


def allocate(choice: SlurmChoice, nodes: Sequence[str], job_name: str) -> Allocation:
    """The allocation the run uses: the one it is inside, else a new one (see module doc)."""
    reason = available()
    if reason:
        raise SlurmError(reason)
    job = os.environ.get("SLURM_JOB_ID")
    if job:
        given = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
        if not given:
            given = _client(["squeue", "-h", "-j", job, "-o", "%N"]).strip()
        inside = hostnames(given)
        wanted = list(nodes) or (hostnames(choice.nodelist) if choice.nodelist else inside)
        outside = [n for n in wanted if n not in inside]
        if outside:
            raise SlurmError(f"{', '.join(outside)} not in the allocation of job {job} ({given})")
        if choice.nodes_count:
            wanted = wanted[: choice.nodes_count]
        return Allocation(job, wanted, owned=False)
    if not (nodes or choice.nodelist or choice.nodes_count):
        raise SlurmError(
            "say which nodes to allocate: --nodelist LIST or --nodes-count N "
            "(or run inside an allocation: salloc, sbatch)"
        )
    # salloc runs in this process group: a Ctrl-C while it waits in the queue reaches it
    # too, and it withdraws the request.
    argv = salloc_argv(choice, nodes, job_name)
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=ALLOCATE_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise SlurmError(f"no allocation within {ALLOCATE_TIMEOUT_S:g} s") from None
    job = granted_job(done.stderr)
    if job is None:
        pending = _ANY_JOB.search(done.stderr)
        if pending:
            subprocess.run(["scancel", pending.group(1)], capture_output=True, check=False)
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise SlurmError(f"no allocation: {last}")
    try:
        listed = _client(["squeue", "-h", "-j", job, "-o", "%N"]).strip()
        return Allocation(job, hostnames(listed), owned=True)
    except BaseException:
        release(Allocation(job, [], owned=True))
        raise


def release(allocation: Allocation) -> None:
    """End the allocation this run asked for (never one it was started inside)."""
    if allocation.owned:
        subprocess.run(["scancel", allocation.job_id], capture_output=True, check=False)
