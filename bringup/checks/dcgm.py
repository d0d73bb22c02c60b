"""Check of the `dcgm` probe: NVIDIA's diagnostic, one finding per test and GPU not passed.

A failed test on one GPU is one FAIL naming the GPU, the test and DCGM's own message; a
warning WARNs, a skipped test is SKIP (DCGM says why), a test that could not run is ERROR.
When nothing went wrong, one PASS says what ran. The action comes from the failing test
and from what DCGM's message says caused it (thermal, power, memory, NVLink, PCIe, DCGM's
own harness): DCGM's suggestion for that cause first. docs/reference.md#dcgm-diagnostics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bringup.checks import Check, finding
from bringup.findings import Finding, Status
from bringup.node.parsers.dcgm_diag import STATUSES, DiagResult, DiagTest, worst
from bringup.node.probes.dcgm import DcgmFacts
from bringup.profile import Profile

_STATUS = {"skip": Status.SKIP, "warn": Status.WARN, "fail": Status.FAIL, "error": Status.ERROR}
_VERB = {"skip": "skipped", "warn": "warned", "fail": "failed", "error": "could not run"}

_HARDWARE = "RMA the GPU if it fails again"
# What to do when a test does not pass and DCGM's message names no cause of its own, by the
# test's name in either DCGM's 3.x wording or its 4.x plugin name (normalised: lowercase,
# letters and digits only).
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
# The name `dcgmi diag -r` takes for a test, by the same normalised key (DCGM 3.x prints
# "GPU Memory" for the plugin `memory`; dcgmi diag reference, "Test selection").
_RUN_NAMES = {
    "gpumemory": "memory",
    "memory": "memory",
    "targetedpower": "targeted_power",
    "targetedstress": "targeted_stress",
    "smstress": "sm_stress",
    "memorybandwidth": "memory_bandwidth",
    "memtest": "memtest",
    "pcie": "pcie",
    "diagnostic": "diagnostic",
    "pulsetest": "pulse_test",
    "contextcreate": "context_create",
}


@dataclass(frozen=True)
class Cause:
    """A cause DCGM's own message names, whatever test reported it, and what to do.

    `said` matches the message templates of DCGM's error codes of this subject
    (`dcgmlib/dcgm_errors.h`, the `DCGM_FR_*_MSG` strings, in github.com/NVIDIA/DCGM; their
    categories and severities: docs.nvidia.com/datacenter/dcgm/latest/reference/diagnostics/
    errors.html). `action` is DCGM's suggestion for those codes (the `DCGM_FR_*_NEXT`
    strings), with the command that does it. docs/reference.md#dcgm-diagnostics.
    """

    subject: str
    said: re.Pattern[str]
    action: str


# In the order they are tried: a message about thermal violations during a memory test is
# about cooling, not about memory (a message can name more than one cause: each counts).
CAUSES = (
    Cause(
        "thermal",
        # DCGM_FR_CLOCK_THROTTLE_THERMAL, _THERMAL_VIOLATIONS(_TS), _TEMP_VIOLATION
        re.compile(r"thermal violation|exceeded user-specified maximum allowed temperature", re.I),
        "thermal violations during the test: verify the cooling of this GPU and node "
        "(airflow and fans, the thermal interface material, the external cooling), as DCGM "
        "advises; `nvidia-smi -q -d TEMPERATURE,PERFORMANCE` shows the margins and the "
        "active throttle reasons",
    ),
    Cause(
        "power",
        # DCGM_FR_CLOCK_THROTTLE_POWER, _TARGET_POWER, _ENFORCED_POWER_LIMIT
        re.compile(
            r"due to power violation|did not reach desired power|enforced power limit", re.I
        ),
        "the GPU did not reach or hold its target power: check that the enforced power limit "
        "is the default (`nvidia-smi -q -d POWER`; raise it with `nvidia-smi -i <gpu> -pl "
        "<default W>`), that clocks and utilisation were high under the test, and the "
        "node's power delivery",
    ),
    Cause(
        "memory",
        # DCGM_FR_VOLATILE_DBE/SBE_DETECTED, _PENDING_PAGE_RETIREMENTS, _RETIRED_PAGES_*,
        # _FAULTY_MEMORY, _CUDA_DBE, _MEMORY_MISMATCH, _ROW_REMAP_FAILURE,
        # _UNCORRECTABLE_ROW_REMAP, _PENDING_ROW_REMAP, _DBE/SBE_(THRESHOLD_)VIOLATION
        re.compile(
            r"ECC error|double-bit|retired page|page retirement|faulty memory|"
            r"memory mismatch|row remap|uncorrectable memory|memory errors",
            re.I,
        ),
        "memory errors: read ECC and remapped rows (`nvidia-smi -q -d ECC,ROW_REMAPPER`); "
        "drain the GPU and reset it (`nvidia-smi -r -i <gpu>`) or reboot the node so pending "
        "remaps apply, then run DCGM's field diagnostic; RMA the GPU if errors recur",
    ),
    Cause(
        "nvlink",
        # DCGM_FR_NVLINK_ERROR_THRESHOLD, _NVLINK_DOWN, _GPU_EXPECTED_NVLINKS_UP,
        # _NVLINK_CRC_ERROR_THRESHOLD, _NVLINK_ERROR_CRITICAL, _NVSWITCH_*, _SXID_ERROR,
        # _CUDA_FM_NOT_INITIALIZED
        re.compile(r"nvlink|nvswitch|fabric ?manager|SXID", re.I),
        "NVLink trouble: make sure Fabric Manager runs (`systemctl status "
        "nvidia-fabricmanager`) and read its log, `dmesg` and the link counters "
        "(`nvidia-smi nvlink -s`, `nvidia-smi nvlink -e`); errors that persist need DCGM's "
        "field diagnostic, then a reseat or RMA of the baseboard",
    ),
    Cause(
        "pcie",
        # DCGM_FR_PCI_REPLAY_RATE, _PCIE_GENERATION, _PCIE_WIDTH, _PCIE_H_REPLAY_VIOLATION,
        # _PCIE_REPLAY_(THRESHOLD_)VIOLATION, _LOW_BANDWIDTH
        re.compile(r"PCIe repla|PCI link (generation|width)|host-side PCIe", re.I),
        "PCIe trouble: read the link (`nvidia-smi -q -d PCIE`: generation, width, replays) "
        "against the slot's; reseat the GPU and check its riser and the BIOS PCIe setting; "
        "run the system's PCIe diagnostics for the hops off the GPU board; RMA if it persists",
    ),
)


def causes_in(messages: list[str]) -> list[Cause]:
    """The causes DCGM's messages name, in CAUSES' order, each once."""
    text = " ".join(messages)
    return [cause for cause in CAUSES if cause.said.search(text)]


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
    status, action = _STATUS[result.status], _action(test, result, level, said)
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


def _action(test: DiagTest, result: DiagResult, level: int, said: list[str]) -> str:
    """What to do, from the failing test and what DCGM said about it: a cause DCGM's
    message names comes first (a memory test that failed on thermal violations is a
    cooling problem before it is a memory one), then the rerun of that test, then the
    test's own action should it fail again without that cause."""
    if result.status == "skip":
        return _SKIPPED
    if result.status == "error":
        return _NOT_RUN
    key = re.sub(r"[^a-z0-9]", "", test.name.lower())
    gpu = _gpu_of(result, said)
    own = _ACTIONS.get(key)
    if own is None:
        if test.category == "Deployment" or key == "software":
            own = _SOFTWARE
        else:
            own = f"rerun `dcgmi diag -r {level}` on this GPU; {_HARDWARE}"
    causes = causes_in(said)
    if not causes:
        return own.replace("<gpu>", gpu)
    named = "; ".join(c.action for c in causes)
    # Deployment checks are level 1's; an output without its command line has level 0.
    run = _RUN_NAMES.get(key, "1" if test.category == "Deployment" else str(level or 3))
    action = f"{named}; then rerun `dcgmi diag -r {run} -i {gpu}`"
    if key in _ACTIONS and _TEST_SUBJECTS.get(key) not in {c.subject for c in causes}:
        subjects = " or ".join(_SUBJECT_WORDS[c.subject] for c in causes)
        action += f"; if {test.name} fails again with no {subjects}: {own}"
    return action.replace("<gpu>", gpu)


def _gpu_of(result: DiagResult, said: list[str]) -> str:
    """The GPU a result is about: its row's, else the one GPU DCGM's message names."""
    if result.gpu is not None:
        return str(result.gpu)
    named = set(re.findall(r"\bGPU ?([0-9]+)\b", " ".join(said)))
    return named.pop() if len(named) == 1 else "<gpu>"


# The subject each test is about (a cause DCGM names that is the test's own subject needs
# no second action); the pcie test checks NVLink too (pcie.gpu_nvlinks_expected_up).
_TEST_SUBJECTS = {
    "gpumemory": "memory",
    "memory": "memory",
    "memtest": "memory",
    "memorybandwidth": "memory",
    "targetedpower": "power",
    "pulsetest": "power",
    "pcie": "pcie",
}
_SUBJECT_WORDS = {
    "thermal": "thermal violation",
    "power": "power message",
    "memory": "memory error",
    "nvlink": "NVLink error",
    "pcie": "PCIe error",
}


CHECKS = [
    Check(
        "dcgm.diag",
        "dcgm",
        judge_diag,
        "NVIDIA's DCGM diagnostic: every test on every GPU",
        profile_free=True,
    ),
]
