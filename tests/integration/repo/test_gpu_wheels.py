"""benchmarks/gpu_wheels.sh carries exactly what the GPU image lacks, in versions that
resolve together, and installs with no network.

A Python like the image's (tests/support/gpu_rehearsal.py: a fresh virtual environment of
this Python holding only the packages benchmarks/gpu_image.txt lists) gets the carried set
as gpu_check.sh installs it, `pip install --no-index --no-deps --target`; then pip's own
check finds every requirement met, and every module the four steps import loads, the
carried ones from the carried folder. What differs from the device: this machine's Python
(the image's is 3.12: the binary wheels, pydantic-core and msgspec, are fetched for this
version by the same pinned list), and the image's packages in the versions installed here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.gpu_rehearsal import (
    REPO,
    ImagePython,
    RehearsalError,
    carried_names,
    image_python,
    wheels,
)
from tests.support.timing import scaled

pytestmark = pytest.mark.burnin

# What `check --local`, `diagnose --local`, `nccl --local` and `burnin --local` import, in
# the controller, the node side and the trainer (the rehearsal proves the list by running
# them; this names them so a missing one says which).
STEP_MODULES = (
    "bringup.cli",
    "bringup.commands.tab",
    "bringup.commands.app",
    "bringup.commands.check",
    "bringup.commands.diagnose",
    "bringup.commands.nccl",
    "bringup.commands.burnin",
    "bringup.fleet.run",
    "bringup.fleet.local",
    "bringup.fleet.target",
    "bringup.checks.catalog",
    "bringup.facts",
    "bringup.baseline",
    "bringup.node.catalog",
    "bringup.node.probes.gemm",
    "bringup.node.probes.nccl",
    "bringup.node.probes.burnin",
    "bringup.node.collective.launcher",
    "bringup.node.burnin.trainer",
    "pydantic",
    "msgspec",
    "pynvml",
    "deepspeed",
    "hjson",
    "torch",
    "transformers",
    "peft",
    "typer",
    "rich",
    "yaml",
)
# Carried, so they must load from the carried folder, never from the image's own.
CARRIED_MODULES = (
    "pydantic",
    "pydantic_core",
    "msgspec",
    "pynvml",
    "deepspeed",
    "hjson",
    "typing_extensions",
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[ImagePython, Path, Path]:
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    try:
        carried = wheels(version)
    except RehearsalError as exc:
        pytest.skip(str(exc))
    work = tmp_path_factory.mktemp("gpu-wheels")
    image = image_python(work / "image", carried_names(carried))
    site = work / "site"
    (work / "tmp").mkdir()  # the image Python's TMPDIR (_env)
    argv = [image.python, "-m", "pip", "install", "-q", "--no-index", "--no-deps"]
    argv += ["--no-compile", "--target", site, *sorted(carried.glob("*.whl"))]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=scaled(300))
    assert done.returncode == 0, done.stderr[-2000:]
    return image, carried, site


def _env(site: Path) -> dict[str, str]:
    """A clean environment, as the device's: its temporary folder the test's own (torch's
    inductor, which importing peft sets up, makes its cache folder in it)."""
    home = os.environ.get("HOME", "/")
    tmp = str(site.parent / "tmp")
    return {"PATH": "/usr/bin:/bin", "HOME": home, "PYTHONPATH": f"{REPO}:{site}", "TMPDIR": tmp}


def test_the_carried_set_is_pinned_and_fits_beside_the_tree(
    installed: tuple[ImagePython, Path, Path],
) -> None:
    _, carried, _ = installed
    assert carried_names(carried) == {
        "annotated-types",
        "deepspeed",
        "hjson",
        "msgspec",
        "nvidia-ml-py",
        "pydantic",
        "pydantic-core",
        "typing-extensions",
        "typing-inspection",
    }
    # One version of each (two would stop the whole install), and room in the 64 MiB that
    # travel with the tree.
    assert len(list(carried.glob("*.whl"))) == 9
    assert sum(w.stat().st_size for w in carried.glob("*.whl")) < 16 * 2**20


def test_every_requirement_is_met_offline(installed: tuple[ImagePython, Path, Path]) -> None:
    image, _, site = installed
    done = subprocess.run(
        [image.python, "-m", "pip", "check"],
        capture_output=True,
        text=True,
        env=_env(site),
        timeout=scaled(120),
    )
    # Only the image's own extras may be unmet here (packages listed but not installed on
    # this machine); nothing the carried set needs.
    carried = {"pydantic", "pydantic-core", "msgspec", "deepspeed", "hjson", "nvidia-ml-py"}
    unmet = [line for line in done.stdout.splitlines() if line.split(" ")[0].lower() in carried]
    assert unmet == [], done.stdout


def test_every_module_the_steps_import_loads_the_carried_ones_from_the_carried_folder(
    installed: tuple[ImagePython, Path, Path],
) -> None:
    image, _, site = installed
    modules = STEP_MODULES + CARRIED_MODULES
    code = (
        "import importlib, json, tempfile\n"
        f"found = {{m: importlib.import_module(m).__file__ for m in {modules!r}}}\n"
        "found['tempfile'] = tempfile.gettempdir()\n"
        "print(json.dumps(found))\n"
    )
    done = subprocess.run(
        [image.python, "-c", code],
        capture_output=True,
        text=True,
        env=_env(site),
        timeout=scaled(300),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    for module in CARRIED_MODULES:
        assert found[module].startswith(str(site)), (module, found[module])
    assert found["torch"].startswith(str(image.python.parents[1])), found["torch"]
    # What those imports leave (peft's makes torch's inductor cache folder) stays in the
    # test's own folder: never /tmp/torchinductor_<user>, a fixed path in a shared /tmp.
    assert found["tempfile"].startswith(str(site.parent)), found["tempfile"]
