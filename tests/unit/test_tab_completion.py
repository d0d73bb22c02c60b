"""A TAB answered without the app (bringup/commands/tab.py) says, byte for byte, what the
Typer app says, on every shell `bringup --install-completion` supports; its table cannot
drift from the app; and it answers within the start-up of Python alone (no typer, click,
rich, pydantic)."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import typer
from typer.testing import CliRunner

from bringup.cli import app
from bringup.commands import tab, tab_table

REPO = Path(__file__).resolve().parents[2]
INVENTORY = "[gpu]\nnode01 ansible_host=10.0.0.1\nnode02\n[head]\nhead01\n"

# What a user types before TAB (a trailing space: a new word). HOSTS and RUN are replaced.
LINES = (
    "bringup ",
    "bringup ch",
    "bringup check",
    "bringup check ",
    "bringup check -",
    "bringup check --pro",
    "bringup check --profile ",
    "bringup check --profile h",
    "bringup check --profile=h",
    "bringup check -p b",
    "bringup check -pb",
    "bringup check --profile = h",
    "bringup check -qp h",
    "bringup check -qx",
    "bringup check --json=1 --pro",
    "bringup plan --method full --gpu",
    "bringup burnin --no-k",
    "bringup report RUN extra --li",
    "bringup check --json --j",
    "bringup check --demo -",
    "bringup check --suite ",
    "bringup check --nodes HOSTS --limit ",
    "bringup check --nodes HOSTS --limit node",
    "bringup check -n HOSTS -l h",
    "bringup check --limit node",
    "bringup check --replay RUN --limit n",
    "bringup check --nosuch --pro",
    "bringup check --data-dir a --data-dir b --da",
    "bringup burnin --recipe llama-",
    "bringup burnin --no-keep-checkpoints --",
    "bringup plan --method ",
    "bringup plan --gpu h",
    "bringup plan --model ",
    "bringup report RUN --format html,j",
    "bringup report RUN --format ",
    "bringup report RUN --limit ",
    "bringup report ",
    "bringup report RUN -",
    "bringup inspect --kind ",
    "bringup inspect --kind smi",
    "bringup profiles ",
    "bringup profiles l",
    "bringup profiles show ",
    "bringup sim nvml ",
    "bringup slurm render --suite ",
    "bringup slurm render check --",
    "bringup slurm healthcheck --p",
    "bringup provision -",
    "bringup --",
    "bringup --version ",
    "bringup chek --",
    "bringup check -- --",
    'bringup check --out "my dir',
)
# Lines the quick answer leaves to the app (root options, an unknown command, `--`).
LEFT_TO_THE_APP = {"bringup --version ", "bringup chek --", "bringup check -- --"}
SHELLS = ("bash", "zsh", "fish-get", "fish-is", "powershell", "pwsh")


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("tab")
    (tmp / "hosts.ini").write_text(INVENTORY)
    run = tmp / "run"
    run.mkdir()
    (run / "manifest.json").write_text('{"nodes": ["node02", "node01", "head01"]}')
    return {"HOSTS": str(tmp / "hosts.ini"), "RUN": str(run)}


def protocol(shell: str, line: str) -> dict[str, str]:
    """The variables Typer's completion script for `shell` sets (typer's
    _completion_shared.py): bash's COMP_WORDS and COMP_CWORD, the others' whole line."""
    if shell == "bash":
        words = line.split()
        cword = len(words) - (0 if line.endswith(" ") else 1)
        return {"_BRINGUP_COMPLETE": "complete_bash", "COMP_WORDS": line, "COMP_CWORD": str(cword)}
    if shell.startswith("fish"):
        action = "get-args" if shell == "fish-get" else "is-args"
        return {
            "_BRINGUP_COMPLETE": "complete_fish",
            "_TYPER_COMPLETE_FISH_ACTION": action,
            "_TYPER_COMPLETE_ARGS": line,
        }
    if shell in ("powershell", "pwsh"):
        word = "" if line.endswith(" ") else line.split()[-1]
        return {
            "_BRINGUP_COMPLETE": f"complete_{shell}",
            "_TYPER_COMPLETE_ARGS": line,
            "_TYPER_COMPLETE_WORD_TO_COMPLETE": word,
        }
    return {"_BRINGUP_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": line}


CLEAR = ("COMP_WORDS", "COMP_CWORD", "_TYPER_COMPLETE_ARGS", "_TYPER_COMPLETE_FISH_ACTION")


@functools.cache
def _the_group() -> typer.core.TyperGroup:
    return typer.main.get_command(app)  # what `app()` runs, built once for all the lines


def by_the_app(env: dict[str, str]) -> tuple[str, int]:
    """Typer's answer: the whole app, run as the shell runs it."""
    everything = {**dict.fromkeys(CLEAR), "_TYPER_COMPLETE_WORD_TO_COMPLETE": None, **env}
    with mock.patch("typer.testing._get_command", lambda _: _the_group()):
        result = CliRunner().invoke(app, [], prog_name="bringup", env=everything)
    return result.stdout, result.exit_code


def by_the_table(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> tuple[str, int] | None:
    """The quick answer, or None when it leaves the line to the app."""
    with monkeypatch.context() as patch:
        for name in (*CLEAR, "_TYPER_COMPLETE_WORD_TO_COMPLETE"):
            patch.delenv(name, raising=False)
        for name, value in env.items():
            patch.setenv(name, value)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = tab.answer("bringup")
    return None if code is None else (out.getvalue(), code)


@pytest.fixture(autouse=True)
def _fixed_width(monkeypatch: pytest.MonkeyPatch) -> None:
    # Typer's rich console reads TERMINAL_WIDTH once, at import: a test cannot set it.
    if os.environ.get("TERMINAL_WIDTH"):
        pytest.skip("TERMINAL_WIDTH is set: Typer fixed its width at import")
    monkeypatch.delenv("TERM", raising=False)


@pytest.mark.parametrize("shell", SHELLS)
def test_each_shell_gets_the_apps_answer_from_the_table(
    shell: str, places: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for line in LINES:
        typed = line.replace("HOSTS", places["HOSTS"]).replace("RUN", places["RUN"])
        # help shown (zsh, fish, PowerShell) is wrapped at the terminal's width: two widths
        for columns in ("80", "41") if shell in ("zsh", "fish-get", "pwsh") else ("80",):
            env = {**protocol(shell, typed), "COLUMNS": columns}
            quick = by_the_table(env, monkeypatch)
            if line in LEFT_TO_THE_APP:
                assert quick is None, line
                continue
            if quick is None:  # help rich restyles (provision's -e), on a shell showing help
                assert shell not in ("bash", "fish-is") and "provision" in line, line
                continue
            assert quick == by_the_app(env), (shell, line, columns)


def test_the_answers_are_the_values_a_user_expects(
    places: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not only equal to the app's: the values themselves (bash, one per line)."""

    def bash(line: str) -> list[str]:
        quick = by_the_table(protocol("bash", line), monkeypatch)
        assert quick is not None, line
        return quick[0].split()

    assert bash("bringup check --profile h") == ["h100", "h200"]
    assert bash(f"bringup check --nodes {places['HOSTS']} --limit node") == ["node01", "node02"]
    assert bash(f"bringup report {places['RUN']} --limit n") == ["node01", "node02"]
    assert bash("bringup report r --format html,j") == ["html,junit", "html,json"]
    assert bash("bringup check --json --j") == []  # given once: not offered again
    assert "check" in bash("bringup ")
    zsh = by_the_table({**protocol("zsh", "bringup check --pro"), "COLUMNS": "80"}, monkeypatch)
    assert zsh is not None and zsh[0].startswith('_arguments \'*: :(("--profile":"')


def test_the_table_is_what_the_app_declares() -> None:
    """tab_table.json is written from the app; a command or option added, renamed or given
    a completer without rewriting it fails here (python -m bringup.commands.tab_table)."""
    written = json.loads(tab_table.TABLE.read_text())
    assert written == tab_table.table(typer.main.get_command(app)), (
        "tab_table.json is stale: run .venv/bin/python -m bringup.commands.tab_table"
    )


def test_the_quick_wrap_is_richs_for_every_help_text() -> None:
    """zsh, fish and PowerShell show help through rich, wrapped at the terminal's width:
    tab.wrap gives rich's lines for each plain help text of the table at every width it
    models (a word wider than the line it leaves to the app)."""
    from rich.console import Console

    texts: set[str] = set()

    def collect(node: dict) -> None:
        if node["plain"] and node["help"]:
            texts.add(node["help"])
        for param in node["params"]:
            if param["option"] and param["plain"] and param["help"]:
                texts.add(param["help"])
        for sub in node.get("commands", []):
            collect(sub)

    collect(json.loads(tab_table.TABLE.read_text())["root"])
    assert len(texts) > 100
    compared = 0
    for text in sorted(texts):
        for form in (text, tab.zsh_escape(text)):
            for width in range(8, min(130, len(form) + 2), 2):
                try:
                    quick = tab.wrap(form, width)
                except tab.NotModelled:
                    continue
                shown = Console(width=width).render(form)
                assert quick == "".join(s.text for s in shown).rstrip("\n"), (form, width)
                compared += 1
    assert compared > 5_000


# The console script as installed: `bringup` with the shell's variables, in a child.
ENTRY = (
    "import atexit, sys; sys.argv[0] = 'bringup'; "
    "atexit.register(lambda: sys.stderr.write("
    "f\"loaded: {sorted({'typer', 'click', 'rich', 'pydantic'} & set(sys.modules))}\")); "
    "from bringup.cli import run; sys.exit(run())"
)
# The app's own answer, in a child too (the whole app, no quick path).
THE_APP = "import sys; sys.argv[0] = 'bringup'; from bringup.commands.app import whole; whole()()"


def _child(program: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    keep = {k: v for k, v in os.environ.items() if k not in (*CLEAR, "TERM", "COLUMNS")}
    return subprocess.run(
        [sys.executable, "-c", program],
        env={**keep, "PYTHONPATH": str(REPO), "COLUMNS": "100", **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish-get", "fish-is", "powershell"])
def test_the_console_script_answers_each_shell_without_the_app(shell: str) -> None:
    """The real protocol end to end: the variables in, the shell's format out, from the
    entry point with none of typer, click, rich or pydantic loaded, as the app says."""
    lines = {
        "bash": "bringup plan --method ",
        "zsh": "bringup check --pro",
        "fish-get": "bringup s",
    }
    for line in (lines.get(shell, "bringup report r --format h"),):
        env = protocol(shell, line)
        quick, slow = _child(ENTRY, env), _child(THE_APP, env)
        assert quick.stderr == "loaded: []", quick.stderr
        assert (quick.stdout, quick.returncode) == (slow.stdout, slow.returncode), (shell, line)
    assert _child(ENTRY, protocol("bash", "bringup check --pro")).stdout == "--profile\n"


def test_a_line_the_table_does_not_model_goes_to_the_app() -> None:
    """`bringup --version TAB`: the app's answer (its --version callback prints, click
    parses resiliently), from the entry point, with the app loaded."""
    env = protocol("bash", "bringup --version ")
    quick, slow = _child(ENTRY, env), _child(THE_APP, env)
    assert "typer" in quick.stderr
    assert (quick.stdout, quick.returncode) == (slow.stdout, slow.returncode)
