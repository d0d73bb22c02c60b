"""How long `bringup check` takes here, against its goals, in one run.

    .venv/bin/python benchmarks/check_speed.py [--repeat 5]

Goals: the quick suite on one node in under 60 s; replaying
recorded facts should cost far less than probing. Prints the median wall time of each
command and its ratio to the goal; it asserts nothing (timings belong to the machine).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_QUICK_S = 60.0


def wall(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cli = [sys.executable, "-m", "bringup.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        quick = [
            wall([*cli, "check", "--local", "--suite", "quick", "--out", str(base / f"q{i}")])
            for i in range(args.repeat)
        ]
        replay = [
            wall([*cli, "check", "--replay", str(base / "q0"), "--out", str(base / f"r{i}")])
            for i in range(args.repeat)
        ]
        demo = [
            wall([*cli, "check", "--demo", "--out", str(base / f"d{i}")])
            for i in range(args.repeat)
        ]
    q, r, d = (statistics.median(x) for x in (quick, replay, demo))
    print(f"check --local --suite quick : {q:6.2f} s  ({q / GOAL_QUICK_S:.3f} of the 60 s goal)")
    print(f"check --replay (same facts) : {r:6.2f} s  ({r / q:.2f} x the live run)")
    print(f"check --demo (6 nodes)      : {d:6.2f} s")


if __name__ == "__main__":
    main()
