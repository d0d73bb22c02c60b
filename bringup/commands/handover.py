"""`bringup handover`: the evidence of a handover in one bundle directory, one report.

    bringup handover --nodes hosts.ini --burnin llama-8b-lora   acceptance, NCCL, diagnose, burn-in
    bringup handover --from runs/check runs/nccl runs/burnin      gather runs already made
    bringup handover --demo --out handover/                       the demo fleet's acceptance

The bundle (bringup/baseline.py) holds each run directory as a part (check/, nccl/,
diagnose/, burnin/), a manifest.json listing the parts (kind, path, status, exit code and
the SHA-256 of each part's manifest.json) and the SHA-256 of each rendered report, and the
report of them all (report.html, report.md, report.junit.xml, report.json), which opens
with what the bundle holds and lacks (bringup/checks/coverage.py): without the acceptance
suite, NCCL across nodes or a burn-in it is never ACCEPTED. `bringup verify BUNDLE` checks
all of it; `--sign` signs that manifest, and so every byte of the bundle. Each part is
made by its own command's function, exactly as `bringup check`, `nccl`, `diagnose` and
`burnin` make it; a later `bringup report NEW_RUN --baseline BUNDLE` compares with the
whole handover.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bringup.commands import complete
from bringup.commands.common import (
    AcceptOpt,
    ConnectTimeoutOpt,
    ForksOpt,
    JsonOpt,
    LimitOpt,
    LocalOpt,
    MaxRawFilesOpt,
    MaxRawMibOpt,
    NodesOpt,
    OutOpt,
    ProfileOpt,
    QuietOpt,
    SuiteOpt,
    fail,
    finite,
    not_for,
    out,
    print_envelope,
)

if TYPE_CHECKING:
    from bringup.baseline import BundlePart

REPORT_FORMATS = ["html", "md", "junit", "json"]
# What chooses how the parts run; nothing runs with --from (and only the profile with --demo).
_RUN_OPTIONS = (
    "profile_name",
    "suite_name",
    "seconds",
    "limit",
    "forks",
    "max_raw_mib",
    "max_raw_files",
    "accept_new_hostkeys",
    "connect_timeout",
)


def handover(
    ctx: typer.Context,
    local: LocalOpt = False,
    nodes_file: NodesOpt = None,
    demo: Annotated[
        bool, typer.Option("--demo", help="The demo fleet's acceptance check as the handover.")
    ] = False,
    sources: Annotated[
        list[Path] | None,
        typer.Option("--from", help="Gather this run directory into the bundle (repeatable)."),
    ] = None,
    burnin_recipe: Annotated[
        str | None,
        typer.Option(
            "--burnin",
            help="Also run the burn-in with this recipe (name or YAML).",
            autocompletion=complete.recipes,
        ),
    ] = None,
    seconds: Annotated[
        float,
        typer.Option("--seconds", callback=finite, help="diagnose: sustained load time, s."),
    ] = 60.0,
    limit: LimitOpt = None,
    forks: ForksOpt = 64,
    max_raw_mib: MaxRawMibOpt = 256,
    max_raw_files: MaxRawFilesOpt = 2000,
    accept_new_hostkeys: AcceptOpt = False,
    connect_timeout: ConnectTimeoutOpt = 10.0,
    profile_name: ProfileOpt = "auto",
    suite_name: SuiteOpt = "acceptance",
    out_dir: OutOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Run the acceptance suite, NCCL, diagnose (and a burn-in) into one handover bundle,
    or gather existing run directories (--from) into one; then report on it."""
    from bringup import baseline as baselines
    from bringup.rundir import default_path, now

    modes = [local, nodes_file is not None, demo, bool(sources)]
    if sum(modes) != 1:
        fail("say what the handover is made of: --nodes FILE, --local, --demo or --from RUN_DIR")
    if sources and burnin_recipe:
        fail("--burnin runs a burn-in: gather an existing one with --from instead")
    if sources:
        not_for(ctx, "--from (the runs gathered keep their own)", *_RUN_OPTIONS)
    if demo:
        not_for(ctx, "--demo (recorded facts: nothing runs on nodes)", *_RUN_OPTIONS[1:])
    bundle_path = out_dir or default_path("handover")
    _create(bundle_path)
    started = now()
    codes: list[int] = []  # of the commands run here
    if sources:  # gathering prints nothing but a refusal, whose JSON goes to stdout
        parts = [_gather(source, bundle_path, i) for i, source in enumerate(sources)]
        mode = "from"
    else:
        steps = _steps(
            ctx,
            local=local,
            nodes_file=nodes_file,
            demo=demo,
            burnin_recipe=burnin_recipe,
            seconds=seconds,
            limit=limit,
            forks=forks,
            max_raw_mib=max_raw_mib,
            max_raw_files=max_raw_files,
            accept_new_hostkeys=accept_new_hostkeys,
            connect_timeout=connect_timeout,
            profile_name=profile_name,
            suite_name=suite_name,
            quiet=quiet or as_json,
        )
        ran = [_run_part(kind, step, bundle_path, quiet or as_json) for kind, step in steps]
        parts, codes = [part for part, _ in ran], [code for _, code in ran]
        mode = "demo" if demo else "run"
    bundle = baselines.Bundle(
        mode=mode,
        profile=_first(bundle_path, parts, "profile") or (None if sources else profile_name),
        suite=_first(bundle_path, parts, "suite"),
        started_at=started,
        ended_at=now(),
        nodes=sorted({n for p in parts for n in _manifest(bundle_path / p.path).get("nodes", [])}),
        parts=parts,
    )
    baselines.write_bundle(bundle_path, bundle)
    # Bad input in a part (exit 2) is the handover's too, whatever the part's manifest says.
    refused = 2 in codes or any(p.exit_code == 2 for p in parts)
    code = _report(bundle_path, bundle, as_json, refused, quiet)
    raise typer.Exit(code)


def _create(path: Path) -> None:
    """An empty bundle directory (a new one, or an empty one given)."""
    from bringup.files import is_link, make_dir

    try:
        if is_link(path):
            fail(f"{path} is a symbolic link; choose another --out")
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            fail(f"{path} exists and is not an empty directory; choose another --out")
        make_dir(path)
    except OSError as exc:
        fail(f"cannot create {path}: {exc.strerror}")


def _steps(ctx: typer.Context, **given: Any) -> list[tuple[str, Callable[[Path], None]]]:
    """The commands a handover runs, in order, each a function of its run directory.

    Each calls the command's own function with the handover's options, as the command
    line would: same run path, same judgement, same run directory.
    """
    from bringup.commands import burnin, check, diagnose, nccl

    reach = {
        "local": given["local"],
        "nodes_file": given["nodes_file"],
        "limit": given["limit"],
        "forks": given["forks"],
        "max_raw_mib": given["max_raw_mib"],
        "max_raw_files": given["max_raw_files"],
        "accept_new_hostkeys": given["accept_new_hostkeys"],
        "connect_timeout": given["connect_timeout"],
    }
    profile_name, quiet = given["profile_name"], given["quiet"]
    if given["demo"]:
        # The demo fleet is recorded facts: its acceptance check is all there is to gather.
        return [
            (
                "check",
                lambda run: check.check(
                    ctx, demo=True, profile_name=profile_name, out_dir=run, quiet=quiet
                ),
            )
        ]
    steps: list[tuple[str, Callable[[Path], None]]] = [
        (
            "check",
            lambda run: check.check(
                ctx,
                **reach,
                profile_name=profile_name,
                suite_name=given["suite_name"],
                out_dir=run,
                quiet=quiet,
            ),
        ),
        (
            "nccl",
            lambda run: nccl.nccl(
                ctx, **reach, profile_name=profile_name, out_dir=run, quiet=quiet
            ),
        ),
        (
            "diagnose",
            lambda run: diagnose.diagnose(
                **reach,
                seconds=given["seconds"],
                profile_name=profile_name,
                out_dir=run,
                quiet=quiet,
            ),
        ),
    ]
    if given["burnin_recipe"]:
        steps.append(
            (
                "burnin",
                lambda run: burnin.burnin(
                    ctx,
                    **reach,
                    recipe_name=given["burnin_recipe"],
                    profile_name=profile_name,
                    out_dir=run,
                    quiet=quiet,
                ),
            )
        )
    return steps


def _run_part(
    kind: str, step: Callable[[Path], None], bundle: Path, quiet: bool
) -> tuple[BundlePart, int]:
    """One command into bundle/<kind>, and its exit code (1 is a verdict, not an end).

    With --json the one document on stdout is the bundle's, and stderr carries nothing but
    the progress line on a terminal: `quiet` parts run quiet and their verdict lines go
    unsaid (the bundle's report has them); with --quiet the bundle's verdict line is all.
    A refusal of the handover itself (below) is said on the real stdout.
    """
    if not quiet:
        out.print(f"[bold]handover: {kind}[/]")
    code = 0
    muted = contextlib.redirect_stdout(io.StringIO()) if quiet else contextlib.nullcontext()
    try:
        with muted:
            step(bundle / kind)
    except typer.Exit as exc:
        code = exc.exit_code
    if code == 2 and not (bundle / kind / "manifest.json").exists():
        fail(f"handover: the {kind} part could not start (see above); {bundle} is incomplete")
    return _recorded(bundle, kind, kind), code


def _recorded(bundle: Path, kind: str, path: str) -> BundlePart:
    """The part as it lies in the bundle: its manifest's status, exit code and SHA-256,
    which the bundle's manifest records (and a signature of it covers)."""
    from bringup.baseline import BundleError, part_record

    try:
        return part_record(bundle, kind, path)
    except BundleError as exc:
        fail(f"handover: the {kind} part cannot be read: {exc}")


def _gather(source: Path, bundle: Path, index: int) -> BundlePart:
    """A copy of an existing run directory as a part, named after the command that made it."""
    from bringup.baseline import PART_KINDS, is_bundle
    from bringup.files import InputError, copy_tree, is_link

    if is_link(source):
        fail(f"--from {source}: a symbolic link; give the run directory itself")
    if not (source / "manifest.json").is_file():
        fail(f"--from {source}: not a run directory (no manifest.json)")
    if is_bundle(source):
        fail(f"--from {source}: is a bundle already; gather its parts instead")
    manifest = _manifest(source)
    command = str(manifest.get("command") or "")
    kind = next((k for k in PART_KINDS if command.startswith(k)), None)
    if kind is None:
        fail(f"--from {source}: a {command or 'unknown'} run is no handover part")
    name = kind if not (bundle / kind).exists() else f"{kind}-{index + 1}"
    try:
        # Regular files only: a link would carry what it points to (any file of this
        # machine, or nothing) into the evidence; a FIFO would hang the copy.
        copy_tree(source, bundle / name, strict=True)
    except InputError as exc:
        fail(f"--from {exc}")
    except OSError as exc:
        fail(f"--from {source}: cannot copy it into {bundle}: {exc}")
    return _recorded(bundle, kind, name)


def _manifest(run: Path) -> dict[str, Any]:
    """A run's manifest.json as plain data ({} when it cannot be read)."""
    import json

    from bringup.files import InputError, read_in

    try:
        data = json.loads(read_in(run, "manifest.json", "manifest"))
    except (InputError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _first(bundle: Path, parts: list[BundlePart], key: str) -> str | None:
    """The first part's `key` (profile, suite): the acceptance check's where there is one."""
    for part in sorted(parts, key=lambda p: p.kind != "check"):
        value = _manifest(bundle / part.path).get(key)
        if isinstance(value, str):
            return value
    return None


def _report(bundle_path: Path, bundle: Any, as_json: bool, refused: bool, quiet: bool) -> int:
    """The bundle's report beside its manifest; the exit code of all it holds."""
    from bringup.baseline import write_bundle
    from bringup.commands.report import coverage_lines, make_report, verdict_lines, write
    from bringup.provenance import sha256_file

    built, prof = make_report(bundle_path, None, None)
    written = write(built, prof, REPORT_FORMATS, bundle_path)
    # The exit status follows the bundle's verdict: 0 only for ACCEPTED.
    code = 2 if refused else 0 if built.verdict.accepted else 1
    bundle.exit_code = code
    # What the renter reads is evidence too: the manifest records each report's hash.
    bundle.reports_sha256 = {path.name: sha256_file(path) for path in written}
    write_bundle(bundle_path, bundle)
    if as_json:
        print_envelope(
            built.findings,
            exit_code=code,
            accepted=built.verdict.accepted,
            provenance=built.verdict.origin_json(),
            run_dir=str(bundle_path),
            data={
                "parts": [p.model_dump(mode="json") for p in bundle.parts],
                "written": [str(p) for p in written],
            },
        )
        return code
    if quiet:
        print(verdict_lines(built)[0])
        return code
    # The verdict first, then what the bundle holds and lacks; its report.coverage ERRORs
    # are those lines, not printed again with the other pieces it lacks.
    verdict, *lacking = verdict_lines(built, skip=("report.coverage",))
    for line in [verdict, *coverage_lines(built), *lacking]:
        print(line)
    for part in bundle.parts:
        print(f"part {part.kind}: {bundle_path / part.path} (exit {part.exit_code})")
    print(f"handover bundle: {bundle_path}")
    return code
