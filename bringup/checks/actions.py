"""What to do about each check's problems: one action per check, and per probe that could not run.

A check's own finding usually carries a precise action ("reset GPU 3 (`nvidia-smi -r -i 3`)");
where it does not (an ERROR deep in a judge, a new branch), `CHECK_ACTIONS` gives the
check's general one, so no WARN, FAIL or ERROR reaches a report without an action. Every
action names the command or option to run. A test (tests/unit/test_actions.py) walks every
check of the catalog and fails when one has no action here or a generic one: a new check
adds its line.

GPU findings then name the part: `name_the_gpu` adds the serial to "GPU 3" (an RMA asks
for the serial, the index changes when a GPU is missing).
"""

from __future__ import annotations

import re
from dataclasses import replace

from bringup.findings import Finding, Status
from bringup.node.gpu_facts import GpuFacts

_DIAGNOSE = "`bringup diagnose --nodes hosts.ini` shows the throttling reasons under load"
_NVLINK = (
    "check the links (`nvidia-smi nvlink -s`, `nvidia-smi nvlink -e`) and Fabric Manager "
    "(`systemctl status nvidia-fabricmanager`); reseat the baseboard, RMA if it persists"
)
_DATA_DIR = (
    "measure the NVMe data disk, not /tmp: `bringup check --data-dir /path/on/nvme`; "
    "check the drive (`nvme smart-log /dev/nvmeX`) and the RAID (`cat /proc/mdstat`)"
)

CHECK_ACTIONS: dict[str, str] = {
    "gpu.count": (
        "compare `nvidia-smi -L` with the order: a missing GPU shows Xid 79 in `dmesg` "
        "(reseat or RMA it); for other hardware choose its profile with `--profile`"
    ),
    "gpu.model": (
        "compare `nvidia-smi -L` with the order; if the node is right, give its profile "
        "with `--profile` (`bringup profiles list`)"
    ),
    "gpu.driver": (
        "install the driver the profile names: `bringup provision --nodes hosts.ini`, "
        "reboot, then `bringup check` again"
    ),
    "gpu.persistence": "enable persistence mode: `nvidia-smi -pm 1` or nvidia-persistenced",
    "gpu.ecc": (
        "enable ECC (`nvidia-smi -i <index> -e 1`, then reset); after uncorrected errors reset "
        "the GPU (`nvidia-smi -r -i <index>`) and RMA it if they recur"
    ),
    "gpu.remapped_rows": (
        "reset the GPU (`nvidia-smi -r -i <index>`) to apply a pending remap; "
        "a remap failure is an RMA"
    ),
    "gpu.pcie": (
        "reseat the GPU, check the riser and the BIOS PCIe speed; `nvidia-smi -q -d PCI` "
        "shows the link width and generation"
    ),
    "gpu.power": (
        "restore the default power limit: `nvidia-smi -i <index> -pl <default W>` "
        "(`nvidia-smi -q -d POWER` shows both)"
    ),
    "gpu.thermal": (
        "check airflow, cold plate and coolant; `nvidia-smi -q -d TEMPERATURE` shows the margins"
    ),
    "gpu.clock_events": f"read `nvidia-smi -q -d PERFORMANCE` for the active reason; {_DIAGNOSE}",
    "gpu.nvlink": _NVLINK,
    "gpu.fabric": (
        "read `systemctl status nvidia-fabricmanager` and /var/log/fabricmanager.log; "
        "restart it (`systemctl restart nvidia-fabricmanager`), then `bringup check` again"
    ),
    "gpu.imex": (
        "read `systemctl status nvidia-imex`, `nvidia-imex-ctl -N` and /var/log/nvidia-imex.log; "
        "restart it on every tray of the domain (`systemctl restart nvidia-imex`), then "
        "`bringup check` again"
    ),
    "topology.gpu_count": (
        "compare `nvidia-smi topo -m` with `nvidia-smi -L`; a GPU missing from both is a "
        "gpu.count fault (Xid 79, reseat or RMA)"
    ),
    "topology.nvlink": f"`nvidia-smi topo -m` must show NV# between every pair: {_NVLINK}",
    "topology.nic_affinity": (
        "give each GPU a NIC on its PCIe switch (`nvidia-smi topo -m` shows PIX/PXB), "
        "or pin NCCL to the near NICs with `NCCL_IB_HCA`"
    ),
    "host.cpu_governor": (
        "set the governor: `cpupower frequency-set -g performance`, and keep it in the "
        "provisioning (`bringup provision`)"
    ),
    "host.memlock": (
        "raise the memlock limit: `* - memlock unlimited` in /etc/security/limits.conf "
        "(LimitMEMLOCK=infinity for services), then log in again"
    ),
    "host.free_space": (
        "free space on the path, or judge the real data disk: "
        "`bringup check --data-dir /path/on/nvme` (the default path is /tmp)"
    ),
    "host.iommu": "add `iommu=pt` to GRUB_CMDLINE_LINUX, run `update-grub` and reboot",
    "host.ib_ports": (
        "`ibstat` shows each port: check the cable and the switch port, and that a subnet "
        "manager runs (`sminfo`)"
    ),
    "fabric.ports": (
        "`ibstat` and `mlxlink -d DEVICE` show the port: reseat or replace the cable or "
        "transceiver, check the switch port, and that a subnet manager runs (`sminfo`)"
    ),
    "fabric.counters": (
        "reseat or replace the cable/transceiver of the port named (`mlxlink -d DEVICE "
        "--show_ber_monitor`), clear the counters (`perfquery -x -R`) and measure again"
    ),
    "fabric.link_flaps": (
        "reseat or replace the cable/transceiver of the rail named and check its switch "
        "port; `journalctl -k | grep mlx5_core` lists each link event"
    ),
    "fabric.gpudirect": (
        "`modprobe nvidia_peermem` and add it to /etc/modules-load.d/, or use NVIDIA's open "
        "kernel modules on Linux 5.12+ (DMA-BUF)"
    ),
    "fabric.acs": (
        "disable ACS on the switch ports between each GPU and its NIC: in the BIOS (ACS, or "
        "IO virtualization / VT-d), or `setpci -s BRIDGE ECAP_ACS+0x6.w=0000` as root after "
        "every boot; `sudo lspci -vvv | grep ACSCtl` shows the bits"
    ),
    "fabric.write_bw": (
        "check the rail's link (`ibstat`, `mlxlink -d DEVICE`) and PCIe link (`lspci -vv`), "
        "and rerun `ib_write_bw -s 8388608 --report_gbits` between two nodes"
    ),
    "ibperf.runs": (
        "install perftest on both nodes (`bringup provision --tags node_tools`) and let them "
        "reach each other on TCP 18515 and up"
    ),
    "nvme.seq_read": _DATA_DIR,
    "nvme.seq_write": _DATA_DIR,
    "nvme.checkpoint": _DATA_DIR,
    "nvme.concurrent_read": _DATA_DIR,
    "nvme.rand_read": _DATA_DIR,
    "storage.separate_devices": (
        "put datasets and checkpoints on different devices and give them with "
        "`--dataset-dir` and `--checkpoint-dir`"
    ),
    "storage.checkpoint_durable": (
        "write checkpoints to a disk that survives a reboot (not tmpfs): "
        "`bringup check --checkpoint-dir /path/on/disk`"
    ),
    "storage.checkpoint_writable": (
        "let the training user write the checkpoint directory (`chown`/`chmod`), or name "
        "the user and directory with `--training-user` and `--checkpoint-dir`"
    ),
    "uplink.throughput": (
        "check the route and NIC to the endpoint (`ip route get ADDRESS`, `ethtool IFACE`); "
        "give the endpoint with `bringup check --uplink URL`"
    ),
    "xid.events": (
        "read the Xid in `dmesg` against NVIDIA's XID catalogue; reset the GPU it names "
        "(`nvidia-smi -r -i <index>`)"
    ),
    "xid.sxid": (
        "read /var/log/fabricmanager.log and `nvidia-smi nvlink -e`; reboot the node after a "
        "fatal SXid, RMA the baseboard if it repeats"
    ),
    "dcgm.diag": (
        "read the failing test's message: its cause (thermal, power, memory, NVLink, PCIe, "
        "DCGM itself) says what to fix first; then rerun `dcgmi diag -r 3` on the node and "
        "RMA the GPU it names only if a hardware fault persists"
    ),
    "nccl.allreduce_busbw": (
        "rerun `bringup nccl --nodes hosts.ini --env NCCL_DEBUG=INFO` and read the same node's "
        "NVLink, NIC and topology findings"
    ),
    "fio.jobs": _DATA_DIR,
    "gemm.tflops": f"read gpu.power and gpu.clock_events of the same GPU; {_DIAGNOSE}",
    "gemm.hbm": (
        "run `dcgmi diag -r 3` on the slow GPU; reset it (`nvidia-smi -r -i <index>`), "
        "RMA it if it stays slow"
    ),
    "gemm.diagnosis": f"follow the diagnosis: {_DIAGNOSE}",
    "telemetry.diagnosis": f"follow the diagnosis: {_DIAGNOSE}",
    "p2p.bandwidth": (
        "check the slow pair's path (`nvidia-smi topo -m`, `nvidia-smi nvlink -s`); reset "
        "both GPUs, reseat the baseboard if it persists"
    ),
    "burnin.run": (
        "read `raw/<node>/burnin/` for the trainer's log, then `bringup burnin --recipe tiny` "
        "to see it start"
    ),
    "burnin.loss": ("rerun `bringup burnin`; NaN on one node only: `dcgmi diag -r 3` on its GPUs"),
    "burnin.checkpoint": (
        "rerun `bringup burnin`; if restore still differs, check the checkpoint disk "
        "(`nvme smart-log`) and GPU memory (`dcgmi diag -r 3`)"
    ),
    "burnin.mfu": f"read this node's gpu.power and gpu.clock_events findings; {_DIAGNOSE}",
    "burnin.straggler": (
        "check the slow rank's GPU: `nvidia-smi -q -d PERFORMANCE,POWER`, then `dcgmi diag -r 3`"
    ),
    "burnin.throttle": (
        "thermal: check airflow; power: restore the limit (`nvidia-smi -pl <default W>`); "
        f"{_DIAGNOSE}"
    ),
}

# A probe that could not run: what its ERROR lines say to do (docs/troubleshooting.md).
_NO_DRIVER = (
    "install the NVIDIA driver (`bringup provision --nodes hosts.ini`), or run inside the "
    "container that has it: `nvidia-smi` must work as this user"
)
PROBE_ACTIONS: dict[str, str] = {
    "gpu": _NO_DRIVER,
    "topology": _NO_DRIVER,
    "host": "read `raw/<node>/host/`: /proc and /sys must be readable (not Linux?)",
    "fabric": "read `raw/<node>/fabric/`: /sys/class/infiniband and /proc must be readable",
    "nvme": "install fio (`apt-get install fio`) and give the data disk with `--data-dir`",
    "storage": "give existing paths with `--dataset-dir` and `--checkpoint-dir`",
    "uplink": "give a reachable endpoint with `bringup check --uplink URL`",
    "xid": "run as root (or in the adm/systemd-journal group): `dmesg` must be readable",
    "dcgm": (
        "install DCGM (the datacenter-gpu-manager package) and start nv-hostengine; "
        "`dcgmi discovery -l` must list the GPUs"
    ),
    "nccl": "install nccl-tests or torch on the node; `bringup nccl --help` lists the engines",
    "ibperf": (
        "install perftest (`bringup provision --nodes hosts.ini --tags node_tools`); the "
        "partner node must be up and reachable"
    ),
    "fio": "install fio (`apt-get install fio`) and give the data disk with `--data-dir`",
    "gemm": "install torch with CUDA on the node; `python3 -c 'import torch'` must work",
    "p2p": "install torch with CUDA on the node; `python3 -c 'import torch'` must work",
    "telemetry": _NO_DRIVER,
    "burnin": "read `raw/<node>/burnin/`; `bringup burnin --recipe tiny` shows it start",
}
TIMED_OUT = (
    "raise `timeout_s` of that step in a copy of the suite (`--suite FILE`), or read "
    "`raw/<node>/<probe>/`"
)
CRASHED = "a bug in bringup (the other probes still ran): report it with `facts/<node>.json`"
NO_DRIVER_TEXT = "no NVIDIA driver"


def unmeasured_action(probe: str, error: str) -> str:
    """The action of the ERROR every check of a probe gets when the probe could not run."""
    if NO_DRIVER_TEXT in error:
        return _NO_DRIVER
    if "timed out" in error or "did not finish" in error:
        return TIMED_OUT.replace("<probe>", probe)
    if "crashed" in error:
        return CRASHED
    return PROBE_ACTIONS.get(probe, f"read `raw/<node>/{probe}/` and rerun `bringup check`")


def with_action(found: Finding, action: str) -> Finding:
    """The finding with `action` where it needs one and has none (PASS and SKIP do not)."""
    if found.action or found.status in (Status.PASS, Status.SKIP):
        return found
    return replace(found, action=action)


_ONE_GPU = re.compile(r"^GPU (?P<index>[0-9]+)\b(?![,0-9])")


def name_the_gpu(found: Finding, gpus: GpuFacts | None) -> Finding:
    """A gpu finding about one GPU ("GPU 3: ...") with that GPU's serial in its action.

    The action gets "GPU 3 (serial X)" where it names GPU 3, else the prefix "GPU 3 (serial
    X): ". Nothing changes when the serial is unknown or the action already has it.
    """
    match = _ONE_GPU.match(found.message)
    if gpus is None or match is None or not found.action or "serial" in found.action:
        return found
    index = int(match.group("index"))
    gpu = next((g for g in gpus.gpus if g.index == index), None)
    if gpu is None or not gpu.serial:
        return found
    label = f"GPU {index} (serial {gpu.serial})"
    # A function, not a template: the serial is the node's text, and "\\A" in it is no escape.
    named, count = re.subn(rf"\bGPU {index}\b(?![,0-9])", lambda _: label, found.action, count=1)
    return replace(found, action=named if count else f"{label}: {found.action}")
