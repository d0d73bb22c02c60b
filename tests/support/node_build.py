"""What simulated nodes would otherwise build over and over: DeepSpeed's CPU op.

A burn-in rank on the CPU loads DeepSpeed's shared-memory op (deepspeed_shm_comm), which
torch compiles on first use into $TORCH_EXTENSIONS_DIR, else into the node's own cache:
about 80 s of CPU, paid by every node of every burn-in test. Built once per session here
and copied into each cluster's own folder (the copy keeps the build's times, so torch's
ninja finds it up to date and only loads it).

Built aside and moved into place when complete: torch holds a lock file in the folder
while it builds or checks, and a process killed meanwhile leaves it there for good.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.timing import scaled

OP = "deepspeed_shm_comm"
BUILD = (
    "from deepspeed.ops.op_builder.cpu import ShareMemCommBuilder\n"
    "ShareMemCommBuilder().load(verbose=False)\n"
)
BUILD_S = 900.0  # minutes on 2 loaded cores; past it the nodes build it as before


def build_deepspeed_cpu_op(where: Path) -> Path | None:
    """Build the op under where/extensions; that folder, or None when it cannot be built
    here (no DeepSpeed, no compiler, too slow): nodes then build it themselves."""
    partial, done = where / "partial", where / "extensions"
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(partial)}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", BUILD],
            env=env,
            capture_output=True,
            text=True,
            timeout=scaled(BUILD_S),
            check=False,
        )
    except subprocess.TimeoutExpired:
        print(f"\n{OP}: not built within {scaled(BUILD_S):.0f} s; each node builds its own")
        return None
    if proc.returncode != 0 or not (partial / OP / f"{OP}.so").is_file():
        why = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"\n{OP}: not built ({why}); each node builds its own")
        return None
    (partial / OP / "lock").unlink(missing_ok=True)
    partial.rename(done)
    return done


def copy_for_cluster(built: Path | None, workdir: Path) -> dict[str, str]:
    """A cluster's own copy of the built op, as the environment its nodes get ({} when
    there is none: each node builds its own)."""
    if built is None:
        return {}
    mine = workdir / "torch-extensions"
    shutil.copytree(built, mine, symlinks=True)  # copy2: the build's times are kept
    return {"TORCH_EXTENSIONS_DIR": str(mine)}


def node_build_env(request: pytest.FixtureRequest, workdir: Path) -> dict[str, str]:
    """The environment a test's cluster gives its nodes: for a test that asks for
    `deepspeed_cpu_op` (the burn-in tests), the session's build copied for this cluster;
    for any other, nothing."""
    if "deepspeed_cpu_op" not in request.fixturenames:
        return {}
    workdir.mkdir(parents=True, exist_ok=True)
    return copy_for_cluster(request.getfixturevalue("deepspeed_cpu_op"), workdir)
