"""The hosts `check --nodes` reads are the ones Ansible's own commands read: every host's
variables as `ansible-inventory --list` prints them, and its templated connection
variables as `ansible HOST -m debug` renders them, on a templated inventory with
group_vars/ and host_vars/ in every form Ansible reads (a folder of two sources, YAML,
JSON, an extension-less file, a folder per host or group, a name that only differs in
case, a template with a filter, one that names a group variable)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.fleet.inventory import load

INI = """\
[rack1]
node[01:04]
node05 ansible_host=10.0.1.5

[rack2]
node[06:08] bringup_slot=2

[gpu:children]
rack1
rack2

[gpu:vars]
ansible_port=22
site=dc1
"""

YAML = """\
all:
  children:
    login:
      hosts:
        login-1.example:
          ansible_user: ops
        Node09:
      vars:
        ansible_port: 2222
"""

GROUP_VARS = {
    "all.yml": "ansible_host: '{{ inventory_hostname }}.mgmt.example'\n"
    "ansible_ssh_common_args: '-o StrictHostKeyChecking=accept-new'\n"
    "bringup_data_dirs: [/data]\n",
    "gpu.yml": "ansible_user: '{{ site }}-admin'\n",
    "rack2/a.yml": "bringup_uplink: 10.1.0.1:5201\n",
    "rack2/b.yaml": "bringup_profile_overrides: {gpu: {count: 8}}\n",
}

HOST_VARS = {
    "node02.yml": "ansible_host: 10.0.0.2\n",
    "node03.yaml": "ansible_host: '{{ inventory_hostname | upper }}.oob.example'\n",
    "node04.json": '{"ansible_user": "json-user", "bringup_slot": 4}',
    "node06": "ansible_port: 2206\n",  # no extension: Ansible reads it
    "node07/a.yml": "bringup_slot: 7\n",
    "node07/b.yml": "ansible_host: 10.0.0.7\n",
    "node08.txt": "ansible_host: 10.9.9.9\n",  # not an extension Ansible reads
    "node01.yml~": "ansible_host: 10.9.9.9\n",  # nor a backup
    "node09.yml": "ansible_host: 10.9.9.9\n",  # Node09's? Not on a case-sensitive disk
}

CONNECTION = ("ansible_host", "ansible_user", "ansible_port", "ansible_ssh_common_args")


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    folder = tmp_path / "inventory"
    for name, text in {
        "hosts.ini": INI,
        "more.yml": YAML,
        **{f"group_vars/{k}": v for k, v in GROUP_VARS.items()},
        **{f"host_vars/{k}": v for k, v in HOST_VARS.items()},
    }.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def ansible(tool: str, *args: str | Path, cwd: Path) -> str:
    """One of Ansible's commands, from the installed ansible-core (ansible.cli.<tool>)."""
    done = subprocess.run(
        [sys.executable, "-m", f"ansible.cli.{tool}", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"PATH": "/usr/bin:/bin", "ANSIBLE_NOCOLOR": "1", "HOME": str(cwd)},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_host_and_variable_is_what_ansibles_commands_read(
    inventory: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"  # no playbook-adjacent group_vars/ here
    work.mkdir()
    monkeypatch.chdir(work)
    listed = json.loads(ansible("inventory", "-i", inventory, "--list", cwd=work))
    hostvars = listed["_meta"]["hostvars"]
    # Ansible's own rendering of the connection variables, host by host.
    expression = ", ".join(f'"{key}": {key} | default(None)' for key in CONNECTION)
    tree = tmp_path / "tree"
    ansible(
        "adhoc",
        "all",
        "-i",
        inventory,
        "-m",
        "debug",
        "-a",
        f"msg={{{{ {{{expression}}} }}}}",
        "-t",
        tree,
        cwd=work,
    )
    rendered = {path.name: json.loads(path.read_text())["msg"] for path in tree.iterdir()}

    hosts = {host.name: host for host in load(inventory)}

    assert sorted(hosts) == sorted(hostvars) == sorted(rendered)
    assert len(hosts) == 10
    for name, host in hosts.items():
        expected = {**hostvars[name]}
        expected |= {k: v for k, v in rendered[name].items() if k in expected}
        ours = {k: v for k, v in host.vars.items() if k not in MAGIC_KEPT}
        assert ours == expected, name
        assert host.address == rendered[name]["ansible_host"]
        assert host.user == rendered[name]["ansible_user"]
        assert host.port == (rendered[name]["ansible_port"] or 22)
    # The cases the inventory is about, pinned.
    assert hosts["node01"].address == "node01.mgmt.example"
    assert hosts["node02"].address == "10.0.0.2"
    assert hosts["node03"].address == "NODE03.oob.example"
    assert (hosts["node04"].user, hosts["node04"].vars["bringup_slot"]) == ("json-user", 4)
    assert hosts["node05"].address == "10.0.1.5"
    assert hosts["node06"].port == 2206
    assert (hosts["node07"].address, hosts["node07"].vars["bringup_slot"]) == ("10.0.0.7", 7)
    assert hosts["node08"].address == "node08.mgmt.example"
    assert hosts["node08"].vars["bringup_profile_overrides"] == {"gpu": {"count": 8}}
    assert hosts["Node09"].address == "Node09.mgmt.example"
    assert (hosts["login-1.example"].user, hosts["login-1.example"].port) == ("ops", 2222)
    assert hosts["node01"].user == "dc1-admin"


# Variables Ansible gives every host that `ansible-inventory --list` leaves out (its
# INTERNAL_STATIC_VARS): bringup keeps them in Host.vars.
MAGIC_KEPT = frozenset(
    {
        "inventory_hostname",
        "inventory_hostname_short",
        "group_names",
        "inventory_dir",
        "inventory_file",
    }
)
