"""The roles for real, against the local NVIDIA repositories, on simulated nodes with
their own root filesystem: apt resolves, pins, holds and replaces packages itself.

Each test names the issue items it covers (the Fabric Manager names per branch, NVLink 5
prerequisites, persistence mode, apt sources, versions and holds, NCCL, nccl-tests,
fabric detection, check mode).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.provision.conftest import needs_rootfs
from tests.integration.provision.hgx import (
    NVIDIA_CTK,
    dpkg,
    fake_git_repo,
    fake_nccl_tests,
    fake_pyxis,
    kernel_log,
    nvidia_documented_apt_setup,
    plant,
    provision,
    ssh,
)
from tests.support.provision import needs_ansible

pytestmark = [pytest.mark.provision, needs_ansible, needs_rootfs]

DRIVER = "nvidia_driver,fabric_manager"


def _held(packages: dict[str, tuple[str, str]]) -> set[str]:
    return {name for name, (status, _) in packages.items() if status.startswith("h")}


def test_b200_branch_575_then_580_then_nothing_to_do(
    make_rootfs_cluster, serve_repos, tmp_path: Path
) -> None:
    """NVLink 5 HGX, branch 575 then 580 through -e: Fabric Manager's names follow the
    branch (suffixed below 580), ib_umad is loaded and persisted, persistence mode is on,
    only the driver's own packages are held, the node reboots once per driver change and
    a rerun changes nothing."""
    cluster = make_rootfs_cluster(1)
    repos = serve_repos(cluster)
    plant(cluster, "node01", "b200")
    root = cluster.root("node01")

    first = provision(
        cluster, repos, tmp_path / "r575", "--tags", DRIVER, extra={"nvidia_driver_branch": "575"}
    )
    assert first.code == 0, first.explain()
    packages = dpkg(cluster)
    assert packages["nvidia-open"][1] == "575.57.08-1"
    assert packages["nvidia-fabricmanager-575"][1] == "575.57.08-1"
    assert packages["libnvidia-nscq-575"][1] == "575.57.08-1"
    assert packages["libnvsdm-575"][1] == "575.57.08-1"
    assert "nvlsm" in packages
    assert "nvidia-fabricmanager" not in packages
    # NVLink 5: ib_umad loaded now and at every boot.
    assert (root / "etc/modules-load.d/bringup-nvlink5.conf").read_text().splitlines()[
        -1
    ] == "ib_umad"
    # Persistence mode: NVIDIA's override, the unit enabled.
    override = (root / "etc/systemd/system/nvidia-persistenced.service.d/override.conf").read_text()
    assert (
        "ExecStart=/usr/bin/nvidia-persistenced --user root --persistence-mode --verbose"
        in override
    )
    wants = root / "etc/systemd/system/multi-user.target.wants"
    assert (wants / "nvidia-persistenced.service").is_symlink()
    assert (wants / "nvidia-fabricmanager.service").is_symlink()
    # Holds: the driver's packages and its lock, nothing else.
    assert _held(packages) == {
        "nvidia-open",
        "nvidia-kernel-open-dkms",
        "nvidia-driver-cuda",
        "nvidia-persistenced",
        "nvidia-driver-pinning-575",
        "nvidia-fabricmanager-575",
        "libnvidia-nscq-575",
        "libnvsdm-575",
    }
    assert kernel_log(cluster)[:3] == [
        "update-initramfs -u",
        "shutdown -r 0 bringup nvidia_driver role - new NVIDIA driver installed",
        "booted",
    ]

    second = provision(
        cluster, repos, tmp_path / "r580", "--tags", DRIVER, extra={"nvidia_driver_branch": "580"}
    )
    assert second.code == 0, second.explain()
    packages = dpkg(cluster)
    assert packages["nvidia-open"][1] == "580.126.20-1"  # the newest of the branch
    assert packages["nvidia-fabricmanager"][1] == "580.126.20-1"
    assert packages["libnvidia-nscq"][1] == "580.126.20-1"
    assert packages["libnvsdm"][1] == "580.126.20-1"
    assert not {"nvidia-fabricmanager-575", "nvidia-driver-pinning-575"} & set(packages)
    assert "nvidia-driver-pinning-580" in _held(packages)
    assert kernel_log(cluster).count("booted") == 2

    third = provision(
        cluster, repos, tmp_path / "again", "--tags", DRIVER, extra={"nvidia_driver_branch": "580"}
    )
    assert third.code == 0, third.explain()
    assert third.node()["changed"] == 0, [t for t in third.tasks() if t["status"] == "changed"]
    assert kernel_log(cluster).count("booted") == 2


def test_check_mode_fails_on_a_package_name_the_repository_lacks_and_names_it(
    make_rootfs_cluster, serve_repos, tmp_path: Path
) -> None:
    """--check on a bare node resolves every install against the repositories the play
    would add: with Fabric Manager's suffix kept for branch 580 (what the role did), the
    check FAILs naming nvidia-fabricmanager-580; with NVIDIA's names it passes. Nothing
    on the node changes."""
    cluster = make_rootfs_cluster(1)
    repos = serve_repos(cluster)
    plant(cluster, "node01", "b200")
    before = dpkg(cluster)
    wrong = provision(
        cluster,
        repos,
        tmp_path / "wrong",
        "--check",
        "--tags",
        DRIVER,
        extra={"fabric_manager_unsuffixed_from": "590"},
    )
    assert wrong.code == 1, wrong.explain()
    finding = wrong.finding()
    assert finding["status"] == "FAIL"
    assert "E: Unable to locate package nvidia-fabricmanager-580" in finding["message"]
    assert wrong.node()["failed_task"].startswith("nvidia_repo : Resolve against the repositories")

    right = provision(cluster, repos, tmp_path / "right", "--check", "--tags", DRIVER)
    assert right.code == 0, right.explain()
    assert right.finding()["status"] == "PASS"
    resolved = [t for t in right.tasks() if t["task"].startswith("nvidia_repo : Resolve")]
    assert len(resolved) == 2  # the driver (lock, then packages) and Fabric Manager
    assert dpkg(cluster) == before
    assert not (
        cluster.root("node01") / "etc/apt/sources.list.d/cuda-debian12-x86_64.list"
    ).exists()


OLD_CUDA_SOURCE = """Types: deb
URIs: {url}/
Suites: /
Signed-By: /etc/apt/keyrings/nvidia-cuda.asc
"""


def test_a_node_set_up_as_nvidia_documents_provisions_without_an_apt_error(
    make_rootfs_cluster, serve_repos, tmp_path: Path
) -> None:
    """cuda-keyring's .list and the toolkit's .list are already there: the roles reuse
    them. A second entry with another Signed-By (what the roles used to write) makes
    Debian's apt refuse every operation."""
    cluster = make_rootfs_cluster(2)
    repos = serve_repos(cluster)
    for node in ("node01", "node02"):
        plant(cluster, node, "b200")
        nvidia_documented_apt_setup(cluster, node, repos)
    # What the nvidia_repo role used to add next to it: apt itself refuses.
    old = cluster.root("node02") / "etc/apt/sources.list.d/nvidia-cuda.sources"
    old.write_text(OLD_CUDA_SOURCE.format(url=repos.cuda_url))
    (cluster.root("node02") / "etc/apt/keyrings").mkdir(exist_ok=True)
    (cluster.root("node02") / "etc/apt/keyrings/nvidia-cuda.asc").write_bytes(
        (repos.root / repos.cuda_path / "3bf863cc.pub").read_bytes()
    )
    refused = ssh(cluster, "node02", "apt-get update 2>&1; echo rc=$?")
    assert "Conflicting values set for option Signed-By" in refused
    assert refused.strip().endswith("rc=100")

    sources = sorted(p.name for p in (cluster.root("node01") / "etc/apt/sources.list.d").iterdir())
    cluster.install_tool("node01", "nvidia-ctk", NVIDIA_CTK)
    run = provision(
        cluster,
        repos,
        tmp_path / "run",
        "--limit",
        "node01",
        "--tags",
        "nvidia_driver,containers",
        extra={
            "nvidia_driver_reboot": False,
            "containers_pyxis": True,
            "containers_pyxis_git_url": fake_pyxis(cluster, "node01", tmp_path),
        },
    )
    assert run.code == 0, run.explain()
    said = [t["task"] for t in run.tasks()]
    assert "nvidia_repo : Say which apt source of NVIDIA's CUDA repository is reused" in said
    assert "nvidia_repo : Say which apt source is reused" in said
    after = sorted(p.name for p in (cluster.root("node01") / "etc/apt/sources.list.d").iterdir())
    assert after == sources == ["cuda-debian12-x86_64.list", "nvidia-container-toolkit.list"]
    update = ssh(cluster, "node01", "apt-get update 2>&1")
    assert "Conflicting" not in update and "W:" not in update and "E:" not in update
    assert dpkg(cluster)["nvidia-container-toolkit"][1] == "1.20.0-1"
    # pyxis is registered where Slurm reads it: plugstack.conf includes plugstack.conf.d.
    slurm = cluster.root("node01") / "etc/slurm"
    assert (slurm / "plugstack.conf.d/pyxis.conf").read_text() == (
        "required /usr/local/lib/slurm/spank_pyxis.so\n"
    )
    assert (slurm / "plugstack.conf").read_text() == "include /etc/slurm/plugstack.conf.d/*\n"


def test_whole_site_versions_move_and_a_rerun_changes_nothing(
    make_rootfs_cluster, serve_repos, tmp_path: Path
) -> None:
    """Every role on a B200 node at driver 580.95.05, then 580.105.08, then again: the
    driver and Fabric Manager follow nvidia_driver_version, NCCL is the newest built for
    cuda_version (not the newest), nccl-tests is on PATH, the container toolkit is not
    held, `containers_nvidia_default_runtime=false` leaves Docker's default alone, DCGM
    is installed with its epoch."""
    cluster = make_rootfs_cluster(1)
    repos = serve_repos(cluster)
    plant(cluster, "node01", "b200")
    cluster.install_tool("node01", "nvidia-ctk", NVIDIA_CTK)
    extra = {
        "cuda_nccl_tests_git_url": fake_nccl_tests(cluster, "node01", tmp_path),
        "containers_nvidia_default_runtime": False,
        "dcgm_version": "4.4.1-1",  # DCGM 4's epoch is added: 1:4.4.1-1
    }
    root = cluster.root("node01")

    first = provision(
        cluster, repos, tmp_path / "r1", extra=extra | {"nvidia_driver_version": "580.95.05"}
    )
    assert first.code == 0, first.explain()
    packages = dpkg(cluster)
    assert packages["nvidia-open"][1] == "580.95.05-1"
    assert packages["nvidia-fabricmanager"][1] == "580.95.05-1"
    assert packages["libnccl2"][1] == "2.28.9-1+cuda13.0"  # not 2.30.7-1+cuda13.2
    assert packages["libnccl-dev"][1] == "2.28.9-1+cuda13.0"
    assert packages["cuda-toolkit-13-0"][1] == "13.0.2-1"
    assert packages["datacenter-gpu-manager-4-cuda13"] == ("hi", "1:4.4.1-1")
    assert packages["datacenter-gpu-manager-4-core"] == ("hi", "1:4.4.1-1")
    toolkit = ["nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container1"]
    assert {packages[name] for name in toolkit} == {("ii", "1.20.0-1")}
    link = root / "usr/local/bin/all_reduce_perf"
    assert link.is_symlink() and str(link.readlink()) == "/opt/nccl-tests/build/all_reduce_perf"
    assert ssh(cluster, "node01", "all_reduce_perf").strip() == "all_reduce"  # non-login PATH
    daemon = json.loads((root / "etc/docker/daemon.json").read_text())
    assert "nvidia" in daemon["runtimes"] and "default-runtime" not in daemon
    blacklist = (root / "etc/apt/apt.conf.d/51bringup-nvidia-driver").read_text()
    entries = [line.strip() for line in blacklist.splitlines() if line.strip().startswith('"')]
    assert '"^nvidia\\-open$";' in entries
    assert not [e for e in entries if "container" in e]

    second = provision(
        cluster, repos, tmp_path / "r2", extra=extra | {"nvidia_driver_version": "580.105.08"}
    )
    assert second.code == 0, second.explain()
    packages = dpkg(cluster)
    assert packages["nvidia-open"] == ("hi", "580.105.08-1")
    assert packages["nvidia-kernel-open-dkms"] == ("hi", "580.105.08-1")
    assert packages["nvidia-fabricmanager"] == ("hi", "580.105.08-1")
    assert packages["nvidia-driver-pinning-580.105.08"][0] == "hi"
    assert "nvidia-driver-pinning-580.95.05" not in packages
    assert kernel_log(cluster).count("booted") == 2

    third = provision(
        cluster, repos, tmp_path / "r3", extra=extra | {"nvidia_driver_version": "580.105.08"}
    )
    assert third.code == 0, third.explain()
    assert third.node()["changed"] == 0, [t for t in third.tasks() if t["status"] == "changed"]


def test_fabric_manager_goes_by_the_switches_not_the_gpu_name(
    make_rootfs_cluster, serve_repos, tmp_path: Path
) -> None:
    """A GB200 host (Blackwell GPUs, IMEX, no NVSwitch) gets no Fabric Manager; an HGX H100
    (NVSwitches on PCI) gets it without the NVLink 5 parts, also with
    nvidia_driver_reboot=false: pinned to the installed driver, enabled for the next boot,
    and no reboot."""
    cluster = make_rootfs_cluster(2)
    repos = serve_repos(cluster)
    plant(cluster, "node01", "gb200", gpus=4)
    plant(cluster, "node02", "h100")
    run = provision(
        cluster, repos, tmp_path / "run", "--tags", DRIVER, extra={"nvidia_driver_reboot": False}
    )
    assert run.code == 0, run.explain()
    gb200, h100 = dpkg(cluster, "node01"), dpkg(cluster, "node02")
    assert "nvidia-open" in gb200
    assert not [name for name in gb200 if "fabricmanager" in name or "nscq" in name]
    said = [t["task"] for t in run.tasks("node01") if t["status"] == "ok"]
    assert "fabric_manager : Say why Fabric Manager is not needed" in said
    assert h100["nvidia-fabricmanager"] == ("hi", h100["nvidia-open"][1])
    assert "libnvsdm" not in h100 and "nvlsm" not in h100
    assert not (cluster.root("node02") / "etc/modules-load.d/bringup-nvlink5.conf").exists()
    assert (
        cluster.root("node02")
        / "etc/systemd/system/multi-user.target.wants/nvidia-fabricmanager.service"
    ).is_symlink()
    assert kernel_log(cluster, "node02") == ["update-initramfs -u"]  # no reboot
    said = [t["task"] for t in run.tasks("node02") if t["status"] == "ok"]
    assert "nvidia_driver : Warn when the installed driver is not the loaded one" in said
    assert "fabric_manager : Say when Fabric Manager starts" in said

    # A rerun with reboots allowed: nothing to install, but the loaded driver is not the
    # installed one, so the node reboots now (a rerun used to never reboot).
    again = provision(cluster, repos, tmp_path / "again", "--limit", "node02", "--tags", DRIVER)
    assert again.code == 0, again.explain()
    assert kernel_log(cluster, "node02")[1:] == [
        "shutdown -r 0 bringup nvidia_driver role - new NVIDIA driver installed",
        "booted",
    ]
    loaded = cluster.root("node02") / "var/lib/bringup-sim/kernel/sys/module/nvidia/version"
    assert loaded.read_text().strip() + "-1" == h100["nvidia-open"][1]


def test_nccl_built_from_source_is_on_the_loader_path(
    make_rootfs_cluster, serve_repos, tmp_path: Path
) -> None:
    cluster = make_rootfs_cluster(1)
    repos = serve_repos(cluster)
    plant(cluster, "node01", "h100")
    makefile = (  # a stand-in libnccl.so.2, compiled on the node (the loader wants ELF)
        "src.build:\n\tmkdir -p build/lib\n"
        "\techo 'int nccl_stand_in;' > build/stand_in.c\n"
        "\tgcc -shared -fPIC -Wl,-soname,libnccl.so.2 -o build/lib/libnccl.so.2 build/stand_in.c\n"
        "clean:\n\trm -rf build\n"
    )
    run = provision(
        cluster,
        repos,
        tmp_path / "run",
        "--tags",
        "cuda",
        extra={
            "cuda_nccl_from_source": True,
            "cuda_nccl_git_url": fake_git_repo(
                cluster, "node01", tmp_path, "nccl", "v2.30.7-1", makefile
            ),
            "cuda_nccl_tests_git_url": fake_nccl_tests(cluster, "node01", tmp_path),
        },
    )
    assert run.code == 0, run.explain()
    root = cluster.root("node01")
    assert (root / "etc/ld.so.conf.d/bringup-nccl.conf").read_text().splitlines()[-1] == (
        "/opt/nccl/build/lib"
    )
    cache = ssh(cluster, "node01", "ldconfig -p | grep libnccl || true")
    assert "/opt/nccl/build/lib/libnccl.so.2" in cache
    assert "libnccl2" not in dpkg(cluster)
