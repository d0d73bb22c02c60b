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
# PYTHONPATH.
ZIP_MAIN = """\
import os, shutil, sys, zipfile
zip_path = os.path.abspath(sys.argv[0])
root = zip_path[: -len(".zip")]
if not os.path.isdir(root):
    tmp = "%s.%d" % (root, os.getpid())
    try:
        with zipfile.ZipFile(zip_path) as archive:
            archive.extractall(tmp)
        os.rename(tmp, root)
    except OSError:  # another run unpacked it first, or no room: the zip itself still works
        shutil.rmtree(tmp, ignore_errors=True)
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


def remote_command(code: NodeCode, python: str) -> str:
    """Run the cached zip if it is there (in a directory only this user owns), else exit 97."""
    return (
        f'd="/tmp/bringup-$(id -u)"; f="$d/{code.file_name}"; '
        'if [ -d "$d" ] && [ ! -L "$d" ] && [ -O "$d" ] && [ -f "$f" ]; then '
        f'exec {shlex.quote(python)} "$f"; fi; exit {NEED_CODE_EXIT}'
    )


def upload_command(code: NodeCode) -> str:
    """Store the zip from stdin under its hash: private directory, temp file, rename."""
    return (
        f'umask 077; d="/tmp/bringup-$(id -u)"; f="$d/{code.file_name}"; '
        'mkdir -p "$d" && [ ! -L "$d" ] && [ -O "$d" ] && chmod 700 "$d" || '
        '{ echo "$d is not a private directory of this user" >&2; exit 1; }; '
        'cat > "$f.$$" && mv -f "$f.$$" "$f" || exit 1; '
        # Best effort: other versions' zips and their unpacked copies, a day old (a busy
        # node may run two versions).
        f'find "$d" -mindepth 1 -maxdepth 1 ! -name {shlex.quote(code.file_name)} '
        f"! -name {shlex.quote(code.file_name[: -len('.zip')])} -mmin +1440 "
        "-exec rm -rf {} + 2>/dev/null; exit 0"
    )
