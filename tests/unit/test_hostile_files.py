"""Hostile files in and around a run directory (issue 23): the one writer never follows a
planted symlink, the one reader never follows one out of a run nor waits on a FIFO, and
what cannot be read is an ERROR and NOT ACCEPTED, never a hang, a traceback or ACCEPTED.

Every command runs for real, in-process, on the demo fleet's run as `bringup check --demo`
writes it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
import yaml

from tests.support.cli import invoke
from tests.support.report_runs import demo_run

PRECIOUS = "precious: the victim of a planted symlink\n"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_run(tmp_path_factory.mktemp("demo") / "run")


@pytest.fixture
def run(demo: Path, tmp_path: Path) -> Path:
    """A fresh copy of the demo run, to be broken."""
    return Path(shutil.copytree(demo, tmp_path / "run"))


def victim(folder: Path, name: str = "victim") -> Path:
    path = folder / name
    path.write_text(PRECIOUS)
    return path


def plant(names: list[Path], target: Path) -> None:
    for name in names:
        name.unlink(missing_ok=True)
        name.symlink_to(target)


def json_of(text: str) -> dict:
    return json.loads(text)


# --- every command: a symlink planted at every output and temporary name -----------------------


def test_report_never_writes_through_a_planted_symlink(run: Path, tmp_path: Path) -> None:
    """Found 1: `.report.md.tmp -> authorized_keys` in a received run gave root."""
    target = victim(tmp_path)
    outputs = ["report.html", "report.md", "report.junit.xml", "report.json"]
    names = [run / n for n in outputs] + [run / f".{n}.tmp" for n in outputs]
    plant(names, target)
    result = invoke("report", run, "--format", "all")
    assert result.exit_code == 1, result.output  # the demo's planted faults
    assert target.read_text() == PRECIOUS
    for name in outputs:
        assert not (run / name).is_symlink() and (run / name).stat().st_size > 0


def test_report_refuses_a_symlinked_out(run: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "elsewhere")
    result = invoke("report", run, "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert result.stderr.strip().endswith("out is a symbolic link; give the directory it points to")
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_learn_never_writes_through_a_planted_symlink(run: Path, tmp_path: Path) -> None:
    target = victim(tmp_path)
    golden = tmp_path / "golden.yaml"
    plant([golden, tmp_path / ".golden.yaml.tmp"], target)
    result = invoke("learn", run, "--out", golden)
    assert result.exit_code == 0, result.output
    assert target.read_text() == PRECIOUS
    assert not golden.is_symlink() and "node:" in golden.read_text()


def test_exporter_textfile_never_writes_through_a_planted_symlink(
    run: Path, tmp_path: Path
) -> None:
    """prometheus_client's write_to_textfile opened PATH.<pid>.<thread> following links."""
    target = victim(tmp_path)
    prom = tmp_path / "bringup.prom"
    guessed = tmp_path / f"bringup.prom.{os.getpid()}.{threading.current_thread().ident}"
    plant([prom, guessed], target)
    result = invoke("exporter", "--run", run, "--textfile", prom)
    assert result.exit_code == 0, result.output
    assert target.read_text() == PRECIOUS
    assert not prom.is_symlink() and "bringup_run_accepted 0.0" in prom.read_text()


def test_verify_sign_never_writes_through_a_planted_symlink(run: Path, tmp_path: Path) -> None:
    target = victim(tmp_path)
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    plant([run / "manifest.json.sig", run / ".manifest.json.sig.tmp"], target)
    result = invoke("verify", run, "--sign", key)
    assert result.exit_code == 0, result.output
    assert target.read_text() == PRECIOUS
    sig = run / "manifest.json.sig"
    assert not sig.is_symlink() and "BEGIN SSH SIGNATURE" in sig.read_text()


def test_check_and_handover_refuse_a_symlinked_out(demo: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "elsewhere")
    for args in (
        ["check", "--demo", "--out", tmp_path / "out"],
        ["handover", "--from", demo, "--out", tmp_path / "out"],
    ):
        result = invoke(*args)
        assert result.exit_code == 2, (args, result.output)
        assert "is a symbolic link; choose another --out" in result.stderr.strip().splitlines()[-1]
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_handover_from_refuses_a_symlink_in_the_source_naming_it(run: Path, tmp_path: Path) -> None:
    """handover --from copied symlinks as they were: the bundle carried any file they named."""
    (run / "raw").mkdir(exist_ok=True)
    (run / "raw" / "evil").symlink_to("/etc/shadow")
    result = invoke("handover", "--from", run, "--out", tmp_path / "bundle")
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert line.startswith(f"error: --from {run}: raw/evil: not a regular file"), line
    assert not (tmp_path / "bundle" / "check" / "raw" / "evil").exists()


# --- hostile files in a run directory: ERROR, NOT ACCEPTED, in seconds -------------------------


def report_json(run: Path) -> dict:
    result = invoke("report", run, "--json", "--out", run.parent / "out")
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return json_of(result.stdout)


def errors(doc: dict) -> list[str]:
    return [f["message"] for f in doc["findings"] if f["status"] == "ERROR"]


def test_a_fifo_facts_file_is_an_error_naming_it_not_a_hang(run: Path) -> None:
    facts = run / "facts" / "b300-node01.json"
    facts.unlink()
    os.mkfifo(facts)
    doc = report_json(run)
    assert doc["verdict"] == "NOT ACCEPTED"
    assert any("facts/b300-node01.json unreadable" in m and "a FIFO" in m for m in errors(doc))


def test_findings_linked_to_dev_zero_is_an_error_not_memory_exhausted(run: Path) -> None:
    (run / "findings.jsonl").unlink()
    (run / "findings.jsonl").symlink_to("/dev/zero")
    doc = report_json(run)
    assert doc["verdict"] == "NOT ACCEPTED"
    assert any(
        m.startswith("findings.jsonl unreadable") and "symbolic link" in m for m in errors(doc)
    )


def test_a_device_as_findings_is_an_error_naming_it(run: Path) -> None:
    """A device node itself (not a link to one): refused as a device, never read."""
    (run / "findings.jsonl").unlink()
    os.mknod(run / "findings.jsonl", 0o600 | 0o020000, os.makedev(1, 5))  # /dev/zero's
    doc = report_json(run)
    assert doc["verdict"] == "NOT ACCEPTED"
    assert any("findings.jsonl unreadable" in m and "a device" in m for m in errors(doc))


def test_a_symlinked_facts_folder_is_an_error_and_never_read(run: Path, tmp_path: Path) -> None:
    shutil.move(run / "facts", tmp_path / "facts")
    (run / "facts").symlink_to(tmp_path / "facts")
    doc = report_json(run)
    assert doc["verdict"] == "NOT ACCEPTED"
    assert any("facts/ is a symbolic link" in m for m in errors(doc))


def test_a_symlinked_raw_is_an_integrity_failure(run: Path, tmp_path: Path) -> None:
    """verify followed `raw -> /usr/share/doc` and hashed 4630 files of this machine."""
    (run / "raw").symlink_to("/usr/share/doc")
    result = invoke("verify", run)
    assert result.exit_code == 1, result.output
    assert "symlink: raw" in result.stdout.splitlines()
    assert "/usr/share/doc" not in result.stdout


def test_a_fifo_in_raw_is_an_integrity_failure_not_a_hang(run: Path) -> None:
    first = run / "facts" / "b300-node01.json"
    first.unlink()
    os.mkfifo(first)
    result = invoke("verify", run)
    assert result.exit_code == 1, result.output
    assert f"not a regular file: {first.relative_to(run).as_posix()}" in result.stdout


# --- golden.yaml: node strings are data, never YAML syntax -------------------------------------


def test_golden_yaml_round_trips_node_strings_with_newlines(run: Path, tmp_path: Path) -> None:
    """A kernel string with newlines wrote real keys (`extra: 1`) into golden.yaml."""
    from bringup.checks.consistency import fleet_fields, from_manifest, majority
    from bringup.rundir import load_facts

    evil = "6.8.0\nextra: 1\n# not a comment\u2028also: 2"
    split = ["a\nsplit: 1", "b\u0085other: 2", "c"]
    for index, file in enumerate(sorted((run / "facts").glob("*.json"))):
        doc = json.loads(file.read_text())
        host = doc["probes"]["host"]["facts"]
        host["kernel"] = evil
        host["firmware"] = {"bmc": split[index % len(split)]}
        file.write_text(json.dumps(doc))
    golden = tmp_path / "golden.yaml"
    result = invoke("learn", run, "--out", golden)
    assert result.exit_code == 0, result.output
    text = golden.read_text()
    loaded = yaml.safe_load(text)
    fields, not_learned = majority(fleet_fields(load_facts(run)))
    assert from_manifest(loaded) == fields
    assert fields["kernel"] == evil  # the value itself, newlines and all
    assert set(loaded) == {"node", "gpus"}
    assert "extra" not in loaded["node"] and "also" not in loaded["node"]
    comments = [line for line in text.splitlines() if line.startswith("#")]
    assert '#   firmware.bmc: "a\\nsplit: 1", "b\\u0085other: 2", "c"' in comments, comments
    assert "firmware.bmc" in not_learned


# --- the exporter: the run that finished last, never blocked by one it cannot read -------------


def set_times(run: Path, started: str, ended: str) -> None:
    manifest = json_of((run / "manifest.json").read_text())
    manifest.update(started_at=started, ended_at=ended)
    (run / "manifest.json").write_text(json.dumps(manifest))


def test_the_exporter_serves_the_run_that_finished_last_after_a_clock_step(
    demo: Path, tmp_path: Path
) -> None:
    """After a clock step back, the run written while the clock was ahead was served over
    every later one (by the newest `started_at` string)."""
    from bringup.report.prometheus import newest_run

    runs = tmp_path / "runs"
    ahead = Path(shutil.copytree(demo, runs / "b-clock-ahead"))
    set_times(ahead, "2099-01-01T00:00:00+00:00", "2099-01-01T01:00:00+00:00")
    later = Path(shutil.copytree(demo, runs / "a-later"))
    set_times(later, "2026-01-01T00:00:00+00:00", "2026-01-01T01:00:00+00:00")
    assert newest_run(runs) == (later, [])


def test_a_fifo_manifest_under_runs_dir_is_skipped_and_said(demo: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    good = Path(shutil.copytree(demo, runs / "good"))
    (runs / "z-fifo").mkdir()
    os.mkfifo(runs / "z-fifo" / "manifest.json")
    result = invoke("exporter", "--runs-dir", runs, "--json")
    assert result.exit_code == 0, result.output
    doc = json_of(result.stdout)
    assert doc["run_dir"] == str(good)
    skipped = doc["data"]["skipped"]
    assert len(skipped) == 1 and skipped[0].startswith(f"skipped {runs / 'z-fifo'}: ")
    assert "a FIFO" in skipped[0]
    assert result.stderr == ""  # --json: said in the document alone (issue 27)
    plain = invoke("exporter", "--runs-dir", runs, "--textfile", tmp_path / "m.prom")
    assert plain.exit_code == 0, plain.output
    assert "a FIFO" in plain.stderr  # without it, said on stderr
