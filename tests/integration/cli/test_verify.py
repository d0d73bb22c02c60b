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

from bringup import rundir
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


EVIDENCE = "raw/, facts/, findings.jsonl, baseline.json, pairs.json"
RUN_COVERS = (
    f"covers: the evidence files ({EVIDENCE}) against manifest.json; not the rendered reports "
    "(`bringup report` makes them again from the evidence); a signature, checked, shows who "
    "signed manifest.json"
)
BUNDLE_COVERS = (
    f"covers: each part's evidence files ({EVIDENCE}) against its manifest.json; each part's "
    "manifest.json, status and exit code, and the reports (report.html, report.json, "
    "report.junit.xml, report.md) against the bundle's manifest.json; a signature, checked, "
    "shows who signed "
    "that manifest"
)


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
        RUN_COVERS,
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
    assert signed.stdout.splitlines()[-2] == f"signed: {run}/manifest.json.sig (key {key})"

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
    assert summary["verdict"]["line"] == (
        "NOT ACCEPTED (demo data; partial handover: no acceptance suite, "
        "no NCCL multi-node/pairwise, no burn-in MFU baseline)"
    )
    assert summary["run"]["parts_sha256"] == {"check": part}
    assert invoke("verify", bundle).stdout.splitlines() == [
        f"INTACT: 7 files match check/manifest.json (sha256 {part})",
        "signature: none",
        "INTACT: the 1 part and 4 reports the bundle's manifest.json records match "
        f"(sha256 {manifest_sha256(bundle)})",
        "signature: none",
        BUNDLE_COVERS,
    ]

    edit(bundle / "check" / "facts" / "b300-node01.json", lambda f: f.update(collected_at="T"))
    result = invoke("verify", bundle, "--json")
    assert result.exit_code == 1
    doc = valid_envelope(json.loads(result.stdout))["data"]
    assert doc["bundle"] == str(bundle) and doc["intact"] is False
    (only,) = doc["parts"]
    assert only["changes"] == [{"kind": "modified", "path": "facts/b300-node01.json"}]
    text = invoke("verify", bundle).stdout
    assert text.startswith("modified: check/facts/b300-node01.json\nCHANGED: 1 difference")


# --- a bundle is evidence as a whole ------------------------------------------------------


@pytest.fixture(scope="module")
def two_parts(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bundle of two acceptance runs (the demo's, twice): check/ and check-2/."""
    bundle = tmp_path_factory.mktemp("bundle") / "b"
    result = invoke("handover", "--from", demo, "--from", demo, "--out", bundle)
    assert result.exit_code == 1, result.output  # the demo's faults: NOT ACCEPTED
    return bundle


def drop_part(bundle: Path) -> None:
    """The failing part taken out of the bundle's manifest, the exit code set to 0."""

    def drop(m: dict[str, Any]) -> None:
        m["parts"] = m["parts"][:1]
        m["exit_code"] = 0

    edit(bundle / "manifest.json", drop)


def accepted(name: str) -> Callable[[Path], None]:
    def forge(bundle: Path) -> None:
        path = bundle / name
        path.write_text(path.read_text().replace("NOT ACCEPTED", "ACCEPTED"))

    return forge


# Each edit a provider could make to a bundle, and the lines `verify` names it with (the
# lines start so; a recorded hash follows in some).
FORGERIES: dict[str, tuple[Callable[[Path], None], list[str]]] = {
    "part taken out of the manifest": (
        drop_part,
        [
            "modified: manifest.json (report.json was rendered from part check-2 (sha256 ",
            "modified: manifest.json (exit code 0, but report.json's verdict is NOT ACCEPTED)",
            "added: check-2/ (not listed in the bundle's manifest.json)",
        ],
    ),
    "part directory deleted": (
        lambda b: shutil.rmtree(b / "check-2"),
        ["missing: check-2/manifest.json (part check-2: cannot read"],
    ),
    "part deleted from both": (
        lambda b: (drop_part(b), shutil.rmtree(b / "check-2")),
        [
            "modified: manifest.json (report.json was rendered from part check-2 (sha256 ",
            "modified: manifest.json (exit code 0, but report.json's verdict is NOT ACCEPTED)",
        ],
    ),
    "part exit code edited in the bundle": (
        lambda b: edit(b / "manifest.json", lambda m: m["parts"][1].update(exit_code=0)),
        ["modified: manifest.json (part check-2: exit code 0 there, 1 in check-2/manifest.json)"],
    ),
    "part exit code edited in the part": (
        lambda b: edit(b / "check-2" / "manifest.json", lambda m: m.update(exit_code=0)),
        [
            "modified: check-2/manifest.json (the bundle's manifest.json records sha256 ",
            "modified: manifest.json (part check-2: exit code 1 there, 0 in check-2/manifest.json)",
        ],
    ),
    "report.md verdict edited": (accepted("report.md"), ["modified: report.md (recorded sha256 "]),
    "report.html verdict edited": (
        accepted("report.html"),
        ["modified: report.html (recorded sha256 "],
    ),
    # The JUnit file a CI gate reads: a failing testcase edited into a pass.
    "report.junit.xml edited": (
        lambda b: (b / "report.junit.xml").write_text(
            (b / "report.junit.xml").read_text().replace("<failure", "<skipped")
        ),
        ["modified: report.junit.xml (recorded sha256 "],
    ),
}


def named(stdout: str, expected: list[str]) -> None:
    """The changes verify lists, before its bundle verdict, start as `expected`."""
    lines = stdout.splitlines()
    verdict = next(i for i, line in enumerate(lines) if " reports the bundle's manifest" in line)
    assert lines[verdict].startswith("CHANGED: ")
    found = [
        line for line in lines[:verdict] if line.startswith(("modified:", "missing:", "added:"))
    ]
    assert len(found) == len(expected), stdout
    for line, start in zip(found, expected, strict=True):
        assert line.startswith(start), stdout


@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_an_edited_bundle_fails_verify(two_parts: Path, tmp_path: Path, forgery: str) -> None:
    bundle = Path(shutil.copytree(two_parts, tmp_path / "b"))
    assert invoke("verify", bundle).exit_code == 0
    forge, lines = FORGERIES[forgery]
    forge(bundle)
    result = invoke("verify", bundle)
    assert result.exit_code == 1, result.output
    named(result.stdout, lines)
    assert result.stdout.splitlines()[-1] == BUNDLE_COVERS


@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_an_edited_signed_bundle_fails_verify(
    two_parts: Path, tmp_path: Path, forgery: str
) -> None:
    bundle = Path(shutil.copytree(two_parts, tmp_path / "b"))
    key = keypair(tmp_path, "renter")
    allowed = signers(tmp_path, "renter@example.com", key)
    check = ("--allowed-signers", allowed, "--identity", "renter@example.com")
    assert invoke("verify", bundle, "--sign", key).exit_code == 0
    assert (bundle / "manifest.json.sig").is_file()
    good = invoke("verify", bundle, *check)
    assert good.exit_code == 0, good.output
    forge, lines = FORGERIES[forgery]
    forge(bundle)
    result = invoke("verify", bundle, *check)
    assert result.exit_code == 1, result.output
    named(result.stdout, lines)


def test_the_signature_covers_the_bundles_manifest(two_parts: Path, tmp_path: Path) -> None:
    """An edit the hashes cannot see (the nodes listed) breaks the bundle's signature."""
    bundle = Path(shutil.copytree(two_parts, tmp_path / "b"))
    key = keypair(tmp_path, "renter")
    allowed = signers(tmp_path, "renter@example.com", key)
    check = ("--allowed-signers", allowed, "--identity", "renter@example.com")
    signed = invoke("verify", bundle, "--sign", key)
    assert signed.exit_code == 0, signed.output
    assert signed.stdout.splitlines()[-2] == f"signed: {bundle}/manifest.json.sig (key {key})"
    edit(bundle / "manifest.json", lambda m: m.update(nodes=["b300-node01"]))
    result = invoke("verify", bundle, *check, "--json")
    assert result.exit_code == 1
    doc = valid_envelope(json.loads(result.stdout))["data"]
    assert doc["manifest"]["intact"] is True  # every hash still matches...
    assert doc["manifest"]["signature"]["good"] is False  # ...the signature does not
    assert [part["signature"]["good"] for part in doc["parts"]] == [True, True]
    assert doc["covers"] == BUNDLE_COVERS.removeprefix("covers: ")


# --- a sharded run (more than rundir.SHARD_ABOVE nodes): the same cover one folder down ---


@pytest.fixture(scope="module")
def sharded_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo run written sharded (the threshold lowered so its six nodes shard)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rundir, "SHARD_ABOVE", 0)
        return demo_run(tmp_path_factory.mktemp("sharded") / "run")


def in_shard(node: str) -> str:
    return f"facts/{rundir.shard_of(node)}/{node}.json"


def test_a_forged_missing_or_planted_file_in_a_shard_is_named(
    sharded_demo: Path, tmp_path: Path
) -> None:
    run = Path(shutil.copytree(sharded_demo, tmp_path / "run"))
    assert invoke("verify", run).stdout.startswith("INTACT: 7 files match manifest.json")

    def new_serial(facts: dict[str, Any]) -> None:
        facts["probes"]["gpu"]["facts"]["gpus"][3]["serial"] = "1654321098765"

    edit(run / in_shard("b300-node02"), new_serial)
    (run / in_shard("b300-node05")).unlink()
    planted = run / "raw" / rundir.shard_of("b300-node01") / "b300-node01" / "gpu"
    planted.mkdir(parents=True)
    (planted / "planted.txt").write_text("x")
    result = invoke("verify", run, "--json")
    assert result.exit_code == 1
    doc = valid_envelope(json.loads(result.stdout))["data"]
    assert doc["changes"] == sorted(
        [
            {"kind": "modified", "path": in_shard("b300-node02")},
            {"kind": "missing", "path": in_shard("b300-node05")},
            {"kind": "added", "path": f"{planted.relative_to(run)}/planted.txt"},
        ],
        key=lambda change: change["path"],
    )


def test_a_forged_file_in_a_shard_of_a_bundles_part_is_named(
    sharded_demo: Path, tmp_path: Path
) -> None:
    bundle = tmp_path / "b"
    assert invoke("handover", "--from", sharded_demo, "--out", bundle).exit_code == 1
    assert invoke("verify", bundle).exit_code == 0
    # handover copied the part as it is: sharded, every file in its manifest's hashes.
    assert (bundle / "check" / in_shard("b300-node03")).is_file()
    edit(bundle / "check" / in_shard("b300-node03"), lambda f: f.update(collected_at="T"))
    result = invoke("verify", bundle)
    assert result.exit_code == 1
    assert result.stdout.startswith(
        f"modified: check/{in_shard('b300-node03')}\nCHANGED: 1 difference"
    )
