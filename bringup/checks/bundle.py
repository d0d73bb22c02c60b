"""Whether a handover bundle holds all a verdict needs: each part judged as the run it is.

A bundle (bringup/baseline.py) gathers run directories; its verdict is worth what its
weakest part is worth. So each part goes through the same completeness rules as a run
given to `bringup report` on its own (checks/completeness.py: status complete, findings
that parse, no lost verdicts, every planned probe answered), and the parts must be the ones
the bundle's manifest.json records. One ERROR per problem, naming the part:

    report.bundle   the bundle and its parts disagree: a part listed but missing or
                    unreadable, its manifest.json, status or exit code not what the bundle
                    recorded, a directory in the bundle that it does not list, no part
                    (bringup/baseline.py `bundle_changes` finds them)
    report.*        a part's own completeness findings (report.run for a crashed part,
                    report.findings for a cut findings.jsonl, ...), "part PATH: " first

The bundle read as one run (its parts' facts merged per node) is judged too; a finding of
it that repeats a part's, for the same node and check, is left out: the part's names where.

Pure: over what the reader found (bringup/report/rundata.py's Part and BundleChange).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from bringup.baseline import BundleChange
from bringup.checks import finding
from bringup.checks.completeness import RunContents, judge_completeness
from bringup.findings import Finding, Status

_VERIFY = (
    "see what changed with `bringup verify BUNDLE`; gather the original runs again "
    "(`bringup handover --from RUN ...`)"
)


class PartContents(Protocol):
    """One part of a bundle as read: the run, or why it cannot be read."""

    @property
    def kind(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def run(self) -> RunContents | None: ...
    @property
    def problem(self) -> str | None: ...


def judge_bundle(
    parts: Sequence[PartContents], changes: Sequence[BundleChange], whole: Sequence[Finding]
) -> list[Finding]:
    """The bundle's findings: where it disagrees with its manifest, each part's
    completeness, then `whole` (the completeness of the bundle read as one run) less what
    a part said already."""
    out = [_disagrees(change) for change in changes]
    named = {change.path.split("/")[0] for change in changes}
    for part in parts:
        if part.run is None:
            if part.path.split("/")[0] not in named:
                why = part.problem or "it cannot be read"
                out.append(_disagrees(BundleChange("missing", f"{part.path}/", why)))
            continue
        out += [_of_part(part.path, f) for f in judge_completeness(part.run)]
    said = {(f.node, f.check) for f in out if f.node}
    out += [f for f in whole if not f.node or (f.node, f.check) not in said]
    return out


def _disagrees(change: BundleChange) -> Finding:
    return finding(
        "report.bundle",
        Status.ERROR,
        f"the bundle is not what its manifest.json records: {change.line()}",
        action=_VERIFY,
    )


def _of_part(path: str, f: Finding) -> Finding:
    """A part's finding, saying which part."""
    return replace(f, message=f"part {path}: {f.message}")
