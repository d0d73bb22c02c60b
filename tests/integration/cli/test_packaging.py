"""An installed wheel carries the data folders, so the CLI works outside the repo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.support import REPO
from tests.support.cli import run_cli


def test_wheel_ships_profiles_and_suites_and_finds_them(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "dist"), str(REPO)],
        check=True,
    )  # fmt: skip
    wheel = next((tmp_path / "dist").glob("bringup-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "bringup/_data/checks/profiles/b300.yaml" in names
    assert "bringup/_data/checks/suites/acceptance.yaml" in names
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    # Run from an unrelated directory with the unpacked wheel first on the path.
    env = {**os.environ, "PYTHONPATH": str(site)}
    probe = "import bringup, sys; print(bringup.__file__)"
    where = subprocess.run([sys.executable, "-c", probe], env=env, cwd=tmp_path,
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert where.startswith(str(site))
    result = run_cli("profiles", "list", "--json", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert [p["name"] for p in json.loads(result.stdout)["data"]["profiles"]] == [
        "a100",
        "b200",
        "b300",
        "gb200",
        "gb300",
        "h100",
        "h200",
    ]
