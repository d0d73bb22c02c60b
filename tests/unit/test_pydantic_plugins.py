"""The entry point's stand-in for pydantic's plugin loader (bringup/cli.py, issue 31): with
every plugin disabled (bringup's default) no importlib.metadata at the first model build,
and a user's plugin still found where plugins are enabled, from the start or later on.

Each case runs in a fresh interpreter: which modules are loaded, and pydantic's cache of
plugins, are per process. The plugin is a real one, found through its distribution's entry
point as pydantic finds any (the `pydantic` group).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO
from tests.support.timing import scaled

# A distribution on sys.path whose `pydantic` entry point is a plugin that counts the
# schema validators pydantic builds with it.
PLUGIN = """\
SEEN = []


class Counting:
    def new_schema_validator(self, schema, schema_type, path, kind, config, settings):
        SEEN.append(path.name)
        return None, None, None


plugin = Counting()
"""
ENTRY_POINTS = "[pydantic]\ncounting = counting_plugin:plugin\n"

# The entry point's own start (cli.run's first lines), then a model of bringup's built and
# used; prints what was loaded and what the plugin saw. ENABLE_LATER: the variable set to
# enable plugins after the start, before the first model.
SCRIPT = """\
import json, os, sys
from bringup import cli
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
cli.no_plugin_search()
if os.environ.get("ENABLE_LATER"):
    os.environ["PYDANTIC_DISABLE_PLUGINS"] = ""
from bringup.findings import Finding, Status
finding = Finding.model_validate({"check": "gpu.count", "status": "PASS", "message": "8 GPUs"})
assert finding.status is Status.PASS
import counting_plugin
print(json.dumps({
    "metadata": "importlib.metadata" in sys.modules,
    "email": "email" in sys.modules,
    "seen": counting_plugin.SEEN,
}))
"""


def _run(tmp_path: Path, **env: str) -> dict[str, object]:
    site = tmp_path / "site"
    dist = site / "counting_plugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: counting-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    (site / "counting_plugin.py").write_text(PLUGIN)
    given = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    given |= {"PYTHONPATH": f"{REPO}{os.pathsep}{site}", **env}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        env=given,
        timeout=scaled(60),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_plugins_disabled_by_default_load_no_package_metadata(tmp_path: Path) -> None:
    result = _run(tmp_path)
    assert result == {"metadata": False, "email": False, "seen": []}


@pytest.mark.parametrize("value", ["", "some_other_plugin"])
def test_a_plugin_is_found_where_the_user_enables_plugins(tmp_path: Path, value: str) -> None:
    result = _run(tmp_path, PYDANTIC_DISABLE_PLUGINS=value)
    assert result["metadata"] is True
    assert "Finding" in result["seen"]  # type: ignore[operator]


def test_plugins_enabled_after_the_start_are_found_by_pydantics_loader(tmp_path: Path) -> None:
    result = _run(tmp_path, ENABLE_LATER="1")
    assert result["metadata"] is True
    assert "Finding" in result["seen"]  # type: ignore[operator]


@pytest.mark.parametrize("value", ["__all__", "1", "true", "counting"])
def test_a_plugin_disabled_is_not_used(tmp_path: Path, value: str) -> None:
    """Every value pydantic reads as disabling it: all of them, or this one by name (the
    stand-in steps aside for a name: pydantic's loader reads the names)."""
    result = _run(tmp_path, PYDANTIC_DISABLE_PLUGINS=value)
    assert result["seen"] == []
