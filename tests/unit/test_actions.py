"""Every check has an action: the table in bringup/checks/actions.py, and what reaches findings."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from bringup import profile
from bringup.checks import Check, actions
from bringup.checks.actions import CHECK_ACTIONS, PROBE_ACTIONS, name_the_gpu, unmeasured_action
from bringup.checks.catalog import CHECKS, judge_node, judge_probe
from bringup.commands.report import build_report
from bringup.findings import Finding, Status
from bringup.node.catalog import PROBES
from bringup.node.gpu_facts import GpuFacts
from bringup.node.probes.host import PathSpace
from bringup.profile import Profile
from bringup.report.render import markdown
from bringup.report.rundata import load
from bringup.sim.demo import _gpu_facts, _host, demo_nodes
from tests.support.profiles import h100_profile
from tests.support.report_runs import demo_run

PROFILE = h100_profile()
B300 = profile.load("b300")

# Words that say "do something" without saying what.
GENERIC = re.compile(
    r"^(investigate|check it|see (the )?message|look into it|contact support|fix it)\b"
    r"|no action recorded",
    re.IGNORECASE,
)
# An action names what to run: a `command`, an --option, or a file to edit.
CONCRETE = re.compile(
    r"`[^`]+`|--[a-z]|/etc/|/var/log/|\b(reseat|RMA|power-cycle|reboot|replace)\b"
)


def is_specific(action: str | None) -> bool:
    return bool(action) and GENERIC.search(action or "") is None and bool(CONCRETE.search(action))


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.name)
def test_every_check_in_the_catalog_has_a_specific_action(check: Check) -> None:
    assert is_specific(CHECK_ACTIONS.get(check.name)), check.name


def test_the_table_names_only_real_checks_and_probes() -> None:
    assert set(CHECK_ACTIONS) == {c.name for c in CHECKS}
    assert set(PROBES) <= set(PROBE_ACTIONS) <= set(PROBES) | {c.probe for c in CHECKS}
    assert all(is_specific(a) for a in PROBE_ACTIONS.values())


@pytest.mark.parametrize("action", ["", "investigate", "investigate: no action recorded"])
def test_the_rule_can_fail(action: str) -> None:
    assert not is_specific(action)


def test_host_free_space_names_the_data_dir_option() -> None:
    facts = _host("n1")
    facts.free_space = [PathSpace("/tmp", free_bytes=10**9, total_bytes=10**10, mount_point="/")]
    free = [f for f in judge_probe("host", facts, None, PROFILE) if f.check == "host.free_space"]
    assert [f.status for f in free] == [Status.FAIL]
    assert "`bringup check --data-dir /path/on/nvme`" in (free[0].action or "")
    assert "--data-dir" in CHECK_ACTIONS["host.free_space"]


def test_a_probe_without_driver_says_how_to_install_it() -> None:
    error = "no NVIDIA driver found (libnvidia-ml.so not loadable)"
    found = judge_probe("gpu", None, error, PROFILE)
    applies = [c for c in CHECKS if c.probe == "gpu" and (c.applies is None or c.applies(PROFILE))]
    assert len(found) == len(applies)
    assert {f.action for f in found} == {unmeasured_action("gpu", error)}
    assert "`bringup provision --nodes hosts.ini`" in (found[0].action or "")


@pytest.mark.parametrize(
    ("probe", "error", "says"),
    [
        ("nvme", "probe nvme timed out after 600 s", "raw/<node>/nvme/"),
        ("topology", "nvidia-smi topo -m did not finish in 30 s", "timeout_s"),
        ("xid", "probe xid crashed: KeyError", "report it with `facts/<node>.json`"),
        ("xid", "cannot read the kernel log (run as root?)", "`dmesg` must be readable"),
    ],
)
def test_unmeasured_actions(probe: str, error: str, says: str) -> None:
    assert says in unmeasured_action(probe, error)


def test_a_check_that_crashes_still_has_an_action(monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(*_: object) -> list[Finding]:
        raise KeyError("x")

    check = next(c for c in CHECKS if c.name == "host.iommu")
    broken = dataclasses.replace(check, judge=crash)
    monkeypatch.setattr("bringup.checks.host.CHECKS", [broken])  # the catalog reads it
    (found,) = judge_probe("host", _host("n1"), None, PROFILE)
    assert found.status == Status.ERROR and found.action == actions.CRASHED


@pytest.mark.parametrize("prof", [B300, PROFILE], ids=["b300", "h100 (every GPU wrong)"])
def test_every_problem_of_the_demo_fleet_has_a_specific_action(prof: Profile) -> None:
    findings = [f for node in demo_nodes() for f in judge_node(node, prof)]
    problems = [f for f in findings if f.status not in (Status.PASS, Status.SKIP)]
    assert len(problems) >= 5  # the demo's planted faults (more under the wrong profile)
    assert [f for f in problems if not is_specific(f.action)] == []


def test_the_demo_report_has_no_unrecorded_action(tmp_path: Path) -> None:
    run = demo_run(tmp_path / "run")
    report = build_report(load(run), B300, None, generated_at="T")
    assert "no action recorded" not in markdown(report)


def test_a_gpu_finding_names_the_gpu_serial_in_its_action() -> None:
    node04 = next(n for n in demo_nodes() if n.node == "b300-node04")
    (remap,) = [f for f in judge_node(node04, B300) if f.check == "gpu.remapped_rows"]
    assert remap.action is not None
    assert remap.action.startswith("reset GPU 3 (serial DEMO00040003) (`nvidia-smi -r -i 3`)")


def _gpus() -> GpuFacts:
    return _gpu_facts()


@pytest.mark.parametrize(
    ("message", "action", "expected"),
    [
        ("GPU 3: pending", "reset GPU 3 now", "reset GPU 3 (serial DEMO00000003) now"),
        ("GPU 3: pending", "reset it", "GPU 3 (serial DEMO00000003): reset it"),
        ("GPU 3, 4: pending", "reset them", "reset them"),  # two GPUs: no one serial
        ("GPU 3: x", "GPU 3 (serial S): done", "GPU 3 (serial S): done"),  # already named
        ("8 GPUs", "replace GPU 3", "replace GPU 3"),  # not about one GPU
        ("GPU 9: gone", "reseat GPU 9", "reseat GPU 9"),  # no such GPU in the facts
    ],
)
def test_name_the_gpu(message: str, action: str, expected: str) -> None:
    found = Finding(check="gpu.x", status=Status.FAIL, message=message, action=action)
    assert name_the_gpu(found, _gpus()).action == expected
    assert name_the_gpu(found, None).action == action


def test_a_serial_that_looks_like_a_regex_escape_is_copied_as_text() -> None:
    # Found by the hostile-text property test: the serial was used as a re.sub template.
    gpus = _gpus()
    gpus.gpus[3].serial = r"\A\1\g<0>"
    found = Finding(check="gpu.x", status=Status.FAIL, message="GPU 3: x", action="reset GPU 3")
    assert name_the_gpu(found, gpus).action == r"reset GPU 3 (serial \A\1\g<0>)"
