"""A rehearsal of benchmarks/gpu_check.sh on a machine without a GPU, run as the lent GPU
machine will run it (docs/gpu-run.md):

- the working tree as the device receives it: tracked and untracked-not-ignored files,
  plus the carried .whl/ (benchmarks/gpu_wheels.sh, for this machine's Python);
- a Python like the image's: a fresh virtual environment holding only the packages the
  image lists (benchmarks/gpu_image.txt) that are installed here, and no `bringup` on PATH;
- the simulated NVML (docs/nvmlsim.md) built from a recorded H200 `nvidia-smi -q`, and a
  stand-in `nvidia-smi` that prints recorded real outputs and nothing else;
- a fake $OUT, a wall-clock cap of 600 s, GPU_CHECK_SIZE=cpu (the same steps, CPU-sized).

    python -m tests.support.gpu_rehearsal [--script PATH]     (make gpu-rehearsal)

prints the wall time, the summary, and what is wrong; exit 1 when anything is.
tests/integration/repo/test_gpu_rehearsal.py runs it in the suite.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
H200_Q = FIXTURES / "smi" / "ugpuexp-h200-q-load.txt"
# What the stand-in nvidia-smi answers, each a recorded real output (the fixtures'
# SOURCES.md name them): the H200's -q, and an HGX H200's topo -m and nvlink -s.
RECORDED = {
    "-q": H200_Q,
    "topo -m": FIXTURES / "topo" / "simllm-vastai-h200x8-8nic.txt",
    "nvlink -s": FIXTURES / "smi" / "simllm-vastai-h200x8-nvlink-s.txt",
}
WALL_CAP_S = 600  # one device call
MAX_FILES = 8  # what comes back from $OUT
MAX_FOLDERS = 2  # $OUT/a/b/file comes back, $OUT/a/b/c/file does not
MAX_FILE_BYTES = 16 * 1024 * 1024
RETURNABLE_NAME = re.compile(r"[A-Za-z0-9._-]+")
STEPS = ("install", "captures", "check", "diagnose", "nccl", "burnin")
BRINGUP_STEPS = ("check", "diagnose", "nccl", "burnin")
# The headline figures the issue asks of the summary; each a value, or null with a reason.
HEADLINE = (
    "gemm_bf16_tflops",
    "gemm_bf16_pct_of_peak",
    "gemm_fp8_tflops",
    "gemm_fp8_pct_of_peak",
    "hbm_gb_s",
    "nccl_busbw_gb_s",
    "burnin_tokens_per_s",
    "burnin_mfu_pct",
    "telemetry_max_sm_clock_mhz",
    "telemetry_max_power_w",
    "telemetry_max_temperature_c",
    "driver_version",
    "cuda_driver_version",
    "torch_version",
)


class RehearsalError(Exception):
    """The rehearsal cannot be set up here (no C compiler, no package index): a skip."""


# --- the parts: a Python like the image's, the wheels, the stand-ins --------------------------


def image_packages() -> list[str]:
    lines = (REPO / "benchmarks" / "gpu_image.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def carried_names(wheel_dir: Path) -> set[str]:
    """The distributions a folder of wheels holds (name-version-...whl)."""
    return {_normal(w.name.split("-")[0]) for w in wheel_dir.glob("*.whl")}


@dataclass
class ImagePython:
    python: Path
    linked: list[str]  # the image's packages found here
    drift: list[str]  # what they need here that the image list lacks (newer versions here)


def image_python(dest: Path, carried: set[str]) -> ImagePython:
    """A fresh virtual environment of this Python with only the image's packages: each one
    installed here is linked in, file tree by file tree; nothing else is importable.

    Versions here are newer than the image's, and a newer release may need a package the
    image's release did not (huggingface-hub 2.x here needs httpx2; the image's 1.33 does
    not): those are linked in too and listed as drift, except what the carried wheels hold,
    which must come from them alone.
    """
    from packaging.requirements import Requirement

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", dest], check=True)
    python = dest / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    image = {_normal(n) for n in image_packages()}
    linked: list[str] = []
    drift: list[str] = []
    todo = sorted(image)
    while todo:
        name = todo.pop()
        if name in linked or name in carried:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        linked.append(name)
        if name not in image:
            drift.append(f"{name} {dist.version}")
        tops = {Path(str(f)).parts[0] for f in dist.files or []}
        for top in sorted(tops - {"..", "__pycache__"}):
            source = Path(str(dist.locate_file(top)))
            link = site / top
            if source.exists() and not link.exists():
                link.symlink_to(source)
        for line in dist.requires or []:
            need = Requirement(line)
            if need.marker is None or need.marker.evaluate({"extra": ""}):
                todo.append(_normal(need.name))
    return ImagePython(python, sorted(linked), sorted(drift))


def wheels(python_version: str) -> Path:
    """benchmarks/gpu_wheels.sh's set for this Python, fetched once per version of the
    script into a cache (it needs a package index; the device needs none)."""
    script = REPO / "benchmarks" / "gpu_wheels.sh"
    key = hashlib.sha256(script.read_bytes()).hexdigest()[:12]
    cache = Path.home() / ".cache" / "bringup" / "gpu-wheels" / f"{python_version}-{key}"
    if any(cache.glob("*.whl")):
        return cache
    partial = cache.with_name(cache.name + f".partial-{os.getpid()}")
    env = {**os.environ, "PYTHON": sys.executable}
    proc = subprocess.run(
        ["bash", script, python_version, partial],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if proc.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        last = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        raise RehearsalError(f"benchmarks/gpu_wheels.sh {python_version}: {last}")
    shutil.rmtree(cache, ignore_errors=True)
    partial.rename(cache)
    return cache


def device_tree(dest: Path, carried_wheels: Path) -> Path:
    """The working tree as the device receives it: tracked and untracked-not-ignored files
    (`git ls-files`), plus the carried .whl/."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = REPO / os.fsdecode(name)
        if source.is_file():  # a tracked file deleted in the worktree does not travel
            target = dest / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    shutil.copytree(carried_wheels, dest / ".whl")
    return dest


def stand_in_smi(bin_dir: Path) -> Path:
    """`nvidia-smi` that prints recorded real outputs (RECORDED, and the name and driver
    fields of the H200 capture) and refuses anything else, as an unknown option is."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    cases = "\n".join(f'    "{args}") exec cat "{path}" ;;' for args, path in RECORDED.items())
    field = 'grep -m1 "^ *{0} *:" "{1}" | sed "s/^[^:]*: *//"'
    script = f"""#!/bin/sh
# The rehearsal's nvidia-smi: recorded real outputs only (tests/support/gpu_rehearsal.py).
case "$*" in
{cases}
    "--query-gpu=name --format=csv,noheader") {field.format("Product Name", H200_Q)} ;;
    "--query-gpu=driver_version --format=csv,noheader") {field.format("Driver Version", H200_Q)} ;;
    *) echo "stand-in nvidia-smi: no recorded output for: $*" >&2; exit 2 ;;
esac
"""
    smi = bin_dir / "nvidia-smi"
    smi.write_text(script)
    smi.chmod(0o755)
    return smi


def simulated_nvml(dest: Path) -> dict[str, str]:
    """The simulated NVML answering as the recorded H200: the environment that loads it."""
    from bringup.sim.nvml import (
        NvmlSimError,
        build_library,
        library_env,
        state_from_capture,
        write_state,
    )

    try:
        library = build_library(dest / "nvml")
    except NvmlSimError as exc:
        raise RehearsalError(f"cannot build the simulated NVML: {exc}") from None
    state = write_state(state_from_capture(H200_Q), dest / "h200-state.json")
    env = library_env(library, state)
    return {k: env[k] for k in ("LD_LIBRARY_PATH", "BRINGUP_NVMLSIM_STATE")}


# --- the run ----------------------------------------------------------------------------------


@dataclass
class Rehearsal:
    exit_code: int | None  # None: killed at the wall-clock cap
    wall_s: float
    output: str
    out: Path
    files: dict[str, int]  # path under $OUT -> bytes
    summary: dict[str, Any] | None
    steps_recorded: list[list[str]]  # steps.txt from the tarball
    step_documents: dict[str, Any]  # runs/<label>.json from the tarball, parsed or None
    left_running: list[str] = field(default_factory=list)
    drift: list[str] = field(default_factory=list)  # ImagePython.drift


def _marked(marker: str) -> list[int]:
    """Processes whose environment holds the marker: everything the script started."""
    found = []
    needle = marker.encode()
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if needle in environ.read_bytes():
                found.append(int(environ.parent.name))
        except OSError:
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return "?"


def rehearse(work: Path, script: Path | None = None) -> Rehearsal:
    """Run gpu_check.sh (or `script` in its place) as the device would, under work/."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    carried = wheels(version)
    tree = device_tree(work / "tree", carried)
    if script is not None:
        shutil.copy2(script, tree / "benchmarks" / "gpu_check.sh")
    image = image_python(work / "image", carried_names(carried))
    bin_dir = work / "bin"
    stand_in_smi(bin_dir)
    out = work / "OUT"
    out.mkdir()
    (work / "tmp").mkdir()
    marker = f"GPU_REHEARSAL_{uuid.uuid4().hex}"
    env = {
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(work / "home"),
        # DeepSpeed's CPU path compiles its shm op here (the device's CUDA path does not):
        # a folder of this rehearsal's own, so no lock left by a killed build can stall it.
        "TORCH_EXTENSIONS_DIR": str(work / "torch_extensions"),
        "TMPDIR": str(work / "tmp"),
        "LANG": "C.UTF-8",
        "OUT": str(out),
        "PYTHON": str(image.python),
        "GPU_CHECK_SIZE": "cpu",
        "GPU_REHEARSAL": marker,
        **simulated_nvml(work),
    }
    if shutil.which("bringup", path=env["PATH"]):
        raise RehearsalError(f"a `bringup` program is on the clean PATH: {env['PATH']}")
    started = time.monotonic()
    proc = subprocess.Popen(
        ["bash", "benchmarks/gpu_check.sh"],
        cwd=tree,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=WALL_CAP_S)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        code = None
    wall = time.monotonic() - started
    time.sleep(1)  # a process killed at the end has a moment to go
    left = [pid for pid in _marked(marker) if _alive(pid)]
    described = [f"{pid}: {_cmdline(pid)}" for pid in left]
    for pid in left:  # the rehearsal itself leaves nothing behind either
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    files = {
        str(p.relative_to(out)): p.stat().st_size for p in sorted(out.rglob("*")) if p.is_file()
    }
    summary = _read_json(out / "summary.json")
    steps, documents = _from_tarball(out / "gpu-check.tar.gz")
    return Rehearsal(
        code, wall, output, out, files, summary, steps, documents, described, image.drift
    )


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _from_tarball(path: Path) -> tuple[list[list[str]], dict[str, Any]]:
    steps: list[list[str]] = []
    documents: dict[str, Any] = {}
    if not path.is_file():
        return steps, documents
    with tarfile.open(path) as tar:
        names = set(tar.getnames())

        def read(name: str) -> bytes | None:
            if name not in names:
                return None
            member = tar.extractfile(name)
            return member.read() if member else None

        text = (read("steps.txt") or b"").decode()
        steps = [line.split() for line in text.splitlines() if line.strip()]
        for label in BRINGUP_STEPS:
            raw = read(f"runs/{label}.json")
            try:
                documents[label] = json.loads(raw) if raw else None
            except ValueError:
                documents[label] = None
    return steps, documents


# --- what must hold -----------------------------------------------------------------------------


def problems(r: Rehearsal) -> list[str]:
    """Everything wrong with a rehearsal, as lines; empty when the GPU run would be sound."""
    found: list[str] = []
    if r.exit_code is None:
        found.append(f"still running at the wall-clock cap of {WALL_CAP_S} s")
    elif r.exit_code != 0:
        found.append(f"gpu_check.sh exited {r.exit_code}")
    # What comes back from $OUT.
    if len(r.files) > MAX_FILES:
        found.append(f"{len(r.files)} files under $OUT, at most {MAX_FILES} come back")
    for name, size in r.files.items():
        parts = Path(name).parts
        if len(parts) - 1 > MAX_FOLDERS:
            found.append(f"$OUT/{name}: {len(parts) - 1} folders deep, would not come back")
        if size >= MAX_FILE_BYTES:
            found.append(f"$OUT/{name}: {size} bytes, over 16 MiB")
        if not all(RETURNABLE_NAME.fullmatch(p) for p in parts):
            found.append(f"$OUT/{name}: a name that would not come back")
    # Every step ran: no 127, no empty or missing JSON, each bringup step a whole document.
    ran = {row[0]: row for row in r.steps_recorded if row}
    for label in STEPS:
        row = ran.get(label)
        if row is None:
            found.append(f"step {label}: not recorded as run")
        elif len(row) > 1 and row[1] not in ("0", "1"):
            found.append(f"step {label}: exit {row[1]}")
    for label in BRINGUP_STEPS:
        doc = r.step_documents.get(label)
        if not isinstance(doc, dict) or "exit_code" not in doc:
            found.append(f"step {label}: no JSON document")
    # The summary: every step ok, every headline figure a value or a reason.
    if not isinstance(r.summary, dict):
        found.append("no summary.json in $OUT")
        return found
    for label in STEPS:
        step = (r.summary.get("steps") or {}).get(label) or {}
        if step.get("status") != "ok":
            found.append(f"summary: step {label} {step.get('status')}: {step.get('reason')}")
    figures = r.summary.get("figures") or {}
    for name in HEADLINE:
        entry = figures.get(name)
        if not isinstance(entry, dict):
            found.append(f"summary: no headline figure {name}")
        elif entry.get("value") is None and not entry.get("reason"):
            found.append(f"summary: {name} is null without a reason")
    if r.left_running:
        found.append(f"left running: {r.left_running}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", type=Path, help="run this in place of gpu_check.sh")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gpu-rehearsal-") as tmp:
        try:
            r = rehearse(Path(tmp), args.script.resolve() if args.script else None)
        except RehearsalError as exc:
            print(f"gpu-rehearsal: {exc}", file=sys.stderr)
            return 2
        print(r.output)
        print(json.dumps(r.summary, indent=2))
        print(f"files under $OUT: {r.files}")
        print(f"image packages newer here, with needs the image list lacks: {r.drift}")
        print(f"wall time: {r.wall_s:.1f} s (cap {WALL_CAP_S} s), exit {r.exit_code}")
        found = problems(r)
        for line in found:
            print(f"gpu-rehearsal: {line}", file=sys.stderr)
        print("gpu-rehearsal: " + ("FAILED" if found else "passed"), file=sys.stderr)
        return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
