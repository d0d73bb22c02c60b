"""`bringup verify RUN_DIR`: a run's files against the hashes its manifest holds, and its
detached signature, made and checked by the real ssh-keygen with keys made here."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bringup.provenance import manifest_sha256
from tests.support.cli import invoke, valid_envelope
from tests.support.report_runs import demo_run

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs ssh-keygen")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_run(tmp_path_factory.mktemp("demo") / "run")


@pytest.fixture
def run(demo: Path, tmp_path: Path) -> Path:
    """A copy of the demo run, to edit."""
    return Path(shutil.copytree(demo, tmp_path / "run"))


def keypair(folder: Path, name: str) -> Path:
    """A fresh ed25519 key without a passphrase; its allowed_signers line beside it."""
    key = folder / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True
    )
    return key


def signers(folder: Path, identity: str, key: Path) -> Path:
    path = folder / "allowed_signers"
    path.write_text(f"{identity} {key.with_suffix('.pub').read_text()}")
    return path


def edit(path: Path, change: Callable[[dict[str, Any]], object]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2) + "\n")


def test_an_intact_demo_run_verifies(demo: Path) -> None:
    result = invoke("verify", demo)
    assert result.exit_code == 0, result.output
    digest = manifest_sha256(demo)
    assert result.stdout.splitlines() == [
        f"INTACT: 7 files match manifest.json (sha256 {digest})",
        "signature: none",
    ]


def test_edited_facts_fail_and_name_the_edited_file(run: Path) -> None:
    """The issue's case: a changed GPU serial and a halved NVMe figure in a copied run."""

    def new_serial(facts: dict[str, Any]) -> None:
        facts["probes"]["gpu"]["facts"]["gpus"][3]["serial"] = "1654321098765"

    def halved(facts: dict[str, Any]) -> None:
        path = facts["probes"]["nvme"]["facts"]["paths"][0]
        path["seq_read_bytes_per_s"] /= 2

    edit(run / "facts" / "b300-node02.json", new_serial)
    edit(run / "facts" / "b300-node05.json", halved)
    result = invoke("verify", run)
    assert result.exit_code == 1
    assert result.stdout.splitlines()[:3] == [
        "modified: facts/b300-node02.json",
        "modified: facts/b300-node05.json",
        "CHANGED: 2 differences from the 7 files manifest.json records "
        f"(sha256 {manifest_sha256(run)})",
    ]


def test_missing_and_added_files_are_named(run: Path) -> None:
    (run / "findings.jsonl").unlink()
    (run / "raw" / "b300-node01").mkdir(parents=True)
    (run / "raw" / "b300-node01" / "planted.txt").write_text("x")
    result = invoke("verify", run, "--json")
    assert result.exit_code == 1
    envelope = valid_envelope(json.loads(result.stdout))
    doc = envelope["data"]
    assert doc["intact"] is False and envelope["exit_code"] == 1
    assert doc["changes"] == [
        {"kind": "missing", "path": "findings.jsonl"},
        {"kind": "added", "path": "raw/b300-node01/planted.txt"},
    ]
    assert doc["manifest_sha256"] == manifest_sha256(run)


def test_a_manifest_without_hashes_is_not_verified(run: Path) -> None:
    edit(run / "manifest.json", lambda m: m.update(files_sha256=None))
    result = invoke("verify", run)
    assert result.exit_code == 1
    assert result.stdout.startswith("NOT VERIFIED: manifest.json holds no file hashes")


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda p: p / "nosuch", "not a directory (not a run directory)"),
        (lambda p: p, "no manifest.json (not a run directory)"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, make: Callable[[Path], Path], words: str
) -> None:
    result = invoke("verify", make(tmp_path))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and words in result.stderr
    assert "Traceback" not in result.output


def test_an_unreadable_manifest_is_bad_input(run: Path) -> None:
    (run / "manifest.json").write_text("{not json")
    result = invoke("verify", run)
    assert result.exit_code == 2
    assert "manifest.json: not a run manifest" in result.stderr
    assert result.stderr.count("\n") == 1


def test_sign_then_verify_the_signature(run: Path, tmp_path: Path) -> None:
    key = keypair(tmp_path, "renter")
    allowed = signers(tmp_path, "renter@example.com", key)
    signed = invoke("verify", run, "--sign", key)
    assert signed.exit_code == 0, signed.output
    assert (run / "manifest.json.sig").read_text().startswith("-----BEGIN SSH SIGNATURE-----")
    assert signed.stdout.splitlines()[-1] == f"signed: {run}/manifest.json.sig (key {key})"

    good = invoke("verify", run, "--allowed-signers", allowed, "--identity", "renter@example.com")
    assert good.exit_code == 0, good.output
    assert 'signature: good, Good "bringup-run" signature for renter@example.com' in good.stdout

    other = invoke("verify", run, "--allowed-signers", allowed, "--identity", "provider@x")
    assert other.exit_code == 1
    assert "signature: BAD:" in other.stdout

    # The manifest edited after signing (its hashes made to match edited facts).
    edit(run / "manifest.json", lambda m: m.update(profile="h100"))
    forged = invoke("verify", run, "--allowed-signers", allowed, "--identity", "renter@example.com")
    assert forged.exit_code == 1
    assert "INTACT" in forged.stdout and "signature: BAD:" in forged.stdout


def test_a_changed_run_is_not_signed(run: Path, tmp_path: Path) -> None:
    key = keypair(tmp_path, "renter")
    (run / "findings.jsonl").write_text("")
    result = invoke("verify", run, "--sign", key)
    assert result.exit_code == 1
    assert not (run / "manifest.json.sig").exists()
    assert "not signed: only an intact run with a good signature is signed" in result.stdout


def test_no_signature_to_check_is_a_failure(run: Path, tmp_path: Path) -> None:
    allowed = signers(tmp_path, "renter@example.com", keypair(tmp_path, "renter"))
    result = invoke("verify", run, "--allowed-signers", allowed, "--identity", "renter@example.com")
    assert result.exit_code == 1
    assert f"signature: BAD: no manifest.json.sig in {run}" in result.stdout


def test_signature_options_go_together(run: Path, tmp_path: Path) -> None:
    result = invoke("verify", run, "--identity", "renter@example.com")
    assert result.exit_code == 2
    assert "--allowed-signers and --identity go together" in result.stderr
    result = invoke("verify", run, "--sign", tmp_path / "nokey")
    assert result.exit_code == 2
    assert "no such key file" in result.stderr


def test_a_handover_bundle_verifies_each_part(tmp_path: Path) -> None:
    bundle = tmp_path / "handover"
    assert invoke("handover", "--demo", "--out", bundle).exit_code == 1  # the demo's faults
    part = manifest_sha256(bundle / "check")
    summary = json.loads((bundle / "report.json").read_text())
    assert summary["verdict"]["line"] == "NOT ACCEPTED (demo data)"
    assert summary["run"]["parts_sha256"] == {"check": part}
    assert invoke("verify", bundle).stdout.splitlines() == [
        f"INTACT: 7 files match check/manifest.json (sha256 {part})",
        "signature: none",
    ]

    edit(bundle / "check" / "facts" / "b300-node01.json", lambda f: f.update(collected_at="T"))
    result = invoke("verify", bundle, "--json")
    assert result.exit_code == 1
    doc = valid_envelope(json.loads(result.stdout))["data"]
    assert doc["bundle"] == str(bundle) and doc["intact"] is False
    (only,) = doc["parts"]
    assert only["changes"] == [{"kind": "modified", "path": "facts/b300-node01.json"}]
    text = invoke("verify", bundle).stdout
    assert text.startswith("modified: check/facts/b300-node01.json\nCHANGED: 1 differences")
