"""A real Slurm over the simulated cluster: munge, slurmctld and one slurmd per node.

The head node is a namespace of its own (`bu-<run>-c`, address .253 on the cluster's
bridge): `munged` and `slurmctld` run there, so the sweep that removes a crashed run's
namespaces removes them too. Each simulated node runs `slurmd -N nodeNN` in its namespace;
the nodes share this machine's hostname, so Slurm node names are the only names that
tell them apart (as in containers and at some sites).

Everything is private to the cluster, under `<workdir>/slurm`: slurm.conf, cgroup.conf, the
munge key, the controller's state, the nodes' logs; its Unix sockets (munge's, and each
step's in slurmd's spool) in a short folder of its run id beside the run's state file,
`/run/bringup-simcluster/<run>.slurm`: a socket's path holds at most 107 bytes, and below
a deep work directory (a test's, under pytest-xdist) every step's launch failed ("Task
launch ... failed: Unspecified error"). Nothing reads or writes /etc/slurm or
/etc/munge; a client (srun, sinfo, scontrol) needs only `SLURM_CONF` pointing at this
cluster's slurm.conf (the munge socket is named in it), which `SimSlurm.env()` gives.

A task started by `srun` inherits the environment of srun, not of its node. The node's own
environment (its tools first on PATH, its cache, its simulated NVML) reaches each task
through a TaskProlog that prints the node's `export` lines, as sshd's SetEnv does for an
SSH session.

Needs root and Debian's `slurm-wlm` (22.05) and `munge`: `available()` says why not.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bringup.sim.netns import STATE_DIR, SUBNET, SimClusterError, run_setup

HEAD_HOST = 253  # the head node's address on the bridge: 10.231.<run>.253
PARTITION = "sim"
READY_S = 30.0
TOOLS = [
    ("munged", "munge"),
    ("slurmctld", "slurmctld"),
    ("slurmd", "slurmd"),
    ("srun", "slurm-client"),
    ("sinfo", "slurm-client"),
    ("scontrol", "slurm-client"),
]


def available() -> str | None:
    """None when a real Slurm can run over the simulated cluster here, else why not."""
    if os.geteuid() != 0:
        return "needs root (slurmd runs as root in each node's namespace): run as root"
    for tool, package in TOOLS:
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            return f"no `{tool}` (apt-get install slurm-wlm munge; {package})"
    return None


def socket_dir(run: int) -> Path:
    """The folder of run id `run`'s Slurm sockets: beside its state file, root's alone."""
    return STATE_DIR / f"{run}.slurm"


def _tool(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


@dataclass(frozen=True)
class SlurmNode:
    """What Slurm needs of one simulated node."""

    name: str
    address: str
    netns: str
    env: Mapping[str, str]  # what its tasks get on top of srun's (PATH, XDG_CACHE_HOME, NVML)
    identity: Sequence[str] = ()  # words before slurmd: its own machine id (netns.own_identity)


class SimSlurm:
    """Slurm of one simulated cluster run: start() after the network, stop() before it goes."""

    def __init__(
        self,
        workdir: Path,
        run: int,
        bridge: str,
        nodes: Sequence[SlurmNode],
        extra_conf: Sequence[str] = (),
    ) -> None:
        """extra_conf: slurm.conf lines added before the nodes (HealthCheckProgram=...)."""
        self.extra_conf = list(extra_conf)
        self.dir = workdir / "slurm"
        # The sockets: a short path whatever the work directory's (removed by stop(), or by
        # the sweep of a crashed run: netns.teardown_run).
        self.sockets = socket_dir(run)
        self.run = run
        self.bridge = bridge
        self.nodes = list(nodes)
        self.netns = f"bu-{run}-c"
        self.veth = f"bu-{run}-vc"
        self.address = f"{SUBNET}.{run}.{HEAD_HOST}"
        self.cluster_name = f"bu{run}"
        self._procs: list[subprocess.Popen[bytes]] = []

    # -- where things are

    @property
    def conf(self) -> Path:
        return self.dir / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        return self.sockets / "munge.socket"

    @property
    def partition(self) -> str:
        return PARTITION

    def env(self) -> dict[str, str]:
        """What a Slurm client (srun, salloc, sinfo, scontrol) needs to use this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def log(self, name: str) -> Path:
        """The log of the controller (`slurmctld`), of munge (`munged`) or of a node's slurmd."""
        return self.dir / "log" / f"{name}.log"

    # -- life cycle

    def start(self) -> None:
        reason = available()
        if reason:
            raise SimClusterError(f"slurm: {reason}")
        self._write_files()
        self._head_network()
        # The nodes reach the head node over the bridge; a default route through it lets a
        # task reach any address of this machine (srun's, when it listens on another one).
        for node in self.nodes:
            subprocess.run(
                ["ip", "-n", node.netns, "route", "replace", "default", "via", self.address],
                capture_output=True,
                check=False,
            )
        self._spawn(self.netns, self._munged_argv(), "munged")
        self._wait(lambda: self.munge_socket.exists(), "munged", "munged")
        self._spawn(self.netns, [_tool("slurmctld"), "-D", "-f", str(self.conf)], "slurmctld")
        self._wait(self._controller_up, "slurmctld", "slurmctld")
        for node in self.nodes:
            argv = [_tool("slurmd"), "-D", "-N", node.name, "-f", str(self.conf)]
            self._spawn(node.netns, [*node.identity, *argv], node.name)
        self._wait(self._nodes_idle, "the nodes' slurmd", self.nodes[0].name)

    def stop(self) -> None:
        """End the daemons (the namespace sweep ends them too; this reaps them)."""
        for proc in reversed(self._procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(self._procs):
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True, check=False)
        shutil.rmtree(self.sockets, ignore_errors=True)

    # -- pieces

    def _write_files(self) -> None:
        for sub in ("munge", "state", "spool", "log"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.sockets, ignore_errors=True)  # a crashed run's of this id
        (self.sockets / "spool").mkdir(parents=True)
        # munged refuses a socket directory others can write to, and a key others can read.
        for path in (self.dir, self.dir / "munge", self.sockets):
            path.chmod(0o755)
        key = self.dir / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        (self.dir / "plugstack.conf").write_text("")  # none of this machine's SPANK plugins
        (self.dir / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")
        self.conf.write_text(self.slurm_conf())
        prolog = self.dir / "task_prolog.sh"
        prolog.write_text(self._task_prolog())
        prolog.chmod(0o755)
        for node in self.nodes:
            lines = [f"export {k}={v}" for k, v in node.env.items()]
            (self.dir / f"{node.name}.env").write_text("".join(f"{x}\n" for x in lines))

    def slurm_conf(self) -> str:
        host = socket.gethostname().split(".")[0]  # slurmctld starts only on SlurmctldHost
        d = self.dir
        lines = [
            f"# Slurm of simulated cluster run {self.run} (bringup.sim.slurm)",
            f"ClusterName={self.cluster_name}",
            f"SlurmctldHost={host}({self.address})",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={d / 'state'}",
            f"SlurmdSpoolDir={self.sockets / 'spool'}/%n",
            f"SlurmctldPidFile={d / 'slurmctld.pid'}",
            f"SlurmdPidFile={d / 'spool'}/%n.pid",
            f"SlurmctldLogFile={self.log('slurmctld')}",
            f"SlurmdLogFile={d / 'log'}/%n.log",
            f"PlugStackConfig={d / 'plugstack.conf'}",
            f"TaskProlog={d / 'task_prolog.sh'}",
            # cgroup v1 hierarchy here; no cgroup confinement of jobs (they are processes in
            # a namespace): process groups track them, and tasks are not bound to CPUs.
            "ProctrackType=proctrack/pgid",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            # Whole nodes per job, as GPU clusters schedule them.
            "SelectType=select/linear",
            "SchedulerType=sched/backfill",
            "ReturnToService=2",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=30",
            "InactiveLimit=0",
            "KillWait=5",
            "MinJobAge=60",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            *self.extra_conf,
        ]
        for node in self.nodes:
            lines.append(f"NodeName={node.name} NodeAddr={node.address} CPUs=1 State=UNKNOWN")
        names = ",".join(n.name for n in self.nodes)
        lines.append(
            f"PartitionName={PARTITION} Nodes={names} Default=YES MaxTime=INFINITE State=UP"
        )
        return "\n".join(lines) + "\n"

    def _task_prolog(self) -> str:
        # Slurm adds every `export NAME=value` line a TaskProlog prints to the task's env.
        return f'#!/bin/sh\ncat "{self.dir}/$SLURMD_NODENAME.env" 2>/dev/null\nexit 0\n'

    def _munged_argv(self) -> list[str]:
        m = self.dir / "munge"
        return [
            _tool("munged"),
            "--foreground",
            "--force",  # the work directory may be private (0700): only root uses the socket
            f"--socket={self.munge_socket}",
            f"--key-file={m / 'munge.key'}",
            f"--pid-file={m / 'munged.pid'}",
            f"--seed-file={m / 'munged.seed'}",
            f"--log-file={self.log('munged')}",
        ]

    def _head_network(self) -> None:
        outside = [
            f"netns add {self.netns}",
            f"link add {self.veth} type veth peer name eth0 netns {self.netns}",
            f"link set {self.veth} master {self.bridge}",
            f"link set {self.veth} up",
        ]
        run_setup(["ip", "-batch", "-"], "\n".join(outside) + "\n")
        inside = ["link set lo up", f"addr add {self.address}/24 dev eth0", "link set eth0 up"]
        run_setup(["ip", "-n", self.netns, "-batch", "-"], "\n".join(inside) + "\n")

    def _spawn(self, netns: str, argv: list[str], log_name: str) -> None:
        env = {**os.environ, **self.env()}
        with self.log(log_name + ".out").open("ab") as out:
            self._procs.append(
                subprocess.Popen(
                    ["ip", "netns", "exec", netns, *argv],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    env=env,
                    start_new_session=True,  # a Ctrl-C of the test run reaches stop()
                )
            )

    def _wait(self, ready: object, what: str, log_name: str) -> None:
        assert callable(ready)
        end = time.monotonic() + READY_S
        while time.monotonic() < end:
            if ready():
                return
            if any(p.poll() is not None for p in self._procs):
                break
            time.sleep(0.2)
        raise SimClusterError(f"slurm: {what} did not start: {self._last_log(log_name)}")

    def _last_log(self, name: str) -> str:
        for path in (self.log(name), self.log(name + ".out")):
            try:
                lines = path.read_text(errors="replace").strip().splitlines()
            except OSError:
                continue
            if lines:
                return lines[-1]
        return "no log"

    def client(self, *argv: str, timeout_s: float = 10) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command against this cluster."""
        return subprocess.run(
            list(argv),
            env={**os.environ, **self.env()},
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )

    def _controller_up(self) -> bool:
        return self.client("scontrol", "ping").stdout.count("UP") > 0

    def _nodes_idle(self) -> bool:
        out = self.client("sinfo", "-h", "-N", "-o", "%N %t").stdout.split("\n")
        states = dict(line.split() for line in out if line.strip())
        return len(states) == len(self.nodes) and all(
            s.rstrip("*") in ("idle", "alloc", "mix") for s in states.values()
        )
