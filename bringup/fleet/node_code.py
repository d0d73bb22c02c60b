"""The node side as it travels: the `bringup.node` package in one deterministic zip, named
by its content hash, with its bytecode compiled in, and the one shell command that runs it
from a node's cache, storing it there first when it is missing or not the same bytes.
Used by the SSH and Slurm transports (fleet/ssh.py, fleet/slurm.py); nothing here touches
the network.

One run, one session (docs/architecture.md, "The node code"):

1. the controller starts `python3 -c BOOT NAME SIZE SHA256 MAGIC STORE` and writes the
   request at once, framed (`request_frame`: its length on a line, then the JSON);
2. BOOT reads it, and reads the cached zip if its directory is this user's own: the same
   size and sha256 as the controller's, it prints `{"bringup_code": "cached"}`; anything
   else (missing, cut short, changed) prints `{"bringup_code": "needed"}` and reads the
   zip from stdin (exactly SIZE bytes), checks its size and sha256 and stores it
   (temporary file, rename), in the same interpreter;
3. the node side runs from the checked zip, in that interpreter, and prints one JSON line
   per probe (bringup/node/protocol.py).

So a cached zip runs only when its bytes are the controller's, checked at every start by
code that comes with the command (never by the cached code itself), and a run costs one
SSH session and one Python start, upload or not.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import stat
import subprocess
import sys
from dataclasses import dataclass
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from typing import Any

NEED_CODE_EXIT = 97  # BOOT's exit status when the zip is needed and stdin brought none
PACKAGE = Path(__file__).resolve().parents[1]  # bringup/
CODE_LINE = "bringup_code"  # the key of BOOT's first line: "cached" or "needed"


@dataclass(frozen=True)
class NodeCode:
    """The probe code as one zip (built once per run) and its content hash."""

    data: bytes
    sha256: str
    magic: str = MAGIC_NUMBER.hex()  # the bytecode's Python (importlib.util.MAGIC_NUMBER)

    @property
    def file_name(self) -> str:
        return f"{self.sha256[:32]}.zip"


# `python3 zip` (by hand, on a node): the node side with the request on stdin. The
# transports never start it this way: BOOT checks the zip first, and runs it.
ZIP_MAIN = """\
import sys
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
    """The zip of node_files() with each module's bytecode beside its source, for this
    Python: from the controller's cache of built zips when the same sources were built
    before (a build costs about 0.2 s of CPU), else built and kept there."""
    sources = [("__main__.py", ZIP_MAIN.encode())]
    sources += [(name, path.read_bytes()) for name, path in node_files()]
    key = hashlib.sha256(MAGIC_NUMBER + BUILD_PY.encode())
    for name, data in sources:
        key.update(b"%d:%s%d:" % (len(name), name.encode(), len(data)) + data)
    cache = _built_cache()
    data = _read_built(cache, key.hexdigest()[:32])
    if data is None:
        data = _build(sources)
        _keep_built(cache, key.hexdigest()[:32], data)
    return NodeCode(data=data, sha256=hashlib.sha256(data).hexdigest())


# The build, in a Python of its own: marshal's output depends on the string hashes of the
# process (the order of a frozenset constant) and on reference counts (what else the
# process holds), so the zip is the same bytes, hence the same name on the nodes, only when
# compiled in a fresh interpreter with a fixed hash seed. Bytecode beside each source (as
# zipimport looks for it), unchecked-hash pycs (PEP 552: valid whatever the zip's
# timestamps); a node whose Python is another version ignores them (their magic number
# differs) and uses the sources. Deterministic: fixed timestamps, names in order.
BUILD_PY = """\
import importlib._bootstrap_external as bootstrap, importlib.util, io, json, sys, zipfile
buffer = io.BytesIO()
with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
    for name, text in json.load(sys.stdin):
        source = text.encode("utf-8", "surrogateescape")
        entries = [(name, source)]
        if name.endswith(".py") and name != "__main__.py":
            code = compile(source, name, "exec", dont_inherit=True)
            pyc = bootstrap._code_to_hash_pyc(code, importlib.util.source_hash(source), False)
            entries.append((name + "c", bytes(pyc)))
        for entry, data in entries:
            info = zipfile.ZipInfo(entry, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
sys.stdout.buffer.write(buffer.getvalue())
"""


def _build(sources: list[tuple[str, bytes]]) -> bytes:
    payload = json.dumps([[n, d.decode("utf-8", "surrogateescape")] for n, d in sources])
    done = subprocess.run(
        [sys.executable, "-c", BUILD_PY],
        input=payload.encode("utf-8", "surrogateescape"),
        capture_output=True,
        env={"PYTHONHASHSEED": "0", "PATH": os.environ.get("PATH", "")},
        cwd="/",  # nothing in the working directory may shadow a module of the build
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"cannot build the probe code zip: {last}")
    return done.stdout


def _built_cache() -> Path:
    """The controller's cache of built zips: bringup/node-code under the user's cache
    (XDG_CACHE_HOME when absolute, else ~/.cache), mode 700."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "bringup" / "node-code"


def _read_built(cache: Path, key: str) -> bytes | None:
    """The zip built before from the same sources (`<key>-<its sha256>.zip`), when the
    folder is this user's own and the bytes are still those its name says; else None."""
    from bringup.files import InputError, read_bytes

    try:
        folder = os.lstat(cache)
        if not (stat.S_ISDIR(folder.st_mode) and folder.st_uid == os.geteuid()):
            return None
        for name in os.listdir(cache):
            if name.startswith(f"{key}-") and name.endswith(".zip"):
                data = read_bytes(cache / name, "the probe code zip")
                if name == _built_name(key, data):
                    return data
    except (OSError, InputError):
        pass
    return None


def _built_name(key: str, data: bytes) -> str:
    return f"{key}-{hashlib.sha256(data).hexdigest()[:32]}.zip"


def _keep_built(cache: Path, key: str, data: bytes) -> None:
    """Best effort: a controller that cannot keep it builds the zip again at the next run."""
    from bringup.files import make_dir, write_atomic

    try:
        make_dir(cache)
        os.chmod(cache, 0o700)
        write_atomic(cache / _built_name(key, data), data, mode=0o600)
    except OSError:
        pass


def request_frame(request: dict[str, Any]) -> bytes:
    """The request as BOOT reads it from stdin: its length in bytes on a line, then the
    JSON (so that the zip, when asked for, can follow it on the same stdin)."""
    body = json.dumps(request).encode()
    return b"%d\n" % len(body) + body


def code_answer(line: bytes) -> str | None:
    """ "cached" or "needed" when `line` is BOOT's first line, else None (a line a login
    script printed before the command ran: it is skipped)."""
    start = line.rfind(b'{"%s"' % CODE_LINE.encode())
    try:
        answer = json.loads(line[max(start, 0) :])
    except ValueError:
        return None
    if isinstance(answer, dict) and answer.get(CODE_LINE) in ("cached", "needed"):
        return str(answer[CODE_LINE])
    return None


# The node's cache of probe code: `bringup/code` under the user's own cache directory
# (XDG_CACHE_HOME when it is an absolute path, as the XDG spec asks, else ~/.cache), never
# a shared /tmp. The directory must be a real directory this user owns (not a symlink);
# it is made mode 700. Versions not started for a day go when another is stored.
#
# BOOT runs with `python3 -c`, where sys.path[0] is the working directory (the login
# directory over SSH): it is dropped before any import, so no file there can stand in for
# a module. A request or a zip cut short is never run or stored. When the zip's bytecode is
# for another Python (MAGIC), the node side runs from a copy unpacked from the checked
# bytes beside the zip, where that Python caches its own bytecode once.
BOOT = r"""
import sys
del sys.path[0]
import hashlib, os, stat


def fail(why):
    sys.stderr.write(why + "\n")
    sys.exit(1)


def read_exactly(n):
    parts, left = [], n
    while left > 0:
        chunk = os.read(0, min(left, 1 << 20))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def private(path):
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


name, size, digest, magic, store = sys.argv[1:6]
size = int(size)
head = b""
while not head.endswith(b"\n") and len(head) < 20:
    byte = os.read(0, 1)
    if not byte:
        break
    head += byte
if not head.strip().isdigit():
    fail("no request on stdin")
request = read_exactly(int(head))
xdg = os.environ.get("XDG_CACHE_HOME", "")
base = xdg if xdg.startswith("/") else os.path.join(os.path.expanduser("~"), ".cache")
folder = os.path.join(base, "bringup", "code")
path = os.path.join(folder, name)
data = b""
if store != "1" and private(folder):
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as cached:
            data = cached.read(size + 1)
    except OSError:
        pass
found = len(data) == size and hashlib.sha256(data).hexdigest() == digest
os.write(1, b'{"bringup_code": "%s"}\n' % (b"cached" if found else b"needed"))
if found:
    try:
        os.utime(path)  # in use: the clean-up of another version's upload keeps it
    except OSError:
        pass
else:
    data = read_exactly(size)
    if not data:
        sys.exit(97)
    if len(data) != size:
        fail("the probe code arrived incomplete: %d of %d bytes" % (len(data), size))
    if hashlib.sha256(data).hexdigest() != digest:
        fail("the probe code arrived damaged: its sha256 differs")
    os.umask(0o077)
    try:
        os.makedirs(folder, 0o700, exist_ok=True)
    except OSError:
        pass
    if not private(folder):
        fail("%s is not a private directory of this user" % folder)
    os.chmod(folder, 0o700)
    temporary = "%s.%d" % (path, os.getpid())
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.rename(temporary, path)
    except OSError as exc:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        fail("cannot store the probe code in %s: %s" % (folder, exc.strerror or exc))
    import shutil, time

    for entry in os.scandir(folder):
        if entry.name.startswith(name[:-4]):
            continue
        try:
            if time.time() - entry.stat(follow_symlinks=False).st_mtime > 86400:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
        except OSError:
            pass
root = path
try:  # loaded at every CPython start (importlib.util would cost an import)
    from _frozen_importlib_external import MAGIC_NUMBER
except ImportError:
    MAGIC_NUMBER = b""
if MAGIC_NUMBER.hex() != magic:
    root = path[:-4]
    if not os.path.isdir(root):
        import io, shutil, zipfile

        unpacking = "%s.%d" % (root, os.getpid())
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                archive.extractall(unpacking, [n for n in archive.namelist() if n.endswith(".py")])
            os.rename(unpacking, root)
        except OSError:
            shutil.rmtree(unpacking, ignore_errors=True)
    if os.path.isdir(root):
        os.utime(root)
    else:
        root = path
sys.path.insert(0, root)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
import json
from bringup.node.protocol import serve

serve(json.loads(request), 1)
"""


def remote_command(code: NodeCode, python: str, store: bool = False) -> str:
    """The command that runs the node side (see the module doc). `store`: the zip follows
    the request on stdin whatever the cache holds (a transport that cannot wait for BOOT's
    answer before it writes stdin: Slurm's second step)."""
    args = [code.file_name, str(len(code.data)), code.sha256, code.magic, "1" if store else "0"]
    return f"exec {shlex.quote(python)} -c {shlex.quote(BOOT)} " + " ".join(args)
