"""The PCI tree from sysfs: which bridges lie between two devices.

/sys/bus/pci/devices/<address> is a link into /sys/devices, whose path is the device's
chain of upstream bridges:

    /sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:05:00.0
                  host bridge  root port   switch up    switch down  the GPU

Two devices under one PCIe switch (PIX/PXB in `nvidia-smi topo -m`) share the start of that
chain; the bridges below the last one they share are the switch ports a peer-to-peer
transfer between them enters, where ACS decides whether it goes across or up to the CPU
(drivers/pci/p2pdma.c walks the same bridges). Devices on different root ports share no
bridge: their traffic crosses the root complex anyway (PHB/NODE/SYS), and that is
topology.nic_affinity's finding, not ACS's.

Standard library only; the /sys root is a parameter so that tests read trees they write.
"""

from __future__ import annotations

import re
from pathlib import Path

PCI_ADDRESS = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
NVIDIA_VENDOR = "0x10de"
# PCI class codes of a GPU: VGA-compatible (0x0300) and 3D controller (0x0302), the class of
# every data-centre GPU (the sysfs `class` file holds class, subclass and prog-if: 0x030200).
GPU_CLASSES = ("0x0300", "0x0302")


def chain(sys_root: Path, address: str) -> list[str] | None:
    """The PCI addresses from the root port down to the device itself; None when sysfs does
    not know the device (or its link does not lead into a PCI hierarchy)."""
    link = sys_root / "bus" / "pci" / "devices" / address
    try:
        resolved = link.resolve(strict=True)
    except OSError:
        return None
    parts = [p for p in resolved.parts if PCI_ADDRESS.match(p)]
    return parts if parts and parts[-1] == address else None


def bridges_between(a: list[str], b: list[str]) -> list[str] | None:
    """The bridges below the deepest one two chains share (a's side, then b's); None when
    they share none (different root ports: no switch between them)."""
    shared = 0
    for x, y in zip(a[:-1], b[:-1], strict=False):
        if x != y:
            break
        shared += 1
    if shared == 0:
        return None
    return a[shared:-1] + b[shared:-1]


def nvidia_gpus(sys_root: Path) -> list[str]:
    """PCI addresses of the NVIDIA GPUs (display and 3D controllers), sorted: the order
    `nvidia-smi` numbers them in (by PCI bus id)."""
    root = sys_root / "bus" / "pci" / "devices"
    try:
        entries = sorted(p.name for p in root.iterdir())
    except OSError:
        return []
    found = []
    for name in entries:
        vendor = _read(root / name / "vendor")
        klass = _read(root / name / "class")
        if vendor == NVIDIA_VENDOR and klass is not None and klass.startswith(GPU_CLASSES):
            found.append(name)
    return found


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip().lower()
    except OSError:
        return None
