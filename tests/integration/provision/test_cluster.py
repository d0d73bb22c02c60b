"""`bringup provision` against a simulated cluster: real sshd in network namespaces.

The default nodes share this machine's filesystem: on them only --check runs (it changes
nothing) and the NGC steps with a docker that only prints. Real runs happen on rootfs
nodes (each its own Debian, bringup.sim.rootfs), never on this machine; test_roles.py
runs the GPU roles there against the local NVIDIA repositories.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bringup.sim.cluster import SimCluster
from tests.integration.provision.conftest import PROVISION_IMAGE, needs_rootfs
from tests.support.provision import PLAYBOOKS, needs_ansible, run_provision

WHY_NOT = SimCluster.available()
pytestmark = [
    pytest.mark.provision,
    needs_ansible,
    pytest.mark.skipif(WHY_NOT is not None, reason=f"simulated cluster: {WHY_NOT}"),
]

# What node_tools installs (playbooks/roles/node_tools/defaults/main.yml, Debian 12).
NODE_TOOLS = [
    "python3-venv",
    "fio",
    "nvme-cli",
    "numactl",
    "pciutils",
    "infiniband-diags",
    "ibverbs-utils",
    "perftest",
    "linux-cpupower",
]


def test_the_converge_checks_every_package_node_tools_installs() -> None:
    """NODE_TOOLS is the role's list (python3 aside: the image's base), the fabric's tools
    among them, and the image holds each (the nodes reach no Debian mirror)."""
    defaults = yaml.safe_load((PLAYBOOKS / "roles/node_tools/defaults/main.yml").read_text())
    role = [p for p in defaults["node_tools_packages"] if p != "python3"]
    role += defaults["node_tools_packages_by_distribution"]["Debian"]
    assert sorted(role) == sorted(NODE_TOOLS)
    assert {"perftest", "infiniband-diags", "ibverbs-utils", "pciutils"} <= set(NODE_TOOLS)
    assert set(role) <= set(PROVISION_IMAGE.packages)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with SimCluster(3, tmp_path_factory.mktemp("provision-cluster")) as sim:
        yield sim


def _json(result_stdout: str) -> dict[str, object]:
    return json.loads(result_stdout)


def test_check_mode_whole_site_and_an_unreachable_node(cluster: SimCluster, tmp_path: Path) -> None:
    """--check of all roles on node01/02 while node03's sshd is down: the others finish."""
    cluster.stop_sshd("node03")
    try:
        result = run_provision(
            "--nodes", str(cluster.inventory), "--check", "--json", "--out", str(tmp_path / "r")
        )
    finally:
        cluster.start_sshd("node03")
    assert result.returncode == 1, result.stderr
    doc = _json(result.stdout)
    nodes = doc["data"]["hosts"]
    for name in ("node01", "node02"):
        assert nodes[name]["status"] in ("ok", "changed"), nodes[name]
        assert nodes[name]["failed"] == 0 and nodes[name]["failed_task"] is None
    assert nodes["node03"]["status"] == "unreachable"
    statuses = {f["node"]: f["status"] for f in doc["findings"]}
    assert statuses == {"node01": "PASS", "node02": "PASS", "node03": "UNREACHABLE"}
    # The record: manifest, facts with a "provision" record, every task's outcome in raw/.
    run = tmp_path / "r"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["command"] == "provision" and manifest["exit_code"] == 1
    facts = json.loads((run / "facts" / "node01.json").read_text())
    record = facts["probes"]["provision"]
    assert record["ok"] is True and record["facts"]["check_mode"] is True
    lines = (run / "raw/node01/provision/tasks.jsonl").read_text().splitlines()
    tasks = [json.loads(x) for x in lines]
    # Every GPU role ran its guard: no NVIDIA PCI device, so its GPU tasks were skipped.
    said = {t["task"] for t in tasks}
    for role in ("nvidia_driver", "fabric_manager", "cuda", "dcgm"):
        assert any(t.startswith(f"{role} : Say why") for t in said), role
    assert "nvidia_driver : Install the driver packages (open kernel modules)" not in {
        t["task"] for t in tasks if t["status"] != "skipped"
    }


@needs_rootfs
def test_real_run_twice_second_changes_nothing(make_rootfs_cluster, tmp_path: Path) -> None:
    """Every role for real on two GPU-less rootfs nodes (node_tools installs, the GPU
    roles skip themselves); a rerun reports changed=0."""
    rootfs_cluster = make_rootfs_cluster(2)
    runs = []
    for i in (1, 2):
        result = run_provision(
            "--nodes",
            str(rootfs_cluster.inventory),
            "-e",
            "containers_docker_packages=[]",  # no Debian mirror reaches the nodes
            "--json",
            "--out",
            str(tmp_path / f"run{i}"),
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        runs.append(_json(result.stdout))
    for name in ("node01", "node02"):
        assert runs[0]["data"]["hosts"][name]["status"] in ("ok", "changed")
        second = runs[1]["data"]["hosts"][name]
        assert second["changed"] == 0, second
        assert second["failed"] == 0 and second["status"] == "ok"
    status = rootfs_cluster.root("node01") / "var/lib/dpkg/status"
    installed = subprocess.run(
        [
            "dpkg-query",
            f"--admindir={status.parent}",
            "-W",
            "-f",
            "${db:Status-Abbrev}\n",
            *NODE_TOOLS,
        ],
        capture_output=True,
        text=True,
    ).stdout.split()
    assert installed == ["ii"] * len(NODE_TOOLS)


def test_ngc_key_never_reaches_a_file_or_log(cluster: SimCluster, tmp_path: Path) -> None:
    """A docker that prints its password: the key gets to it, and nowhere else."""
    key = f"nvapi-{secrets.token_hex(16)}"
    received = tmp_path / "received.sha256"
    docker = tmp_path / "leaky-docker"
    docker.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        "  image) exit 1 ;;\n"  # the image is not there yet
        "  login) pw=$(cat)\n"
        f'    printf %s "$pw" | sha256sum | cut -d" " -f1 > {received}\n'
        '    echo "login failed for password $pw"; echo "denied: $pw" >&2; exit 1 ;;\n'
        "esac\n"
        "exit 0\n"
    )
    docker.chmod(0o755)
    run = tmp_path / "run"
    env = dict(os.environ, NGC_API_KEY=key)
    result = run_provision(
        "--nodes",
        str(cluster.inventory),
        "--limit",
        "node01",
        "--playbook",
        str(Path(__file__).with_name("ngc_secret.yml")),
        "-e",
        f"leaky_docker={docker}",
        "--json",
        "--out",
        str(run),
        env=env,
    )
    assert result.returncode == 1, result.stderr
    doc = _json(result.stdout)
    assert doc["data"]["hosts"]["node01"]["failed_task"] == "containers : Log in to nvcr.io"
    assert doc["data"]["hosts"]["node01"]["message"] == "output hidden (no_log: true)"
    # The key did reach docker (on stdin) ...
    assert received.read_text().strip() == hashlib.sha256(key.encode()).hexdigest()
    # ... and no file of the run, nor our output, holds it.
    assert key not in result.stdout and key not in result.stderr
    files = [p for p in run.rglob("*") if p.is_file()]
    assert any("job_events" in str(p) for p in files)
    leaked = [str(p) for p in files if key.encode() in p.read_bytes()]
    assert leaked == []


# A playbook of the user's that runs one task on the node, then loads a role's file that
# Ansible cannot parse: the file is read only then (include_tasks), mid-play.
MID_PLAY = """\
- name: Load a role's tasks mid-play
  hosts: all
  gather_facts: false
  tasks:
    - name: Say hello first
      ansible.builtin.debug:
        msg: hello
    - name: Read the driver's state
      ansible.builtin.include_tasks: roles/nvidia_driver/tasks/read_state.yml
"""
MID_PLAY_INCLUDE = "Read the driver's state"


@pytest.mark.parametrize(
    ("playbook", "broken"),
    [
        # site.yml's roles are read before the play: Ansible stops before any task.
        ("site.yml", "roles/node_tools/tasks/main.yml"),
        # an included file is read when the play gets there, after a task ran.
        ("mid_play.yml", "roles/nvidia_driver/tasks/read_state.yml"),
    ],
)
def test_a_role_file_ansible_cannot_parse_is_one_line_and_exit_2(
    cluster: SimCluster, tmp_path: Path, playbook: str, broken: str
) -> None:
    """Broken YAML in a role's file (a copy of the shipped playbooks, run as --playbook):
    Ansible's parse error, with the file and line it names, on one line; exit 2; the node
    is not left "running", and what ran is kept."""
    books = tmp_path / "playbooks"
    shutil.copytree(PLAYBOOKS, books)
    (books / "mid_play.yml").write_text(MID_PLAY)
    bad = books / broken
    lines = bad.read_text().splitlines(keepends=True)
    lines.insert(3, "- name: Say it: loud\n")  # line 4: a colon YAML cannot take unquoted
    bad.write_text("".join(lines))
    run = tmp_path / "run"
    # --check: these nodes share this machine's filesystem.
    result = run_provision(
        "--nodes", str(cluster.inventory), "--limit", "node01", "--check",
        "--playbook", str(books / playbook), "--out", str(run),
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "Traceback" not in line
    # Where, as Ansible names it, then its words (2.19: "YAML parsing failed: Colons in
    # unquoted values ...", before: "Syntax Error while loading YAML. mapping values ...").
    assert f"ansible-playbook stopped: {bad}:4:15: " in line and "YAML" in line, line
    manifest = json.loads((run / "manifest.json").read_text())
    assert (manifest["status"], manifest["exit_code"]) == ("refused", 2)
    record = json.loads((run / "facts/node01.json").read_text())["probes"]["provision"]
    assert record["ok"] is False and record["facts"]["status"] == "error"
    assert f"{bad}:4:15" in record["error"]
    [finding] = [json.loads(x) for x in (run / "findings.jsonl").read_text().splitlines()]
    assert finding["status"] == "ERROR" and f"{bad}:4:15" in finding["message"]
    tasks = (run / "raw/node01/provision/tasks.jsonl").read_text().splitlines()
    ran = [json.loads(x)["task"] for x in tasks]
    # Mid-play, the task before is kept, and the include (Ansible reports it ok: the file
    # is read after it).
    assert ran == ([] if playbook == "site.yml" else ["Say hello first", MID_PLAY_INCLUDE]), ran
