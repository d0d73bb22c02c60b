"""Each host's variables, read with the group part worked out once per set of groups, equal
what Ansible's VariableManager gives host by host: precedence of all/groups/children/hosts,
group_vars and host_vars beside the inventory and in the working directory, group priority,
the hash behaviour and a reordered group precedence."""

from __future__ import annotations

from pathlib import Path

import pytest

from bringup.fleet.inventory import host_variables, load

INI = """\
[rack1]
node[01:06] ansible_user=ops
gpu07 rack_slot=7 shared='{"inline": 1}'

[rack2]
node[07:12]
gpu07

[rack3]
node[13:15] ansible_port=2200

[gpu:children]
rack1
rack2

[pod:children]
gpu
rack3

[pod:vars]
level=pod
shared={"pod": 1, "nested": {"a": 1}}

[rack2:vars]
level=rack2
ansible_group_priority=5

[rack1:vars]
level=rack1
"""


@pytest.fixture
def inventory_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    inv = tmp_path / "inv"
    (inv / "group_vars").mkdir(parents=True)
    (inv / "host_vars").mkdir()
    (inv / "hosts.ini").write_text(INI)
    (inv / "group_vars" / "all.yml").write_text("level: all\nansible_user: root\nfrom_all: 1\n")
    (inv / "group_vars" / "gpu.yml").write_text("level: gpu\nshared: {nested: {b: 2}}\n")
    (inv / "group_vars" / "rack3").mkdir()  # a directory of files, as Ansible allows
    (inv / "group_vars" / "rack3" / "a.yml").write_text("rack3_a: 1\nlevel: rack3-dir\n")
    (inv / "group_vars" / "rack3" / "b.yml").write_text("rack3_b: 2\n")
    (inv / "host_vars" / "node03.yml").write_text("level: host\nshared: {host: 3}\n")
    (inv / "host_vars" / "gpu07.yml").write_text("ansible_port: 2207\n")
    # The working directory is where Ansible looks for playbook-adjacent vars.
    play = tmp_path / "play"
    (play / "group_vars").mkdir(parents=True)
    (play / "host_vars").mkdir()
    (play / "group_vars" / "rack1.yml").write_text("from_play: rack1\nlevel: play-rack1\n")
    (play / "host_vars" / "node13.yml").write_text("from_play: node13\n")
    monkeypatch.chdir(play)
    # Ansible keeps the real path of "." for the life of the process (the vars plugin's
    # CANONICAL_PATHS): forgotten here, so this test's working directory is the one read.
    from ansible.plugins.vars import host_group_vars

    monkeypatch.setattr(host_group_vars, "CANONICAL_PATHS", {})
    return inv


def _both(path: Path) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Every host's variables: VariableManager host by host, and host_variables."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(path)])
    manager = VariableManager(loader=loader, inventory=inventory)
    hosts = inventory.get_hosts("all")
    assert len(hosts) == 16
    ansible = [manager.get_vars(host=h, include_hostvars=False) for h in hosts]
    return ansible, host_variables(manager, hosts)


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"DEFAULT_HASH_BEHAVIOUR": "merge"},
        {
            "VARIABLE_PRECEDENCE": [
                "all_plugins_inventory",
                "groups_plugins_play",
                "groups_inventory",
                "all_inventory",
                "groups_plugins_inventory",
                "all_plugins_play",
            ]
        },
    ],
    ids=["defaults", "hash-merge", "reordered-precedence"],
)
def test_host_variables_equal_ansibles_per_host_vars(
    inventory_dir: Path, monkeypatch: pytest.MonkeyPatch, config: dict[str, object]
) -> None:
    from ansible import constants

    for name, value in config.items():
        monkeypatch.setattr(constants, name, value)
    ansible, fast = _both(inventory_dir / "hosts.ini")
    assert fast == ansible


def test_each_level_wins_where_it_should(inventory_dir: Path) -> None:
    """The generated inventory has the cases the equivalence is about."""
    _, fast = _both(inventory_dir / "hosts.ini")
    by_name = {v["inventory_hostname"]: v for v in fast}
    assert by_name["node03"]["level"] == "host"
    assert by_name["node01"]["level"] == "play-rack1"  # playbook group_vars beat inventory's
    assert by_name["node01"]["from_play"] == "rack1"
    assert by_name["node13"]["from_play"] == "node13"
    assert by_name["node13"]["rack3_b"] == 2 and by_name["node13"]["ansible_port"] == 2200
    assert by_name["gpu07"]["ansible_port"] == 2207
    assert by_name["node01"]["ansible_user"] == "ops"
    assert by_name["node08"]["ansible_user"] == "root"


def test_the_merged_hash_behaviour_is_ansibles(
    inventory_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ansible import constants

    monkeypatch.setattr(constants, "DEFAULT_HASH_BEHAVIOUR", "merge")
    _, fast = _both(inventory_dir / "hosts.ini")
    node03 = next(v for v in fast if v["inventory_hostname"] == "node03")
    assert node03["shared"] == {"pod": 1, "nested": {"a": 1, "b": 2}, "host": 3}


def test_an_unknown_precedence_entry_takes_ansibles_own_path(
    inventory_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ansible import constants

    monkeypatch.setattr(constants, "VARIABLE_PRECEDENCE", ["all_inventory", "made_up"])
    ansible, fast = _both(inventory_dir / "hosts.ini")
    assert fast == ansible


def test_load_keeps_ansibles_answer_with_a_limit(inventory_dir: Path) -> None:
    hosts = load(inventory_dir / "hosts.ini", "gpu:!rack2")
    assert [h.name for h in hosts] == [f"node{i:02d}" for i in range(1, 7)]
    assert hosts[2].vars["level"] == "host" and hosts[0].vars["level"] == "play-rack1"
    assert hosts[0].user == "ops"
