"""What a test pays to start and stop a simulated cluster (issue 30: the suite's time).

    sudo .venv/bin/python benchmarks/sim_cluster_start.py [--nodes 2 8] [--repeat 3]

Starts and stops SimCluster(n) `--repeat` times in one process, as a test session does
(the first start of a process pays what a session pays once), for each size. CPU is user
+ system of this process and its children (getrusage), wall beside it; the median of the
later starts, and the first start apart. Another tree's code: run this file with that
tree's interpreter (`/path/to/tree/.venv/bin/python benchmarks/sim_cluster_start.py`), on
the same machine back to back, and compare the ratios. Needs root (network namespaces).
Asserts nothing.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def start_and_stop(nodes: int, workdir: Path) -> tuple[float, float]:
    """(CPU s, wall s) of one start and stop of a cluster of `nodes`."""
    from bringup.sim.cluster import SimCluster

    cpu, wall = _cpu(), time.perf_counter()
    with SimCluster(nodes, workdir):
        pass
    return _cpu() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 8])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import bringup

    print(f"bringup from {Path(bringup.__file__).parent}")
    with tempfile.TemporaryDirectory(prefix="sim-cluster-start-") as tmp:
        runs = 0
        for nodes in args.nodes:
            results = []
            for _ in range(args.repeat):
                results.append(start_and_stop(nodes, Path(tmp) / f"c{runs}"))
                runs += 1
            first, later = results[0], results[1:] or results
            print(
                f"{nodes} nodes: first {first[0]:.2f} s CPU ({first[1]:.2f} s wall); "
                f"then median {statistics.median(r[0] for r in later):.2f} s CPU "
                f"({statistics.median(r[1] for r in later):.2f} s wall) per start and stop"
            )


if __name__ == "__main__":
    main()
