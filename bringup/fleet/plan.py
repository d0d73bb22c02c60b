"""Planning a run: what each node is asked to do, from the suite, the profile and its
inventory variables. Pure functions: nothing here connects or runs anything.

Per-node host variables (inventory): `bringup_profile_overrides` (a mapping merged onto
the profile, validated by its schema), `bringup_data_dirs` (where host and nvme measure),
`bringup_dataset_dir`, `bringup_checkpoint_dir` and `bringup_training_user` (what the
storage probe looks at), `bringup_uplink` (the uplink probe's endpoint),
`bringup_probe_params` ({probe: {param: value}}) and `bringup_replay` (a facts file whose
recorded probes answer for the node: how GPU facts reach GPU-less simulated nodes).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bringup import profile as profiles
from bringup.facts import NodeFacts, record_json
from bringup.fleet.inventory import Host
from bringup.fleet.transport import Runner
from bringup.provenance import file_source, sha256_file
from bringup.rundir import Override, RunDirError, load_facts
from bringup.schema import as_json
from bringup.suite import Suite

# Probes whose `paths` parameter --data-dir (or bringup_data_dirs) replaces.
PATH_PROBES = ("host", "nvme")
# Probe parameters that the check command's options (--dataset-dir, --checkpoint-dir,
# --training-user, --uplink) and these host variables set; a host's own value wins.
OPTION_VARS: dict[str, tuple[str, str]] = {
    "bringup_dataset_dir": ("storage", "dataset_dir"),
    "bringup_checkpoint_dir": ("storage", "checkpoint_dir"),
    "bringup_training_user": ("storage", "user"),
    "bringup_uplink": ("uplink", "endpoint"),
}
# Seconds a node may take beyond the sum of its probes' timeouts (connect, upload, start).
NODE_SLACK_S = 60.0


class FleetError(Exception):
    """A node's inventory variables are invalid; one line naming the node."""


# --- planning: pure functions of inventory, suite and profile -----------------------------


def build_request(
    suite: Suite,
    data_dirs: list[str] | None = None,
    *param_layers: dict[str, dict[str, Any]] | None,
) -> dict[str, Any]:
    """The node-side request: the suite's probes, with --data-dir, then each layer of
    per-node parameters ({probe: {param: value}}) laid over in order."""
    steps = []
    for step in suite.probes:
        params = dict(step.params)
        if data_dirs and step.name in PATH_PROBES:
            params["paths"] = list(data_dirs)
        for layer in param_layers:
            params.update((layer or {}).get(step.name, {}))
        steps.append({"name": step.name, "params": params, "timeout_s": step.timeout_s})
    return {"probes": steps}


def merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """`overrides` laid over `base`, mappings merged key by key."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def node_profile(base: profiles.Profile, overrides: object, node: str) -> profiles.Profile:
    """The profile for one node: `bringup_profile_overrides` merged on, schema-checked."""
    if overrides is None:
        return base
    if not isinstance(overrides, dict):
        raise FleetError(f"host {node}: bringup_profile_overrides must be a mapping")
    data = merge(as_json(base), overrides)
    try:
        return profiles.parse(data, f"host {node}: bringup_profile_overrides")
    except profiles.ProfileError as exc:
        raise FleetError(str(exc)) from None


def override_changes(base: profiles.Profile, judged: profiles.Profile) -> list[Override]:
    """Each field (dotted, "gpu.count") where the node's profile differs from its base."""
    return [
        Override(field=name, profile=was, value=now)
        for name, was, now in _differences(as_json(base), as_json(judged))
    ]


def _differences(was: Any, now: Any, where: str = "") -> list[tuple[str, Any, Any]]:
    if isinstance(was, dict) and isinstance(now, dict):
        found = []
        for key in [*was, *(k for k in now if k not in was)]:
            name = f"{where}.{key}" if where else str(key)
            found += _differences(was.get(key), now.get(key), name)
        return found
    return [] if was == now else [(where, was, now)]


def _data_dirs(value: object, node: str) -> list[str] | None:
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise FleetError(f"host {node}: bringup_data_dirs must be a path or a list of paths")
    return items


def _probe_params(value: object, node: str) -> dict[str, dict[str, Any]] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise FleetError(f"host {node}: bringup_probe_params must map probe -> {{param: value}}")
    from bringup.node.catalog import PROBES
    from bringup.node.protocol import build_params

    for probe, params in value.items():
        if probe not in PROBES:
            raise FleetError(f"host {node}: bringup_probe_params: unknown probe {probe!r}")
        try:
            build_params(probe, params)
        except (TypeError, ValueError) as exc:
            raise FleetError(f"host {node}: bringup_probe_params: {exc}") from None
    return value


def option_params(
    given: dict[str, dict[str, Any]] | None, host_vars: dict[str, Any], node: str
) -> dict[str, dict[str, Any]]:
    """{probe: {param: value}} of the command's options, a host's variables laid over."""
    params = {probe: dict(values) for probe, values in (given or {}).items()}
    for var, (probe, param) in OPTION_VARS.items():
        value = host_vars.get(var)
        if value is None:
            continue
        if not isinstance(value, str) or not value:
            raise FleetError(f"host {node}: {var} must be one string (a path, user or endpoint)")
        params.setdefault(probe, {})[param] = value
    return params


def load_replay(path: object, node: str) -> NodeFacts:
    """The recording named by `bringup_replay`: one node's facts file, each record marked
    as answered from that file (its path and SHA-256): never a live measurement."""
    file = Path(str(path))
    try:
        recorded = load_facts(file)
        sha = sha256_file(file) if file.is_file() else None
    except RunDirError as exc:
        raise FleetError(f"host {node}: bringup_replay: {exc}") from None
    except OSError as exc:
        raise FleetError(f"host {node}: bringup_replay: {file}: {exc.strerror}") from None
    if len(recorded) != 1 or sha is None:
        raise FleetError(f"host {node}: bringup_replay must name one facts/<node>.json file")
    source = file_source(str(file.resolve()), sha)
    facts = recorded[0]
    probes = {name: record.with_source(source) for name, record in facts.probes.items()}
    return replace(facts, probes=probes)


@dataclass
class NodePlan:
    """What to do on one node."""

    node: str
    runner: Runner
    request: dict[str, Any]  # the probes to run on the node itself
    replayed: list[dict[str, Any]] = field(default_factory=list)  # answered from a recording
    profile: profiles.Profile | None = None
    # --profile auto: the profile of the node's own GPU, chosen when its facts are in, with
    # the host's bringup_profile_overrides laid on it then.
    auto: bool = False
    overrides: object = None
    base: profiles.Profile | None = None  # the profile given, before the overrides
    remote: bool = True  # an SSH node: its reachability is a finding
    deadline_s: float = 0.0
    skip: bool = False  # resume: every probe already answered, judge what is recorded

    @property
    def probes(self) -> list[str]:
        """Every probe this plan records, replayed or run."""
        return [r["probe"] for r in self.replayed] + [s["name"] for s in self.request["probes"]]


def plan_node(
    host: Host,
    runner: Runner,
    suite: Suite,
    profile: profiles.Profile | str | None,
    *,
    data_dirs: list[str] | None = None,
    params: dict[str, dict[str, Any]] | None = None,
    done: NodeFacts | None = None,
    remote: bool = True,
    options: dict[str, dict[str, Any]] | None = None,
) -> NodePlan:
    """A node's plan from the suite and its inventory variables.

    `params` ({probe: {param: value}}) is the command's own per-node setting, laid over
    the host's `bringup_probe_params` (a node's place in a multi-node job, say); `done`
    (resume) drops the probes that already answered. `options` ({probe: {param: value}}) is
    what the command's options set (OPTION_VARS), under the host's own variables. A plan
    without a profile records its probes and is not judged by the suite's checks
    (snapshot; the burn-in judges itself); profile.AUTO judges the node by the profile
    of its GPU (checks/auto.py).
    """
    node, host_vars = host.name, host.vars
    dirs = _data_dirs(host_vars.get("bringup_data_dirs"), node) or data_dirs
    own = _probe_params(host_vars.get("bringup_probe_params"), node)
    named = option_params(options, host_vars, node)
    request = build_request(suite, dirs, named, own, params)
    finished = {p for p, r in (done.probes.items() if done else []) if r.ok}
    steps = [s for s in request["probes"] if s["name"] not in finished]
    replayed: list[dict[str, Any]] = []
    if host_vars.get("bringup_replay") is not None:
        recording = load_replay(host_vars["bringup_replay"], node)
        for step in list(steps):
            record = recording.probes.get(step["name"])
            if record is not None:
                copy = record_json(record)
                copy["params"] = {**copy.get("params", {}), "replayed": True}
                replayed.append(copy)
                steps.remove(step)
    overrides = host_vars.get("bringup_profile_overrides")
    auto = profile == profiles.AUTO
    judged_by = None
    if isinstance(profile, profiles.Profile):
        judged_by = node_profile(profile, overrides, node)
    elif auto and overrides is not None:
        # Said now, not after the run: a wrong key, type or range is wrong on any profile.
        node_profile(profiles.load(profiles.available()[0]), overrides, node)
    return NodePlan(
        node=node,
        runner=runner,
        request={"probes": steps},
        replayed=replayed,
        profile=judged_by,
        auto=auto,
        overrides=overrides,
        base=profile if isinstance(profile, profiles.Profile) else None,
        remote=remote,
        deadline_s=sum(float(s["timeout_s"]) for s in steps) + NODE_SLACK_S,
        skip=done is not None and not steps and not replayed,
    )


# --- what a run writes to the nodes' disks: said before it starts ---------------------------


def disk_writes(plans: list[NodePlan]) -> list[str]:
    """One line per set of directories the nvme probe will write into, with how much and
    on which nodes: fio's files and the checkpoint test are gigabytes, never unannounced."""
    from bringup.node.probes.nvme import DEFAULT_PATH
    from bringup.node.protocol import build_params

    where: dict[tuple[str, ...], tuple[str, list[str]]] = {}
    for plan in plans:
        for step in plan.request["probes"]:
            if step["name"] != "nvme":
                continue
            params = build_params("nvme", step["params"])
            paths = tuple(params.paths) if params.paths is not None else ()
            size = (
                f"fio files of {params.size_bytes / 1e9:.1f} GB (one per GPU for the "
                f"concurrent read) and a {params.checkpoint_bytes / 1e9:.1f} GB checkpoint"
            )
            where.setdefault(paths, (size, []))[1].append(plan.node)
    lines = []
    for paths, (size, nodes) in where.items():
        into = (
            ", ".join(paths)
            if paths
            else f"{DEFAULT_PATH} (no --data-dir: only if it is on a block device, "
            "else nvme.* ERROR)"
        )
        on = nodes[0] if len(nodes) == 1 else f"{len(nodes)} nodes"
        lines.append(f"nvme: {size} in {into} on {on}, removed afterwards")
    return lines
