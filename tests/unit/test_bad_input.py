"""Bad input at the CLI edge, in-process: the one reader (bringup/files.py), run directory
names and writes, `fail` with --json, options refused where they do not apply, numbers
checked in every command."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import typer

from bringup.commands.common import Cli, create_run, fail
from bringup.files import InputError, open_append, read_text, write_atomic
from bringup.rundir import RunDir, file_name, load_manifest
from tests.support.cli import invoke

# --- the one reader -------------------------------------------------------------------------


def test_a_text_file_is_read(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("gpu: {count: 8}\n")
    assert read_text(tmp_path / "p.yaml", "profile") == "gpu: {count: 8}\n"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_bytes(b"ok\n\x93\xff"), "{p}: not UTF-8 text (byte 0x93 at offset 3)"),
        (lambda p: p.mkdir(), "{p}: a directory, not a profile file"),
        (lambda p: os.mkfifo(p), "{p}: a FIFO, not a profile file"),
        (lambda p: p.write_bytes(b"x" * 101), "{p}: 101 bytes, over the 100 bytes cap"),
        (lambda p: None, "cannot read {p}: No such file or directory"),
    ],
    ids=["binary", "directory", "fifo", "over the cap", "missing"],
)
def test_what_the_reader_refuses_is_one_line_naming_the_file(
    tmp_path: Path, make, message: str
) -> None:
    path = tmp_path / "p.yaml"
    make(path)
    with pytest.raises(InputError) as info:
        read_text(path, "profile", limit=100)
    assert str(info.value).startswith(message.format(p=path))
    assert "\n" not in str(info.value)


def test_a_device_is_refused_before_it_is_read() -> None:
    # /dev/urandom never ends: reading it was the old behaviour of `inspect`.
    with pytest.raises(InputError, match="/dev/urandom: a device, not a tool output file"):
        read_text(Path("/dev/urandom"), "tool output")


def test_lenient_reading_replaces_a_stray_byte(tmp_path: Path) -> None:
    (tmp_path / "dmesg.txt").write_bytes(b"NVRM: Xid \xff 79\n")
    assert read_text(tmp_path / "dmesg.txt", "tool output", lenient=True) == "NVRM: Xid \ufffd 79\n"


# --- writes never follow a planted symlink --------------------------------------------------


def test_atomic_write_ignores_a_planted_temp_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    run = tmp_path / "run"
    run.mkdir()
    # The old temp name, planted by someone who can write the directory.
    (run / ".manifest.json.tmp").symlink_to(victim)
    write_atomic(run / "manifest.json", "{}\n")
    assert victim.read_text() == "precious\n"
    assert (run / "manifest.json").read_text() == "{}\n"
    assert not (run / "manifest.json").is_symlink()


def test_appending_findings_never_follows_a_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / "findings.jsonl").symlink_to(victim)
    with pytest.raises(OSError):
        open_append(tmp_path / "findings.jsonl")
    assert victim.read_text() == "precious\n"


# --- facts file names: one file per node, inside its folder ---------------------------------


NAMES = ["a/b", "a_b", "a%2Fb", "x", ".x", "..", ".", "", "a" * 300, "a" * 301, "\ud800", "é"]


def test_node_names_map_to_different_safe_file_names() -> None:
    files = [file_name(n) for n in NAMES]
    assert len(set(files)) == len(NAMES)
    for name in files:
        assert "/" not in name and not name.startswith(".") and 0 < len(name) <= 200
        assert name.isascii()
    assert file_name("node-01") == "node-01" and file_name("gpu1.example.com") == "gpu1.example.com"


def test_a_replay_keeps_every_node_apart(tmp_path: Path) -> None:
    nodes = ["a/b", "a_b", "x", ".x", "n" * 300]
    (tmp_path / "in" / "facts").mkdir(parents=True)
    for index, node in enumerate(nodes):
        record = {"probe": "xid", "ok": False, "error": "boom"}
        doc = {"node": node, "bringup_version": "0", "collected_at": "t", "probes": {"xid": record}}
        (tmp_path / "in" / "facts" / f"{index}.json").write_text(json.dumps(doc))
    result = invoke("check", "--replay", tmp_path / "in", "--out", tmp_path / "out")
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1, result.stderr  # every node's xid probe failed
    written = sorted((tmp_path / "out" / "facts").iterdir())
    assert len(written) == len(nodes)
    assert {json.loads(p.read_text())["node"] for p in written} == set(nodes)


# --- fail: one line, one JSON document with --json, the run directory marked refused -------


def _app(body) -> typer.Typer:
    app = typer.Typer(cls=Cli)

    @app.command()
    def go(out: Path, as_json: bool = typer.Option(False, "--json")) -> None:
        body(out)

    @app.command()
    def other() -> None:
        pass

    return app


def test_fail_after_the_run_directory_exists_marks_it_refused(tmp_path: Path) -> None:
    def body(out: Path) -> None:
        create_run(out, "go", None, None)
        fail("--thing [/]: bad\nsecond line \x1b[31m")

    result = typer.testing.CliRunner().invoke(_app(body), ["go", str(tmp_path / "r"), "--json"])
    assert result.exit_code == 2
    line = "--thing [/]: bad\\nsecond line \\x1b[31m"
    assert result.stderr == f"error: {line}\n"  # markup and control characters as text
    doc = json.loads(result.stdout)  # the envelope of every --json (docs/json.md)
    assert (doc["command"], doc["error"], doc["exit_code"], doc["verdict"]) == ("go", line, 2, None)
    assert doc["run_dir"] == str(tmp_path / "r")
    manifest = load_manifest(tmp_path / "r")
    assert (manifest.status, manifest.exit_code) == ("refused", 2)


def test_without_json_stdout_stays_empty(tmp_path: Path) -> None:
    def body(out: Path) -> None:
        fail("no")

    result = typer.testing.CliRunner().invoke(_app(body), ["go", str(tmp_path)])
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", "error: no\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["check", "--demo", "--profile", "b900", "--json"], "unknown profile 'b900'"),
        (["check", "--demo", "--forks", "0", "--json"], "Invalid value for '--forks'"),
        (["inspect", "--json"], "Missing argument 'FILE'"),
        (["--nosuch", "--json"], "No such option: --nosuch"),
        (["nosuch", "--json"], "No such command 'nosuch'"),
        (["report", "/nonexistent/run", "--json"], "/nonexistent/run"),
    ],
)
def test_json_is_one_document_when_the_input_is_refused(args: list[str], message: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2, result.stderr
    doc = json.loads(result.stdout)
    assert doc["exit_code"] == 2 and message.lower() in doc["error"].lower()
    assert result.stderr.count("\n") == 1 and doc["error"] in result.stderr


# --- options that do not apply, numbers out of range -----------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["check", "--demo", "--suite", "nosuch"], "--suite does not apply to --demo"),
        (["check", "--demo", "--data-dir", "/nonexistent"], "--data-dir does not apply to --demo"),
        (["check", "--replay", "x", "--forks", "3"], "--forks does not apply to --replay"),
        (["check", "--resume", "x", "--profile", "h100"], "--profile does not apply to --resume"),
        (["nccl", "--local", "--port", "2000"], "--port does not apply to --local"),
        (["nccl", "--local", "--slow-fraction", "0.5"], "--slow-fraction does not apply"),
        (["burnin", "--local", "--port", "2000"], "--port does not apply"),
        (["burnin", "--local", "--node-work-dir", "/x"], "--node-work-dir does not apply"),
    ],
)
def test_an_option_that_does_nothing_in_the_mode_is_refused(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = invoke(*args, "--out", _unwritable(tmp_path))  # were it accepted: nothing runs
    assert result.exit_code == 2, result.stderr
    assert result.stderr.startswith(f"error: {message}") and result.stderr.count("\n") == 1


def _unwritable(tmp_path: Path) -> Path:
    """A run directory that cannot be made (its parent is a file)."""
    (tmp_path / "file").write_text("")
    return tmp_path / "file" / "run"


NUMBERS = [
    ("diagnose", "--forks", "-1"),
    ("diagnose", "--seconds", "-5"),
    ("diagnose", "--seconds", "nan"),
    ("diagnose", "--interval", "0"),
    ("diagnose", "--connect-timeout", "-1"),
    ("nccl", "--forks", "-1"),
    ("nccl", "--timeout", "-5"),
    ("nccl", "--timeout", "inf"),
    ("nccl", "--rendezvous-timeout", "0"),
    ("nccl", "--iters", "0"),
    ("nccl", "--warmup", "-1"),
    ("nccl", "--port", "70000"),
    ("nccl", "--port", "0"),
    ("nccl", "--ranks", "0"),
    ("nccl", "--step-factor", "1"),
    ("nccl", "--slow-fraction", "nan"),
    ("check", "--forks", "0"),
    ("check", "--connect-timeout", "0"),
    ("snapshot", "--forks", "-3"),
    ("burnin", "--minutes", "nan"),
    ("burnin", "--peak-tflops", "0"),
    ("burnin", "--port", "0"),
    ("burnin", "--rendezvous-timeout", "-1"),
    ("burnin", "--steps", "0"),
    ("provision", "--forks", "0"),
    ("provision", "--connect-timeout", "-1"),
]


@pytest.mark.parametrize(("command", "option", "value"), NUMBERS)
def test_numbers_out_of_range_are_refused(
    tmp_path: Path, command: str, option: str, value: str
) -> None:
    # An inventory that is not there: were the number accepted, nothing would run either.
    where = ["--nodes", "/nonexistent.ini", "--out", _unwritable(tmp_path)]
    result = invoke(command, *where, option, value)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and option in result.stderr, result.stderr


def test_a_run_directory_cannot_be_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("mine\n")
    with pytest.raises(InputError, match="exists and is not a directory"):
        RunDir.create(tmp_path / "f", "check", None, None)
    assert (tmp_path / "f").read_text() == "mine\n"


# --- a full disk ------------------------------------------------------------------------------


def test_the_line_of_a_full_disk_names_what_could_not_be_written(tmp_path: Path) -> None:
    """No room left (the disk, a quota): the run directory when the command made one, with
    `--resume` for a check of an inventory's nodes; else the file. Any other OSError is
    not this line's (None: raised as it is)."""
    import errno

    from bringup.commands.invocation import Invocation, no_space_line

    full = OSError(errno.ENOSPC, "No space left on device")
    quota = OSError(errno.EDQUOT, "Disk quota exceeded", "/srv/out/report.html")
    assert no_space_line(OSError(errno.EACCES, "Permission denied"), None) is None
    assert no_space_line(quota, None) == (
        "no space left to write /srv/out/report.html (Disk quota exceeded): free space on its "
        "file system, run again"
    )
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick")
    said = no_space_line(full, Invocation(json=False, command="check", run=run))
    assert said == (
        f"no space left to write the run directory {run.path} (No space left on device): free "
        f"space on its file system (`df -h {run.path}`); what it holds so far is kept"
    )
    run.manifest.inventory = "hosts.ini"  # a check of an inventory's nodes resumes
    resumed = no_space_line(full, Invocation(json=False, command="check", run=run))
    assert (
        resumed == f"{said}, and `bringup check --resume {run.path}` measures only what is missing"
    )
    assert no_space_line(full, Invocation(json=False, command="burnin", run=run)) == said
