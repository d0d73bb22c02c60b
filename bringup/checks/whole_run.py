"""What only a whole run shows, judged by one function for `check` at its end and for
`report` (and the exporter, and handover) afterwards, so that both say the same thing.

    report.*          the pieces the run lacks (bringup/checks/completeness.py): a planned
                      probe answered by nothing, or by a record under another name, is an
                      ERROR in both
    fleet.<metric>    the stragglers: a node worse than the fleet's median
                      (bringup/checks/stragglers.py)

`check` records these findings in its findings.jsonl (its exit code is theirs too); the
report drops whatever a run recorded of them and judges them again from the facts, so a
report on the same run reaches the same findings, and one on an edited run cannot be
talked into less by the file it reads.
"""

from __future__ import annotations

from bringup.checks.completeness import RunContents, judge_completeness
from bringup.checks.stragglers import judge_stragglers
from bringup.findings import Finding
from bringup.measurements import METRICS, NodeMeasurements, measure_fleet, tolerances
from bringup.profile import Profile


def is_whole_run(check: str) -> bool:
    """A check judged over the whole run here, not by a node's own checks."""
    if check.startswith("report."):
        return True
    return check.startswith("fleet.") and check.removeprefix("fleet.") in METRICS


def judge_whole_run(
    run: RunContents,
    profile: Profile | None,
    measured: list[NodeMeasurements] | None = None,
    complete: list[Finding] | None = None,
) -> list[Finding]:
    """The whole run's findings: what it lacks (`complete` when judged already, as a
    handover bundle's parts are), then its stragglers. `measured`:
    measure_fleet(run.facts, profile) when the caller has it already."""
    lacking = judge_completeness(run) if complete is None else list(complete)
    now = measured if measured is not None else measure_fleet(dict(run.facts), profile)
    return [*lacking, *judge_stragglers(now, tolerances(profile))]
