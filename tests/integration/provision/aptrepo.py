"""NVIDIA's CUDA and container-toolkit apt repositories as a test fixture.

Built at test time from tests/fixtures/apt/nvidia-repos.yaml (no .deb is committed):
each package is an empty `dpkg-deb` package with the real name, version, dependencies
and conflicts, plus the few files that carry behaviour (the pinning packages' apt
preferences, cuda-keyring's source list and keyring, the service units). The Release
files are signed with a throwaway key made for the test process, so apt on the nodes
verifies them through `Signed-By` exactly as it verifies NVIDIA's.

Every provisioning test builds the repositories for its own URL (its cluster's bridge);
about 130 dpkg-deb runs and an RSA key took 15 s on 2 loaded cores each time. Within one
test process the key is made once and each .deb is built once (its bytes depend only on
the package and the key) and copied: a later build remakes only the packages that carry
the URL (cuda-keyring's source list), the indexes and their signatures.

    build(out, url) ─► out/compute/cuda/repos/debian12/x86_64/  InRelease, Packages, *.deb,
                                                                 3bf863cc.pub (the key)
                       out/libnvidia-container/stable/deb/amd64/  InRelease, Packages, *.deb
                       out/libnvidia-container/gpgkey              (the key)
    serve(out, host) ─► http://host:port/ (a thread; bound to one address, never 0.0.0.0)
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import email.utils
import functools
import gzip
import hashlib
import http.server
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.support import FIXTURES
from tests.support.timing import scaled

DATA = FIXTURES / "apt" / "nvidia-repos.yaml"
CUDA_KEYRING = "/usr/share/keyrings/cuda-archive-keyring.gpg"  # where cuda-keyring puts its key
CONTROL_FIELDS = [
    ("pre_depends", "Pre-Depends"),
    ("depends", "Depends"),
    ("recommends", "Recommends"),
    ("conflicts", "Conflicts"),
    ("breaks", "Breaks"),
    ("replaces", "Replaces"),
    ("provides", "Provides"),
]


@dataclasses.dataclass(frozen=True)
class Package:
    """One package of the fixture: its control fields and the files it ships."""

    repo: str  # "cuda" or "toolkit"
    name: str
    version: str
    architecture: str = "amd64"
    fields: tuple[tuple[str, str], ...] = ()  # (control field, value), in control order
    files: tuple[tuple[str, str], ...] = ()  # (absolute path, content; "{KEY}": the key)

    @property
    def filename(self) -> str:
        version = self.version.split(":", 1)[-1]  # no epoch in file names, as dpkg-name
        return f"{self.name}_{version}_{self.architecture}.deb"


@dataclasses.dataclass(frozen=True)
class Repos:
    """The built repositories: where they are, their URLs, and what they hold."""

    root: Path
    url: str
    cuda_path: str
    toolkit_path: str
    packages: tuple[Package, ...]

    @property
    def cuda_url(self) -> str:
        """The repository of one distribution and architecture (apt's URI, "deb URI /")."""
        return f"{self.url}/{self.cuda_path}"

    @property
    def cuda_base_url(self) -> str:
        """What nvidia_repo_base_url is set to: the repositories' common base."""
        return self.cuda_url.rsplit("/", 2)[0]

    @property
    def toolkit_url(self) -> str:
        return f"{self.url}/{self.toolkit_path}"

    @property
    def toolkit_key_url(self) -> str:
        return f"{self.url}/libnvidia-container/gpgkey"

    def versions(self, name: str) -> list[str]:
        return [p.version for p in self.packages if p.name == name]


# --- the data ------------------------------------------------------------------------


def _fill(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\{([A-Z_]+)\}", lambda m: values.get(m.group(1), m.group(0)), text)


def _package(repo: str, spec: dict[str, Any], values: dict[str, str], version: str) -> Package:
    fields = tuple(
        (field, _fill(str(spec[key]), values)) for key, field in CONTROL_FIELDS if spec.get(key)
    )
    files = tuple(
        (path, _fill(str(text), values)) for path, text in (spec.get("files") or {}).items()
    )
    return Package(
        repo=repo,
        name=_fill(spec["name"], values),
        version=version,
        architecture=str(spec.get("architecture", "amd64")),
        fields=tuple((f, v) for f, v in fields if v),
        files=files,
    )


def _suffix(branch: str) -> str:
    """NVIDIA's Fabric Manager family carries the branch in its names below 580."""
    return f"-{branch}" if int(branch) < 580 else ""


def packages(data: dict[str, Any], cuda_url: str) -> list[Package]:
    """Every package the data file describes, placeholders filled."""
    result: list[Package] = []
    driver = data["driver"]
    branches: dict[str, list[str]] = {
        str(b): [str(v) for v in vs] for b, vs in driver["branches"].items()
    }
    fm_names = {f"nvidia-fabricmanager{_suffix(b)}" for b in branches}
    for branch, versions in branches.items():
        suffix = _suffix(branch)
        others = ", ".join(sorted(fm_names - {f"nvidia-fabricmanager{suffix}"}))
        for version in versions:
            values = {"B": branch, "V": version, "S": suffix, "FABRICMANAGER_OTHERS": others}
            for spec in driver["packages"]:
                if int(branch) >= int(spec.get("since", 0)):
                    result.append(_package("cuda", spec, values, f"{version}-1"))
            result.append(_pinning(driver["pinning"], version, values, exact=True))
        result.append(_pinning(driver["pinning"], branch, {"B": branch, "V": branch}, exact=False))
    keyring = {"URL": cuda_url, "KEYRING": CUDA_KEYRING}
    for spec in data["packages"]["cuda"]:
        result.append(_package("cuda", spec, keyring, str(spec["version"])))
    for group in data["packages"]["toolkit"]:
        for version in group["versions"]:
            for spec in group["set"]:
                result.append(_package("toolkit", spec, {"TV": version}, version))
    return result


def _pinning(spec: dict[str, Any], what: str, values: dict[str, str], exact: bool) -> Package:
    """nvidia-driver-pinning-<branch> or -<version>: one preferences file, mutually exclusive."""
    pin = f"{values['V']}-*" if exact else f"{values['B']}.*"
    version = _fill(spec["exact_version" if exact else "version"], values)
    return Package(
        repo="cuda",
        name=f"nvidia-driver-pinning-{what}",
        version=version,
        architecture="all",
        fields=(
            ("Conflicts", "nvidia-driver-pinning"),
            ("Replaces", "nvidia-driver-pinning"),
            ("Provides", "nvidia-driver-pinning"),
        ),
        files=((spec["file"], _fill(spec["preferences"], {"PIN": pin})),),
    )


# --- building --------------------------------------------------------------------------


class _Signer:
    """A throwaway OpenPGP key in its own GNUPGHOME (its agent stopped at the end)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        home.mkdir(mode=0o700)
        self._gpg(
            "--quick-gen-key",
            "--passphrase",
            "",
            "bringup test repository <repo@bringup.test>",
            "rsa2048",
            "sign",
            "never",
        )

    def _gpg(self, *args: str, stdin: bytes | None = None) -> bytes:
        proc = subprocess.run(
            ["gpg", "--batch", "--pinentry-mode", "loopback", "--homedir", str(self.home), *args],
            input=stdin,
            capture_output=True,
            check=False,
            timeout=scaled(120),
        )
        if proc.returncode != 0:
            raise RuntimeError(f"gpg {args[0]}: {proc.stderr.decode(errors='replace')[-300:]}")
        return proc.stdout

    def public(self, armor: bool) -> bytes:
        return self._gpg(*(["--armor"] if armor else []), "--export")

    def clearsign(self, text: bytes) -> bytes:
        return self._gpg("--clearsign", "--digest-algo", "SHA256", stdin=text)

    def close(self) -> None:
        subprocess.run(
            ["gpgconf", "--homedir", str(self.home), "--kill", "all"],
            capture_output=True,
            check=False,
        )


@functools.cache
def _signer() -> _Signer:
    """This process's signing key, made at its first build; its home goes when the process
    ends (each build stops the agent it started)."""
    home = Path(tempfile.mkdtemp(prefix="bringup-aptrepo-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    return _Signer(home / "gnupg")


@dataclasses.dataclass(frozen=True)
class _Built:
    """One built .deb: its bytes and its control stanza as `dpkg-deb --field` prints it."""

    data: bytes
    control: str


_BUILT: dict[tuple[Package, bytes], _Built] = {}


def _deb(package: Package, key: bytes, work: Path) -> _Built:
    """The package built with this key: once per process, then from memory."""
    built = _BUILT.get((package, key))
    if built is None:
        work.mkdir(parents=True, exist_ok=True)
        deb = work / package.filename
        _build_deb(package, key, work, work)
        control = subprocess.run(
            ["dpkg-deb", "--field", str(deb)], capture_output=True, text=True, check=True
        ).stdout.strip()
        built = _BUILT[(package, key)] = _Built(deb.read_bytes(), control)
        deb.unlink()
    return built


def _build_deb(package: Package, key: bytes, work: Path, out: Path) -> None:
    root = work / f"{package.name}_{package.version.replace(':', '_')}"
    (root / "DEBIAN").mkdir(parents=True)
    control = [
        f"Package: {package.name}",
        f"Version: {package.version}",
        f"Architecture: {package.architecture}",
        "Maintainer: bringup tests <tests@bringup.test>",
        *[f"{field}: {value}" for field, value in package.fields],
        f"Description: {package.name} (empty: bringup test fixture)",
        " Same name, version and relations as NVIDIA's package; no content.",
    ]
    (root / "DEBIAN" / "control").write_text("\n".join(control) + "\n")
    conffiles = []
    for path, text in package.files:
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if text == "{KEY}":
            target.write_bytes(key)
        else:
            target.write_text(text)
        if path.startswith("/etc/"):
            conffiles.append(path)
    if conffiles:
        (root / "DEBIAN" / "conffiles").write_text("\n".join(conffiles) + "\n")
    subprocess.run(
        [
            "dpkg-deb",
            "--root-owner-group",
            "-Zgzip",
            "-z1",
            "--build",
            str(root),
            str(out / package.filename),
        ],
        capture_output=True,
        check=True,
        timeout=scaled(60),
    )
    shutil.rmtree(root)


def _index(
    repo_dir: Path, packages: list[Package], built: dict[Package, _Built], signer: _Signer
) -> None:
    """Packages, Packages.gz and a signed InRelease for a flat repository ("deb URL /")."""
    stanzas = []
    for package in sorted(packages, key=lambda p: (p.name, p.version)):
        deb = built[package]
        stanzas.append(
            f"{deb.control}\nFilename: ./{package.filename}\nSize: {len(deb.data)}\n"
            f"SHA256: {hashlib.sha256(deb.data).hexdigest()}\n"
        )
    index = "\n".join(stanzas).encode()
    (repo_dir / "Packages").write_bytes(index)
    (repo_dir / "Packages.gz").write_bytes(gzip.compress(index, mtime=0))
    lines = [
        "Origin: bringup test fixture",
        "Label: NVIDIA (empty packages)",
        "Architectures: amd64 all",
        f"Date: {email.utils.formatdate(usegmt=True)}",
        "SHA256:",
    ]
    for name in ("Packages", "Packages.gz"):
        data = (repo_dir / name).read_bytes()
        lines.append(f" {hashlib.sha256(data).hexdigest()} {len(data)} {name}")
    release = ("\n".join(lines) + "\n").encode()
    (repo_dir / "Release").write_bytes(release)
    (repo_dir / "InRelease").write_bytes(signer.clearsign(release))


def build(out: Path, url: str, data_file: Path = DATA) -> Repos:
    """Build both repositories under out, for clients that reach out at url."""
    data = yaml.safe_load(data_file.read_text())
    cuda_path = data["repositories"]["cuda"]["path"]
    toolkit_path = data["repositories"]["toolkit"]["path"]
    all_packages = packages(data, f"{url}/{cuda_path}")
    signer = _signer()
    try:
        key = signer.public(armor=False)
        with tempfile.TemporaryDirectory(prefix="bringup-aptrepo-") as tmp:
            built = {p: _deb(p, key, Path(tmp) / "build") for p in all_packages}
        for repo, path in (("cuda", cuda_path), ("toolkit", toolkit_path)):
            repo_dir = out / path
            repo_dir.mkdir(parents=True, exist_ok=True)
            mine = [p for p in all_packages if p.repo == repo]
            for package in mine:
                (repo_dir / package.filename).write_bytes(built[package].data)
            _index(repo_dir, mine, built, signer)
            key_file = (repo_dir / data["repositories"][repo]["key"]).resolve()
            key_file.parent.mkdir(parents=True, exist_ok=True)
            key_file.write_bytes(signer.public(armor=True))
    finally:
        signer.close()  # no agent left running between builds (gpg starts one when asked)
    return Repos(out, url, cuda_path, toolkit_path, tuple(all_packages))


# --- serving ---------------------------------------------------------------------------


class _Quiet(http.server.SimpleHTTPRequestHandler):
    requests: list[str]

    def log_message(self, format: str, *args: Any) -> None:
        type(self).requests.append(self.path)


@contextlib.contextmanager
def serve(root: Path, host: str) -> Iterator[str]:
    """Serve root over HTTP on host (one address: the bridge's, never 0.0.0.0) for the
    `with` block; gives the base URL (the port is chosen by the kernel)."""
    handler = type("Handler", (_Quiet,), {"requests": []})
    server = http.server.ThreadingHTTPServer(
        (host, 0), functools.partial(handler, directory=str(root))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=scaled(10))
