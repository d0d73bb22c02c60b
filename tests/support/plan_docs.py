"""The examples of docs/plan.md, as `bringup plan` prints them: each block between
`<!-- plan-example: ARGS -->` and the end of the code block that follows it is the tool's
own output for ARGS at 100 columns (trailing spaces dropped). tests/unit/test_plan_docs.py
keeps the page equal to it; after a change to the plan's output, rewrite the page with

    .venv/bin/python -m tests.support.plan_docs docs/plan.md
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

WIDTH = 100
BLOCK = re.compile(r"(<!-- plan-example: (?P<args>[^>]*?) -->\n```text\n)(?P<body>.*?)(```)", re.S)


def output(args: str) -> str:
    """`bringup plan ARGS` as a terminal of WIDTH columns shows it, with its command line.

    In a process of its own: the console's width is read when the process first imports
    it, so an in-process run would take whatever width an earlier test left behind."""
    env = {**os.environ, "COLUMNS": str(WIDTH), "PYTHONPATH": str(REPO)}
    env.pop("TERMINAL_WIDTH", None)
    argv = [sys.executable, "-m", "bringup.cli", "plan", *shlex.split(args)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, check=False)
    lines = [line.rstrip() for line in (done.stdout + done.stderr).splitlines()]
    return "\n".join([f"$ bringup plan {args}", *lines]).rstrip() + "\n"


def render(page: str) -> str:
    """The page with every example block replaced by the tool's output."""
    return BLOCK.sub(lambda m: m.group(1) + output(m.group("args")) + m.group(4), page)


def examples(page: str) -> list[str]:
    return [m.group("args") for m in BLOCK.finditer(page)]


if __name__ == "__main__":
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/plan.md")
    path.write_text(render(path.read_text()))
