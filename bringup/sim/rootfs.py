"""Simulated nodes with their own root filesystem, for tests that change a node.

By default the simulated nodes (bringup.sim.cluster) share this machine's filesystem: a
real provisioning run on them would install packages, write apt and modprobe settings
on the machine running the tests, and a driver role could reboot it. In rootfs mode each
node gets its own Debian:

    mmdebstrap --variant=apt --include=openssh-server,python3,... bookworm  (once, cached)
        └─► <cache>/<key>/root          the image, unpacked once, never written to
    per node: overlayfs  lower = the image, upper = <workdir>/.rootfs/nodeNN/upper
    per node: ip netns exec <ns> unshare --mount --uts --ipc --pid --fork  (mounts, hostname
              and process tree of its own) ─► proc, sysfs (read-only), a small /dev, /run
              ─► setpriv (no CAP_SYS_MODULE, no CAP_SYS_BOOT) chroot <merged> sshd

So a file a node writes lands only in its overlay, apt and dpkg work on the node's own
package database, and its hostname is its own. The mounts live in the node's private
mount namespace: they disappear with its last process, nothing is mounted on this
machine. The node's kernel is this machine's, so what would reach a kernel is simulated
and recorded instead (KERNEL_LOG inside the node):

- `modprobe M` / `modprobe -r M` mark M loaded / unloaded under KERNEL_ROOT/sys/module;
- `shutdown -r` / `reboot` is a reboot: modules unloaded, those of /etc/modules-load.d
  loaded, the hooks of BOOT_HOOKS run (a test's "the new driver is loaded now"), and a
  new boot id, which is what Ansible's reboot module waits for;
- `update-initramfs` is recorded.

KERNEL_ROOT holds the rest of the node's simulated kernel view, written by a test: PCI
devices (sys/bus/pci/devices/*/{vendor,device,class}), NVSwitches
(proc/driver/nvidia-nvswitch/devices/*), InfiniBand devices and their VPD, a loaded
module's version (sys/module/nvidia/version). The roles read it through their
`hardware_facts_kernel_root` variable (empty, the real /proc and /sys, everywhere else).

The nodes have no route to a Debian mirror: what they should have from Debian is in the
image (Image.packages); the image has no apt sources of its own.

Needs root, `mmdebstrap` (Debian package), util-linux (`unshare`, `setpriv`), and
overlayfs in the kernel. `available()` says why it cannot run otherwise.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import uuid
from collections.abc import Sequence
from pathlib import Path

from bringup.sim.netns import DMI_SERIAL

SUITE = "bookworm"
BASE_PACKAGES = ("openssh-server", "python3")
CACHE_ENV = "BRINGUP_ROOTFS_CACHE"  # where images are kept (default DEFAULT_CACHE)
DEFAULT_CACHE = Path("/var/cache/bringup/rootfs")
IMAGE_FORMAT = "1"  # part of every image's key: change it when images are made differently
BUILD_TIMEOUT_S = 1800

# Inside every node (paths of its own root filesystem).
KERNEL_ROOT = "/var/lib/bringup-sim/kernel"
KERNEL_LOG = "/var/log/bringup-sim/kernel.log"
BOOT_HOOKS = "/etc/bringup-sim/boot.d"
KERNEL_TOOLS = ("shutdown", "reboot", "modprobe", "update-initramfs")


class RootfsError(Exception):
    """The image could not be built or a node's root filesystem set up; one line."""


@dataclasses.dataclass(frozen=True)
class Image:
    """A Debian image: the suite and the packages it is built with (besides apt's)."""

    packages: tuple[str, ...] = BASE_PACKAGES
    suite: str = SUITE

    @property
    def key(self) -> str:
        """The cache key: the same suite and packages give the same image."""
        text = "\n".join([IMAGE_FORMAT, self.suite, *sorted(set(self.packages))])
        return f"{self.suite}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def available() -> str | None:
    """None when rootfs nodes can be made here, else the reason they cannot."""
    if os.geteuid() != 0:
        return "needs root (mounts, chroot)"
    for tool, package in [
        ("mmdebstrap", "mmdebstrap"),
        ("unshare", "util-linux"),
        ("setpriv", "util-linux"),
        ("chroot", "coreutils"),
    ]:
        if shutil.which(tool) is None:
            return f"no `{tool}` on PATH (apt-get install {package})"
    try:
        filesystems = Path("/proc/filesystems").read_text()
    except OSError:
        filesystems = ""
    if "\toverlay\n" not in filesystems:
        return "no overlayfs in this kernel (modprobe overlay)"
    return None


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def ensure_image(image: Image, cache: Path | None = None) -> Path:
    """The unpacked root filesystem of the image, built with mmdebstrap the first time.

    Concurrent callers wait on a lock; a build that failed leaves nothing behind. The
    directory returned is only ever an overlay's lower layer: never write to it.
    """
    base = (cache or cache_dir()) / image.key
    root = base / "root"
    done = base / "complete"
    if done.exists():
        return root
    base.mkdir(parents=True, exist_ok=True)
    with (base / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return root
        _build(image, base, root)
        done.write_text(" ".join(sorted(image.packages)) + "\n")
    return root


def _build(image: Image, base: Path, root: Path) -> None:
    building = base / "building"
    shutil.rmtree(building, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)
    log = base / "mmdebstrap.log"
    argv = [
        "mmdebstrap",
        "--variant=apt",
        f"--include={','.join(sorted(set(image.packages)))}",
        # The nodes reach no mirror: the image keeps no apt sources, and no lists.
        '--customize-hook=rm -f "$1"/etc/apt/sources.list; rm -rf "$1"/etc/apt/sources.list.d/*',
        # Mount points the node start needs, and its simulated kernel view.
        f'--customize-hook=mkdir -p "$1{KERNEL_ROOT}" "$1{BOOT_HOOKS}"',
        image.suite,
        str(building),
    ]
    with log.open("w") as out:
        try:
            proc = subprocess.run(
                argv, stdout=out, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            shutil.rmtree(building, ignore_errors=True)
            raise RootfsError(f"mmdebstrap took over {BUILD_TIMEOUT_S} s (log: {log})") from None
    if proc.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        lines = log.read_text(errors="replace").strip().splitlines()
        last = next((x for x in reversed(lines) if x.startswith("E:")), lines[-1] if lines else "")
        raise RootfsError(f"mmdebstrap {image.suite} failed: {last} (log: {log})")
    building.rename(root)


# --- one node -----------------------------------------------------------------------------

# The node's kernel tools: what would reach this machine's kernel is recorded instead.
KERNEL_STUB = f"""#!/bin/sh
# bringup simulated node (bringup.sim.rootfs): the kernel is the host's, so this tool
# only records what it was asked and keeps the node's simulated kernel state.
log={KERNEL_LOG}
kroot={KERNEL_ROOT}
mkdir -p "${{log%/*}}" "$kroot/sys/module"
tool=${{0##*/}}
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $tool $*" >> "$log"
case "$tool" in
  modprobe)
    remove=
    for arg in "$@"; do
      case "$arg" in
        -r|--remove) remove=1 ;;
        -*) ;;
        *) if [ -n "$remove" ]; then rm -rf "$kroot/sys/module/$arg"
           else mkdir -p "$kroot/sys/module/$arg"; fi ;;
      esac
    done ;;
  shutdown|reboot)
    case "$tool $*" in
      reboot*|*-r*)
        rm -rf "$kroot/sys/module"
        mkdir -p "$kroot/sys/module"
        for module in $(cat /etc/modules-load.d/*.conf /etc/modules 2>/dev/null \\
                        | sed -e 's/#.*//' -e 's/;.*//'); do
          mkdir -p "$kroot/sys/module/$module"
        done
        for hook in {BOOT_HOOKS}/*; do
          if [ -x "$hook" ]; then "$hook" >> "$log" 2>&1; fi
        done
        cat /proc/sys/kernel/random/uuid > /proc/sys/kernel/random/boot_id
        echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) booted" >> "$log" ;;
    esac ;;
esac
exit 0
"""


def _serial_mount(merged: str, serial: Path | None) -> list[str]:
    """The line that puts the node's own DMI system serial over this machine's, where this
    machine has one (merged: the node's root, quoted)."""
    if serial is None:
        return []
    target = f"{merged}{DMI_SERIAL}"
    return [f"if [ -e {target} ]; then mount --bind {shlex.quote(str(serial))} {target}; fi"]


# Device nodes of the node's own small /dev: name, major, minor.
DEVICES = [("null", 1, 3), ("zero", 1, 5), ("full", 1, 7), ("random", 1, 8), ("urandom", 1, 9)]
DEVICES += [("tty", 5, 0)]


@dataclasses.dataclass
class NodeRoot:
    """The root filesystem of one node: the image below, the node's own changes above."""

    lower: Path  # the image (ensure_image)
    state: Path  # the node's overlay folders: upper/, work/, merged/, boot_id

    @property
    def upper(self) -> Path:
        return self.state / "upper"

    @property
    def merged(self) -> Path:
        """The mount point; only inside the node's mount namespace is anything there."""
        return self.state / "merged"

    def prepare(self, machine_id: str | None = None) -> None:
        """Make the overlay folders and put the node's kernel tools (and its own
        /etc/machine-id: the image's is every node's) into its upper layer."""
        for sub in ("upper", "work", "merged"):
            (self.state / sub).mkdir(parents=True, exist_ok=True)
        if machine_id is not None:
            (self.upper / "etc").mkdir(parents=True, exist_ok=True)
            (self.upper / "etc" / "machine-id").write_text(machine_id + "\n")
        sbin = self.upper / "usr" / "sbin"
        sbin.mkdir(parents=True, exist_ok=True)
        for tool in KERNEL_TOOLS:
            path = sbin / tool
            path.write_text(KERNEL_STUB)
            path.chmod(0o755)
        (self.state / "boot_id").write_text(f"{uuid.uuid4()}\n")

    def command(
        self,
        netns: str,
        hostname: str,
        binds: Sequence[Path],
        argv: Sequence[str],
        system_serial: Path | None = None,
    ) -> list[str]:
        """The command line that starts argv (the node's sshd) as the node's first process.

        binds: folders of this machine the node sees at the same path (its sshd_config,
        keys and tools, the simulated NVML library).
        """
        m = shlex.quote(str(self.merged))
        boot_id = shlex.quote(str(self.state / "boot_id"))
        sysrq = f"{m}/proc/sysrq-trigger"  # not in every kernel
        lines = [
            "set -eu",
            f"hostname {shlex.quote(hostname)}",
            "mount -t overlay overlay -o "
            + shlex.quote(
                f"lowerdir={self.lower},upperdir={self.upper},workdir={self.state / 'work'}"
            )
            + f" {m}",
            f"mount -t proc proc {m}/proc",
            # The node may read the kernel's settings, not change this machine's.
            f"mount --bind {m}/proc/sys {m}/proc/sys",
            f"mount -o remount,bind,ro {m}/proc/sys",
            f"mount --bind {boot_id} {m}/proc/sys/kernel/random/boot_id",
            f"if [ -e {sysrq} ]; then mount --bind /dev/null {sysrq}; fi",
            f"mount -t sysfs -o ro sysfs {m}/sys",
            *_serial_mount(m, system_serial),
            # A /dev of its own: no disk of this machine is reachable from the node.
            f"mount -t tmpfs -o mode=755,nosuid tmpfs {m}/dev",
            *[f"mknod -m 666 {m}/dev/{name} c {major} {minor}" for name, major, minor in DEVICES],
            f"mkdir {m}/dev/pts {m}/dev/shm",
            f"mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts {m}/dev/pts",
            f"ln -s pts/ptmx {m}/dev/ptmx",
            f"mount -t tmpfs -o mode=1777 tmpfs {m}/dev/shm",
            f"ln -s /proc/self/fd {m}/dev/fd",
            *[
                f"ln -s /proc/self/fd/{i} {m}/dev/{n}"
                for i, n in enumerate(("stdin", "stdout", "stderr"))
            ],
            f"mount -t tmpfs -o mode=755 tmpfs {m}/run",
            f"mkdir -p {m}/run/sshd {m}/run/lock",
            f"mount -t tmpfs -o mode=1777 tmpfs {m}/tmp",
        ]
        for path in binds:
            inside = shlex.quote(f"{self.merged}{path}")
            lines += [f"mkdir -p {inside}", f"mount --bind {shlex.quote(str(path))} {inside}"]
        # No module loading and no reboot of this machine from inside a node.
        lines.append(
            "exec setpriv --bounding-set -sys_module,-sys_boot chroot " + m + " " + shlex.join(argv)
        )
        return [
            "ip",
            "netns",
            "exec",
            netns,
            "unshare",
            "--mount",
            "--uts",
            "--ipc",
            "--pid",
            "--fork",
            "--kill-child",
            "--propagation",
            "private",
            "/bin/sh",
            "-c",
            "\n".join(lines),
        ]


def first_process(starter_pid: int) -> int | None:
    """The node's first process (its sshd, PID 1 of its namespace): the child of unshare."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            status = (entry / "status").read_text()
            for line in status.splitlines():
                if line.startswith("PPid:") and int(line.split()[1]) == starter_pid:
                    return int(entry.name)
    return None
