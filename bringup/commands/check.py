"""`bringup check`, `snapshot`, `inspect` and `profiles`: run the suite on nodes, record
facts to judge later, judge a tool output someone sent, and show the shipped profiles.

    bringup check --nodes hosts.ini --profile b300     the suite on every node, over SSH
    bringup check --local --suite quick                this machine
    bringup check --replay RUN_DIR | --demo            judge recorded facts again
    bringup snapshot --out snap/                       record now, judge later
    bringup inspect nvidia-smi-q.txt --profile h100    judge a log someone sent
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bringup.commands.common import (
    AcceptOpt,
    ConnectTimeoutOpt,
    DataDirOpt,
    ForksOpt,
    JsonOpt,
    LimitOpt,
    LocalOpt,
    NodesOpt,
    OutOpt,
    ProfileOpt,
    SuiteOpt,
    create_run,
    fail,
    finish_run,
    load_facts,
    load_profile,
    load_suite,
    not_for,
    open_nodes,
    out,
    print_json,
    remember_run,
    run_json,
    show_run,
    target,
)

if TYPE_CHECKING:
    from bringup import profile
    from bringup.findings import Finding
    from bringup.fleet.run import NodeOutcome
    from bringup.fleet.target import Target
    from bringup.rundir import RunDir

profiles_app = typer.Typer(help="List and show the shipped profiles.", no_args_is_help=True)

DatasetDirOpt = Annotated[
    str | None,
    typer.Option("--dataset-dir", help="The training dataset's directory (storage checks)."),
]
CheckpointDirOpt = Annotated[
    str | None,
    typer.Option("--checkpoint-dir", help="Where training writes checkpoints (storage checks)."),
]
TrainingUserOpt = Annotated[
    str | None,
    typer.Option("--training-user", help="The user training runs as (checkpoint write test)."),
]
GoldenOpt = Annotated[
    Path | None,
    typer.Option("--golden", help="A manifest from `bringup learn`: every node judged by it."),
]
UplinkOpt = Annotated[
    str | None,
    typer.Option("--uplink", help="iperf3://HOST[:PORT] or an http(s) URL: uplink throughput."),
]


# --- check --------------------------------------------------------------------------------


def check(
    ctx: typer.Context,
    local: LocalOpt = False,
    nodes_file: NodesOpt = None,
    replay: Annotated[
        Path | None, typer.Option("--replay", help="Re-judge the facts of a run or snapshot.")
    ] = None,
    demo: Annotated[
        bool, typer.Option("--demo", help="Replay the embedded demo fleet (B300 nodes).")
    ] = False,
    resume: Annotated[
        Path | None,
        typer.Option("--resume", help="Continue a run directory: only what did not finish."),
    ] = None,
    limit: LimitOpt = None,
    forks: ForksOpt = 64,
    accept_new_hostkeys: AcceptOpt = False,
    connect_timeout: ConnectTimeoutOpt = 10.0,
    profile_name: ProfileOpt = "b300",
    suite_name: SuiteOpt = "acceptance",
    data_dirs: DataDirOpt = None,
    out_dir: OutOpt = None,
    as_json: JsonOpt = False,
    dataset_dir: DatasetDirOpt = None,
    checkpoint_dir: CheckpointDirOpt = None,
    training_user: TrainingUserOpt = None,
    uplink: UplinkOpt = None,
    golden: GoldenOpt = None,
) -> None:
    """Run the suite on nodes (--nodes, --local) or re-judge recorded facts (--replay, --demo)."""
    sources = [local, nodes_file is not None or resume is not None, replay is not None, demo]
    if sum(sources) != 1:
        fail("say where the facts come from: --nodes FILE, --local, --replay DIR or --demo")
    if limit and nodes_file is None and resume is None:
        fail("--limit selects hosts of an inventory: give --nodes FILE")
    if replay is not None or demo:
        mode = "--demo" if demo else "--replay"
        not_for(ctx, f"{mode} (it judges recorded facts; nothing runs on nodes)", *_RUN_OPTIONS)
    if resume is not None:
        not_for(ctx, "--resume (a run resumes as it started)", "profile_name", "suite_name")
    outcomes: list[NodeOutcome] = []
    golden_fields = _load_golden(golden) if golden is not None else None
    if replay is not None or demo:
        findings, run = _judge_recorded(replay, demo, profile_name, out_dir)
    else:
        if resume is not None:
            nodes_file, limit, profile_name, suite_name, data_dirs = _resumed(
                resume, nodes_file, limit, data_dirs
            )
        # A resumed run names its inventory (from its manifest) like --nodes does.
        chosen = target(local, nodes_file, limit, forks, accept_new_hostkeys, connect_timeout)
        options = _storage(chosen, dataset_dir, checkpoint_dir, training_user)
        if uplink:
            options["uplink"] = {"endpoint": uplink}
        findings, run, outcomes = probe_fleet(
            "check", chosen, suite_name, profile_name, data_dirs, out_dir, resume, options
        )
    findings += judge_fleet(run, findings, golden_fields, golden)
    code = finish_run(run, findings)
    durations = _durations(run) if outcomes else {}
    if as_json:
        nodes = {
            o.node: {"state": o.state, "reason": o.reason, "seconds": o.seconds} for o in outcomes
        }
        extra: dict[str, Any] = {"nodes": nodes, "durations": durations} if nodes else {}
        print_json(run_json(run, findings, **extra))
    else:
        show_run(run, findings, f"profile {run.manifest.profile}", durations)
    raise typer.Exit(code)


def _durations(run: RunDir) -> dict[str, dict[str, float]]:
    """Seconds each probe ran on each node (docs/workflows.md#how-long-a-suite-takes)."""
    from bringup.commands.show import probe_durations

    if not (run.path / "facts").exists():
        return {}
    return probe_durations(run.recorded())


def _load_golden(path: Path) -> dict[str, Any]:
    """The flat fields of a golden manifest; exit 2 naming what is wrong with it."""
    import yaml

    from bringup.checks.consistency import from_manifest

    try:
        return from_manifest(yaml.safe_load(path.read_text()))
    except OSError as exc:
        fail(f"--golden {path}: {exc.strerror}")
    except (yaml.YAMLError, ValueError) as exc:
        fail(f"--golden {path}: {' '.join(str(exc).split())}")


def judge_fleet(
    run: RunDir, findings: list[Finding], golden: dict[str, Any] | None, source: Path | None
) -> list[Finding]:
    """Judgements over all nodes of the run, once every node is in: the odd node out, and
    each node against the golden manifest; recorded in the run directory."""
    from bringup.checks.consistency import fleet_fields, judge_consistency, judge_golden

    if not (run.path / "facts").exists():
        return []
    fleet = fleet_fields(run.recorded())
    flagged: dict[str, set[str]] = {}
    for f in findings:
        if f.status.bad or f.status.name == "WARN":
            flagged.setdefault(f.node, set()).add(f.check)
    found = judge_consistency(fleet, flagged)
    if golden is not None:
        found += judge_golden(golden, fleet, str(source))
    run.add_findings(found)
    return found


# What chooses and reaches the nodes a run probes: nothing for --replay and --demo.
_RUN_OPTIONS = ("suite_name", "data_dirs", "forks", "accept_new_hostkeys", "connect_timeout")


def _judge_recorded(
    replay: Path | None, demo: bool, profile_name: str, out_dir: Path | None
) -> tuple[list[Finding], RunDir]:
    """--replay / --demo: recorded facts judged again into a new run directory."""
    from bringup.checks.catalog import judge_node

    prof = load_profile(profile_name)
    if demo:
        from bringup.sim.demo import demo_nodes

        nodes = demo_nodes()
    else:
        assert replay is not None
        nodes = load_facts(replay)
    run = create_run(out_dir, "check", profile_name, None)
    findings = []
    for node in nodes:
        for record in node.probes.values():
            run.add_record(node.node, record.model_dump())
    for node in nodes:
        node_findings = judge_node(node, prof)
        run.add_findings(node_findings)
        findings.extend(node_findings)
    return findings, run


def _resumed(
    resume: Path, nodes_file: Path | None, limit: str | None, data_dirs: list[Path] | None
) -> tuple[Path, str | None, str, str, list[Path] | None]:
    """A run is resumed as it started: its inventory, limit, profile, suite, data dirs."""
    from bringup.rundir import RunDirError, load_resumable

    try:
        manifest, _ = load_resumable(resume)  # all of it, before anything runs
    except RunDirError as exc:
        fail(f"--resume: {exc}")
    if manifest.inventory is None and nodes_file is None:
        fail(f"--resume {resume}: a --local run cannot be resumed; run it again")
    return (
        nodes_file or Path(manifest.inventory or ""),
        limit or manifest.limit,
        manifest.profile or "b300",
        manifest.suite_source or manifest.suite or "acceptance",
        data_dirs or [Path(d) for d in manifest.data_dirs] or None,
    )


def probe_fleet(
    command: str,
    chosen: Target,
    suite_name: str,
    profile_name: str | None,
    data_dirs: list[Path] | None,
    out_dir: Path | None,
    resume: Path | None = None,
    options: dict[str, dict[str, Any]] | None = None,
) -> tuple[list[Finding], RunDir, list[NodeOutcome]]:
    """The suite on every node of the target, each result recorded as it arrives."""
    from bringup.fleet.plan import FleetError, plan_node
    from bringup.fleet.run import run as run_fleet
    from bringup.rundir import RunDir, RunDirError

    suite_chosen = load_suite(suite_name)
    prof = load_profile(profile_name) if profile_name else None
    dirs = _data_dirs(chosen, data_dirs)
    done = {f.node: f for f in load_facts(resume)} if resume is not None else {}
    with open_nodes(chosen) as nodes:
        try:
            plans = [
                plan_node(
                    host,
                    nodes.runner(host),
                    suite_chosen,
                    prof,
                    data_dirs=dirs,
                    done=done.get(host.name) if resume is not None else None,
                    remote=nodes.remote,
                    options=options,
                )
                for host in nodes.hosts
            ]
        except FleetError as exc:
            fail(str(exc))
        if resume is not None:
            try:
                run = remember_run(RunDir.reopen(resume))
            except RunDirError as exc:
                fail(f"--resume: {exc}")
            run.reset_findings()
        else:
            run = create_run(out_dir, command, profile_name, suite_chosen.name)
            if chosen.nodes_file is not None:
                _record_target(run, chosen, dirs, suite_name)
        outcomes = run_fleet(plans, run, forks=chosen.forks)
    findings = [f for o in outcomes for f in o.findings]
    return findings, run, outcomes


def _data_dirs(chosen: Target, data_dirs: list[Path] | None) -> list[str]:
    """--data-dir as the nodes will read it: local dirs must exist, remote ones be absolute."""
    if not chosen.remote:
        for path in data_dirs or []:
            if not path.is_dir():
                fail(f"--data-dir {path}: not a directory")
        return [str(p.resolve()) for p in data_dirs or []]
    for path in data_dirs or []:
        if not str(path).startswith("/"):
            fail(f"--data-dir {path}: give an absolute path (it is a path on the nodes)")
    return [str(p) for p in data_dirs or []]


def _storage(
    chosen: Target, dataset: str | None, checkpoint: str | None, user: str | None
) -> dict[str, dict[str, Any]]:
    """--dataset-dir, --checkpoint-dir, --training-user for the storage probe. The paths
    are not required to exist: a missing one is the storage check's finding, on each node."""
    given = {"dataset_dir": dataset, "checkpoint_dir": checkpoint}
    params: dict[str, str] = {}
    for name, path in given.items():
        if not path:
            continue
        option = "--" + name.replace("_", "-")
        if chosen.remote and not path.startswith("/"):
            fail(f"{option} {path}: give an absolute path (it is a path on the nodes)")
        params[name] = path if chosen.remote else str(Path(path).resolve())
    if user:
        params["user"] = user
    return {"storage": params} if params else {}


def _record_target(run: RunDir, chosen: Target, dirs: list[str], suite_name: str) -> None:
    """What --resume needs to run the rest exactly as this run started."""
    assert chosen.nodes_file is not None
    run.manifest.inventory = str(chosen.nodes_file.resolve())
    run.manifest.limit = chosen.limit
    run.manifest.data_dirs = dirs
    given = Path(suite_name)
    run.manifest.suite_source = str(given.resolve()) if given.suffix else suite_name
    run.save_manifest()


# --- snapshot -----------------------------------------------------------------------------


def snapshot(
    nodes_file: NodesOpt = None,
    limit: LimitOpt = None,
    forks: ForksOpt = 64,
    accept_new_hostkeys: AcceptOpt = False,
    connect_timeout: ConnectTimeoutOpt = 10.0,
    suite_name: SuiteOpt = "quick",
    data_dirs: DataDirOpt = None,
    out_dir: OutOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Record facts and raw tool outputs of this node (or --nodes), to judge later."""
    from bringup.commands.show import plain

    chosen = target(
        nodes_file is None, nodes_file, limit, forks, accept_new_hostkeys, connect_timeout
    )
    _, run, outcomes = probe_fleet("snapshot", chosen, suite_name, None, data_dirs, out_dir)
    run.finish("complete" if run.manifest.status == "running" else run.manifest.status, 0)
    recorded = {f.node: f for f in load_facts(run.path)} if (run.path / "facts").exists() else {}
    if nodes_file is None:
        node_facts = next(iter(recorded.values()), None)
        probes = {name: r.ok for name, r in node_facts.probes.items()} if node_facts else {}
        if as_json:
            print_json({"run_dir": str(run.path), "probes": probes})
            return
        for name, ok in probes.items():
            out.print(plain(f"{name:10} {'recorded' if ok else 'recorded (error)'}"))
        out.print(plain(f"snapshot: {run.path}"))
        return
    doc: dict[str, Any] = {
        o.node: {
            "state": o.state,
            "reason": o.reason,
            "probes": {n: r.ok for n, r in recorded[o.node].probes.items()}
            if o.node in recorded
            else {},
        }
        for o in outcomes
    }
    if as_json:
        print_json({"run_dir": str(run.path), "nodes": doc})
    else:
        for node, entry in doc.items():
            probes = " ".join(f"{n}{'' if ok else '(error)'}" for n, ok in entry["probes"].items())
            out.print(plain(f"{node:16} {entry['state']:12} {entry['reason'] or probes}"))
        out.print(plain(f"snapshot: {run.path}"))
    bad = any(o.state != "complete" for o in outcomes)
    raise typer.Exit(1 if bad else 0)


# --- inspect ------------------------------------------------------------------------------


def inspect(
    file: Annotated[Path, typer.Argument(help="Tool output, facts JSON, or snapshot directory.")],
    profile_name: ProfileOpt = "b300",
    kind: Annotated[
        str | None, typer.Option("--kind", help="Skip detection: smi-q, topo, fio, ...")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Recognise a tool output someone sent, print its facts and the findings."""
    from bringup.commands.show import node_table, plain, summary_line
    from bringup.findings import exit_code
    from bringup.recognize import InspectError, inspect_text, is_facts_json, read_text

    prof = load_profile(profile_name)
    try:
        if file.is_dir() or (file.suffix == ".json" and is_facts_json(read_text(file))):
            if kind is not None:
                fail(f"--kind does not apply to {file}: it holds facts, not a tool output")
            _inspect_facts(file, prof, profile_name, as_json)
            return
        result = inspect_text(read_text(file), prof, kind)
    except InspectError as exc:
        fail(str(exc))
    if as_json:
        print_json(
            {
                "kind": result.kind,
                "facts": result.facts_json(),
                "findings": [f.model_dump(mode="json") for f in result.findings],
            }
        )
    else:
        out.print(plain(file, style="bold") + plain(f": {result.kind}"))
        out.print_json(data=result.facts_json())
        out.print(node_table(result.findings, f"findings — profile {profile_name}"))
        out.print(summary_line(result.findings))
    raise typer.Exit(exit_code(result.findings))


def _inspect_facts(path: Path, prof: profile.Profile, name: str, as_json: bool) -> None:
    from bringup.checks.catalog import judge_node
    from bringup.commands.show import node_table, summary_line
    from bringup.findings import exit_code

    nodes = load_facts(path)
    findings = [f for node in nodes for f in judge_node(node, prof)]
    if as_json:
        print_json(
            {
                "kind": "facts",
                "facts": {n.node: n.model_dump(mode="json") for n in nodes},
                "findings": [f.model_dump(mode="json") for f in findings],
            }
        )
    else:
        for node in nodes:
            mine = [f for f in findings if f.node == node.node]
            out.print(node_table(mine, f"{node.node} — profile {name}"))
        out.print(summary_line(findings))
    raise typer.Exit(exit_code(findings))


# --- profiles -----------------------------------------------------------------------------


@profiles_app.command("list")
def profiles_list(as_json: JsonOpt = False) -> None:
    """The shipped profiles."""
    from bringup import profile

    loaded = {name: load_profile(name) for name in profile.available()}
    if as_json:
        print_json(
            [
                {"name": n, "gpu": p.gpu.model, "description": p.description}
                for n, p in loaded.items()
            ]
        )
        return
    for name, prof in loaded.items():
        out.print(f"[bold]{name:6}[/] {prof.gpu.count}× {prof.gpu.model} — {prof.description}")


@profiles_app.command("show")
def profiles_show(name: str, as_json: JsonOpt = False) -> None:
    """Every threshold of one profile (a name or a YAML path)."""
    prof = load_profile(name)
    if as_json:
        print(prof.model_dump_json(indent=2))
    else:
        out.print_json(prof.model_dump_json())
