"""The node side as it travels: the `bringup.node` package in one deterministic zip, named
by its content hash, and the two shell commands that run it from a node's cache or store
it there. Used by the SSH transport (fleet/ssh.py); nothing here touches the network.
"""

from __future__ import annotations

import hashlib
import io
import shlex
import zipfile
from dataclasses import dataclass
from pathlib import Path

NEED_CODE_EXIT = 97  # the remote command's exit status when the zip is not cached
PACKAGE = Path(__file__).resolve().parents[1]  # bringup/


@dataclass(frozen=True)
class NodeCode:
    """The probe code as one zip (built once per run) and its content hash."""

    data: bytes
    sha256: str

    @property
    def file_name(self) -> str:
        return f"{self.sha256[:32]}.zip"


# The zip's entry point. It runs the node side from an unpacked copy beside the zip, where
# Python can cache bytecode (__pycache__), which it cannot do inside a zip: later runs skip
# compiling the probe code, about half the node side's start-up. Programs the probes start
# in a new interpreter (collective ranks, the burn-in trainer) find the package through
# PYTHONPATH. zipfile and shutil load only to unpack (once per version of the code), and
# each start marks the zip and its copy as used here, with no `touch` process: the
# clean-up of an upload removes versions by age, and a version still started must never
# count as old.
ZIP_MAIN = """\
import os, sys
zip_path = os.path.abspath(sys.argv[0])
root = zip_path[: -len(".zip")]
if not os.path.isdir(root):
    import shutil, zipfile
    tmp = "%s.%d" % (root, os.getpid())
    try:
        with zipfile.ZipFile(zip_path) as archive:
            archive.extractall(tmp)
        os.rename(tmp, root)
    except OSError:  # another run unpacked it first, or no room: the zip itself still works
        shutil.rmtree(tmp, ignore_errors=True)
for used in (zip_path, root):
    try:
        os.utime(used)
    except OSError:
        pass
if not os.path.isdir(root):
    root = zip_path
sys.path[0] = root
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
from bringup.node.protocol import main
sys.exit(main(sys.argv[1:]))
"""


def node_files() -> list[tuple[str, Path]]:
    """(name in the zip, file) for everything the node side needs: the `bringup.node`
    package, whole, and the controller's pynvml (nvidia-ml-py: one pure-Python file), so a
    node needs only python3 and the driver, and reads NVML with the bindings bringup was
    tested with. Nothing else of bringup runs on a node (an import-linter contract keeps
    the package free of controller imports), so no list of files is kept by hand."""
    files = [("bringup/__init__.py", PACKAGE / "__init__.py")]
    for path in sorted((PACKAGE / "node").rglob("*.py")):
        files.append((path.relative_to(PACKAGE.parent).as_posix(), path))
    pynvml = _pynvml_file()
    if pynvml is not None:
        files.append(("pynvml.py", pynvml))
    return files


def _pynvml_file() -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec("pynvml")
    if spec is None or spec.origin is None or not spec.origin.endswith("pynvml.py"):
        return None
    return Path(spec.origin)


def build_node_code() -> NodeCode:
    """A deterministic zip (fixed timestamps, sorted names) so its hash names its content."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        entries = [("__main__.py", ZIP_MAIN.encode())]
        entries += [(name, path.read_bytes()) for name, path in node_files()]
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    data = buffer.getvalue()
    return NodeCode(data=data, sha256=hashlib.sha256(data).hexdigest())


# The node's cache of probe code: `bringup/code` under the user's own cache directory
# (XDG_CACHE_HOME when it is an absolute path, as the XDG spec asks, else ~/.cache), never
# a shared /tmp. The directory must be a real directory this user owns (not a symlink);
# it is made mode 700.
CACHE_SHELL = (
    'case "$XDG_CACHE_HOME" in /*) c="$XDG_CACHE_HOME" ;; *) c="$HOME/.cache" ;; esac; '
    'd="$c/bringup/code"; '
)
PRIVATE_SHELL = '[ -d "$d" ] && [ ! -L "$d" ] && [ -O "$d" ]'

# Run on the node against the uploaded temp file before it takes the zip's name: a channel
# that closed early leaves `cat` with a short file and exit status 0, and a short zip kept
# under its hash would fail every later run. The node's own python3 (required anyway) checks
# it: sha256sum is not on every node (macOS, minimal images) and needs no second tool.
VERIFY_PY = """\
import hashlib, sys
path, size, digest = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(path, "rb") as f:
    data = f.read()
if len(data) != size:
    sys.exit("the probe code arrived incomplete: %d of %d bytes" % (len(data), size))
if hashlib.sha256(data).hexdigest() != digest:
    sys.exit("the probe code arrived damaged: its sha256 differs")
"""


def remote_command(code: NodeCode, python: str) -> str:
    """Run the cached zip if it is there (in a directory only this user owns), else exit 97.
    The zip's entry point (ZIP_MAIN) marks it as used."""
    return (
        f'{CACHE_SHELL}f="$d/{code.file_name}"; '
        f'if {PRIVATE_SHELL} && [ -f "$f" ]; then '
        f'exec {shlex.quote(python)} "$f"; fi; exit {NEED_CODE_EXIT}'
    )


def upload_command(code: NodeCode, python: str, replace: bool = False) -> str:
    """Store the zip from stdin under its hash: private directory, temp file, size and
    sha256 checked, rename. `replace`: the cached copy failed to start, so its unpacked
    copy goes too (the next start unpacks the new zip)."""
    discard = 'rm -rf "${f%.zip}"; ' if replace else ""
    verify = f"{shlex.quote(python)} -I -c {shlex.quote(VERIFY_PY)}"
    return (
        f'umask 077; {CACHE_SHELL}f="$d/{code.file_name}"; '
        f'mkdir -p "$d" && {PRIVATE_SHELL} && chmod 700 "$d" || '
        '{ echo "$d is not a private directory of this user" >&2; exit 1; }; '
        f"{discard}"
        f't="$f.$$"; cat > "$t" && {verify} "$t" {len(code.data)} {code.sha256} && '
        'mv -f "$t" "$f" || { rm -f "$t"; exit 1; }; '
        # Best effort: other versions' zips and their unpacked copies not started for a day
        # (a busy node may run two versions; each start touches its own).
        f'find "$d" -mindepth 1 -maxdepth 1 ! -name {shlex.quote(code.file_name)} '
        f"! -name {shlex.quote(code.file_name[: -len('.zip')])} -mmin +1440 "
        "-exec rm -rf {} + 2>/dev/null; exit 0"
    )
