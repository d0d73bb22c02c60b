"""Compiling nvml_sim.c into a libnvidia-ml.so.1 against NVIDIA's own nvml.h.

The header is not part of this repository (NVIDIA's licence); the build finds one in this
order:

1. `header=`, a path to an nvml.h;
2. the nvidia-nvml-dev wheels installed in the running Python (the `dev` extra installs
   nvidia-nvml-dev==13.0.87, header nvidia/cu13/include/nvml.h, and
   nvidia-nvml-dev-cu12==12.9.79, header nvidia/nvml_dev/include/nvml.h); the newest wins;
3. otherwise a one-line NvmlSimError that says what to install.

The state is read with cJSON (Debian/Ubuntu: libcjson-dev), linked with -lcjson.

A process compiles each (compiler, header, source) once: every simulated cluster builds
the library for its nodes (about a second of CPU), and a test session starts about a
hundred clusters, so a later build writes out the bytes compiled first.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.resources
import os
import shutil
import subprocess
from pathlib import Path

from bringup.sim.nvml.state import ENV_STATE, NvmlSimError

LIBRARY_NAME = "libnvidia-ml.so.1"  # the name pynvml loads (CDLL("libnvidia-ml.so.1"))
# The wheels that ship nvml.h, newest first: (distribution, CUDA version).
HEADER_WHEELS = (("nvidia-nvml-dev", "13"), ("nvidia-nvml-dev-cu12", "12"))
# What this process compiled: (compiler, SHA-256 of nvml.h, of nvml_sim.c) -> the library.
_COMPILED: dict[tuple[str, str, str], bytes] = {}


def installed_headers() -> list[Path]:
    """The nvml.h of every nvidia-nvml-dev wheel installed here, newest CUDA first."""
    found = []
    for distribution, _cuda in HEADER_WHEELS:
        try:
            files = importlib.metadata.distribution(distribution).files or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for entry in files:
            if entry.name == "nvml.h" and entry.parent.name == "include":
                path = Path(str(entry.locate()))
                if path.is_file():
                    found.append(path)
    return found


def find_header(header: Path | str | None = None) -> Path:
    """The nvml.h to compile against: `header`, else the newest installed wheel's."""
    if header is not None:
        path = Path(header)
        if not path.is_file():
            raise NvmlSimError(f"no nvml.h at {path}")
        return path
    found = installed_headers()
    if not found:
        raise NvmlSimError(
            "no nvml.h: pip install nvidia-nvml-dev==13.0.87 (or the dev extra), or pass --header"
        )
    return found[0]


def source() -> Path:
    """nvml_sim.c as installed (inside the package, so a wheel carries it)."""
    return Path(str(importlib.resources.files("bringup.sim.nvml") / "nvml_sim.c"))


def build_library(out_dir: Path, header: Path | None = None, cc: str = "cc") -> Path:
    """Compile the simulator into out_dir/libnvidia-ml.so.1 and return that path.

    NvmlSimError (one line) when there is no compiler, no header, or the compile fails.
    """
    compiler = shutil.which(cc)
    if compiler is None:
        raise NvmlSimError(f"no C compiler {cc!r} on PATH")
    nvml_h = find_header(header)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    library = out_dir / LIBRARY_NAME
    key = (compiler, _sha256(nvml_h), _sha256(source()))
    if key in _COMPILED:
        return _write_library(library, _COMPILED[key])
    command = [
        compiler,
        "-std=c11",
        "-O2",
        "-Wall",
        "-Wextra",
        "-shared",
        "-fPIC",
        f"-I{nvml_h.parent}",
        # pynvml loads the library by this name; the soname matches it.
        f"-Wl,-soname,{LIBRARY_NAME}",
        "-o",
        str(library),
        str(source()),
        "-lcjson",
    ]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NvmlSimError(f"{cc} could not run: {exc}") from None
    if result.returncode != 0:
        errors = [line for line in result.stderr.splitlines() if "error" in line]
        first = (errors or result.stderr.strip().splitlines() or ["no output"])[0]
        hint = " (install libcjson-dev)" if "cJSON" in result.stderr else ""
        raise NvmlSimError(f"{cc} failed on nvml_sim.c: {first.strip()}{hint}")
    _COMPILED[key] = library.read_bytes()
    return library


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_library(library: Path, compiled: bytes) -> Path:
    """The compiled bytes at `library`, put in place whole by a rename: a process that has
    the file loaded keeps its mapping (as when the linker writes a new file)."""
    partial = library.with_name(f".{library.name}.{os.getpid()}")
    partial.write_bytes(compiled)
    partial.chmod(0o755)
    partial.replace(library)
    return library


def library_env(library: Path, state_path: Path, base: dict[str, str] | None = None) -> dict:
    """An environment in which pynvml loads the simulator and it reads `state_path`."""
    env = dict(os.environ if base is None else base)
    directory = str(Path(library).parent)
    previous = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = f"{directory}:{previous}" if previous else directory
    env[ENV_STATE] = str(state_path)
    return env
