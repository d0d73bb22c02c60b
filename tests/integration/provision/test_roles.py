"""The roles for real, against the local NVIDIA repositories, on simulated nodes with
their own root filesystem: apt resolves, pins, holds and replaces packages itself.

Each test names the issue items it covers (the Fabric Manager names per branch, NVLink 5
prerequisites, persistence mode, apt sources, versions and holds, NCCL, nccl-tests,
fabric detection, check mode).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.provision.conftest import needs_rootfs
from tests.integration.provision.hgx import dpkg, kernel_log, plant, provision
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
