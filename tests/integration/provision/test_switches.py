"""Typed switches: `-e nvidia_driver_reboot=false` switches the reboot off, on the installed
ansible-core, whether the value arrives as YAML (bringup provision) or as a string
(plain `ansible-playbook -e NAME=false`).

The roles' own conditions are taken from their task files and evaluated by Ansible on
localhost in debug tasks: nothing of a role runs on this machine.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bringup.fleet.provision import parse_extra_vars
from tests.support.provision import ANSIBLE_PLAYBOOK, PLAYBOOKS, ansible_env, needs_ansible
from tests.support.timing import scaled

pytestmark = [pytest.mark.provision, needs_ansible]

ROLES = PLAYBOOKS / "roles"
CONDITION_KEYS = ("when", "changed_when", "failed_when", "until")


def _switches() -> set[str]:
    """Every role variable whose default is a boolean: the switches."""
    names = set()
    for defaults in ROLES.glob("*/defaults/main.yml"):
        for name, value in (yaml.safe_load(defaults.read_text()) or {}).items():
            if isinstance(value, bool):
                names.add(name)
    return names


def _tasks(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Tasks, blocks and their inner tasks, depth first."""
    for item in items or []:
        yield item
        for key in ("block", "rescue", "always"):
            yield from _tasks(item.get(key) or [])


def _task_files() -> list[Path]:
    return sorted([*ROLES.glob("*/tasks/*.yml"), *ROLES.glob("*/handlers/*.yml")])


def _expressions(task: dict[str, Any]) -> Iterator[str]:
    """The Jinja expressions of a task: its conditions whole, templates elsewhere."""
    for key in CONDITION_KEYS:
        value = task.get(key)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                yield item
    stack: list[object] = [v for k, v in task.items() if k not in CONDITION_KEYS]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str):
            yield from re.findall(r"\{\{(.*?)\}\}", value, flags=re.DOTALL)


def test_every_switch_is_read_through_bool() -> None:
    """A switch used bare is true for the string "false" (ansible-core <= 2.18) or an
    error (2.19): every use of one in an expression goes through `| bool`."""
    switches = _switches()
    assert {"nvidia_driver_reboot", "containers_nvidia_default_runtime"} <= switches
    bare = []
    for path in _task_files():
        for task in _tasks(yaml.safe_load(path.read_text()) or []):
            for expression in _expressions(task):
                expression = re.sub(r"'[^']*'|\"[^\"]*\"", "''", expression)  # not in text
                for name in switches:
                    for match in re.finditer(rf"(?<![\w.]){name}(?!\w)", expression):
                        rest = expression[match.end() :]
                        if not re.match(r"\s*\|\s*bool\b", rest):
                            where = f"{path.relative_to(PLAYBOOKS)}: {task.get('name')}"
                            bare.append(f"{where}: {name}")
    assert bare == []


def _conditions_of(switch: str) -> list[tuple[str, list[str], dict[str, Any]]]:
    """(task name, its `when` list, its own vars) of every task whose `when` reads the
    switch."""
    found = []
    for path in _task_files():
        for task in _tasks(yaml.safe_load(path.read_text()) or []):
            when = task.get("when")
            conditions = when if isinstance(when, list) else [when] if when else []
            if any(re.search(rf"(?<![\w.]){switch}(?!\w)", str(c)) for c in conditions):
                found.append(
                    (str(task.get("name")), [str(c) for c in conditions], task.get("vars") or {})
                )
    return found


# What the conditions read besides the switches: the driver install changed, the node
# runs systemd, Docker's daemon.json names the nvidia runtime but not as its default.
CONTEXT: dict[str, object] = {
    "nvidia_driver_install": {"changed": True},
    "containers_daemon_json": {
        "content": base64.b64encode(
            json.dumps({"runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}}).encode()
        ).decode()
    },
    "ansible_facts": {"service_mgr": "systemd"},
}


def _evaluate(tmp_path: Path, switches: list[str], extra_vars: list[str]) -> dict[str, bool]:
    """Run the roles' conditions of these switches in debug tasks on localhost; which ran."""
    tasks = []
    for switch in switches:
        for name, conditions, own_vars in _conditions_of(switch):
            tasks.append(
                {
                    "name": f"{switch}: {name}",
                    "ansible.builtin.debug": {"msg": f"RAN {switch}: {name}"},
                    "when": conditions,
                    "vars": own_vars,
                }
            )
    assert tasks, f"no task reads {switches}"
    play = [
        {
            "name": "Evaluate the roles' switches",
            "hosts": "localhost",
            "gather_facts": False,
            # The roles' defaults, below -e as role defaults are.
            "vars_files": [str(p) for p in sorted(ROLES.glob("*/defaults/main.yml"))],
            "vars": CONTEXT,
            "tasks": tasks,
        }
    ]
    book = tmp_path / "switches.yml"
    book.write_text(yaml.safe_dump(play, sort_keys=False))
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", "localhost,", "-c", "local", str(book), *extra_vars],
        capture_output=True,
        text=True,
        env=ansible_env(),
        timeout=scaled(300),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {str(t["name"]): f'"msg": "RAN {t["name"]}"' in proc.stdout for t in tasks}


SWITCHES = ["nvidia_driver_reboot", "containers_nvidia_default_runtime"]


def test_the_switches_are_on_by_default(tmp_path: Path) -> None:
    ran = _evaluate(tmp_path, SWITCHES, [])
    assert ran["nvidia_driver_reboot: Reboot into the new driver"] is True
    assert ran["containers_nvidia_default_runtime: Make the NVIDIA runtime Docker's runtime"]


@pytest.mark.parametrize("how", ["ansible-playbook string", "bringup provision YAML"])
def test_false_switches_them_off(tmp_path: Path, how: str) -> None:
    """`=false` as ansible-playbook passes it (a string) and as bringup provision does."""
    pairs = [f"{name}=false" for name in SWITCHES]
    if how == "bringup provision YAML":
        typed = parse_extra_vars(pairs)
        assert typed == {name: False for name in SWITCHES}
        extra = ["-e", json.dumps(typed)]
    else:
        extra = [arg for pair in pairs for arg in ("-e", pair)]
    ran = _evaluate(tmp_path, SWITCHES, extra)
    assert ran["nvidia_driver_reboot: Reboot into the new driver"] is False
    assert ran["containers_nvidia_default_runtime: Make the NVIDIA runtime Docker's runtime"] is (
        False
    )
