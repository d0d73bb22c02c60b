"""The one list of checks, and judging a node's facts against a profile."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bringup.checks import (
    Check,
    dcgm,
    finding,
    fio,
    gpu,
    host,
    nccl,
    nvme,
    p2p,
    storage,
    topology,
    uplink,
    xid,
)
from bringup.checks import burnin as burnin_checks
from bringup.checks import gemm as gemm_checks
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

CHECKS: list[Check] = [
    *gpu.CHECKS,
    *topology.CHECKS,
    *host.CHECKS,
    *nvme.CHECKS,
    *storage.CHECKS,
    *uplink.CHECKS,
    *xid.CHECKS,
    *dcgm.CHECKS,
    *nccl.CHECKS,
    *fio.CHECKS,
    *gemm_checks.CHECKS,
    *p2p.CHECKS,
    *burnin_checks.CHECKS,
]


def checks_for(probe: str, profile_free_only: bool = False) -> list[Check]:
    return [c for c in CHECKS if c.probe == probe and (c.profile_free or not profile_free_only)]


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
    return [f.model_copy(update={"node": node.node}) for f in findings]
