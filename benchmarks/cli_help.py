"""How fast `bringup --help` answers, against a bare Typer app of the same size, in one run.

    .venv/bin/python benchmarks/cli_help.py [--repeat 5]

Goal: the median of `bringup --help` at most 2x the median of a
Typer app with ten commands and no other imports, on the same machine, in the same run.
Start-up is what a user feels on every command and what shell completion pays on every
TAB; it stays low only while command modules import their heavy libraries (matplotlib,
pydantic models, the fleet, torch, Ansible) inside the handler that needs them. Prints
both medians and the ratio; asserts nothing (timings belong to the machine).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

GOAL_RATIO = 2.0

# The yardstick: what Typer itself costs for a CLI of ten commands.
BARE_APP = """
import typer
app = typer.Typer()
for i in range(10):
    def command(value: int = 1) -> None:
        '''A command.'''
    app.command(f"c{i}")(command)
app()
"""


def wall(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def median_of(argv: list[str], repeat: int) -> float:
    wall(argv)  # warm the page cache and the bytecode caches first
    return statistics.median(wall(argv) for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    bringup = median_of([sys.executable, "-m", "bringup.cli", "--help"], args.repeat)
    bare = median_of([sys.executable, "-c", BARE_APP, "--help"], args.repeat)
    ratio = bringup / bare
    print(f"bringup --help          median {bringup:.3f} s of {args.repeat}")
    print(f"bare Typer, 10 commands median {bare:.3f} s of {args.repeat}")
    verdict = "within" if ratio <= GOAL_RATIO else "OVER"
    print(f"ratio {ratio:.2f} ({verdict} the goal of {GOAL_RATIO:g}x)")


if __name__ == "__main__":
    main()
