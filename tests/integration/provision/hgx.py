"""Simulated HGX hardware for rootfs nodes, and `bringup provision` run against them with
the local NVIDIA repositories.

A rootfs node's kernel view is files under bringup.sim.rootfs.KERNEL_ROOT, which the
roles read through `hardware_facts_kernel_root`: PCI devices (vendor, device, class, VPD)
as sysfs shows them, and the loaded modules. A boot hook "loads" the installed driver at
each simulated reboot, as a GPU node's kernel would.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bringup.sim import rootfs
from bringup.sim.cluster import SimCluster
from tests.integration.provision.aptrepo import Repos
from tests.support.provision import run_provision
from tests.support.timing import scaled

KERNEL = rootfs.KERNEL_ROOT.lstrip("/")

# PCI device IDs (NVIDIA 10de:xxxx; the management NIC Mellanox 15b3:1021, a ConnectX-7).
GPU_DEVICE = {"h100": "0x2330", "b200": "0x2901", "gb200": "0x2941"}
NVSWITCH_DEVICE = "0x22a3"  # HGX H100's NVSwitch, PCI class 0680 ("other bridge")

# The simulated driver loads at boot: the version of the installed nvidia-open.
BOOT_HOOK = f"""#!/bin/sh
# bringup test: the kernel loads the installed NVIDIA driver at boot.
version=$(dpkg-query -W -f '${{Version}}' nvidia-open 2>/dev/null) || exit 0
mkdir -p {rootfs.KERNEL_ROOT}/sys/module/nvidia
echo "${{version%-*}}" > {rootfs.KERNEL_ROOT}/sys/module/nvidia/version
"""


# At each simulated boot the node's simulated NVML (bringup.sim.nvml) shows what the
# booted node runs: the installed driver's version, and persistence mode as
# nvidia-persistenced's unit gives it (enabled, and run with --persistence-mode).
NVML_BOOT_HOOK = """#!/usr/bin/python3
import json, os, subprocess
STATE = {state!r}
UNIT = "/lib/systemd/system/nvidia-persistenced.service"
OVERRIDE = "/etc/systemd/system/nvidia-persistenced.service.d/override.conf"
ENABLED = "/etc/systemd/system/multi-user.target.wants/nvidia-persistenced.service"


def exec_start(path):
    if not os.path.exists(path):
        return None
    lines = open(path).read().splitlines()
    starts = [x.split("=", 1)[1] for x in lines if x.startswith("ExecStart=")]
    return starts[-1] if starts else None


state = json.load(open(STATE))
version = subprocess.run(
    ["dpkg-query", "-W", "-f", "${{Version}}", "nvidia-open"], capture_output=True, text=True
).stdout
if version:
    state["driver_version"] = version.rsplit("-", 1)[0]
command = exec_start(OVERRIDE) or exec_start(UNIT) or ""
on = os.path.islink(ENABLED) and " --persistence-mode" in command
for gpu in state["gpus"]:
    gpu["persistence_mode"] = int(on)
with open(STATE, "w") as f:
    json.dump(state, f, indent=1)
"""


def follow_nvml(cluster: SimCluster, node: str) -> None:
    """Make the node's simulated NVML follow what it boots (NVML_BOOT_HOOK)."""
    hook = cluster.root(node) / "etc/bringup-sim/boot.d/60-nvml"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(NVML_BOOT_HOOK.format(state=str(cluster.node(node).nvml_state)))
    hook.chmod(0o755)


def ssh(cluster: SimCluster, node: str, command: str) -> str:
    """Run a command on a node over SSH (as the controller does); its stdout."""
    argv = [
        "ssh",
        "-i",
        str(cluster.key_file),
        "-o",
        f"UserKnownHostsFile={cluster.known_hosts}",
        "-o",
        "BatchMode=yes",
        f"root@{cluster.node(node).address}",
        command,
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=scaled(120), check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _pci(root: Path, slot: str, vendor: str, device: str, pci_class: str, vpd: bytes = b"") -> None:
    path = root / KERNEL / "sys/bus/pci/devices" / slot
    path.mkdir(parents=True)
    (path / "vendor").write_text(f"{vendor}\n")
    (path / "device").write_text(f"{device}\n")
    (path / "class").write_text(f"{pci_class}\n")
    if vpd:
        (path / "vpd").write_bytes(vpd)


def plant(cluster: SimCluster, node: str, kind: str, gpus: int = 8) -> None:
    """Give a rootfs node the PCI bus of an HGX board (h100, b200) or a GB200 host."""
    root = cluster.root(node)
    for i in range(gpus):
        _pci(root, f"0000:{0x18 + i * 0x10:02x}:00.0", "0x10de", GPU_DEVICE[kind], "0x030200")
    if kind == "h100":
        for i in range(4):
            _pci(root, f"0000:{0xC5 + i:02x}:00.0", "0x10de", NVSWITCH_DEVICE, "0x068000")
    if kind == "b200":
        # The NVLink 5 switch tray's management NIC: "SW_MNG" in its VPD.
        vpd = b"\x82\x10NVIDIA ConnectX-7\x90\x12PN:SW_MNG_CX7_OSFP\x78"
        _pci(root, "0000:03:00.0", "0x15b3", "0x1021", "0x020700", vpd)
    hook = root / "etc/bringup-sim/boot.d/50-nvidia"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(BOOT_HOOK)
    hook.chmod(0o755)


# nvidia-ctk's `runtime configure` as it edits Docker's daemon.json (the real binary comes
# with the toolkit, whose packages are empty here).
NVIDIA_CTK = """#!/usr/bin/python3
import json, os, sys
args = sys.argv[1:]
if args[:2] != ["runtime", "configure"]:
    sys.exit(0)
path = "/etc/docker/daemon.json"
doc = json.load(open(path)) if os.path.exists(path) else {}
doc.setdefault("runtimes", {})["nvidia"] = {"args": [], "path": "nvidia-container-runtime"}
if "--set-as-default" in args:
    doc["default-runtime"] = "nvidia"
os.makedirs("/etc/docker", exist_ok=True)
with open(path, "w") as f:
    json.dump(doc, f, indent=4)
"""


def nvidia_documented_apt_setup(cluster: SimCluster, node: str, repos: Repos) -> None:
    """The node as NVIDIA's install guides leave it: cuda-keyring installed (its .list and
    keyring), the toolkit's key dearmored in /usr/share/keyrings and its .list."""
    root = cluster.root(node)
    keyring = (repos.root / repos.cuda_path / "cuda-keyring_1.1-1_all.deb").read_bytes()
    (root / "tmp/cuda-keyring.deb").write_bytes(keyring)
    ssh(cluster, node, "dpkg -i /tmp/cuda-keyring.deb")
    armored = (repos.root / "libnvidia-container/gpgkey").read_text()
    binary = subprocess.run(
        ["gpg", "--dearmor"], input=armored.encode(), capture_output=True, check=True
    ).stdout
    (root / "usr/share/keyrings/nvidia-container-toolkit-keyring.gpg").write_bytes(binary)
    (root / "etc/apt/sources.list.d/nvidia-container-toolkit.list").write_text(
        "deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
        f"{repos.url}/libnvidia-container/stable/deb/$(ARCH) /\n"
    )


NCCL_TESTS_MAKEFILE = (
    "# bringup test: stands in for nccl-tests' build.\n"
    "all:\n"
    "\tmkdir -p build\n"
    "\tfor t in all_reduce all_gather; do \\\n"
    "\t  printf '#!/bin/sh\\necho %s\\n' $$t > build/$${t}_perf; \\\n"
    "\t  chmod +x build/$${t}_perf; \\\n"
    "\tdone\n"
    "clean:\n"
    "\trm -rf build\n"
)

PYXIS_MAKEFILE = (
    "# bringup test: stands in for pyxis' build and install.\n"
    "install:\n"
    "\tmkdir -p /usr/local/lib/slurm\n"
    "\ttouch /usr/local/lib/slurm/spank_pyxis.so\n"
)


def fake_git_repo(
    cluster: SimCluster, node: str, tmp: Path, name: str, tag: str, makefile: str
) -> str:
    """A git repository at the tag a role builds, with this Makefile, put in the node as
    /srv/<name>.git; its URL returned (the roles clone it as they clone GitHub's)."""
    repo = tmp / name
    repo.mkdir(parents=True)
    (repo / "Makefile").write_text(makefile)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "stand-in"], check=True)
    subprocess.run([*git, "tag", tag], check=True)
    bare = tmp / f"{name}.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    shutil.copytree(bare, cluster.root(node) / f"srv/{name}.git")
    shutil.rmtree(repo)
    shutil.rmtree(bare)
    return f"file:///srv/{name}.git"


def fake_nccl_tests(cluster: SimCluster, node: str, tmp: Path) -> str:
    """nccl-tests at the cuda role's tag, building stand-ins for its binaries."""
    return fake_git_repo(cluster, node, tmp, "nccl-tests", "v2.19.6", NCCL_TESTS_MAKEFILE)


def fake_pyxis(cluster: SimCluster, node: str, tmp: Path) -> str:
    """pyxis at the containers role's tag, installing a stand-in plugin."""
    return fake_git_repo(cluster, node, tmp, "pyxis", "v0.20.0", PYXIS_MAKEFILE)


def base_vars(repos: Repos) -> dict[str, Any]:
    """What every run on rootfs nodes sets: their kernel view, the local repositories,
    and what the image cannot have (this kernel's headers, Docker)."""
    return {
        "hardware_facts_kernel_root": rootfs.KERNEL_ROOT,
        "nvidia_repo_base_url": repos.cuda_base_url,
        "containers_toolkit_repo_url": f"{repos.url}/libnvidia-container/stable/deb/$(ARCH)",
        "containers_toolkit_key_url": repos.toolkit_key_url,
        "nvidia_driver_headers_packages": [],
        "containers_docker_packages": [],
        "containers_ngc_pull": False,
        "nvidia_driver_reboot_timeout_s": 120,
    }


@dataclass
class Run:
    """One `bringup provision --json` run."""

    code: int
    doc: dict[str, Any]
    stdout: str
    stderr: str
    out: Path

    def node(self, name: str = "node01") -> dict[str, Any]:
        return self.doc["data"]["hosts"][name]

    def tasks(self, name: str = "node01") -> list[dict[str, Any]]:
        lines = (self.out / "raw" / name / "provision" / "tasks.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]

    def finding(self, name: str = "node01") -> dict[str, Any]:
        return next(f for f in self.doc["findings"] if f["node"] == name)

    def explain(self) -> str:
        """What to print when an assertion on the run fails."""
        failed = (
            [t for t in self.tasks() if t["status"] in ("failed", "ignored")]
            if (self.out / "raw").exists()
            else []
        )
        return (
            json.dumps({"node": self.doc.get("nodes"), "failed": failed}, indent=1)[-4000:]
            + (self.stderr[-2000:])
        )


def provision(
    cluster: SimCluster,
    repos: Repos,
    out: Path,
    *args: str,
    extra: dict[str, Any] | None = None,
) -> Run:
    """`bringup provision --nodes <cluster> --json --out OUT ARGS -e ...` as a user runs it."""
    values = base_vars(repos) | (extra or {})
    pairs = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in values.items()]
    argv = ["--nodes", str(cluster.inventory), "--json", "--out", str(out), *args]
    for pair in pairs:
        argv += ["-e", pair]
    result = run_provision(*argv, timeout=1200)
    try:
        doc = json.loads(result.stdout)
    except json.JSONDecodeError:
        doc = {}
    return Run(result.returncode, doc, result.stdout, result.stderr, out)


def dpkg(cluster: SimCluster, node: str = "node01") -> dict[str, tuple[str, str]]:
    """The node's packages: name -> (dpkg status abbreviation, version)."""
    root = cluster.root(node)
    proc = subprocess.run(
        [
            "dpkg-query",
            f"--admindir={root}/var/lib/dpkg",
            "-W",
            "-f",
            "${db:Status-Abbrev}\t${Package}\t${Version}\n",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    result = {}
    for line in proc.stdout.splitlines():
        status, name, version = line.split("\t")
        if status[1:2] == "i":  # installed (ii, hi)
            result[name] = (status.strip(), version)
    return result


def kernel_log(cluster: SimCluster, node: str = "node01") -> list[str]:
    """What the node asked of its kernel (reboots, module loads), without timestamps."""
    path = cluster.root(node) / rootfs.KERNEL_LOG.lstrip("/")
    if not path.exists():
        return []
    return [line.split(" ", 1)[1] for line in path.read_text().splitlines()]
