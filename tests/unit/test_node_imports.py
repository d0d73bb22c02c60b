"""The node side loads only what the probes it was asked for need (issue 31): it starts at
every run, under Slurm at every job start, and the imports were most of its CPU.

Each case is a fresh interpreter, as on a node; what it imported is read from sys.modules.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Runs the node side's own entry point on a request, in process, then prints what it loaded.
SCRIPT = """
import io, json, sys
from bringup.node import protocol
sys.stdin = io.StringIO(sys.argv[1])
protocol.main([])
loaded = sorted(m for m in sys.modules if m.startswith("bringup.node.probes.") or m == "pynvml")
print(json.dumps(loaded))
"""


def _loaded(request: dict[str, object]) -> tuple[list[str], list[dict[str, object]]]:
    done = subprocess.run(
        [sys.executable, "-I", "-c", SCRIPT, json.dumps(request)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    *records, loaded = done.stdout.strip().splitlines()
    return json.loads(loaded), [json.loads(line) for line in records]


def test_the_node_side_imports_no_probe_before_it_is_asked() -> None:
    loaded, records = _loaded({"probes": []})
    assert records == []
    assert loaded == []


def test_each_probe_is_imported_in_its_own_child_only() -> None:
    # The probe runs in a forked child: the node side itself never loads it, so the next
    # probe's child does not inherit it either.
    loaded, records = _loaded({"probes": [{"name": "xid", "params": {"timeout_s": 5}}]})
    assert [r["probe"] for r in records] == ["xid"]
    assert loaded == []


def test_an_unknown_probe_is_still_named_and_loads_nothing() -> None:
    loaded, records = _loaded({"probes": [{"name": "gpux"}]})
    assert records[0]["error"] == "unknown probe 'gpux'"
    assert loaded == []


def test_the_catalog_loads_a_probe_on_first_lookup() -> None:
    script = (
        "import sys; from bringup.node.catalog import PROBES\n"
        "before = [m for m in sys.modules if m.startswith('bringup.node.probes.')]\n"
        "names = list(PROBES); has = 'host' in PROBES\n"
        "mid = [m for m in sys.modules if m.startswith('bringup.node.probes.')]\n"
        "PROBES['xid'].Params()\n"
        "after = [m for m in sys.modules if m.startswith('bringup.node.probes.')]\n"
        "print(before, mid, after, len(names), has, 'pynvml' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["[]", "[]", "['bringup.node.probes.xid']", "15", "True", "False"]
