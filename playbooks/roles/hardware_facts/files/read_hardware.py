#!/usr/bin/env python3
"""What the roles need to know of a node's hardware and kernel, as one JSON document.

Read from sysfs and procfs only (no lspci, no loaded driver needed): the PCI bus is
there before any driver, so a bare node is read the same as a provisioned one.

    python3 read_hardware.py [KERNEL_ROOT]

KERNEL_ROOT (default "") is prefixed to /sys and /proc: the simulated nodes of the
tests keep their kernel view as files under another root.
"""

import glob
import json
import os
import sys

NVIDIA = "0x10de"
MELLANOX = "0x15b3"
WATCHED_MODULES = ("nvidia", "nouveau", "ib_umad", "mlx5_core")


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def text(path):
    data = read(path)
    return None if data is None else data.decode(errors="replace").strip()


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else ""
    devices = []
    nvlink5_management = []
    for dev in sorted(glob.glob(f"{root}/sys/bus/pci/devices/*")):
        vendor = text(f"{dev}/vendor")
        if vendor == NVIDIA:
            pci_class = (text(f"{dev}/class") or "0x000000")[2:6]
            device = (text(f"{dev}/device") or "0x0000")[2:]
            # "<slot> <class>: <vendor>:<device>", as `lspci -n -D -d 10de:` prints it.
            devices.append(f"{os.path.basename(dev)} {pci_class}: 10de:{device}")
        elif vendor == MELLANOX and b"SW_MNG" in (read(f"{dev}/vpd") or b""):
            # The NVLink 5 switch tray's management NIC: NVIDIA's driver container tells
            # an NVLink 5 system by this VPD keyword (it reads it through
            # /sys/class/infiniband/*/device/vpd, the same PCI file).
            nvlink5_management.append(os.path.basename(dev))
    nvswitch_dir = f"{root}/proc/driver/nvidia-nvswitch/devices"
    try:
        nvswitch_devices = sorted(os.listdir(nvswitch_dir))
    except OSError:
        nvswitch_devices = []
    loaded = sorted(os.listdir(f"{root}/sys/module")) if os.path.isdir(f"{root}/sys/module") else []
    print(
        json.dumps(
            {
                "pci": devices,
                "nvswitch_devices": nvswitch_devices,
                "nvlink5_management": nvlink5_management,
                "nvidia_loaded_version": text(f"{root}/sys/module/nvidia/version") or "",
                "modules": [m for m in loaded if m in WATCHED_MODULES],
            }
        )
    )


main()
