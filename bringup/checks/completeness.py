"""Whether a run directory holds all a verdict needs: what is missing is never a pass.

The report reads run directories tolerantly (a crashed run still makes a report) and lists
what it could not read; these are the verdicts on those lists: one ERROR `report.*` each.
Pure: over the lines the reader wrote (bringup/report/rundata.py) and the manifest status.
"""

from __future__ import annotations

from bringup.checks import finding
from bringup.findings import Finding, Status


def judge_completeness(
    run_path: str,
    unjudged: str | None,
    status: str | None,
    node_problems: dict[str, list[str]],
) -> list[Finding]:
    """ERRORs for a run never judged, a run that did not end, and each node's missing piece.

    `unjudged`: why the run has no findings (None when it has them); `status`: the
    manifest's (None without a manifest); `node_problems`: node -> what is missing there.
    """
    out: list[Finding] = []
    if unjudged is not None:
        out.append(
            finding(
                "report.findings",
                Status.ERROR,
                unjudged,
                action=f"judge the recorded facts: `bringup check --replay {run_path}`",
            )
        )
    if status is not None and status not in ("complete", "interrupted"):
        # An interrupted run already carries its own `run` ERROR finding (cli.py).
        out.append(
            finding(
                "report.run",
                Status.ERROR,
                f"the run did not complete (status {status!r}): probes after the "
                "last recorded one did not run",
                action="rerun (`bringup check --resume RUN_DIR` where available)",
            )
        )
    for node, lines in sorted(node_problems.items()):
        for line in lines:
            f = finding(
                "report.missing",
                Status.ERROR,
                line,
                action="rerun the missing probes on this node, then report again",
            )
            out.append(f.model_copy(update={"node": node}))
    return out
