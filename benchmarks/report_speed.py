"""How long the reports of the 6-node demo take, against `check --demo`, in one run.

    .venv/bin/python benchmarks/report_speed.py [--repeat 5]

Goals (issue 27): `report --format html` at most 1.5x the wall time of `check --demo`,
`report --baseline` at most 2x, `handover --demo` at most 3x. The commands run side by
side, one of each per round, so a machine busy for a while slows them all alike. Prints
each median and its ratio to `check --demo`; asserts nothing (timings belong to the
machine).

Where the time went before (cProfile of `handover --demo`, this repository's history):
--profile auto read and validated every shipped profile for each node it detected, with
PyYAML's pure-Python parser (libyaml now, bringup/schema.py); and every report imported
matplotlib and drew its figures with its own module set-up (bringup/report/plots.py).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOALS = {"report --format html": 1.5, "report --baseline": 2.0, "handover --demo": 3.0}


def wall(argv: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cli = [sys.executable, "-m", "bringup.cli"]
    times: dict[str, list[tuple[float, float]]] = {"check --demo": []}
    times.update({name: [] for name in GOALS})
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        # Two demo runs to report on and compare; then warm the bytecode caches once.
        for name in ("first", "second"):
            wall([*cli, "check", "--demo", "--out", str(base / name)])
        wall([*cli, "report", str(base / "first"), "--format", "html", "--out", str(base / "w")])
        for i in range(args.repeat):
            commands = {
                "check --demo": ["check", "--demo", "--out", str(base / f"c{i}")],
                "report --format html": [
                    "report",
                    str(base / "first"),
                    "--format",
                    "html",
                    "--out",
                    str(base / f"h{i}"),
                ],
                "report --baseline": [
                    "report",
                    str(base / "second"),
                    "--baseline",
                    str(base / "first"),
                    "--out",
                    str(base / f"b{i}"),
                ],
                "handover --demo": ["handover", "--demo", "--out", str(base / f"d{i}")],
            }
            for name, argv in commands.items():
                times[name].append(wall([*cli, *argv]))
    walls = {name: statistics.median(w for w, _ in values) for name, values in times.items()}
    cpus = {name: statistics.median(c for _, c in values) for name, values in times.items()}
    check, check_cpu = walls["check --demo"], cpus["check --demo"]
    print(f"medians of {args.repeat}; CPU is user + system, steadier on a shared machine")
    print(f"{'check --demo':22s} wall {check:6.2f} s  cpu {check_cpu:6.2f} s")
    for name, goal in GOALS.items():
        ratio = walls[name] / check
        verdict = "within" if ratio <= goal else "OVER"
        print(
            f"{name:22s} wall {walls[name]:6.2f} s  cpu {cpus[name]:6.2f} s  "
            f"ratio {ratio:4.2f} (cpu {cpus[name] / check_cpu:4.2f}; "
            f"{verdict} the goal of {goal:g}x)"
        )


if __name__ == "__main__":
    main()
