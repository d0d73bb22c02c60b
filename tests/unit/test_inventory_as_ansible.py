"""`inventory.load` reads every generated inventory as Ansible does host by host, with
none of bringup's shortcuts: InventoryManager's own parse, `VariableManager.get_vars` for
each host and a Templar of its own for each host's connection variables. The shortcuts
it holds equal: the parse's per-host steps done once (`_parse_quickly`), a host's
host_vars asked for only when its folder has an entry that could be its file
(`host_vars_files`, case-insensitively), and simple templates joined (`Templates`)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from bringup.fleet import inventory
from bringup.fleet.inventory import Host, InventoryError, load

NAME = st.from_regex(r"[a-zA-Z][a-zA-Z0-9_.-]{0,5}", fullmatch=True)
EXTENSIONS = [".yml", ".yaml", ".json", "", "/", ".txt", ".yml~", ".YML"]
ADDRESSES = [
    "{{ inventory_hostname }}.mgmt.example",
    "{{ inventory_hostname | upper }}.oob.example",
    "{{ site }}-{{ inventory_hostname }}",
    "{{ rack }}.{{ inventory_hostname }}",  # rack is a number: Ansible's templar renders it
    "{{ undefined_var }}.example",
    "10.0.0.1",
]


@st.composite
def inventories(draw: st.DrawFn) -> dict[str, Any]:
    hosts = draw(st.lists(NAME, min_size=1, max_size=8, unique=True))
    groups = [draw(st.sampled_from(["g0", "g1", "g2"])) for _ in hosts]
    # host_vars entries: some hosts' names, some in another case, some nobody's
    stems = draw(
        st.lists(st.one_of(st.sampled_from(hosts), st.sampled_from(hosts).map(str.swapcase), NAME))
    )
    entries = {}  # by the name in the folder: a file or a folder of that name
    for stem in stems:
        entry = stem + draw(st.sampled_from(EXTENSIONS))
        entries[entry.rstrip("/")] = entry
    return {
        "hosts": hosts,
        "groups": groups,
        "inline": draw(st.lists(st.sampled_from(hosts), max_size=2)),
        "host_vars": draw(st.sampled_from(["folder", "none", "a file"])),
        "entries": sorted(entries.values()),
        "address": draw(st.sampled_from(ADDRESSES)),
        "host_address": draw(st.sampled_from(ADDRESSES)),
        "site": draw(st.booleans()),
        "source": draw(st.sampled_from(["file", "folder"])),
    }


def write(folder: Path, spec: dict[str, Any]) -> Path:
    lines = []
    for group in ("g0", "g1", "g2"):
        lines.append(f"[{group}]")
        for host, in_group in zip(spec["hosts"], spec["groups"], strict=True):
            if in_group == group:
                inline = " ansible_host=10.9.9.9" if host in spec["inline"] else ""
                lines.append(f"{host}{inline}")
    lines += ["[g0:children]", "g2", "[g1:vars]", "rack=7"]
    (folder / "hosts.ini").write_text("\n".join(lines) + "\n")
    (folder / "group_vars").mkdir()
    site = "site: dc1\n" if spec["site"] else ""
    (folder / "group_vars" / "all.yml").write_text(
        f"ansible_host: '{spec['address']}'\nansible_user: root\n{site}"
    )
    if spec["host_vars"] == "a file":
        (folder / "host_vars").write_text("not a folder\n")
    elif spec["host_vars"] == "folder":
        (folder / "host_vars").mkdir()
        for entry in spec["entries"]:
            if entry.endswith("/"):
                (folder / "host_vars" / entry).mkdir(exist_ok=True)
                (folder / "host_vars" / entry / "a.yml").write_text(f"in_dir: {entry!r}\n")
            elif entry.endswith(".json"):
                (folder / "host_vars" / entry).write_text(json.dumps({"from": entry}))
            else:
                address = spec["host_address"]
                (folder / "host_vars" / entry).write_text(
                    f"from: {entry!r}\nansible_host: '{address}'\nansible_user: u1\n"
                )
    return folder if spec["source"] == "folder" else folder / "hosts.ini"


def ansible_load(path: Path) -> list[Host] | str:
    """Each host as Ansible gives it, host by host, rendered by a Templar of its own;
    or the line `load` is to say."""
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(path)])
    variables = VariableManager(loader=loader, inventory=manager)
    hosts = []
    for host in manager.get_hosts("all"):
        values = variables.get_vars(host=host, include_hostvars=False)
        values = {k: v for k, v in values.items() if k not in inventory.MAGIC_VARS}
        templar = Templar(loader=loader, variables=values)
        for key in inventory.CONNECTION_VARS:
            if "{{" in str(values.get(key, "")):
                try:
                    values[key] = templar.template(values[key])
                except AnsibleError as exc:
                    return f"host {host.name}: {key}: {inventory._one_line(exc.message)}"
        hosts.append(inventory._host(host.name, inventory._plain(values)))
    return hosts


def bringup_load(path: Path) -> list[Host] | str:
    try:
        return load(path)
    except InventoryError as exc:
        return str(exc)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=inventories())
def test_every_host_is_read_as_ansible_reads_it(spec: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp), spec)
        expected = ansible_load(path)
        got = bringup_load(path)
    event("an error" if isinstance(expected, str) else "hosts")
    assert got == expected  # every field of every host, its vars included


FIXED = {
    "hosts": ["node01", "node02", "Node03", "gpu.4"],
    "groups": ["g0", "g1", "g2", "g1"],
    "inline": ["node02"],
    "host_vars": "folder",
    "entries": ["node01.yml", "node03.yaml", "gpu.4/", "NODE02.json"],
    "address": "{{ inventory_hostname }}.mgmt.example",
    "host_address": "{{ inventory_hostname | upper }}.oob.example",
    "site": True,
    "source": "folder",
}


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"RUN_VARS_PLUGINS": "start"},  # the vars plugins run at the parse too
        {"DEFAULT_HASH_BEHAVIOUR": "merge"},
        {"YAML_FILENAME_EXTENSIONS": [".yml", "json"]},
    ],
    ids=["defaults", "vars-plugins-at-start", "hash-merge", "other-extensions"],
)
def test_ansibles_settings_are_read_as_ansible_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: dict[str, object]
) -> None:
    from ansible import constants
    from ansible.vars import plugins

    for name, value in config.items():
        monkeypatch.setattr(constants, name, value)
    plugins._plugin_should_run.cache_clear()  # it keeps its answer per plugin and stage
    try:
        path = write(tmp_path, FIXED)
        expected = ansible_load(path)
        assert not isinstance(expected, str), expected
        assert load(path) == expected
    finally:
        plugins._plugin_should_run.cache_clear()
