"""The one list of checks, and judging a node's facts against a profile.

A subject's check module is imported when a probe it judges is first judged: `bringup
slurm healthcheck` runs at every job start and judges two probes, and importing every
check module (and what they import: the burn-in baseline, the NCCL and fio models) cost
it more CPU than its probes (benchmarks/node_side.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from typing import Any

from bringup.checks import Check, finding
from bringup.checks.actions import (
    CHECK_ACTIONS,
    CRASHED,
    name_the_gpu,
    unmeasured_action,
    with_action,
)
from bringup.facts import FactsError, NodeFacts, decode
from bringup.findings import Finding, Status
from bringup.profile import Profile

# probe -> the module of bringup.checks whose CHECKS judge it, in the order of all_checks()
# (tests/unit/test_catalog.py holds every module's checks to this table)
CHECK_MODULES: dict[str, str] = {
    "gpu": "gpu",
    "topology": "topology",
    "host": "host",
    "fabric": "fabric",
    "nvme": "nvme",
    "storage": "storage",
    "uplink": "uplink",
    "xid": "xid",
    "dcgm": "dcgm",
    "nccl": "nccl",
    "ibperf": "ibperf",
    "fio": "fio",
    "gemm": "gemm",
    "telemetry": "gemm",
    "p2p": "p2p",
    "burnin": "burnin",
}


def _checks_of(module: str) -> list[Check]:
    checks: list[Check] = importlib.import_module(f"bringup.checks.{module}").CHECKS
    return checks


def checks_for(probe: str, profile_free_only: bool = False) -> list[Check]:
    """The checks that judge `probe`, in catalog order (their module loads here); with
    `profile_free_only`, those that can judge a GPU no profile fits."""
    module = CHECK_MODULES.get(probe)
    checks = [c for c in _checks_of(module) if c.probe == probe] if module else []
    return [c for c in checks if c.profile_free or not profile_free_only]


def all_checks() -> list[Check]:
    """Every check, every subject's module loaded: the report's table, the docs, tests."""
    return checks_of_probes(CHECK_MODULES)


def checks_of_probes(probes: Iterable[str]) -> list[Check]:
    """Every check of the subjects that judge these probes, in the order of all_checks():
    only those subjects' modules load (a health check judges two probes)."""
    wanted = {CHECK_MODULES[p] for p in probes if p in CHECK_MODULES}
    modules = [m for m in dict.fromkeys(CHECK_MODULES.values()) if m in wanted]
    return [c for module in modules for c in _checks_of(module)]


def __getattr__(name: str) -> Any:
    # `CHECKS`, the whole list, as before: built on first use (PEP 562).
    if name == "CHECKS":
        return all_checks()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def judge_probe(
    probe: str,
    facts: Any,
    error: str | None,
    profile: Profile,
    context: Mapping[str, Any] | None = None,
    profile_free_only: bool = False,
) -> list[Finding]:
    """Findings of every check that reads `probe`; an unmeasured probe makes each an ERROR.
    With `profile_free_only` (a GPU no profile fits), only the checks that need none.

    `context` holds the node's other probes' facts (probe -> facts), for the checks that
    read another probe as evidence; without it they judge `facts` alone. Every ERROR of an
    unmeasured probe carries the same message (the probe's error) and a check name
    starting with the probe's: a console can show them as one line.

    Every WARN, FAIL and ERROR leaves with an action: the check's own, else its line of
    CHECK_ACTIONS (bringup/checks/actions.py).
    """
    findings: list[Finding] = []
    for check in checks_for(probe, profile_free_only):
        if error is not None and check.applies is not None and not check.applies(profile):
            continue  # nothing to measure here, so nothing left unmeasured
        if error is not None:
            action = unmeasured_action(probe, error)
            findings.append(finding(check.name, Status.ERROR, error, action=action))
            continue
        extra = [(context or {}).get(check.context)] if check.context else []
        try:
            judged = check.judge(facts, profile, *extra)
        except Exception as exc:  # a bug in one check must not hide the others' verdicts
            message = f"check crashed: {type(exc).__name__}: {exc}"
            findings.append(finding(check.name, Status.ERROR, message, action=CRASHED))
            continue
        action = CHECK_ACTIONS.get(check.name)
        findings.extend(with_action(f, action) if action else f for f in judged)
    return findings


def judge_node(node: NodeFacts, profile: Profile, profile_free_only: bool = False) -> list[Finding]:
    """Findings for every probe recorded for a node, each stamped with the node's name
    (with `profile_free_only`, of the checks that need no profile: see judge_probe)."""
    decoded: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for record in node.probes.values():
        facts, error = None, record.error
        if record.ok:
            try:
                facts = decode(record)
            except FactsError as exc:
                error = str(exc)
        elif error is None:
            error = "probe failed without a reason"
        if error is None:
            decoded[record.probe] = facts
        else:
            errors[record.probe] = error
    findings: list[Finding] = []
    for record in node.probes.values():
        probe = record.probe
        judged = judge_probe(
            probe, decoded.get(probe), errors.get(probe), profile, decoded, profile_free_only
        )
        if probe == "gpu":  # NVML's index: the serial names the same GPU (not a CUDA index)
            judged = [name_the_gpu(f, decoded.get("gpu")) for f in judged]
        findings.extend(judged)
    # Named in place, not copied: each finding was made by this call (a check returns its
    # own, tests/unit/test_catalog.py), and a copy of each was 8 % of judging a node.
    for f in findings:
        f.node = node.node
    return findings
