"""docs/cli.md's examples, run as written (issue 27: help and docs that say what the
command does). They run in order in one directory, on the demo fleet and the data bringup
ships; each ends with the exit status the page states, prints no traceback, and keeps the
one option surface: with -q one line on stdout, with --json one document and an empty
stderr (progress goes there only on a terminal)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bringup.commands.options import EXAMPLES
from tests.support import REPO


def test_the_page_shows_the_examples_the_test_runs() -> None:
    page = (REPO / "docs" / "cli.md").read_text()
    for example in EXAMPLES:
        assert f"{example.line}  # exit {example.exit}: {example.says}" in page


def test_each_example_does_what_the_page_says(cli: Callable[..., Any], tmp_path: Path) -> None:
    for example in EXAMPLES:
        program, *args = shlex.split(example.line)
        assert program == "bringup"
        result = cli(*args, cwd=tmp_path)
        said = f"{example.line}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
        assert result.code == example.exit, said
        assert "Traceback" not in result.stderr, said
        if "-q" in args:
            assert len(result.stdout.splitlines()) == 1, said
            assert result.stderr == "", said
        if "--json" in args:
            assert json.loads(result.stdout)["exit_code"] == example.exit, said
            assert result.stderr == "", said
    written = {"demo", "demo-again", "golden.yaml", "bundle", "bringup.prom"}
    assert written <= {p.name for p in tmp_path.iterdir()}
    assert (tmp_path / "demo" / "report.html").is_file()
