"""`bringup burnin` bad input: one line on stderr, exit 2, nothing trained."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import invoke


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "say where to run: --local (this machine) or --nodes hosts.ini"),
        (["--local", "--recipe", "llama-9b"], "unknown recipe 'llama-9b'; available: llama-1b"),
        (["--local", "--steps", "3", "--minutes", "1"], "give --steps or --minutes, not both"),
        (["--local", "--zero", "1"], "--zero 1: ZeRO stage must be 2 or 3"),
        (["--local", "--data", "/nonexistent.jsonl"], "--data /nonexistent.jsonl: not a file"),
        (["--local", "--profile", "h999"], "unknown profile 'h999'"),
        (["--local", "--joint"], "--joint needs --nodes hosts.ini"),
        (["--nodes", "h.ini", "--resume", "x"], "--resume works with --local only"),
        (["--nodes", "/nonexistent/hosts.ini"], "/nonexistent/hosts.ini"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], message: str) -> None:
    result = invoke("burnin", *args)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines() if result.stderr else result.output.splitlines()
    assert len(lines) == 1 and message in lines[0]


def test_a_bad_recipe_file_names_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "r.yaml"
    bad.write_text("name: x\ndescription: x\nsource: x\nmodel: {}\ntrain: {seq_len: 8}\nlr: 1\n")
    result = invoke("burnin", "--local", "--recipe", bad)
    assert result.exit_code == 2
    assert f"{bad}: lr: unknown key" in result.output + (result.stderr or "")
