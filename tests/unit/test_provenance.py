"""Provenance and integrity of a run directory (bringup/provenance.py, bringup/rundir.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from bringup.findings import Status
from bringup.provenance import (
    REDACTED,
    Change,
    Origin,
    Provenance,
    Resumed,
    Source,
    compare,
    evidence_files,
    evidence_hashes,
    origin_of,
)
from bringup.rundir import RunDir, load_manifest


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["check", "--local"], ["check", "--local"]),
        # An option whose name says secret: its value, in either spelling.
        (["x", "--password", "hunter2", "--out", "o"], ["x", "--password", REDACTED, "--out", "o"]),
        (["x", "--api-key=abc123"], ["x", f"--api-key={REDACTED}"]),
        (["x", "--token", "t0k"], ["x", "--token", REDACTED]),
        # KEY=VALUE words (provision -e, nccl --env) whose key says secret.
        (
            ["provision", "-e", "ansible_become_password=pw", "-e", "driver=580"],
            ["provision", "-e", f"ansible_become_password={REDACTED}", "-e", "driver=580"],
        ),
        (["nccl", "--env", "HF_TOKEN=hf_x"], ["nccl", "--env", f"HF_TOKEN={REDACTED}"]),
        # Options that only look alike keep their values.
        (["plan", "--tokens", "1e9"], ["plan", "--tokens", "1e9"]),
        (
            ["check", "--accept-new-hostkeys", "--out", "o"],
            ["check", "--accept-new-hostkeys", "--out", "o"],
        ),
        (["verify", "--sign", "/k/id_ed25519", "r"], ["verify", "--sign", "/k/id_ed25519", "r"]),
    ],
)
def test_secret_values_never_reach_the_manifest(argv: list[str], expected: list[str]) -> None:
    from bringup.provenance import redact

    assert redact(argv) == expected


def test_compare_names_each_changed_file_once() -> None:
    recorded = {"facts/a.json": "1", "facts/b.json": "2", "findings.jsonl": "3"}
    now = {"facts/a.json": "1", "facts/b.json": "9", "raw/a/gpu/x.txt": "4"}
    assert compare(recorded, now) == [
        Change("modified", "facts/b.json"),
        Change("missing", "findings.jsonl"),
        Change("added", "raw/a/gpu/x.txt"),
    ]
    assert [c.line() for c in compare(recorded, recorded)] == []
    assert Change("missing", "findings.jsonl").line() == "missing: findings.jsonl"


def test_evidence_is_raw_facts_findings_and_result_files_not_reports(tmp_path: Path) -> None:
    for name in (
        "raw/n1/gpu/nvidia-smi-q.txt",
        "facts/n1.json",
        "findings.jsonl",
        "baseline.json",
        "manifest.json",
        "manifest.json.sig",
        "report.html",
        "report.json",
        "facts/.n1.json.tmp",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    assert evidence_files(tmp_path) == [
        "baseline.json",
        "facts/n1.json",
        "findings.jsonl",
        "raw/n1/gpu/nvidia-smi-q.txt",
    ]
    digest = hashlib.sha256(b"facts/n1.json").hexdigest()
    assert evidence_hashes(tmp_path)["facts/n1.json"] == digest


def test_a_run_is_live_only_when_every_record_is() -> None:
    """The run's origin is derived from its records: one link anywhere makes it not live,
    and the verdict says each cause in the order first met."""
    demo, sim = Source(kind="demo"), Source(kind="simulated", of="GPUs")
    replayed = Source(kind="replayed", of="d", sha256="ab" * 32)
    files = Source(kind="file", of="/x/n3.json", sha256="cd" * 32)
    assert origin_of([("n1", []), ("n2", [])]) == Origin()
    assert Origin().live and Origin().mode == "live" and Origin().note is None
    chained = origin_of([("n1", [demo, replayed]), ("n2", [demo, replayed])])
    assert chained.note == "demo data, replayed from d"
    assert chained.mode == "demo+replayed" and not chained.live
    mixed = origin_of([("n1", []), ("n2", [sim]), ("n3", [demo, files]), ("n4", [files])])
    assert mixed.note == "simulated GPUs, demo data, facts from files on n3, n4"
    assert origin_of([("n1", []), ("n2", [sim])]).note == "simulated GPUs"


def test_an_old_record_without_a_chain_takes_its_manifests_mode() -> None:
    """Fail closed for runs written before records carried a chain."""
    assert origin_of([("n1", [])], Provenance(mode="demo")).note == "demo data"
    replay = Provenance(mode="replay", replay_of="runs/x")
    assert origin_of([("n1", [])], replay).note == "replayed from runs/x"
    assert origin_of([("n1", [])], Provenance(mode="resume")).live


@pytest.mark.parametrize(
    ("statuses", "live", "expected"),
    [
        ([Status.PASS, Status.WARN], True, ("ACCEPTED", 0)),
        ([Status.PASS], False, ("NOT ACCEPTED (demo data)", 1)),
        ([Status.PASS, Status.FAIL], True, ("NOT ACCEPTED", 1)),
        ([], True, ("NOT ACCEPTED", 1)),  # nothing judged is never accepted
    ],
)
def test_one_rule_gives_the_verdict_and_the_exit_status(
    statuses: list[Status], live: bool, expected: tuple[str, int]
) -> None:
    from bringup.findings import Finding
    from bringup.provenance import verdict_exit_code, verdict_word

    findings = [
        Finding(node="n1", check=f"c{i}", status=s, message="m") for i, s in enumerate(statuses)
    ]
    made = Origin() if live else Origin(("demo data",), ("demo",))
    assert (verdict_word(findings, made), verdict_exit_code(findings, made)) == expected


def test_finish_hashes_every_evidence_file_and_resume_clears_them(tmp_path: Path) -> None:
    made = Provenance(mode="live", argv=["check", "--local"], controller="ctl")
    run = RunDir.create(tmp_path / "run", "check", "b300", "quick", made, probes=["gpu"])
    record = {"probe": "gpu", "ok": True, "raw": {"smi.txt": "GPU 0"}, "started_at": "T0"}
    run.add_record("n1", record)
    run.add_findings([])
    run.finish("complete", 0)
    manifest = load_manifest(tmp_path / "run")
    assert manifest.provenance == made
    assert manifest.probes == ["gpu"]
    assert manifest.files_sha256 is not None
    assert sorted(manifest.files_sha256) == [
        "facts/n1.json",
        "findings.jsonl",
        "raw/n1/gpu/smi.txt",
    ]
    assert manifest.files_sha256["raw/n1/gpu/smi.txt"] == hashlib.sha256(b"GPU 0").hexdigest()

    again = RunDir.reopen(tmp_path / "run", Resumed(at="T1", argv=["check", "--resume"]))
    saved = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert saved["files_sha256"] is None  # the files change again until it finishes
    assert saved["provenance"]["mode"] == "resume"
    assert saved["provenance"]["argv"] == ["check", "--local"]  # how it started
    assert saved["provenance"]["resumed"] == [
        {"at": "T1", "argv": ["check", "--resume"], "controller": ""}
    ]
    # What the node measured before the resume keeps the node's time.
    assert again.facts_of("n1").probes["gpu"].started_at == "T0"


def test_a_replay_keeps_measurement_times_and_copies_raw_files_but_no_links(
    tmp_path: Path,
) -> None:
    first = RunDir.create(tmp_path / "first", "snapshot", None, "quick")
    first.add_record("n1", {"probe": "gpu", "ok": True, "raw": {"a.txt": "A"}, "started_at": "T0"})
    secret = tmp_path / "secret"
    secret.write_text("not evidence")
    (tmp_path / "first" / "raw" / "n1" / "gpu" / "link.txt").symlink_to(secret)
    recorded = first.facts_of("n1")

    replay = RunDir.create(tmp_path / "replay", "check", "b300", None)
    replay.add_recorded(recorded, tmp_path / "first")
    stored = json.loads((tmp_path / "replay" / "facts" / "n1.json").read_text())
    assert stored["collected_at"] == recorded.collected_at
    assert stored["probes"]["gpu"]["started_at"] == "T0"
    copied = tmp_path / "replay" / "raw" / "n1" / "gpu"
    assert (copied / "a.txt").read_text() == "A"
    assert not (copied / "link.txt").exists()
    assert replay.manifest.nodes == ["n1"]
