"""`bringup check`, `snapshot`, `inspect` and `profiles`: run the suite on nodes, record
facts to judge later, judge a tool output someone sent, and show the shipped profiles.

    bringup check --nodes hosts.ini --profile b300     the suite on every node, over SSH
    bringup check --local --suite quick                this machine
    bringup check --replay RUN_DIR | --demo            judge recorded facts again
    bringup snapshot --out snap/                       record now, judge later
    bringup inspect nvidia-smi-q.txt --profile h100    judge a log someone sent
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bringup.commands import complete
from bringup.commands.common import (
    AcceptOpt,
    AccountOpt,
    ConnectTimeoutOpt,
    DataDirOpt,
    ForksOpt,
    JsonOpt,
    LimitOpt,
    LocalOpt,
    MaxRawFilesOpt,
    MaxRawMibOpt,
    NodelistOpt,
    NodesCountOpt,
    NodesOpt,
    OutOpt,
    PartitionOpt,
    ProfileOpt,
    QuietOpt,
    SlurmOpt,
    SuiteOpt,
    TimeOpt,
    create_run,
    err,
    fail,
    finish_run,
    load_facts,
    load_profile,
    load_suite,
    node_entries,
    not_for,
    open_nodes,
    out,
    print_envelope,
    probe_states,
    profile_or_auto,
    progress_console,
    provenance,
    record_slurm,
    recorded_entries,
    remember_run,
    resumed,
    select_nodes,
    show_run,
    slurm_choice,
    target,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import IO

    from bringup import profile
    from bringup.commands.report import WholeRunDigest
    from bringup.facts import NodeFacts
    from bringup.findings import Finding
    from bringup.fleet.run import NodeOutcome
    from bringup.fleet.tally import Tally
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
    max_raw_mib: MaxRawMibOpt = 256,
    max_raw_files: MaxRawFilesOpt = 2000,
    profile_name: ProfileOpt = "auto",
    suite_name: SuiteOpt = "acceptance",
    data_dirs: DataDirOpt = None,
    out_dir: OutOpt = None,
    as_json: JsonOpt = False,
    dataset_dir: DatasetDirOpt = None,
    checkpoint_dir: CheckpointDirOpt = None,
    training_user: TrainingUserOpt = None,
    uplink: UplinkOpt = None,
    golden: GoldenOpt = None,
    slurm: SlurmOpt = False,
    partition: PartitionOpt = None,
    nodelist: NodelistOpt = None,
    nodes_count: NodesCountOpt = None,
    account: AccountOpt = None,
    time_limit: TimeOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Run the suite on nodes (--nodes, --local, --slurm) or re-judge recorded facts
    (--replay, --demo)."""
    remote = nodes_file is not None or resume is not None or slurm
    sources = [local, remote, replay is not None, demo]
    if sum(sources) != 1:
        fail(
            "say where the facts come from: --nodes FILE, --slurm, --local, --replay DIR or --demo"
        )
    in_slurm = slurm_choice(slurm, partition, nodelist, nodes_count, account, time_limit)
    if limit and local:
        fail("--limit selects nodes: give --nodes FILE, --replay DIR or --demo")
    if replay is not None or demo:
        mode = "--demo" if demo else "--replay"
        not_for(ctx, f"{mode} (it judges recorded facts; nothing runs on nodes)", *_RUN_OPTIONS)
        if demo:
            not_for(ctx, "--demo (its nodes record the demo's probes)", "suite_name")
    if resume is not None:
        not_for(ctx, "--resume (a run resumes as it started)", "profile_name", "suite_name")
    outcomes: list[NodeOutcome] = []
    golden_fields = _load_golden(golden) if golden is not None else None
    if replay is not None or demo:
        given = ctx.get_parameter_source("suite_name")
        override = suite_name if given and given.name in ("COMMANDLINE", "ENVIRONMENT") else None
        tally, run = _judge_recorded(replay, demo, profile_name, out_dir, override, limit)
        taken = None  # recorded facts, read from their files: judge_whole reads them again
    else:
        if resume is not None:
            nodes_file, limit, profile_name, suite_name, data_dirs = _resumed(
                resume, nodes_file, limit, data_dirs
            )
        # A resumed run names its inventory (from its manifest) like --nodes does.
        chosen = target(
            local,
            nodes_file,
            limit,
            forks,
            accept_new_hostkeys,
            connect_timeout,
            in_slurm,
            "check",
            max_raw_mib=max_raw_mib,
            max_raw_files=max_raw_files,
        )
        options = _storage(chosen, dataset_dir, checkpoint_dir, training_user)
        if uplink:
            options["uplink"] = {"endpoint": uplink}
        tally, run, outcomes, taken = probe_fleet(
            "check", chosen, suite_name, profile_name, data_dirs, out_dir, resume, options
        )
    from bringup.commands.report import judge_whole

    # What the run's findings come to, not each one (fleet/tally.py): the fleet checks
    # read the problems, the whole run the nodes that have findings and the bad ones.
    tally.add(judge_fleet(run, tally.noted, golden_fields, golden, outcomes))
    tally.add(judge_whole(run, tally, taken))
    code = finish_run(run, tally)
    tally.reader = lambda: read_back(run, tally)  # what prints every finding: from the file
    durations = _durations(run) if outcomes else {}
    if as_json:
        # A run says what became of each node; recorded facts, what each probe recorded.
        nodes = node_entries(outcomes) if outcomes else recorded_entries(load_facts(run.path))
        data = {"durations": durations} if durations else None
        # Demo, replayed, file-sourced or simulated facts are never ACCEPTED: the run's
        # origin, read from its records, decides with the findings (as the report does).
        every = tally.every()
        counted = (tally.total, tally.bad)
        print_envelope(every, counted=counted, run=run, nodes=nodes, data=data)
    else:
        show_run(run, tally, f"profile {run.manifest.profile}", durations, quiet)
    raise typer.Exit(code)


def read_back(run: RunDir, tally: Tally) -> Iterator[Finding]:
    """Every finding of the run, read back from its findings.jsonl in the order `check`
    gives them (the plan's nodes, then the fleet's and the whole run's findings), each
    line validated as the report reads it.

    The file must hold what the run tallied as it wrote it, batch by batch: a line that
    does not parse, a line more or fewer, or another count of a status is refused (exit
    2, one line), before anything is printed. The findings are spooled to an anonymous
    temporary file as they are read (the file holds the nodes in the order they ended),
    and given back from it in order: never every finding at once."""
    import pickle
    import tempfile

    from bringup.files import InputError, read_lines_in
    from bringup.findings import Status, read_finding
    from bringup.report.rundata import FINDINGS_LINE_BYTES, findings_cap

    where = f"{run.path}/findings.jsonl"
    cap = findings_cap(len(run.manifest.nodes))
    counts = dict.fromkeys(Status, 0)
    spool = tempfile.TemporaryFile()  # noqa: SIM115 (unlinked; closed by the generator)
    places: list[tuple[int, int]] = []  # each batch's (offset, length) in the spool
    read = False
    try:
        lines = read_lines_in(run.path, "findings.jsonl", "findings", cap, FINDINGS_LINE_BYTES)
        written = (line for line in lines if line.strip())
        for _, count in tally.batches:
            batch = []
            for line in written if count else ():
                batch.append(read_finding(line))
                counts[batch[-1].status] += 1
                if len(batch) == count:
                    break
            if len(batch) != count:
                fail(f"{where}: fewer findings than the run wrote: it changed under the run")
            data = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
            places.append((spool.tell(), len(data)))
            spool.write(data)
        if next(written, None) is not None:
            fail(f"{where}: more findings than the run wrote: it changed under the run")
        if counts != tally.counts:
            fail(f"{where}: not the findings the run wrote (other statuses): it changed")
        read = True
    except InputError as exc:
        fail(f"cannot read back the run's findings: {exc}")
    except ValueError:  # a line that does not parse (pydantic's ValidationError)
        fail(f"{where}: a line does not parse as a finding: it changed under the run")
    except OSError as exc:
        fail(f"cannot spool the run's findings to a temporary file: {exc.strerror}")
    finally:
        if not read:  # refused: the spool is of no use
            spool.close()
    return _spooled(spool, [places[index] for index, _ in tally.in_order()])


def _spooled(spool: IO[bytes], places: list[tuple[int, int]]) -> Iterator[Finding]:
    """The batches at these places of the spool, in this order; the spool closed after."""
    import pickle

    with spool:
        for offset, length in places:
            spool.seek(offset)
            batch: list[Finding] = pickle.loads(spool.read(length))  # this process's own
            yield from batch


def _durations(run: RunDir) -> dict[str, dict[str, float]]:
    """Seconds each probe ran on each node (docs/workflows.md#how-long-a-suite-takes)."""
    if not (run.path / "facts").exists():
        return {}
    return run.probe_times()


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
    run: RunDir,
    findings: list[Finding],
    golden: dict[str, Any] | None,
    source: Path | None,
    outcomes: list[NodeOutcome] | None = None,
) -> list[Finding]:
    """Judgements over all nodes of the run, once every node is in: one machine per node,
    the odd node out, and each node against the golden manifest; recorded in the run
    directory. A node the run judged (`outcomes`) is compared by the values taken then
    (its facts let go of); any other node of the run by its recorded facts."""
    from bringup.checks.consistency import judge_consistency, judge_golden
    from bringup.checks.identity import judge_marks
    from bringup.fleet.run import fleet_values
    from bringup.rundir import file_name

    if not (run.path / "facts").exists():
        return []
    values = {
        o.node: (o.fields, o.marks)
        for o in outcomes or []
        if o.fields is not None and o.marks is not None
    }
    values |= {f.node: fleet_values(f) for f in run.recorded(skip=set(values))}
    # In the order of the run's files, as the facts were read back before.
    ordered = sorted(values, key=file_name)
    fleet = {node: values[node][0] for node in ordered}
    flagged: dict[str, set[str]] = {}
    for f in findings:
        if f.status.bad or f.status.name == "WARN":
            flagged.setdefault(f.node, set()).add(f.check)
    marks = {node: values[node][1] for node in ordered}
    found = judge_marks(marks) + judge_consistency(fleet, flagged)
    if golden is not None:
        found += judge_golden(golden, fleet, str(source))
    run.add_findings(found)
    return found


# What chooses and reaches the nodes a run probes: nothing for --replay and --demo. (--suite
# says what a replay is judged complete against: the original run's suite unless given.)
_RUN_OPTIONS = (
    "data_dirs",
    "forks",
    "max_raw_mib",
    "max_raw_files",
    "accept_new_hostkeys",
    "connect_timeout",
    *("partition", "nodelist", "nodes_count", "account", "time_limit"),
)


def _judge_recorded(
    replay: Path | None,
    demo: bool,
    profile_name: str,
    out_dir: Path | None,
    suite_name: str | None = None,
    limit: str | None = None,
) -> tuple[Tally, RunDir]:
    """--replay / --demo: recorded facts (of the nodes --limit selects) judged again into a
    new run directory.

    The new run keeps what was measured as it was measured (each record's time on the
    node, the raw tool outputs) and says where it came from (the replayed directory and
    the SHA-256 of its manifest). It is judged complete against the original run's suite
    (or --suite): each planned probe a node has no record of is an ERROR, not measured.
    """
    from bringup.checks.auto import NO_PROFILE, judge_node_by
    from bringup.checks.catalog import judge_probe
    from bringup.files import InputError
    from bringup.fleet.tally import Tally
    from bringup.profile import Profile

    prof = profile_or_auto(profile_name)
    # An unmeasured probe's ERRORs read nothing of a profile.
    unmeasured = prof if isinstance(prof, Profile) else NO_PROFILE
    original = _Original()
    if demo:
        from bringup.sim.demo import demo_nodes

        nodes = demo_nodes()
        made = provenance("demo")
        # The demo's nodes record every probe it has: that is its plan.
        original.probes = list(dict.fromkeys(p for n in nodes for p in n.probes))
    else:
        assert replay is not None
        original = _original(replay)
        nodes = [_replayed(n, replay, original) for n in load_facts(replay)]
        made = provenance("replay", replay_of=str(replay), replay_manifest_sha256=original.sha256)
    if suite_name is not None:
        chosen = load_suite(suite_name)
        given = Path(suite_name)
        original.suite = chosen.name
        original.suite_source = str(given.resolve()) if given.suffix else suite_name
        original.probes = [step.name for step in chosen.probes]
    if limit:
        chosen_nodes = set(select_nodes([n.node for n in nodes], limit))
        nodes = [n for n in nodes if n.node in chosen_nodes]
        original.nodes = [n for n in original.nodes if n in chosen_nodes]
    run = create_run(out_dir, "check", profile_name, original.suite, made, original.probes)
    run.manifest.suite_source = original.suite_source
    source = replay if replay is not None and replay.is_dir() else None
    run.expect(len({*original.nodes, *(node.node for node in nodes)}))  # its layout
    for node in nodes:
        try:
            run.add_recorded(node, source)
        except InputError as exc:  # a raw output of the replayed run that cannot be read
            fail(f"--replay: {exc}")
    unrecorded = [n for n in original.nodes if n not in {node.node for node in nodes}]
    run.add_nodes(unrecorded)  # planned, never reported: each probe below is not measured
    tally = Tally()
    for node in [*nodes, *(run.facts_of(n) for n in unrecorded)]:
        node_findings = judge_node_by(node, prof)
        for probe in original.probes or []:
            if probe not in node.probes:
                why = f"not measured: {node.node} has no record of probe {probe!r} in {replay}"
                action = f"run the {probe} probe on {node.node} (bringup check), then judge again"
                node_findings += [
                    replace(f, node=node.node, action=action)
                    for f in judge_probe(probe, None, why, unmeasured)
                ]
        run.add_findings(node_findings)
        tally.add(node_findings)
    if replay is not None and replay.is_dir() and original.sha256 is not None:
        chosen = {n.node for n in nodes}
        changed = _source_changes(replay, original, chosen, chosen if limit else None)
        run.add_findings(changed)
        tally.add(changed)
    return tally, run


def _source_changes(
    replay: Path, original: _Original, replayed: set[str], nodes: set[str] | None
) -> list[Finding]:
    """replay.source: each evidence file of the replayed run that is not as it recorded."""
    from bringup.checks.integrity import judge_replay_source
    from bringup.provenance import evidence_hashes
    from bringup.rundir import file_name

    try:
        present = evidence_hashes(replay)
    except OSError as exc:
        fail(f"--replay {replay}: cannot read its files: {exc.strerror}")
    names = {file_name(node): node for node in [*original.nodes, *replayed]}
    return judge_replay_source(str(replay), original.files_sha256, present, names, nodes)


def _replayed(node: NodeFacts, replay: Path, original: _Original) -> NodeFacts:
    """A replayed node's facts, each record one step further from its measurement: it
    keeps its chain (demo data stays demo data) and adds "replayed from RUN". A record
    from before records carried a chain takes the replayed run's own mode (demo)."""
    from bringup.provenance import demo_source, replayed_source

    step = replayed_source(str(replay), original.sha256)
    probes = {}
    for name, record in node.probes.items():
        if not record.provenance and original.mode == "demo":
            record = record.with_source(demo_source())
        elif not record.provenance and original.mode == "replay" and original.replay_of:
            record = record.with_source(replayed_source(original.replay_of, None))
        probes[name] = record.with_source(step)
    return replace(node, probes=probes)


class _Original:
    """What a replay keeps of the run it judges again."""

    def __init__(self) -> None:
        self.sha256: str | None = None  # of its manifest.json; None: it has none
        self.mode: str | None = None  # its provenance mode, when its manifest says
        self.replay_of: str | None = None
        self.files_sha256: dict[str, str] | None = None  # what it recorded of its files
        self.suite: str | None = None
        self.suite_source: str | None = None
        self.probes: list[str] | None = None  # its plan; None: not known
        self.nodes: list[str] = []


def _original(replay: Path) -> _Original:
    """The replayed run's manifest: its hash, suite, planned probes and nodes. A facts
    file, or a directory whose manifest is missing or unreadable, gives none of them."""
    from bringup import suite as suites
    from bringup.provenance import manifest_sha256
    from bringup.rundir import RunDirError, load_manifest

    found = _Original()
    if not replay.is_dir():
        return found
    try:
        found.sha256 = manifest_sha256(replay)
        manifest = load_manifest(replay)
    except (OSError, RunDirError):
        return found
    found.suite, found.suite_source = manifest.suite, manifest.suite_source
    if manifest.provenance is not None:
        found.mode, found.replay_of = manifest.provenance.mode, manifest.provenance.replay_of
    found.files_sha256 = manifest.files_sha256
    found.nodes = list(manifest.nodes)
    found.probes = manifest.probes
    source = manifest.suite_source or manifest.suite
    if found.probes is None and source:  # a run from before its probes were recorded
        with contextlib.suppress(suites.SuiteError):  # not known: the report says so
            found.probes = [step.name for step in suites.load(source).probes]
    return found


def _resumed(
    resume: Path, nodes_file: Path | None, limit: str | None, data_dirs: list[Path] | None
) -> tuple[Path, str | None, str, str, list[Path] | None]:
    """A run is resumed as it started: its inventory, limit, profile, suite, data dirs."""
    from bringup.rundir import RunDirError, load_resumable

    try:
        manifest, _ = load_resumable(resume)  # all of it, before anything runs
    except RunDirError as exc:
        fail(f"--resume: {exc}")
    if manifest.slurm_job_id is not None:
        # Its allocation is gone, and resuming over SSH would reach other nodes than it did.
        fail(f"--resume {resume}: a --slurm run cannot be resumed (yet); run it again")
    if manifest.inventory is None and nodes_file is None:
        fail(f"--resume {resume}: a --local run cannot be resumed; run it again")
    return (
        nodes_file or Path(manifest.inventory or ""),
        limit or manifest.limit,
        manifest.profile or "auto",
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
) -> tuple[Tally, RunDir, list[NodeOutcome], WholeRunDigest | None]:
    """The suite on every node of the target, each result recorded as it arrives, and
    what their findings come to (fleet/tally.py): each node's tallied as it is judged;
    for a check, what the rules over the whole run read of every node, taken as it was
    judged (commands/report.py, WholeRunDigest)."""
    from bringup.commands.report import WholeRunDigest
    from bringup.commands.show import plain
    from bringup.fleet.plan import FleetError, disk_writes, plan_node
    from bringup.fleet.run import run as run_fleet
    from bringup.fleet.tally import Tally
    from bringup.rundir import RunDir, RunDirError

    suite_chosen = load_suite(suite_name)
    prof = profile_or_auto(profile_name) if profile_name else None
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
                run = remember_run(RunDir.reopen(resume, resumed()))
            except RunDirError as exc:
                fail(f"--resume: {exc}")
            run.reset_findings()
        else:
            probes = [step.name for step in suite_chosen.probes]
            run = create_run(out_dir, command, profile_name, suite_chosen.name, probes=probes)
            if chosen.nodes_file is not None:
                _record_target(run, chosen, dirs, suite_name)
            record_slurm(run, nodes)
        # Gigabytes written to the nodes' disks are said before they are (stderr: --json
        # keeps stdout to its one document).
        for line in disk_writes(plans):
            err.print(plain(line), soft_wrap=True)
        tally = Tally()
        taken = WholeRunDigest.of_run(run.manifest) if command == "check" else None
        outcomes = run_fleet(
            plans,
            run,
            forks=chosen.forks,
            caps=chosen.caps,
            console=progress_console(),
            compare=command == "check",  # its fleet checks: the values taken at judging
            tally=tally,
            digest=taken.take if taken is not None else None,
        )
        if "ibperf" in suite_chosen.jobs and nodes.remote and len(nodes.hosts) >= 2:
            from bringup.commands.ibperf_job import run_ibperf

            # After the probes: each node's rails are what its fabric probe just read.
            tally.add(run_ibperf(nodes, run, prof))
    return tally, run, outcomes, taken


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
    quiet: QuietOpt = False,
    slurm: SlurmOpt = False,
    partition: PartitionOpt = None,
    nodelist: NodelistOpt = None,
    nodes_count: NodesCountOpt = None,
    account: AccountOpt = None,
    time_limit: TimeOpt = None,
) -> None:
    """Record facts and raw tool outputs of this node (or --nodes, --slurm), to judge later."""
    from bringup.commands.show import plain

    in_slurm = slurm_choice(slurm, partition, nodelist, nodes_count, account, time_limit)
    here = nodes_file is None and in_slurm is None
    chosen = target(
        here,
        nodes_file,
        limit,
        forks,
        accept_new_hostkeys,
        connect_timeout,
        in_slurm,
        "snapshot",
    )
    _, run, outcomes, _ = probe_fleet("snapshot", chosen, suite_name, None, data_dirs, out_dir)
    run.finish("complete" if run.manifest.status == "running" else run.manifest.status, 0)
    recorded = {f.node: f for f in load_facts(run.path)} if (run.path / "facts").exists() else {}
    # A probe that could not run is said with its reason, and makes the exit code 1: the
    # snapshot lacks what it was asked to record.
    errors = {
        node: {name: r.error or "failed" for name, r in facts.probes.items() if not r.ok}
        for node, facts in recorded.items()
    }
    bad = any(o.state != "complete" for o in outcomes) or any(errors.values())
    if as_json:
        # One shape for --local and --nodes: each node's state and what each probe recorded.
        nodes = node_entries(outcomes)
        for entry in nodes:
            if entry["node"] in recorded:
                entry["probes"] = probe_states(recorded[entry["node"]])
        print_envelope([], exit_code=1 if bad else 0, judged=False, run=run, nodes=nodes)
        raise typer.Exit(1 if bad else 0)
    if quiet:
        failed = sum(1 for probes in errors.values() for _ in probes)
        unreached = sum(1 for o in outcomes if o.state != "complete")
        said = f" ({failed} probe errors, {unreached} nodes not complete)" if bad else ""
        out.print(plain(f"snapshot: {run.path}{said}"), soft_wrap=True)
        raise typer.Exit(1 if bad else 0)
    if here:
        node_facts = next(iter(recorded.values()), None)
        probes = {name: r.ok for name, r in node_facts.probes.items()} if node_facts else {}
        mine = errors.get(node_facts.node, {}) if node_facts else {}
        for name in probes:
            said = f"error: {mine[name]}" if name in mine else "recorded"
            out.print(plain(f"{name:10} {said}"), soft_wrap=True)
        out.print(plain(f"snapshot: {run.path}"))
        raise typer.Exit(1 if bad else 0)
    for o in outcomes:
        mine_probes = recorded[o.node].probes if o.node in recorded else {}
        probes_text = " ".join(f"{n}{'' if r.ok else '(error)'}" for n, r in mine_probes.items())
        out.print(plain(f"{o.node:16} {o.state:12} {o.reason or probes_text}"))
        for name, reason in errors.get(o.node, {}).items():
            out.print(plain(f"{'':16} {name} error: {reason}"), soft_wrap=True)
    out.print(plain(f"snapshot: {run.path}"))
    raise typer.Exit(1 if bad else 0)


# --- inspect ------------------------------------------------------------------------------


def inspect(
    file: Annotated[Path, typer.Argument(help="Tool output, facts JSON, or snapshot directory.")],
    profile_name: ProfileOpt = "auto",
    kind: Annotated[
        str | None,
        typer.Option(
            "--kind", help="Skip detection: smi-q, topo, fio, ...", autocompletion=complete.kinds
        ),
    ] = None,
    show_facts: Annotated[
        bool, typer.Option("--facts", help="Print the parsed facts before the findings.")
    ] = False,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Recognise a tool output someone sent and judge it: its findings and the verdict."""
    from bringup.commands.show import (
        inspect_exit_code,
        inspect_line,
        node_table,
        plain,
        summary_line,
    )
    from bringup.recognize import InspectError, described, inspect_text, is_facts_json, read_text

    prof = profile_or_auto(profile_name)
    try:
        if file.is_dir() or (file.suffix == ".json" and is_facts_json(read_text(file))):
            if kind is not None:
                fail(f"--kind does not apply to {file}: it holds facts, not a tool output")
            _inspect_facts(file, prof, profile_name, as_json, show_facts, quiet)
            return
        result = inspect_text(read_text(file), prof, kind)
    except InspectError as exc:
        fail(str(exc))
    if as_json:
        parsed = [{"node": "", "probe": result.kind, "facts": result.facts_json()}]
        data = {
            "source": str(file),
            "kind": result.kind,
            "read": result.read,
            "profile": result.profile,
            "facts": parsed,
        }
        # Not an acceptance: no verdict word; `data.verdict` says what inspect found.
        data["verdict"] = inspect_line(result.findings, described(result.kind)).plain
        code = inspect_exit_code(result.findings)
        print_envelope(result.findings, exit_code=code, judged=False, data=data)
    elif not quiet:
        read = f" — {result.read}" if result.read else ""
        out.print(plain(file, style="bold") + plain(f": {result.kind}{read}"))
        if show_facts:
            out.print_json(data=result.facts_json())
        title = f"findings — profile {result.profile}" if result.profile else "findings"
        out.print(node_table(result.findings, title))
        out.print(summary_line(result.findings))
    if not as_json:
        line = inspect_line(result.findings, described(result.kind))
        out.print(line, highlight=False, soft_wrap=True)
    raise typer.Exit(inspect_exit_code(result.findings))


def _inspect_facts(
    path: Path,
    prof: profile.Profile | str,
    name: str,
    as_json: bool,
    show_facts: bool = False,
    quiet: bool = False,
) -> None:
    from bringup.checks.auto import judge_node_by
    from bringup.commands.show import inspect_exit_code, inspect_line, node_table, summary_line
    from bringup.facts import origin

    nodes = load_facts(path)
    findings = [f for node in nodes for f in judge_node_by(node, prof)]
    # Recorded facts judged as they are, not a run of a suite: never ACCEPTED (a run is
    # judged again, with its plan and its provenance, by `check --replay`).
    count = f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}"
    made = origin(nodes).note  # the chain each record carries: "demo data", ...
    line = inspect_line(findings, f"the facts of {count} in {path}", made)
    code = inspect_exit_code(findings)
    if as_json:
        # The shape of a tool output's: one entry per node and probe.
        parsed = [
            {"node": n.node, "probe": probe, "facts": record.facts}
            for n in nodes
            for probe, record in n.probes.items()
        ]
        read = f"{len(nodes)} node{'' if len(nodes) == 1 else 's'} of recorded facts"
        data = {
            "source": str(path),
            "kind": "facts",
            "read": read,
            "profile": name,
            "facts": parsed,
            "verdict": line.plain,
        }
        nodes_seen = recorded_entries(nodes)
        print_envelope(findings, exit_code=code, judged=False, nodes=nodes_seen, data=data)
    else:
        for node in nodes if not quiet else []:
            if show_facts:
                from bringup.facts import node_facts_text

                out.print_json(node_facts_text(node))
            mine = [f for f in findings if f.node == node.node]
            out.print(node_table(mine, f"{node.node} — profile {name}"))
        if not quiet:
            out.print(summary_line(findings))
        out.print(line, highlight=False, soft_wrap=True)
    raise typer.Exit(code)


# --- profiles -----------------------------------------------------------------------------


@profiles_app.command("list")
def profiles_list(as_json: JsonOpt = False, quiet: QuietOpt = False) -> None:
    """The shipped profiles."""
    from bringup import profile

    loaded = {name: load_profile(name) for name in profile.available()}
    if as_json:
        listed = [
            {"name": n, "gpu": p.gpu.model, "gpus": p.gpu.count, "description": p.description}
            for n, p in loaded.items()
        ]
        print_envelope([], judged=False, data={"profiles": listed})
        return
    if quiet:  # the names, for a script: `for p in $(bringup profiles list -q)`
        print(" ".join(loaded))
        return
    for name, prof in loaded.items():
        out.print(f"[bold]{name:6}[/] {prof.gpu.count}× {prof.gpu.model} — {prof.description}")


@profiles_app.command("show")
def profiles_show(name: str, as_json: JsonOpt = False, quiet: QuietOpt = False) -> None:
    """Every threshold of one profile (a name or a YAML path)."""
    from bringup.schema import as_json as plain

    prof = load_profile(name)
    if as_json:
        print_envelope([], judged=False, data={"profile": plain(prof)})
    elif quiet:
        line = f"{prof.name}: {prof.gpu.count}× {prof.gpu.model} — {prof.description}"
        out.print(line, highlight=False, markup=False, soft_wrap=True)
    else:
        out.print_json(data=plain(prof))
