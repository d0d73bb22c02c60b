"""How long one TAB takes: `bringup` asked for completions as bash asks, in one run.

    .venv/bin/python benchmarks/completion.py [--repeat 5] [--source DIR] [--baseline DIR]

Goal (issue 27): at most 0.3 s per TAB. The shell runs `bringup` again on every TAB, so
what counts is start-up: the entry point answers from a table without building the app
(bringup/commands/tab.py: no typer, click, rich or pydantic), and the value completers
read file names, not files (bringup/commands/complete.py). Prints, for each line
completed, the median wall and CPU (user + system) seconds and the answers' count;
asserts nothing (timings belong to the machine: on a shared one, CPU is the steadier
figure). `--source DIR` runs another checkout's bringup with this interpreter;
`--baseline DIR` runs one (say `git archive main` unpacked) side by side, line by line,
for a before/after measured under the same load.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_S = 0.3
REPO = Path(__file__).resolve().parent.parent

LINES = (
    "bringup ch",
    "bringup check --pro",
    "bringup check --profile h",
    "bringup check --suite ",
    "bringup burnin --recipe ",
    "bringup plan --method ",
    "bringup report RUN --format html,j",
    "bringup check --nodes HOSTS --limit n",
)
# `bringup` as its console script starts it: the name picks Typer's _BRINGUP_COMPLETE.
PROGRAM = "import sys; sys.argv[0] = 'bringup'; from bringup.cli import run; sys.exit(run())"
HOSTS = "[gpu]\nnode01 ansible_host=10.0.0.1\nnode02 ansible_host=10.0.0.2\n[head]\nhead01\n"


def tab(line: str, source: Path) -> tuple[float, float, int]:
    """Wall and CPU seconds of one completion of `line`, and how many answers it gave."""
    env = {
        **os.environ,
        "PYTHONPATH": str(source),
        "_BRINGUP_COMPLETE": "complete_bash",
        "COMP_WORDS": line,
        "COMP_CWORD": str(len(line.split()) - (0 if line.endswith(" ") else 1)),
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        env=env,
        cwd=source,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, len(done.stdout.split())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--source", type=Path, default=REPO)
    parser.add_argument("--baseline", type=Path, help="another checkout, measured alongside")
    args = parser.parse_args()
    sources = [s for s in (args.baseline, args.source) if s is not None]
    with tempfile.TemporaryDirectory() as tmp:
        hosts = Path(tmp) / "hosts.ini"
        hosts.write_text(HOSTS)
        run = Path(tmp) / "demo"
        subprocess.run(
            [sys.executable, "-m", "bringup.cli", "check", "--demo", "--out", str(run), "-q"],
            env={**os.environ, "PYTHONPATH": str(args.source)},
            cwd=args.source,
            capture_output=True,
            check=False,
        )
        print(f"medians of {args.repeat}, goal {GOAL_S:g} s per TAB")
        worst = dict.fromkeys(sources, 0.0)
        for line in LINES:
            typed = line.replace("HOSTS", str(hosts)).replace("RUN", str(run))
            for source in sources:
                tab(typed, source)  # warm the bytecode and page caches
                runs = [tab(typed, source) for _ in range(args.repeat)]
                wall = statistics.median(r[0] for r in runs)
                cpu = statistics.median(r[1] for r in runs)
                worst[source] = max(worst[source], cpu)
                print(
                    f"  {line:40s} wall {wall:5.2f} s  cpu {cpu:5.2f} s  "
                    f"answers {runs[0][2]:2d}  {source}"
                )
        for source, slowest in worst.items():
            verdict = "within" if slowest <= GOAL_S else "OVER"
            print(f"{source}: slowest TAB {slowest:.2f} s CPU ({verdict} the goal of {GOAL_S:g} s)")


if __name__ == "__main__":
    main()
