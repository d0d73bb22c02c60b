"""The README shows what the tool prints (issue 27, 3): its demo block is the real output
of the command it names, at 80 columns, compared line by line (trailing spaces aside).

When the console changes on purpose, rewrite the block with the output this test prints.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from tests.support.cli import run_cli

README = Path(__file__).resolve().parents[3] / "README.md"
COMMAND = "$ bringup check --demo --out runs/demo"


def readme_demo_block() -> list[str]:
    """The lines of the README's fenced block that starts with COMMAND, COMMAND first."""
    lines = README.read_text().splitlines()
    start = lines.index(COMMAND)
    end = lines.index("```", start)
    return lines[start:end]


def test_the_readme_demo_block_is_what_check_demo_prints(tmp_path: Path) -> None:
    block = readme_demo_block()
    args = shlex.split(block[0].removeprefix("$ bringup "))
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    result = run_cli(*args, cwd=tmp_path, env=env)
    assert result.returncode == 1, result.stderr  # the demo's planted faults
    printed = [line.rstrip() for line in result.stdout.splitlines()]
    assert block[1:] == printed, "\n".join(["README block should read:", *printed])
