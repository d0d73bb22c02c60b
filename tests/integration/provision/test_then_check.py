"""The provisioned state is what `bringup check` expects: provision a rootfs node against
the local NVIDIA repositories, let its simulated NVML show what it boots (driver version,
persistence mode from nvidia-persistenced's unit), then run `bringup check` on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.provision.conftest import needs_rootfs
from tests.integration.provision.hgx import (
    dpkg,
    fake_nccl_tests,
    follow_nvml,
    plant,
    provision,
    ssh,
)
from tests.support.cluster import run_check
from tests.support.provision import needs_ansible

pytestmark = [pytest.mark.provision, needs_ansible, needs_rootfs]


def test_check_after_provision_finds_persistence_on_and_the_branch_installed(
    make_rootfs_cluster, serve_repos, tmp_path: Path
) -> None:
    cluster = make_rootfs_cluster(1, nvml=None)
    if cluster.nvml_library is None:
        pytest.skip(f"simulated NVML: {cluster.nvml_why_not}")
    repos = serve_repos(cluster)
    plant(cluster, "node01", "b200")
    follow_nvml(cluster, "node01")
    # Before: an R570 driver loaded, persistence off (the packaged unit's default).
    state_file = cluster.node("node01").nvml_state
    state = json.loads(state_file.read_text())
    state["driver_version"] = "570.172.08"
    for gpu in state["gpus"]:
        gpu["persistence_mode"] = 0
    state_file.write_text(json.dumps(state))
    before = run_check(cluster.inventory, "--suite", "quick", profile=cluster.profile_path)
    assert before.statuses("node01")["gpu.persistence"] == "WARN"
    assert before.statuses("node01")["gpu.driver"] == "FAIL"

    run = provision(
        cluster,
        repos,
        tmp_path / "provision",
        "--tags",
        "nvidia_driver,fabric_manager,cuda",
        extra={"cuda_nccl_tests_git_url": fake_nccl_tests(cluster, "node01", tmp_path)},
    )
    assert run.code == 0, run.explain()
    after = run_check(cluster.inventory, "--suite", "quick", profile=cluster.profile_path)
    statuses = after.statuses("node01")
    assert statuses["gpu.persistence"] == "PASS", after.messages("node01", "gpu.persistence")
    assert statuses["gpu.driver"] == "PASS", after.messages("node01", "gpu.driver")
    installed = dpkg(cluster)["nvidia-open"][1]
    assert json.loads(state_file.read_text())["driver_version"] == installed.rsplit("-", 1)[0]
    # Fabric Manager of that driver, enabled; nccl-tests where the nccl probe looks (PATH).
    assert dpkg(cluster)["nvidia-fabricmanager"][1] == installed
    root = cluster.root("node01")
    wants = root / "etc/systemd/system/multi-user.target.wants"
    assert (wants / "nvidia-fabricmanager.service").is_symlink()
    assert (
        ssh(cluster, "node01", "command -v all_reduce_perf").strip()
        == "/usr/local/bin/all_reduce_perf"
    )
