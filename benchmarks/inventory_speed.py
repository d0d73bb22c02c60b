"""Reading a large inventory, as `check --nodes` reads it: this checkout beside others.

    .venv/bin/python benchmarks/inventory_speed.py [--nodes 1000 10000] [--baseline main]
        [--repeat 5]

The inventory is `benchmarks/scale.py`'s (INI ranges in racks of 40, children two levels
deep, `[gpu:vars]`, group_vars/ for all, a pod and a rack, `group_vars/all.yml` templating
every address as `{{ inventory_hostname }}.mgmt.example`, a host_vars/ file with a literal
address for every tenth node), written once per size and read by every tree. Each reading is its own
process, started in the tree with its own bringup first on the path: Ansible's import and
`bringup.fleet.inventory.load(path)`, as scale.py's inventory figure measures them (CPU:
user + system of the process, from `os.times`). The trees are measured in turn, `--repeat`
rounds, so that each sees the same load; the median is printed, with each round's figures
and the load average before and after. `--baseline REV` adds that commit, checked out in a
private `git worktree` (removed afterwards). Asserts nothing. docs/scale.md reads it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import scale  # noqa: E402  (scale.py writes the inventory)
from node_side import tree_of  # noqa: E402  (a baseline's private worktree)

READ = """\
import json, os, sys
start = os.times()
from ansible.inventory.manager import InventoryManager  # noqa: F401
from ansible.vars.manager import VariableManager  # noqa: F401
from bringup.fleet import inventory
imported = os.times()
hosts = inventory.load(__import__("pathlib").Path(sys.argv[1]))
done = os.times()
cpu = lambda a, b: (b.user - a.user) + (b.system - a.system)
rows = sorted(json.dumps([h.name, h.address, h.port, h.user, h.ssh_args, h.vars], sort_keys=True)
              for h in hosts)
digest = __import__("hashlib").sha256("\\n".join(rows).encode()).hexdigest()
print(json.dumps({"import_s": cpu(start, imported), "read_s": cpu(imported, done),
                  "hosts": len(hosts), "digest": digest, "module": inventory.__file__}))
"""


def read_once(tree: Path, path: Path) -> dict[str, float]:
    """One reading by `tree`'s bringup, in a process of its own."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", READ, str(path)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{tree}: reading {path} failed: {done.stderr.strip()[-2000:]}")
    figures = json.loads(done.stdout.splitlines()[-1])
    if not figures["module"].startswith(str(tree)):
        raise SystemExit(f"{tree}: read by {figures['module']}, not the tree's own bringup")
    return figures


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--baseline", nargs="*", default=[], help="commits to measure beside")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bringup-inventory-") as tmp, ExitStack() as stack:
        base = Path(tmp)
        names = ["this checkout", *args.baseline]
        trees = [stack.enter_context(tree_of(rev, base)) for rev in [None, *args.baseline]]
        for nodes in args.nodes:
            folder = base / f"inventory-{nodes}"
            folder.mkdir()
            path = scale.write_inventory(folder, nodes)
            before = load_average()
            rounds: dict[str, list[dict[str, float]]] = {name: [] for name in names}
            for _ in range(args.repeat):
                for name, tree in zip(names, trees, strict=True):
                    rounds[name].append(read_once(tree, path))
            after = load_average()
            print(f"{nodes} templated hosts (load average {before} before, {after} after)")
            for name in names:
                totals = [r["import_s"] + r["read_s"] for r in rounds[name]]
                imported = statistics.median(r["import_s"] for r in rounds[name])
                read = statistics.median(r["read_s"] for r in rounds[name])
                assert all(r["hosts"] == nodes for r in rounds[name]), rounds[name]
                print(
                    f"  {name:16} {statistics.median(totals):6.3f} s CPU median"
                    f" (import {imported:.3f}, read {read:.3f});"
                    f" rounds: {', '.join(f'{t:.2f}' for t in totals)}"
                )
            digests = {r["digest"] for rs in rounds.values() for r in rs}
            same = "yes" if len(digests) == 1 else f"NO ({len(digests)} different readings)"
            print(f"  every tree read the same hosts, addresses and variables: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
