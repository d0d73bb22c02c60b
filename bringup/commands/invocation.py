"""One invocation of a command, without typer or rich: what it was asked, the run it made,
loading what the user named, and its --json document.

commands/common.py re-exports all of it, with `fail` (rich's one error line, typer's
exit 2) around the loaders here, which raise `Refused` instead. It is apart so that
`bringup slurm healthcheck`, answered without building the Typer app at every job start
(commands/healthcheck.py, issue 31), shares these with every command rather than keeping
copies: the same manifest argv, the same run directory, the same refusals and the same
envelope.
"""

from __future__ import annotations

import contextlib
import errno
import json
import signal
import sys
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bringup import profile, suite
    from bringup.findings import Finding
    from bringup.provenance import Mode, Origin, Provenance
    from bringup.rundir import RunDir


class Refused(Exception):
    """Bad input: what the user named cannot be used. Said by `fail` (common.py): one line,
    exit 2."""


@dataclass
class Invocation:
    """What `fail` needs to know of the command line being run."""

    json: bool  # --json given: stdout carries one JSON document, an error too
    command: str = ""  # "check", "profiles list": the envelope's "command"
    run: RunDir | None = None  # the run directory created or reopened, if any
    argv: list[str] | None = None  # the command line after `bringup`, for the manifest


INVOCATION: ContextVar[Invocation | None] = ContextVar("bringup_invocation", default=None)


def one_line(text: str) -> str:
    """The text with its control characters (newlines, ESC, ...) written as escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def remember_run(run: RunDir) -> RunDir:
    """The run directory of this invocation: `fail` marks it refused."""
    now = INVOCATION.get()
    if now is not None:
        now.run = run
    return run


# What a file system with no room left says to a write: the disk full, or a quota spent.
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


def no_space_line(exc: OSError, now: Invocation | None) -> str | None:
    """The line a command ends with when what it writes finds no room left (`exc`); None
    for any other error. The run directory, where the command made one: what it holds
    so far is kept (every record is on disk as it arrives), and a check resumed with
    room again measures only what is missing."""
    if exc.errno not in NO_SPACE:
        return None
    why = exc.strerror or str(exc)
    run = now.run if now is not None else None
    if run is None:
        where = f" {exc.filename}" if exc.filename else ""
        return f"no space left to write{where} ({why}): free space on its file system, run again"
    line = (
        f"no space left to write the run directory {run.path} ({why}): free space on its "
        f"file system (`df -h {run.path}`); what it holds so far is kept"
    )
    if now is not None and now.command == "check" and run.manifest.inventory is not None:
        line += f", and `bringup check --resume {run.path}` measures only what is missing"
    return line


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """While a command runs, SIGTERM ends it as Ctrl-C does (KeyboardInterrupt).

    `timeout`, a scheduler or systemd stop a run with SIGTERM. Python's default dies on
    the spot, and what the controller started in sessions of its own (the node side, its
    probes, the trainer ranks) would run on, reparented, loading the GPU under the next
    run. Raised as KeyboardInterrupt, it takes the one path Ctrl-C takes: fleet.run kills
    those process trees and finishes the run directory as interrupted.
    """
    try:
        previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    except ValueError:  # not the main thread (an in-process caller): its signals are its own
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# --- loading what the user named: Refused when it cannot be --------------------------------


def named_profile(name: str) -> profile.Profile:
    from bringup import profile

    if name == profile.AUTO:
        raise Refused(
            "auto is not a profile, it picks one per GPU: name one (bringup profiles list)"
        )
    try:
        return profile.load(name)
    except profile.ProfileError as exc:
        raise Refused(str(exc)) from None


def named_profile_or_auto(name: str) -> profile.Profile | str:
    """--profile: the profile named, or profile.AUTO (each node judged by its GPU's)."""
    from bringup import profile

    return profile.AUTO if name == profile.AUTO else named_profile(name)


def named_suite(name: str) -> suite.Suite:
    from bringup import suite

    try:
        return suite.load(name)
    except suite.SuiteError as exc:
        raise Refused(str(exc)) from None


def provenance(mode: Mode = "live", **replay: str | None) -> Provenance:
    """How this invocation makes its run: the mode, its command line (secrets redacted),
    this host; `replay` gives replay_of and replay_manifest_sha256."""
    from bringup.provenance import Provenance, controller_host, redact

    now = INVOCATION.get()
    argv = redact(now.argv or []) if now is not None else []
    return Provenance(mode=mode, argv=argv, controller=controller_host(), **replay)


def new_run(
    out_dir: Path | None,
    command: str,
    profile_name: str | None,
    suite_name: str | None,
    made: Provenance | None = None,
    probes: list[str] | None = None,
) -> RunDir:
    """A new run directory, its manifest saying how it is made (`made`: a live run of this
    command line by default) and which probes each node is asked for (`probes`)."""
    from bringup.rundir import RunDir, RunDirError, default_path

    path = out_dir or default_path(command)
    try:
        run = RunDir.create(
            path, command, profile_name, suite_name, made or provenance(), probes=probes
        )
    except RunDirError as exc:
        raise Refused(str(exc)) from None
    return remember_run(run)


# --- the one document of --json ------------------------------------------------------------


def run_origin(run: RunDir) -> Origin:
    """Where the facts of a run came from, from every record it holds (and its manifest)."""
    from bringup.provenance import origin_of

    return origin_of(run.record_chains(), run.manifest.provenance)


def print_json(doc: dict[str, Any] | list[Any]) -> None:
    """One JSON document on stdout (nothing else); with --json, the envelope."""
    print(json.dumps(doc, indent=2))


def print_envelope(
    findings: Iterable[Finding],
    *,
    exit_code: int | None = None,
    judged: bool = True,
    accepted: bool | None = None,
    run: RunDir | None = None,
    origin: Origin | None = None,
    counted: tuple[int, int] | None = None,
    **optional: Any,
) -> None:
    """The one document of --json (commands/envelope.py): the findings, the verdict when
    the command judges and the exit code it gives (unless said), and `optional`:
    run_dir, nodes, data, error. The verdict is the one rule of bringup/provenance.py:
    ACCEPTED only when nothing is bad and every record was measured live (`origin`, by
    default the run's, read from its records); `accepted` gives it when the caller
    judged already (the report). The run's directory is `run_dir` when a run is given.

    `counted`: how many findings there are and how many of them are bad, when the
    caller tallied them (fleet/tally.py) and `findings` reads them back as they are
    written (`check` at ten thousand nodes: never every finding at once)."""
    from bringup.commands.envelope import document
    from bringup.provenance import LIVE, accepted_counted

    if counted is None:
        findings = list(findings)  # a report's are read back from disk (findingstore.py)
        counted = (len(findings), sum(1 for f in findings if f.status.bad))
    total, bad = counted

    if run is not None:
        optional.setdefault("run_dir", str(run.path))
    word = None
    if judged:
        if origin is None and run is not None and (run.path / "facts").exists():
            origin = run_origin(run)
        origin = origin or LIVE
        if accepted is None:
            accepted = accepted_counted(total, bad, origin)
        word = "ACCEPTED" if accepted else "NOT ACCEPTED"
        optional.setdefault("provenance", origin_json(origin))
    if exit_code is None:
        exit_code = (0 if accepted else 1) if judged else (1 if bad else 0)
    print_with_findings(document(command_name(), exit_code, [], word, **optional), findings)


# Where the envelope's findings go in its text: its one top-level key of that name (a
# deeper key is indented further; a text's quotes are escaped).
_FINDINGS_AT = '\n  "findings": []'


def print_with_findings(doc: dict[str, Any], findings: Iterable[Finding]) -> None:
    """print_json of the envelope `doc` with these findings as its "findings" (given
    empty), written one finding at a time: the same text as print_json of the document
    that holds them (tests/unit/test_check_tally.py), never every finding's JSON at once."""
    from bringup.findings import finding_json

    head, found, tail = json.dumps(doc, indent=2).partition(_FINDINGS_AT)
    assert found, "the envelope has its findings at the top level"
    write = sys.stdout.write
    write(head + '\n  "findings": [')
    first = True
    for f in findings:
        item = json.dumps(finding_json(f), indent=2).replace("\n", "\n    ")
        write(("\n    " if first else ",\n    ") + item)
        first = False
    write(("]" if first else "\n  ]") + tail + "\n")


def origin_json(origin: Origin) -> dict[str, Any]:
    """The envelope's `provenance`: the run's mode, whether it is live, and why not."""
    return {"mode": origin.mode, "live": origin.live, "reasons": list(origin.reasons)}


def command_name() -> str:
    """The command being run, as the command group read it from the arguments."""
    now = INVOCATION.get()
    return now.command if now is not None else ""
