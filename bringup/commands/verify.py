"""`bringup verify RUN_DIR`: are a run's files still what it measured?

    bringup verify runs/x                                       the hashes, file by file
    bringup verify runs/x --sign ~/.ssh/id_ed25519              ... then sign manifest.json
    bringup verify runs/x --allowed-signers signers --identity renter@example.com

A finished run's manifest.json holds the SHA-256 of every evidence file (raw/, facts/,
findings.jsonl, the run's result files: bringup/provenance.py). verify recomputes them
and prints one line per file that differs (modified, missing, added), then the verdict
with the SHA-256 of manifest.json itself, the string a report quotes. The manifest can
carry a detached signature, manifest.json.sig, made and checked by OpenSSH's ssh-keygen
(`-Y sign` / `-Y verify`, namespace "bringup-run"): the key is the user's; bringup
never reads it.

A handover bundle is verified part by part, then as a whole: its own manifest.json
records each part's manifest.json (SHA-256), status and exit code and the SHA-256 of each
rendered report, so a part removed or edited, an exit code changed or a report's text
changed is named; `--sign` signs that manifest too, and a signature over it covers every
byte of the bundle. The last line says what was covered (docs/reports.md, "What `verify`
proves and what it does not").

Exit codes: 0 intact (and the signature good, when checked), 1 a file changed, the
manifest holds no hashes or the signature does not verify, 2 bad input.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bringup.commands.common import JsonOpt, QuietOpt, fail, out, print_envelope

if TYPE_CHECKING:
    from bringup.baseline import Bundle

NAMESPACE = "bringup-run"  # what a signature is for: a bringup run, nothing else
_TIMEOUT_S = 60


def verify(
    run_dir: Annotated[Path, typer.Argument(help="The run directory to verify.")],
    sign: Annotated[
        Path | None,
        typer.Option("--sign", help="Sign manifest.json with this SSH private key, if intact."),
    ] = None,
    allowed_signers: Annotated[
        Path | None,
        typer.Option(
            "--allowed-signers", help="OpenSSH allowed_signers file: check manifest.json.sig."
        ),
    ] = None,
    identity: Annotated[
        str | None,
        typer.Option("--identity", help="Who must have signed (a principal of that file)."),
    ] = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Check a run's (or a handover bundle's runs') files against the hashes in its
    manifest, and its signature."""
    from bringup.commands.show import plain

    if (allowed_signers is None) != (identity is None):
        fail("--allowed-signers and --identity go together: the file, and who must have signed")
    if sign is not None and not sign.is_file():
        fail(f"--sign {sign}: no such key file")
    if allowed_signers is not None and not allowed_signers.is_file():
        fail(f"--allowed-signers {allowed_signers}: no such file")
    bundle = _bundle(run_dir)
    parts = [(p.path, run_dir / p.path) for p in bundle.parts] if bundle else [("", run_dir)]
    checked: list[_Verified | _VerifiedBundle] = [_verify_run(path, name) for name, path in parts]
    if bundle is not None:
        # Last: the bundle's manifest, which records every part's manifest and report.
        checked.append(_VerifiedBundle(run_dir, bundle))
    for one in checked:
        if allowed_signers is not None and identity is not None:
            one.signature.update(_check_signature(one.path, allowed_signers, identity))
        if sign is not None and one.good and all(c.good for c in checked):
            _sign(one.path, sign)
            one.signature.update(present=True, signed_with=str(sign))
    code = 0 if all(one.good for one in checked) else 1
    covers = _covers(bundle)
    if as_json:
        docs = [one.doc() for one in checked]
        if bundle is not None:
            found = {"bundle": str(run_dir), "parts": docs[:-1], "manifest": docs[-1]}
        else:
            found = docs[0]
        intact = all(one.intact for one in checked)
        data = {**found, "intact": intact, "covers": covers}
        print_envelope([], exit_code=code, judged=False, run_dir=str(run_dir), data=data)
        raise typer.Exit(code)
    if quiet:  # the first run (or the bundle's manifest) found wanting, else the last
        worst = next((one for one in checked if not one.good), checked[-1])
        # Intact but not good: its signature is what failed.
        bad_signature = worst.intact and not worst.good
        line = _signature_line(worst.signature) if bad_signature else worst.verdict()
        out.print(plain(line), soft_wrap=True)
        raise typer.Exit(code)
    for one in checked:
        for line in one.lines():
            out.print(plain(line), soft_wrap=True)
    out.print(plain(f"covers: {covers}"), soft_wrap=True)
    if sign is not None and not all("signed_with" in one.signature for one in checked):
        out.print(plain("not signed: only an intact run with a good signature is signed"))
    raise typer.Exit(code)


def _covers(bundle: Bundle | None) -> str:
    """What verify checked, in one line: and so what it does not (docs/reports.md)."""
    from bringup.provenance import EVIDENCE_DIRS, EVIDENCE_FILES

    evidence = ", ".join([*(f"{d}/" for d in EVIDENCE_DIRS), *EVIDENCE_FILES])
    if bundle is None:
        return (
            f"the evidence files ({evidence}) against manifest.json; not the rendered "
            "reports (`bringup report` makes them again from the evidence); a signature, "
            "checked, shows who signed manifest.json"
        )
    reports = ", ".join(sorted(bundle.reports_sha256 or {})) or "none recorded"
    return (
        f"each part's evidence files ({evidence}) against its manifest.json; each part's "
        f"manifest.json, status and exit code, and the reports ({reports}) against the "
        "bundle's manifest.json; a signature, checked, shows who signed that manifest"
    )


class _Verified:
    """One run directory checked: what changed, and its signature."""

    def __init__(self, path: Path, name: str) -> None:
        from bringup.provenance import Change

        self.path = path
        self.name = name  # the part's path in a bundle; "" for a run given itself
        self.digest: str | None = None  # of its manifest.json
        self.recorded: dict[str, str] | None = None
        self.changes: list[Change] = []
        self.signature = _signature_file(path)

    @property
    def intact(self) -> bool:
        return self.recorded is not None and not self.changes

    @property
    def good(self) -> bool:
        return self.intact and self.signature.get("good", True)

    def verdict(self) -> str:
        manifest = f"{self.name}/manifest.json" if self.name else "manifest.json"
        if self.digest is None:
            return f"MISSING: {manifest} cannot be read"
        if self.recorded is None:
            return (
                f"NOT VERIFIED: {manifest} holds no file hashes "
                "(a run that did not finish, or one from before bringup recorded them)"
            )
        if self.changes:
            return (
                f"CHANGED: {_count(len(self.changes), 'difference')} from the "
                f"{_count(len(self.recorded), 'file')} {manifest} records"
            )
        files = len(self.recorded)
        return f"INTACT: {_count(files, 'file')} {'matches' if files == 1 else 'match'} {manifest}"

    def lines(self) -> list[str]:
        prefix = f"{self.name}/" if self.name else ""
        found = [f"{c.kind}: {prefix}{c.path}" for c in self.changes]
        sha = f" (sha256 {self.digest})" if self.digest else ""
        return [*found, f"{self.verdict()}{sha}", _signature_line(self.signature)]

    def doc(self) -> dict[str, Any]:
        return {
            "run_dir": str(self.path),
            "manifest_sha256": self.digest,
            "intact": self.intact,
            "files": len(self.recorded or {}),
            "changes": [{"kind": c.kind, "path": c.path} for c in self.changes],
            "signature": self.signature,
        }


def _signature_file(path: Path) -> dict[str, Any]:
    """Where a manifest's signature would be, and whether it is there (checked later)."""
    from bringup.provenance import SIGNATURE

    return {"file": str(path / SIGNATURE), "present": (path / SIGNATURE).is_file()}


class _VerifiedBundle:
    """A bundle's own manifest.json checked: each part's manifest, status and exit code as
    recorded, each rendered report, nothing unlisted (bringup/baseline.py); its signature."""

    def __init__(self, path: Path, bundle: Bundle) -> None:
        from bringup.baseline import bundle_changes
        from bringup.provenance import manifest_sha256

        self.path = path
        self.bundle = bundle
        self.changes = bundle_changes(path, bundle)
        try:
            self.digest: str | None = manifest_sha256(path)
        except OSError:
            self.digest = None  # read a moment ago: gone since
        self.signature = _signature_file(path)

    @property
    def intact(self) -> bool:
        return self.digest is not None and not self.changes

    @property
    def good(self) -> bool:
        return self.intact and self.signature.get("good", True)

    def verdict(self) -> str:
        parts, reports = len(self.bundle.parts), len(self.bundle.reports_sha256 or {})
        covered = (
            f"{_count(parts, 'part')} and {_count(reports, 'report')} "
            "the bundle's manifest.json records"
        )
        if self.digest is None:
            return "MISSING: the bundle's manifest.json cannot be read"
        if any(c.kind == "unrecorded" for c in self.changes):
            return (
                "NOT VERIFIED: the bundle's manifest.json does not record the hashes of "
                "all its parts and reports (a bundle made by an older bringup)"
            )
        if self.changes:
            return f"CHANGED: {_count(len(self.changes), 'difference')} from the {covered}"
        return f"INTACT: the {covered} match"

    def lines(self) -> list[str]:
        sha = f" (sha256 {self.digest})" if self.digest else ""
        found = [c.line() for c in self.changes]
        return [*found, f"{self.verdict()}{sha}", _signature_line(self.signature)]

    def doc(self) -> dict[str, Any]:
        return {
            "run_dir": str(self.path),
            "manifest_sha256": self.digest,
            "intact": self.intact,
            "parts": len(self.bundle.parts),
            "reports": sorted(self.bundle.reports_sha256 or {}),
            "changes": [{"kind": c.kind, "path": c.path, "detail": c.detail} for c in self.changes],
            "signature": self.signature,
        }


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _bundle(run_dir: Path) -> Bundle | None:
    """The bundle's manifest when `run_dir` is a handover bundle; None for a run (whose
    manifest must be readable); exit 2 when neither is."""
    from bringup.baseline import BundleError, is_bundle, load_bundle
    from bringup.rundir import RunDirError, load_manifest

    if is_bundle(run_dir):
        try:
            bundle = load_bundle(run_dir)
        except BundleError as exc:
            fail(str(exc))
        return bundle  # without parts: CHANGED, as its manifest was (bundle_changes)
    try:
        load_manifest(run_dir)
    except RunDirError as exc:
        fail(str(exc))
    return None


def _verify_run(path: Path, name: str) -> _Verified:
    """Recompute the hashes of one run directory (a bundle's part that cannot be read is
    reported as such; a run given itself was read already)."""
    from bringup.provenance import compare, evidence_hashes, manifest_sha256
    from bringup.rundir import RunDirError, load_manifest

    one = _Verified(path, name)
    try:
        manifest = load_manifest(path)
        one.digest = manifest_sha256(path)
        now = evidence_hashes(path)
    except RunDirError:
        return one  # a part of a bundle gone or broken: MISSING
    except OSError as exc:
        fail(f"{path}: cannot read {exc.filename or 'a file'}: {exc.strerror}")
    one.recorded = manifest.files_sha256
    one.changes = compare(one.recorded, now) if one.recorded is not None else []
    return one


def _signature_line(signature: dict[str, Any]) -> str:
    if "signed_with" in signature:
        return f"signed: {signature['file']} (key {signature['signed_with']})"
    if "good" in signature:
        if signature["good"]:
            return f"signature: good, {signature['detail']}"
        return f"signature: BAD: {signature['detail']}"
    if signature["present"]:
        return (
            f"signature: {signature['file']} present, not checked "
            "(give --allowed-signers FILE --identity ID)"
        )
    return "signature: none"


def _ssh_keygen() -> str:
    found = shutil.which("ssh-keygen")
    if found is None:
        fail("ssh-keygen not found: install OpenSSH (the client) to sign or check signatures")
    return found


def _run(args: list[str], data: bytes) -> subprocess.CompletedProcess[bytes]:
    """ssh-keygen with the manifest on stdin; arguments as a list, no shell."""
    try:
        return subprocess.run(args, input=data, capture_output=True, timeout=_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        fail(f"ssh-keygen did not finish within {_TIMEOUT_S} s (a key with a passphrase?)")
    except OSError as exc:
        fail(f"cannot run ssh-keygen: {exc.strerror}")


def _last_line(output: bytes) -> str:
    lines = output.decode("utf-8", errors="replace").strip().splitlines()
    return lines[-1] if lines else "no message"


def _read(run_dir: Path, name: str) -> bytes:
    """A file of the run (bringup/files.py: no symlink followed, no FIFO waited on)."""
    from bringup.files import InputError, read_bytes_in

    try:
        return read_bytes_in(run_dir, name, "run")
    except InputError as exc:
        fail(str(exc))


def _check_signature(run_dir: Path, allowed: Path, identity: str) -> dict[str, Any]:
    """`ssh-keygen -Y verify` of manifest.json.sig: {"good": bool, "detail": text}."""
    from bringup.provenance import MANIFEST, SIGNATURE

    if not os.path.lexists(run_dir / SIGNATURE):
        return {"good": False, "detail": f"no {SIGNATURE} in {run_dir}"}
    signature = _read(run_dir, SIGNATURE)
    manifest = _read(run_dir, MANIFEST)
    # ssh-keygen reads the signature from a path: a private copy of what was read, so a
    # link or FIFO at the run's own name is never handed to it.
    with tempfile.TemporaryDirectory(prefix="bringup-verify-") as private:
        sig = Path(private, SIGNATURE)
        sig.write_bytes(signature)
        args = [_ssh_keygen(), "-Y", "verify", "-f", str(allowed), "-I", identity]
        args += ["-n", NAMESPACE, "-s", str(sig)]
        done = _run(args, manifest)
    detail = _last_line(done.stdout if done.returncode == 0 else done.stderr or done.stdout)
    return {"good": done.returncode == 0, "detail": detail, "identity": identity}


def _sign(run_dir: Path, key: Path) -> None:
    """manifest.json.sig: the detached signature `ssh-keygen -Y sign` writes."""
    from bringup.files import write_atomic
    from bringup.provenance import MANIFEST, SIGNATURE

    args = [_ssh_keygen(), "-Y", "sign", "-f", str(key), "-n", NAMESPACE]
    done = _run(args, _read(run_dir, MANIFEST))
    if done.returncode != 0 or not done.stdout.strip():
        fail(f"ssh-keygen could not sign with {key}: {_last_line(done.stderr)}")
    try:
        write_atomic(run_dir / SIGNATURE, done.stdout.decode("ascii"))
    except OSError as exc:
        fail(f"cannot write {run_dir / SIGNATURE}: {exc.strerror}")
