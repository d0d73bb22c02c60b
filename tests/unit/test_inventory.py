"""Inventories read by Ansible's own parser: hosts, groups, vars beside them, --limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from bringup.fleet.inventory import Host, InventoryError, load, ssh_options

INI = """\
# a small GPU fleet
[gpu]
node01 ansible_host=10.0.0.1 ansible_user=root
node02 ansible_host=10.0.0.2 ansible_port=2222 ansible_ssh_private_key_file=/keys/id {overrides}
node[03:04] ansible_host=10.0.0.3

[gpu:vars]
ansible_ssh_common_args='-o ProxyJump=admin@bastion:2200 -o UserKnownHostsFile=/etc/kh'

[login]
login1 ansible_ssh_extra_args='-J jump1' ansible_password=s3cret

[cluster:children]
gpu
login
""".replace("{overrides}", """bringup_profile_overrides='{"gpu": {"count": 7}}'""")


@pytest.fixture
def fleet_dir(tmp_path: Path) -> Path:
    (tmp_path / "hosts.ini").write_text(INI)
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "gpu.yml").write_text("ansible_user: admin\n")
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "node03.yml").write_text(
        "bringup_data_dirs: [/data, /ckpt]\nansible_python_interpreter: /opt/py/bin/python3\n"
    )
    return tmp_path


def test_ini_hosts_with_groups_and_vars_beside_the_file(fleet_dir: Path) -> None:
    hosts = load(fleet_dir / "hosts.ini")
    assert [h.name for h in hosts] == ["node01", "node02", "node03", "node04", "login1"]
    node01, node02, node03, node04, login1 = hosts
    assert (node01.address, node01.port, node01.user, node01.key_file) == (
        "10.0.0.1",
        22,
        "root",  # the host's own variable beats group_vars
        None,
    )
    assert (node02.address, node02.port, node02.user, node02.key_file) == (
        "10.0.0.2",
        2222,
        "admin",  # from group_vars/gpu.yml
        "/keys/id",
    )
    assert node02.proxy_jump == "admin@bastion:2200"
    assert node02.ssh_args == [
        "-o",
        "ProxyJump=admin@bastion:2200",
        "-o",
        "UserKnownHostsFile=/etc/kh",
    ]
    assert node02.ssh_option("UserKnownHostsFile") == "/etc/kh"
    assert node02.vars["bringup_profile_overrides"] == {"gpu": {"count": 7}}
    assert node03.address == node04.address == "10.0.0.3"
    assert node03.vars["bringup_data_dirs"] == ["/data", "/ckpt"]
    assert node03.python == "/opt/py/bin/python3" and node04.python == "python3"
    assert login1.address == "login1" and login1.proxy_jump == "jump1"
    assert node03.vars["group_names"] == ["cluster", "gpu"]
    assert "groups" not in node03.vars  # no copy of the whole inventory per host


def test_passwords_stay_out_of_vars_and_repr(fleet_dir: Path) -> None:
    login1 = load(fleet_dir / "hosts.ini", "login1")[0]
    assert login1.password == "s3cret"
    assert "s3cret" not in repr(login1)
    assert "ansible_password" not in login1.vars


@pytest.mark.parametrize(
    ("pattern", "names"),
    [
        ("gpu:!node02", ["node01", "node03", "node04"]),
        ("gpu[0:1]", ["node01", "node02"]),
        ("node0*", ["node01", "node02", "node03", "node04"]),
        ("login:node04", ["login1", "node04"]),
        ("gpu:&cluster:!~node0[34]", ["node01", "node02"]),  # ~ is a regex
    ],
)
def test_limit_selects_hosts_as_ansible_does(
    fleet_dir: Path, pattern: str, names: list[str]
) -> None:
    assert sorted(h.name for h in load(fleet_dir / "hosts.ini", pattern)) == sorted(names)


def test_yaml_inventory_with_templated_address(tmp_path: Path) -> None:
    (tmp_path / "hosts.yml").write_text(
        "all:\n"
        "  children:\n"
        "    gpu:\n"
        "      hosts:\n"
        "        b300-a:\n"
        "          ansible_host: '{{ inventory_hostname }}.cluster.example'\n"
        "          bringup_probe_params: {nvme: {runtime_s: 5}}\n"
        "      vars:\n"
        "        ansible_port: 2022\n"
    )
    (host,) = load(tmp_path / "hosts.yml")
    assert host == Host(
        name="b300-a",
        address="b300-a.cluster.example",
        port=2022,
        vars=host.vars,
    )
    assert host.vars["bringup_probe_params"] == {"nvme": {"runtime_s": 5}}


def templated_fleet(folder: Path) -> Path:
    """Forty hosts whose address is one template in group_vars/all.yml; two of them
    with another in host_vars/, one with a literal address, one with a broken template
    only when asked."""
    (folder / "hosts.ini").write_text("[gpu]\nnode[01:40] rack=r1\n")
    (folder / "group_vars").mkdir()
    (folder / "group_vars" / "all.yml").write_text(
        "ansible_host: '{{ inventory_hostname }}.mgmt.example'\nansible_user: '{{ rack }}-admin'\n"
    )
    (folder / "host_vars").mkdir()
    for name in ("node05", "node06"):
        (folder / "host_vars" / f"{name}.yml").write_text(
            "ansible_host: '{{ inventory_hostname | upper }}.oob.example'\n"
        )
    (folder / "host_vars" / "node07.yml").write_text("ansible_host: 10.0.0.7\n")
    return folder / "hosts.ini"


def test_each_distinct_template_is_compiled_once_each_host_rendered_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ansible compiled `{{ inventory_hostname }}.mgmt` again for every host: a
    10,000-node inventory spent seconds on it. Now a template with a filter is compiled
    once, and one that only puts variables between text is read once and never
    compiled (Templates.one: its hosts' values joined)."""
    from ansible._internal._templating._engine import TemplateEngine

    compiled: list[str] = []
    original = TemplateEngine._compile_template

    def counting(self: TemplateEngine, template: str, options: object) -> object:
        compiled.append(str(template))
        return original(self, template, options)

    monkeypatch.setattr(TemplateEngine, "_compile_template", counting)
    hosts = {h.name: h for h in load(templated_fleet(tmp_path))}
    assert compiled == ["{{ inventory_hostname | upper }}.oob.example"]
    assert hosts["node01"].address == "node01.mgmt.example"
    assert hosts["node40"].address == "node40.mgmt.example"
    assert hosts["node05"].address == "NODE05.oob.example"
    assert hosts["node06"].address == "NODE06.oob.example"
    assert hosts["node07"].address == "10.0.0.7"
    assert {h.user for h in hosts.values()} == {"r1-admin"}


def test_kept_templates_render_as_a_templar_per_host_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bringup.fleet import inventory

    path = templated_fleet(tmp_path)
    kept = load(path)
    monkeypatch.setattr(inventory, "_cache_compiles", lambda templar: False)
    assert load(path) == kept


def test_a_broken_template_names_its_host_each_time(tmp_path: Path) -> None:
    path = templated_fleet(tmp_path)
    for name in ("node09", "node10"):
        (tmp_path / "host_vars" / f"{name}.yml").write_text("ansible_host: '{{ oops'\n")
    with pytest.raises(InventoryError, match=r"^host node09: ansible_host: Syntax error"):
        load(path)
    with pytest.raises(InventoryError, match=r"^host node10: ansible_host: Syntax error"):
        load(path, limit="node10")


def test_malformed_ini_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "hosts.ini"
    bad.write_text("[gpu]\nnode01 ansible_host=10.0.0.1\nnode02 ansible_host\n")
    with pytest.raises(InventoryError) as info:
        load(bad)
    assert str(info.value) == (
        f"{bad} line 3: Expected key=value host variable assignment, got: ansible_host"
    )


def test_malformed_yaml_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "hosts.yml"
    bad.write_text("all:\n  hosts:\n    a:\n      x: [1\n")
    with pytest.raises(InventoryError) as info:
        load(bad)
    assert str(info.value).startswith(f"{bad} line 5: YAML parsing failed: ")


@pytest.mark.parametrize(
    ("text", "limit", "message"),
    [
        (None, None, "{path}: no such inventory file or directory"),
        ("[gpu]\n", None, "{path}: no hosts"),
        (
            "[gpu]\nn1\n",
            "nothere",
            "--limit 'nothere': no host of {path} matches 'nothere'"
            " (Ansible: Could not match supplied host pattern, ignoring: nothere)",
        ),
    ],
)
def test_nothing_to_run_on_is_an_error(
    tmp_path: Path, text: str | None, limit: str | None, message: str
) -> None:
    path = tmp_path / "hosts.ini"
    if text is not None:
        path.write_text(text)
    with pytest.raises(InventoryError) as info:
        load(path, limit)
    assert str(info.value) == message.format(path=path)


@pytest.mark.parametrize(
    ("limit", "message"),
    [
        # Each of these selected every host before: Ansible drops what it cannot read.
        (",", "--limit ',': no host pattern in it"),
        ("", "--limit '': no host pattern in it"),
        ("~[", "--limit '~[': not a valid host pattern (Ansible reads '~')"),
        ("*[", "--limit '*[': not a valid host pattern (Ansible reads '*')"),
        ("!", "--limit '!': '!' is not a host pattern"),
        ("~", "--limit '~': '~' is not a host pattern"),
        # A pattern that matches nothing was dropped with a warning: a typo ran on the rest.
        (
            "node01,nope",
            "--limit 'node01,nope': no host of {path} matches 'nope'"
            " (Ansible: Could not match supplied host pattern, ignoring: nope)",
        ),
        (
            "gpu:!nope",
            "--limit 'gpu:!nope': no host of {path} matches 'nope'"
            " (Ansible: Could not match supplied host pattern, ignoring: nope)",
        ),
        ("~(", "--limit '~(': Invalid host list pattern: ~("),
        ("gpu[9]", "--limit 'gpu[9]': No hosts matched the subscripted pattern 'gpu[9]'"),
    ],
)
def test_a_limit_that_selects_no_valid_pattern_is_refused(
    fleet_dir: Path, limit: str, message: str
) -> None:
    path = fleet_dir / "hosts.ini"
    with pytest.raises(InventoryError) as info:
        load(path, limit)
    assert str(info.value) == message.format(path=path)


def test_ssh_options_as_ssh_reads_them() -> None:
    args = ["-o", "ProxyJump=j", "-oPort=2200", "-o", "User admin", "-o", "port=1", "-v"]
    assert ssh_options(args) == {"proxyjump": "j", "port": "2200", "user": "admin"}


# Racks in pods, pods in the fleet, a host in two racks and one listed before its rack's
# pod: Ansible's get_hosts("all") walks these groups of groups through sets.
PODS = """\
[rack3]
node[301:304]
[rack1]
node[101:104]
shared
[rack2]
node[201:204]
shared
[login]
login1
[pod_b:children]
rack2
rack3
[pod_a:children]
rack1
[gpu:children]
pod_b
pod_a
"""

_PRINT_ORDERS = (
    "import sys; from pathlib import Path; from bringup.fleet.inventory import load\n"
    "for limit in (None, 'gpu:!rack2'):\n"
    "    print(' '.join(h.name for h in load(Path(sys.argv[1]), limit)))"
)


def test_hosts_come_in_the_inventory_files_order_in_every_process(tmp_path: Path) -> None:
    """Pods of racks read in processes of different hash seeds, with and without --limit:
    each host where the file first names it, the same in every process."""
    import os
    import subprocess
    import sys

    (tmp_path / "hosts.ini").write_text(PODS)
    orders = set()
    for seed in ("0", "1", "2", "3"):
        done = subprocess.run(
            [sys.executable, "-c", _PRINT_ORDERS, str(tmp_path / "hosts.ini")],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        orders.add(tuple(done.stdout.splitlines()))
    rack3, rack1, rack2 = ([f"node{r}0{n}" for n in range(1, 5)] for r in (3, 1, 2))
    whole = [*rack3, *rack1, "shared", *rack2, "login1"]
    limited = [*rack3, *rack1]  # shared is in rack2 too
    assert orders == {(" ".join(whole), " ".join(limited))}
