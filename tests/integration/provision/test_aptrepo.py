"""The local NVIDIA repositories (tests/fixtures/apt): Debian's apt on a rootfs node
reads them through Signed-By, and resolves their names, epochs, dependencies and
conflicts as it would NVIDIA's."""

from __future__ import annotations

import pytest

from tests.integration.provision.conftest import needs_rootfs
from tests.integration.provision.hgx import ssh

pytestmark = [pytest.mark.provision, needs_rootfs]


def test_apt_on_a_node_verifies_and_resolves_the_local_repositories(
    make_rootfs_cluster, serve_repos
) -> None:
    cluster = make_rootfs_cluster(1)
    repos = serve_repos(cluster)
    # NVIDIA's documented setup: cuda-keyring's .list and key, the toolkit's .list.
    root = cluster.root("node01")
    keyring = root / "usr/share/keyrings/nvidia-container-toolkit-keyring.asc"
    keyring.write_bytes((repos.root / "libnvidia-container/gpgkey").read_bytes())
    sources = root / "etc/apt/sources.list.d"
    sources.joinpath("nvidia-container-toolkit.list").write_text(
        f"deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.asc] "
        f"{repos.url}/libnvidia-container/stable/deb/$(ARCH) /\n"
    )
    keyring_deb = (repos.root / repos.cuda_path / "cuda-keyring_1.1-1_all.deb").read_bytes()
    (root / "tmp/cuda-keyring.deb").write_bytes(keyring_deb)
    ssh(cluster, "node01", "dpkg -i /tmp/cuda-keyring.deb")
    ssh(
        cluster,
        "node01",
        "apt-get update -q 2>&1 | tee /tmp/update.log; ! grep -E '^(W|E):' /tmp/update.log",
    )
    policy = ssh(
        cluster,
        "node01",
        "apt-cache madison nvidia-open datacenter-gpu-manager-4-cuda13 nvidia-container-toolkit",
    )
    listed = {tuple(x.strip() for x in line.split("|")[:2]) for line in policy.splitlines()}
    assert ("nvidia-open", "590.48.01-1") in listed
    assert ("nvidia-open", "570.172.08-1") in listed
    assert ("datacenter-gpu-manager-4-cuda13", "1:4.4.2-1") in listed
    assert ("nvidia-container-toolkit", "1.20.0-1") in listed
    # Without the version lock, a versioned metapackage does not install: its exact
    # dependencies are not the candidates (apt's own answer, as with NVIDIA's packages).
    out = ssh(cluster, "node01", "apt-get install -s nvidia-open=580.95.05-1 2>&1 || true")
    assert "nvidia-kernel-open-dkms : Depends: dkms" not in out
    assert "but 590.48.01-1 is to be installed" in out
    # With it, everything resolves, against the image's Debian packages too (dkms, lshw).
    install = "DEBIAN_FRONTEND=noninteractive apt-get install -y -q"
    ssh(cluster, "node01", f"{install} nvidia-driver-pinning-580.95.05")
    ssh(cluster, "node01", f"{install} nvidia-open datacenter-gpu-manager-4-cuda13")
    installed = ssh(
        cluster, "node01", "dpkg-query -W -f '${Package} ${Version}\\n' 'nvidia-*' 'datacenter-*'"
    )
    assert "nvidia-kernel-open-dkms 580.95.05-1" in installed
    assert "datacenter-gpu-manager-4-core 1:4.4.2-1" in installed
    # Switching the lock to the branch: its newest is the candidate, 590 stays out.
    ssh(cluster, "node01", f"{install} nvidia-driver-pinning-580")
    policy = ssh(cluster, "node01", "apt-cache policy nvidia-open")
    assert "Candidate: 580.126.20-1" in policy
    # Fabric Manager packages of two branches conflict.
    out = ssh(
        cluster,
        "node01",
        "apt-get install -s nvidia-fabricmanager=580.95.05-1 nvidia-fabricmanager-575 2>&1 || true",
    )
    assert "nvidia-fabricmanager-575 : Conflicts: nvidia-fabricmanager" in out
