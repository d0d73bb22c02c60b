"""The host side of the simulated cluster: network namespaces, their processes, run ids
that crashed runs leave behind, and the key pairs. Linux-only plumbing, used by cluster.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import resource
import shlex
import shutil
import signal
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path

SSHD = "/usr/sbin/sshd"  # sshd re-executes itself, so it must be started by absolute path
STATE_DIR = Path("/run/bringup-simcluster")  # one file per live cluster: who owns which run id
NETNS_DIR = Path("/run/netns")
SUBNET = "10.231"  # 10.231.<run>.0/24: private, used only on the bridge of one cluster
BRIDGE_HOST = 254  # the controller's address on the bridge: 10.231.<run>.254
MAX_NODES = 250
SSHD_READY_S = 15.0
NAME = re.compile(r"^bu-(\d+)-(br|n\d+|v\d+|c|vc)$")  # every namespace and link we create


class SimClusterError(Exception):
    """The simulated cluster could not be built or changed; one line."""


# --- processes and namespaces: the I/O edge ----------------------------------------------


def run_setup(argv: Sequence[str], stdin: str | None = None) -> str:
    """Run a setup command; SimClusterError with its last stderr line when it fails."""
    proc = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        raise SimClusterError(f"{shlex.join(argv[:4])}: {last}")
    return proc.stdout


def _ns_inode(netns: str) -> int | None:
    try:
        return os.stat(NETNS_DIR / netns).st_ino
    except OSError:
        return None


def netns_pids(netns: str) -> list[int]:
    """Every live process in a network namespace (what `ip netns pids` prints, less zombies)."""
    inode = _ns_inode(netns)
    if inode is None:
        return []
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):  # a process that ended while we looked
            if os.stat(entry / "ns" / "net").st_ino == inode and _state(entry) != "Z":
                pids.append(int(entry.name))
    return pids


def _state(proc_dir: Path) -> str:
    """The state letter of /proc/PID/stat: R, S, D, T (stopped), Z (zombie), ..."""
    return (proc_dir / "stat").read_text().rsplit(")", 1)[1].split()[0]


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def signal_all(pids: Sequence[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _start_time(pid: int) -> str | None:
    """The start time of a process (field 22 of /proc/PID/stat), to tell pid reuse apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _owner_alive(state: dict[str, object]) -> bool:
    pid = state.get("pid")
    return isinstance(pid, int) and _start_time(pid) == state.get("start_time")


def teardown_run(run: int) -> None:
    """Remove every namespace, process and link of run id `run` (ours or a crashed one's)."""
    prefix = f"bu-{run}-"
    for netns in _netns_names():
        if netns.startswith(prefix):
            signal_all(netns_pids(netns), signal.SIGKILL)
    for netns in _netns_names():
        if netns.startswith(prefix):
            # Deleting the namespace destroys its end of the veth pair, and so the pair.
            subprocess.run(["ip", "netns", "del", netns], capture_output=True, check=False)
    for link in _link_names():
        if link.startswith(prefix):
            subprocess.run(["ip", "link", "del", link], capture_output=True, check=False)
    shutil.rmtree(STATE_DIR / f"{run}.slurm", ignore_errors=True)  # its Slurm's sockets
    (STATE_DIR / f"{run}.json").unlink(missing_ok=True)


def _netns_names() -> list[str]:
    try:
        return sorted(p.name for p in NETNS_DIR.iterdir())
    except OSError:
        return []


def _link_names() -> list[str]:
    return sorted(p.name for p in Path("/sys/class/net").iterdir())


def sweep_and_allocate() -> int:
    """Remove what crashed clusters left behind, then claim a free run id (under a lock)."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    with (STATE_DIR / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        owned: set[int] = set()
        for file in STATE_DIR.glob("*.json"):
            try:
                state = json.loads(file.read_text())
            except (OSError, ValueError):
                state = {}
            if _owner_alive(state):
                owned.add(int(file.stem))
            else:
                teardown_run(int(file.stem))
        # Names of ours with no owner at all (a crash between creating and recording).
        for name in _netns_names() + _link_names():
            match = NAME.match(name)
            if match and int(match.group(1)) not in owned:
                teardown_run(int(match.group(1)))
        free = [run for run in range(1, 251) if run not in owned]
        if not free:
            raise SimClusterError("all 250 simulated-cluster run ids are in use")
        run = free[0]
        state = {"pid": os.getpid(), "start_time": _start_time(os.getpid())}
        (STATE_DIR / f"{run}.json").write_text(json.dumps(state))
        return run


def unlimited_memlock() -> None:
    # As NVIDIA's container guidance sets it (`--ulimit memlock=-1`): a configured GPU node.
    # Without CAP_SYS_RESOURCE (a container) the limit cannot be raised; sim_profile() then
    # asks for the limit the nodes do have.
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (resource.RLIM_INFINITY,) * 2)


def nodes_memlock_bytes() -> int | None:
    """The memlock limit the simulated nodes' sessions get: None when unlimited."""
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if hard == resource.RLIM_INFINITY:
        return None
    try:  # can this process raise it, as the sshd start does?
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (hard, resource.RLIM_INFINITY))
    except (ValueError, OSError):
        return hard
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (soft, hard))
    return None


def keygen(path: Path, comment: str) -> str:
    """A new ed25519 key pair at path (and path.pub); returns the public key line."""
    for old in (path, path.with_name(path.name + ".pub")):
        old.unlink(missing_ok=True)
    run_setup(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])
    return path.with_name(path.name + ".pub").read_text().strip()


def banner(address: str, timeout_s: float) -> bool:
    """True when an SSH server answers on address:22 with its banner."""
    try:
        with socket.create_connection((address, 22), timeout=timeout_s) as sock:
            sock.settimeout(timeout_s)
            return sock.recv(64).startswith(b"SSH-")
    except OSError:
        return False


# --- each node a machine of its own -------------------------------------------------------

MACHINE_ID = "/etc/machine-id"
DMI_SERIAL = "/sys/class/dmi/id/product_serial"
# Run inside the node's own mount namespace (`ip netns exec` makes one, and makes / a
# slave, so nothing here reaches this machine): the node's machine id and system serial
# over this machine's, where this machine has them.
_OWN_IDENTITY = f"""set -e
if [ -e {MACHINE_ID} ]; then mount --bind "$1" {MACHINE_ID}; fi
if [ -e {DMI_SERIAL} ]; then mount --bind "$2" {DMI_SERIAL}; fi
shift 2
exec "$@"
"""


def own_identity(folder: Path, number: int) -> list[str]:
    """The words before a command that runs it with a machine id and system serial of the
    node's own (`number`), written into `folder`.

    Simulated nodes share this machine's files: without this every one would show its
    /etc/machine-id and DMI serial, and fleet.identity would rightly call them one machine.
    """
    machine_id, serial = folder / "machine-id", folder / "product_serial"
    machine_id.write_text(f"{number:032x}\n")
    serial.write_text(f"SIM-SYS-{number}\n")
    return ["sh", "-c", _OWN_IDENTITY, "sh", str(machine_id), str(serial)]
