"""Whether the run a replay judges again is still what that run recorded.

A run's manifest holds the SHA-256 of every evidence file as the run left it
(`files_sha256`, bringup/provenance.py). A replay compares them with the files as it
finds them: each file changed, gone or added since is one ERROR `replay.source`, on the
node the file belongs to (or the whole run), and the replay cannot be ACCEPTED. A run
that never recorded its hashes (it did not finish) is said once, as an ERROR too: what
cannot be checked is not taken on trust.

Pure: over the recorded and present hashes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from bringup.checks import finding
from bringup.findings import Finding, Status
from bringup.provenance import compare
from bringup.rundir import node_file

CHECK = "replay.source"
_ACTION = (
    "judge the run as it was recorded: ask its owner for the original run directory "
    "(`bringup verify RUN_DIR` names every changed file), or measure again with `bringup check`"
)


def judge_replay_source(
    run: str,
    recorded: Mapping[str, str] | None,
    present: Mapping[str, str],
    node_of_file: Mapping[str, str],
    nodes: set[str] | None = None,
) -> list[Finding]:
    """One ERROR per evidence file of `run` that differs from what it recorded.

    `node_of_file` maps a node's file name (rundir.file_name) to the node; `nodes`, when
    given, are the nodes replayed (--limit): a changed file of another node is not theirs.
    """
    if recorded is None:
        message = (
            f"replayed data cannot be checked: run {run} recorded no SHA-256 of its files "
            "(it did not finish)"
        )
        return [finding(CHECK, Status.ERROR, message, action=_ACTION)]
    found = []
    for change in compare(dict(recorded), dict(present)):
        node = _node_of(change.path, node_of_file)
        if nodes is not None and node and node not in nodes:
            continue
        message = f"replayed data differs from what run {run} recorded: {change.path}"
        if change.kind != "modified":
            message += f" ({change.kind})"
        item = finding(CHECK, Status.ERROR, message, action=_ACTION)
        found.append(replace(item, node=node))
    return found


def _node_of(path: str, node_of_file: Mapping[str, str]) -> str:
    """The node a run's evidence file belongs to (facts/<node>.json, raw/<node>/..., or
    the same one shard down); "" for the run's own files (findings.jsonl)."""
    name = node_file(path)
    return "" if name is None else node_of_file.get(name, "")
