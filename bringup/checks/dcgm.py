"""Check of the `dcgm` probe: NVIDIA's diagnostic, one finding per test and GPU not passed.

A failed test on one GPU is one FAIL naming the GPU, the test and DCGM's own message; a
warning WARNs, a skipped test is SKIP (DCGM says why), a test that could not run is ERROR.
When nothing went wrong, one PASS says what ran. docs/reference.md#dcgm-diagnostics.
"""

from __future__ import annotations

import re

from bringup.checks import Check, finding
from bringup.findings import Finding, Status
from bringup.node.parsers.dcgm_diag import STATUSES, DiagResult, DiagTest, worst
from bringup.node.probes.dcgm import DcgmFacts
from bringup.profile import Profile

_STATUS = {"skip": Status.SKIP, "warn": Status.WARN, "fail": Status.FAIL, "error": Status.ERROR}
_VERB = {"skip": "skipped", "warn": "warned", "fail": "failed", "error": "could not run"}

_HARDWARE = "RMA the GPU if it fails again"
# What to do when a test does not pass, by the test's name in either DCGM's 3.x wording or
# its 4.x plugin name (normalised: lowercase, letters and digits only).
_ACTIONS: dict[str, str] = {
    "targetedpower": "the GPU did not hold its target power: check its power cables, its "
    "power limit (`nvidia-smi -q -d POWER`) and cooling; rerun `dcgmi diag -r targeted_power "
    f"-i <gpu>`; {_HARDWARE}",
    "targetedstress": "the GPU did not sustain its target FLOPS: look for throttling "
    f"(`bringup diagnose`); rerun `dcgmi diag -r targeted_stress -i <gpu>`; {_HARDWARE}",
    "smstress": "the SMs did not sustain the stress load: look for throttling "
    f"(`bringup diagnose`), rerun `dcgmi diag -r sm_stress -i <gpu>`; {_HARDWARE}",
    "gpumemory": "memory errors: check ECC and remapped rows (`nvidia-smi -q -d ECC,"
    f"ROW_REMAPPER`), reset the GPU (`nvidia-smi -r`) and rerun; {_HARDWARE}",
    "memory": "memory errors: check ECC and remapped rows (`nvidia-smi -q -d ECC,"
    f"ROW_REMAPPER`), reset the GPU (`nvidia-smi -r`) and rerun; {_HARDWARE}",
    "memorybandwidth": "HBM bandwidth below DCGM's floor: look for throttling (`bringup "
    f"diagnose`) and memory errors; {_HARDWARE}",
    "memtest": f"memory test errors: reset the GPU and rerun `dcgmi diag -r memtest`; {_HARDWARE}",
    "pcie": "PCIe or NVLink trouble: check the link (`nvidia-smi -q -d PCIE`: generation, "
    "width, replays; `nvidia-smi nvlink -s`), reseat the GPU; RMA if it persists",
    "diagnostic": f"the hardware diagnostic found a fault: rerun it on this GPU; {_HARDWARE}",
    "pulsetest": "the GPU did not ride through power pulses: check the node's power "
    f"delivery and cooling; {_HARDWARE}",
    "contextcreate": "no CUDA context on the GPU: check the driver (`nvidia-smi`) and that no "
    "process holds the GPU in exclusive mode",
}
_SOFTWARE = "fix the node's setup as DCGM's message says, then rerun the diagnostic"
_SKIPPED = (
    "DCGM's message says why (a test this GPU, its mode or this DCGM version does not "
    "support); run it where it applies, or accept the gap knowingly"
)
_NOT_RUN = "the test could not run: see DCGM's message and the host engine's log; rerun"
# DCGM's own harness failed ("There was an internal error during the test: 'Output of child
# process (N) couldn't be parsed ...'"): no GPU was judged, so the test proves nothing. A
# shared node (another job's CPU binding, a Slurm step without the whole node) is the
# known cause (NVIDIA/DCGM#253).
_INTERNAL = re.compile(r"internal error", re.I)
_HARNESS = (
    "DCGM itself failed, not a GPU: rerun with the node to itself (`sbatch --exclusive`, no "
    "other job on it), then check DCGM: `systemctl status nvidia-dcgm`, the host engine's "
    "log (`nv-hostengine -f dcgm.log --log-level debug`) and `dcgmi diag -r {test} "
    "--debugLogFile diag.log`"
)


def judge_diag(facts: DcgmFacts, profile: Profile) -> list[Finding]:
    """One finding per test and GPU that did not pass; one PASS when all did."""
    check = "dcgm.diag"
    report = facts.report
    findings: list[Finding] = []
    passed: list[str] = []
    for test in report.tests:
        bad = [r for r in _results(test) if r.status != "pass"]
        if not bad:
            passed.append(test.name)
        for result in bad:
            findings.append(_finding(check, test, result, facts.level))
    if not report.tests:
        return [finding(check, Status.ERROR, f"{facts.command}: no test verdict in the output")]
    # A PASS says what passed: a run whose every test was skipped has none to give.
    if passed and not any(f.status in (Status.FAIL, Status.WARN, Status.ERROR) for f in findings):
        version = f" (DCGM {report.dcgm_version})" if report.dcgm_version else ""
        count = len(report.device_ids)
        gpus = f" on {count} GPU{'' if count == 1 else 's'}" if count else ""
        findings.insert(
            0,
            finding(
                check,
                Status.PASS,
                f"{facts.command}{version}: {len(passed)} tests passed{gpus}: " + ", ".join(passed),
                value=len(passed),
                unit="tests",
            ),
        )
    return findings


def _results(test: DiagTest) -> list[DiagResult]:
    """The test's verdicts by GPU; its own verdict too when it gave none by GPU, or when it
    is worse than every GPU's (DCGM 4.x: the test row says Fail while each GPU row says
    Pass, as when DCGM's harness failed): the test's own verdict stands."""
    own = DiagResult(None, test.status, list(test.messages))
    if not test.results:
        return [own]
    if STATUSES.index(test.status) > STATUSES.index(worst([r.status for r in test.results])):
        return [*test.results, own]
    return test.results


def _internal_error(test: DiagTest, result: DiagResult) -> bool:
    """True when DCGM's own words for this result are an internal (harness) error."""
    said = result.messages or (test.messages if result.gpu is None else [])
    return bool(said) and all(_INTERNAL.search(m) for m in said)


def _finding(check: str, test: DiagTest, result: DiagResult, level: int) -> Finding:
    where = f" on GPU {result.gpu}" if result.gpu is not None else ""
    said = result.messages or (test.messages if _only_bad(test, result) else [])
    text = f"{test.name} {_VERB[result.status]}{where}"
    if test.category and test.category != test.name:
        text = f"{test.category} test {text}"
    if test.results and all(r is not result for r in test.results):  # the test's own row
        passed = sum(r.status == "pass" for r in test.results)
        text += f" (DCGM's verdict on the test; {passed}/{len(test.results)} GPU rows passed)"
    status, action = _STATUS[result.status], _action(test, result, level)
    if result.status in ("fail", "error", "warn") and _internal_error(test, result):
        status, action = Status.ERROR, _HARNESS.format(test=test.name)
        text = f"{test.name}: DCGM could not run the test (internal error{where})"
        if test.category and test.category != test.name:
            text = f"{test.category} test {text}"
    if said:
        text += ": " + "; ".join(said)
    return finding(check, status, text, value=test.name, expected="Pass", action=action)


def _only_bad(test: DiagTest, result: DiagResult) -> bool:
    """The test's own messages belong to this result when no other GPU did badly."""
    return [r for r in _results(test) if r.status != "pass"] == [result]


def _action(test: DiagTest, result: DiagResult, level: int) -> str:
    if result.status == "skip":
        return _SKIPPED
    if result.status == "error":
        return _NOT_RUN
    key = re.sub(r"[^a-z0-9]", "", test.name.lower())
    action = _ACTIONS.get(key)
    if action is None:
        if test.category == "Deployment" or key == "software":
            return _SOFTWARE
        action = f"rerun `dcgmi diag -r {level}` on this GPU; {_HARDWARE}"
    gpu = str(result.gpu) if result.gpu is not None else "<gpu>"
    return action.replace("<gpu>", gpu)


CHECKS = [
    Check(
        "dcgm.diag",
        "dcgm",
        judge_diag,
        "NVIDIA's DCGM diagnostic: every test on every GPU",
        profile_free=True,
    ),
]
