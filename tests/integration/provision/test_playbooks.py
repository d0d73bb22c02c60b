"""The playbooks themselves: ansible-lint (production profile), syntax, and the fabric
verification judged on recorded `nvidia-smi -q` outputs by Ansible itself."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support import FIXTURES
from tests.support.provision import (
    ANSIBLE_LINT,
    ANSIBLE_PLAYBOOK,
    PLAYBOOKS,
    ansible_env,
    needs_ansible,
)
from tests.support.timing import scaled

pytestmark = [pytest.mark.provision, needs_ansible]

ROLES = ["node_tools", "nvidia_driver", "fabric_manager", "cuda", "dcgm", "containers"]
SMI = FIXTURES / "smi"


@pytest.mark.skipif(ANSIBLE_LINT is None, reason="ansible-lint not installed")
def test_ansible_lint_production_profile_is_clean() -> None:
    # --offline: no collection installs, no schema refresh (playbooks/.ansible-lint says so too).
    proc = subprocess.run(
        [str(ANSIBLE_LINT), "--offline", "--profile", "production", "--nocolor", "."],
        cwd=PLAYBOOKS,
        capture_output=True,
        text=True,
        env=ansible_env(),
        timeout=scaled(600),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Profile 'production' was required, and it passed" in proc.stdout + proc.stderr


def test_syntax_check() -> None:
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "--syntax-check", "-i", "localhost,", "site.yml"],
        cwd=PLAYBOOKS,
        capture_output=True,
        text=True,
        env=ansible_env(),
        timeout=scaled(300),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


SELECT = PLAYBOOKS / "roles" / "nvidia_repo" / "tasks" / "select.yml"


def _select(tmp_path: Path, wants: dict[str, str], *argv: str) -> tuple[str, str]:
    """Run the hold/release script of nvidia_repo/tasks/select.yml with sh, against a
    dpkg-query answering `wants` (package -> selection; any other package is unknown to
    it) and a dpkg that logs what --set-selections reads: (its stdout, dpkg's log)."""
    script = yaml.safe_load(SELECT.read_text())[0]["vars"]["nvidia_repo_select_script"]
    bin_dir, log = tmp_path / "bin", tmp_path / "set-selections.log"
    bin_dir.mkdir(exist_ok=True)
    log.write_text("")
    table = tmp_path / "wants"
    table.write_text("".join(f"{name} {want}\n" for name, want in wants.items()))
    (bin_dir / "dpkg-query").write_text(  # dpkg-query -W -f=FORMAT NAME
        "#!/bin/sh\nfor name do :; done\n"
        f"awk -v n=\"$name\" '$1 == n {{print $2; found = 1}} END {{exit !found}}' {table}\n"
    )
    (bin_dir / "dpkg").write_text(f'#!/bin/sh\n[ "$1" = --set-selections ] && cat >> {log}\n')
    for tool in ("dpkg-query", "dpkg"):
        (bin_dir / tool).chmod(0o755)
    proc = subprocess.run(
        ["sh", "-c", script, "dpkg-select", *argv],
        capture_output=True,
        text=True,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
        timeout=scaled(30),
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, log.read_text()


def test_one_dpkg_call_sets_only_the_selections_that_differ(tmp_path: Path) -> None:
    """The roles' holds and releases: the packages whose selection differs (a package dpkg
    does not know too, as ansible.builtin.dpkg_selections does) go to dpkg in one
    --set-selections and are printed (the task is changed); none differ: nothing is
    printed nor set; check mode prints what would change and sets nothing."""
    wants = {"nvidia-open": "install", "libnvsdm": "hold", "nvidia-fabricmanager": "install"}
    names = ["nvidia-open", "libnvsdm", "nvidia-fabricmanager", "not-installed"]
    changes = "nvidia-open hold\nnvidia-fabricmanager hold\nnot-installed hold\n"
    assert _select(tmp_path, wants, "apply", "hold", *names) == (changes, changes)
    assert _select(tmp_path, wants, "check", "hold", *names) == (changes, "")
    assert _select(tmp_path, wants, "apply", "hold", "libnvsdm") == ("", "")
    released = "libnvsdm install\n"
    assert _select(tmp_path, wants, "apply", "install", *names[:3]) == (released, released)


def test_every_role_has_one_documented_defaults_file() -> None:
    """Each variable of a role's defaults/main.yml has its own comment right above it."""
    for role in [*ROLES, "hardware_facts", "nvidia_repo"]:
        defaults = PLAYBOOKS / "roles" / role / "defaults" / "main.yml"
        lines = defaults.read_text().splitlines()
        for i, line in enumerate(lines):
            if line and not line.startswith((" ", "#", "-")) and line != "---":
                previous = lines[i - 1] if i else ""
                assert previous.startswith("#"), (
                    f"{defaults}:{i + 1}: {line.split(':')[0]} has no comment right above it"
                )
    for role in ROLES:
        assert f"tags: [{role}]" in (PLAYBOOKS / "site.yml").read_text()


FABRIC_PLAY = """
- name: Judge a recorded nvidia-smi -q with the fabric_manager role's own expressions
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Load the role's verification expressions
      ansible.builtin.include_vars: {vars}
    - name: Report the verdict
      ansible.builtin.debug:
        msg: >-
          VERDICT {{{{ fabric_manager_fabric_ok | bool }}}}
          {{{{ fabric_manager_states | to_json }}}}
      vars:
        fabric_manager_smi_q:
          stdout: >-
            {{{{ lookup('ansible.builtin.file', smi_file)
            | replace(mutate_from, mutate_to) }}}}
"""


def _fabric_verdict(tmp_path: Path, smi_file: Path, gpus: int, mutate: tuple[str, str]) -> str:
    play = tmp_path / "fabric.yml"
    play.write_text(FABRIC_PLAY.format(vars=PLAYBOOKS / "roles/fabric_manager/vars/main.yml"))
    proc = subprocess.run(
        [
            str(ANSIBLE_PLAYBOOK),
            "-i",
            "localhost,",
            "-c",
            "local",
            str(play),
            "-e",
            f"smi_file={smi_file}",
            "-e",
            f"hardware_facts_gpu_count={gpus}",
            "-e",
            f"mutate_from='{mutate[0]}'",
            "-e",
            f"mutate_to='{mutate[1]}'",
        ],
        capture_output=True,
        text=True,
        env=ansible_env(),
        timeout=scaled(300),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(x for x in proc.stdout.splitlines() if "VERDICT" in x)
    return line.split("VERDICT", 1)[1].strip().rstrip('"')


@pytest.mark.parametrize(
    ("fixture", "gpus", "mutate", "expected"),
    [
        # Recorded H200 (driver 590.48.01): Fabric State Completed, Status Success.
        ("ugpuexp-h200-q-load.txt", 1, ("x", "x"), 'True [["Completed", "Success"]]'),
        # The same output while Fabric Manager has not finished.
        (
            "ugpuexp-h200-q-load.txt",
            1,
            (": Completed", ": In Progress"),
            'False [["In Progress", "Success"]]',
        ),
        # One GPU reported where the node has eight: not every GPU registered.
        ("ugpuexp-h200-q-load.txt", 8, ("x", "x"), 'False [["Completed", "Success"]]'),
        # R570+ Health lines: a healthy summary passes; an unhealthy route does not, though
        # the state reads Completed/Success.
        (
            "ugpuexp-h200-q-load.txt",
            1,
            ("Summary" + " " * 36 + ": N/A", "Summary" + " " * 36 + ": Healthy"),
            'True [["Completed", "Success"]]',
        ),
        (
            "ugpuexp-h200-q-load.txt",
            1,
            ("Route Unhealthy" + " " * 28 + ": N/A", "Route Unhealthy" + " " * 28 + ": True"),
            'False [["Completed", "Success"]]',
        ),
        (
            "ugpuexp-h200-q-load.txt",
            1,
            ("Summary" + " " * 36 + ": N/A", "Summary" + " " * 36 + ": Unhealthy"),
            'False [["Completed", "Success"]]',
        ),
        # An A100 nvidia-smi -q (driver 510) without any Fabric section.
        ("mleng-a100-sxm4-80gb-q-excerpt-remapped-rows-pending.txt", 1, ("x", "x"), "False []"),
    ],
)
def test_fabric_verification_on_recorded_outputs(
    tmp_path: Path, fixture: str, gpus: int, mutate: tuple[str, str], expected: str
) -> None:
    verdict = _fabric_verdict(tmp_path, SMI / fixture, gpus, mutate)
    assert verdict.replace('\\"', '"') == expected


HEADERS_PLAY = """
- name: Evaluate nvidia_driver_headers_packages for a kernel release
  hosts: localhost
  gather_facts: false
  vars_files: [{defaults}]
  tasks:
    - name: Report them
      ansible.builtin.debug:
        msg: "HEADERS {{{{ nvidia_driver_headers_packages | to_json }}}}"
      vars:
        ansible_facts: {{kernel: "{{{{ kernel }}}}"}}
"""


@pytest.mark.parametrize(
    ("kernel", "expected"),
    [
        # Debian: the running kernel's headers and its flavour's metapackage, which pulls
        # the headers of every later kernel (NVIDIA's Debian instructions).
        ("6.1.0-18-amd64", ["linux-headers-6.1.0-18-amd64", "linux-headers-amd64"]),
        (
            "6.1.0-18-cloud-amd64",
            ["linux-headers-6.1.0-18-cloud-amd64", "linux-headers-cloud-amd64"],
        ),
        # Ubuntu: the same rule gives linux-headers-generic.
        ("6.8.0-52-generic", ["linux-headers-6.8.0-52-generic", "linux-headers-generic"]),
    ],
)
def test_kernel_headers_also_follow_later_kernels(
    tmp_path: Path, kernel: str, expected: list[str]
) -> None:
    play = tmp_path / "headers.yml"
    play.write_text(
        HEADERS_PLAY.format(defaults=PLAYBOOKS / "roles/nvidia_driver/defaults/main.yml")
    )
    proc = subprocess.run(
        [
            str(ANSIBLE_PLAYBOOK),
            "-i",
            "localhost,",
            "-c",
            "local",
            str(play),
            "-e",
            f"kernel={kernel}",
        ],
        capture_output=True,
        text=True,
        env=ansible_env(),
        timeout=scaled(300),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(x for x in proc.stdout.splitlines() if "HEADERS" in x)
    assert (
        json.loads(line.split("HEADERS", 1)[1].strip().rstrip('"').replace('\\"', '"')) == expected
    )
