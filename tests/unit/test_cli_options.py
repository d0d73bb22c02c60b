"""One option table for every command: no clash, docs/cli.md current, flags shown as flags,
shell completion on."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from typer.testing import CliRunner

from bringup.cli import app
from bringup.commands.options import clashes, markdown, table
from tests.support import REPO
from tests.support.cli import invoke

USES = table(typer.main.get_command(app))


def test_no_option_means_two_things() -> None:
    assert clashes(USES) == []


def test_the_table_covers_every_command_and_subcommand() -> None:
    commands = {u.command for u in USES}
    assert {"check", "nccl", "report", "profiles list", "sim nvml state", "bringup"} <= commands
    forks = {u.command for u in USES if u.long == "--forks"}
    assert forks == {"burnin", "check", "diagnose", "handover", "nccl", "provision", "snapshot"}
    assert {u.short for u in USES if u.long == "--forks"} == {"-f"}


def test_a_clash_is_found() -> None:
    """The checker itself: -f for two long options, --out a path here and a number there,
    a bool that takes true/false."""
    clashing = typer.Typer()

    @clashing.command()
    def one(
        forks: Annotated[int, typer.Option("--forks", "-f")] = 1,
        out: Annotated[str, typer.Option("--out")] = "",
    ) -> None: ...

    @clashing.command()
    def two(
        fmt: Annotated[str, typer.Option("--format", "-f")] = "",
        out: Annotated[int, typer.Option("--out")] = 0,
        forks: Annotated[int, typer.Option("--forks")] = 1,
    ) -> None: ...

    found = clashes(table(typer.main.get_command(clashing)))
    assert found == [
        "-f stands for --forks, --format",
        "--forks has more than one short (one: -f; two: None)",
        "--out has more than one value (one: str; two: int)",
    ]


def test_docs_cli_is_the_table_of_the_commands() -> None:
    """docs/cli.md is generated: `make docs-cli` rewrites it after an option changes."""
    assert (REPO / "docs" / "cli.md").read_text() == markdown(USES)


COMMANDS = sorted({u.command for u in USES} - {"bringup"})


@pytest.mark.parametrize("command", [[], *[c.split() for c in COMMANDS]], ids=str)
def test_help_shows_a_flag_as_a_flag(command: list[str]) -> None:
    result = invoke(*command, "--help")
    assert result.exit_code == 0, result.output
    assert "--help" in result.stdout
    assert "<bool>" not in result.stdout


def test_a_flag_takes_no_value() -> None:
    result = invoke("check", "--demo", "true")
    assert result.exit_code == 2
    assert "unexpected extra argument" in result.stderr


def test_show_completion_prints_the_bash_script(monkeypatch: pytest.MonkeyPatch) -> None:
    # The shell named, not detected: under make (a recipe's /bin/sh) detection finds `sh`,
    # which Typer does not complete for. Typer's own switch for tests takes the name given.
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    result = CliRunner().invoke(app, ["--show-completion", "bash"], prog_name="bringup")
    assert result.exit_code == 0, result.output
    assert "_BRINGUP_COMPLETE=complete_bash" in result.stdout
    assert "complete -o default -F _bringup_completion bringup" in result.stdout


@pytest.mark.parametrize(
    ("words", "expected"),
    [("bringup ch", "check"), ("bringup check --pro", "--profile"), ("bringup profiles l", "list")],
)
def test_completion_answers_the_shell(words: str, expected: str) -> None:
    env = {
        "_BRINGUP_COMPLETE": "complete_bash",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split()) - 1),
    }
    result = CliRunner().invoke(app, [], prog_name="bringup", env=env)
    assert result.stdout.split() == [expected]


def _commands(command: Any, path: str = "bringup") -> Iterator[tuple[str, Any]]:
    """Every registered command and subcommand (click's, as Typer builds them), by name."""
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, f"{path} {name}")


def test_every_command_that_judges_defaults_to_profile_auto() -> None:
    """--profile auto everywhere: each node judged by its own GPU's profile; a default of
    one model (b300) would judge every other GPU by the wrong figures, or drain it."""
    defaults = {
        name: param.default
        for name, command in _commands(typer.main.get_command(app))
        for param in command.params
        if "--profile" in getattr(param, "opts", [])
    }
    assert {"bringup check", "bringup handover", "bringup slurm healthcheck"} <= set(defaults)
    assert {"bringup slurm render", "bringup report", "bringup diagnose"} <= set(defaults)
    assert {name: d for name, d in defaults.items() if d != "auto"} == {}


def test_every_command_takes_quiet_and_json_with_one_meaning() -> None:
    """-q/--quiet and --json on every command (issue 27: handover, plan, verify and learn
    refused -q), each with the one help text of commands/common.py."""
    leaves = {
        name: command
        for name, command in _commands(typer.main.get_command(app))
        if not hasattr(command, "commands")
    }
    assert len(leaves) >= 19  # every command and subcommand, not an empty walk
    missing = {
        name: sorted({"-q", "--quiet", "--json"} - {o for p in c.params for o in p.opts})
        for name, c in leaves.items()
    }
    assert {name: m for name, m in missing.items() if m} == {}
    helps = {(u.long, u.short, u.help) for u in USES if u.long in ("--quiet", "--json")}
    assert len(helps) == 2, helps


def _complete(line: str, env: dict[str, str] | None = None) -> list[str]:
    """What bash gets on a TAB after `line` (a trailing space: a new word)."""
    words = line.split()
    cword = len(words) - (0 if line.endswith(" ") else 1)
    shell = {"_BRINGUP_COMPLETE": "complete_bash", "COMP_WORDS": line, "COMP_CWORD": str(cword)}
    result = CliRunner().invoke(app, [], prog_name="bringup", env={**shell, **(env or {})})
    return result.stdout.split()


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("bringup check --profile h", ["h100", "h200"]),
        (
            "bringup check --profile ",
            ["auto", "a100", "b200", "b300", "gb200", "gb300", "h100", "h200"],
        ),
        ("bringup check --suite ", ["acceptance", "fabric", "prolog", "quick"]),
        (
            "bringup slurm render --suite ",
            ["acceptance", "fabric", "prolog", "quick", "nccl", "burnin"],
        ),
        ("bringup burnin --recipe llama-", ["llama-1b-lora", "llama-70b-lora", "llama-8b-lora"]),
        ("bringup plan --model q", ["qwen-32b-lora"]),
        ("bringup plan --method ", ["full", "lora", "qlora"]),
        ("bringup plan --gpu b", ["b200", "b300"]),
        ("bringup report r --format j", ["junit", "json"]),
        ("bringup report r --format html,j", ["html,junit", "html,json"]),
        ("bringup handover --burnin ti", ["tiny"]),
        ("bringup inspect f --kind smi-q", ["smi-q-series", "smi-q"]),
    ],
)
def test_completion_gives_option_values(line: str, expected: list[str]) -> None:
    """Issue 27: TAB completed commands and options only, no values."""
    assert _complete(line) == expected


INVENTORY = """\
# racks
[gpu]
node01 ansible_host=10.0.0.1
node02 ansible_host=10.0.0.2 ansible_user=ubuntu

[head]
head01

[cluster:children]
gpu
head

[gpu:vars]
ansible_port=2222
"""


def test_completion_gives_the_inventorys_groups_and_hosts(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.ini"
    hosts.write_text(INVENTORY)
    everything = ["cluster", "gpu", "head", "head01", "node01", "node02"]
    assert _complete(f"bringup check --nodes {hosts} --limit ") == everything
    assert _complete(f"bringup check --nodes {hosts} --limit node") == ["node01", "node02"]
    assert _complete("bringup check --limit node") == []  # no inventory given: nothing


def test_the_quick_inventory_reader_reads_as_ansible(tmp_path: Path) -> None:
    """The plain-INI reader (no Ansible import on a TAB) names what Ansible names; what it
    cannot read plainly (a range, YAML) is Ansible's."""
    from bringup.commands.complete import _ansible_names, _ini_names, inventory_names

    hosts = tmp_path / "hosts.ini"
    hosts.write_text(INVENTORY)
    assert _ini_names(INVENTORY) == _ansible_names(hosts)
    ranged = tmp_path / "ranged.ini"
    ranged.write_text("[gpu]\nnode[01:03]\n")
    assert _ini_names(ranged.read_text()) is None
    assert inventory_names(ranged) == ["gpu", "node01", "node02", "node03"]
    yaml_inventory = tmp_path / "hosts.yaml"
    yaml_inventory.write_text("all:\n  children:\n    gpu:\n      hosts:\n        n1:\n")
    assert inventory_names(yaml_inventory) == ["gpu", "n1"]
    assert inventory_names(tmp_path / "missing.ini") == []


def test_completion_gives_a_runs_nodes(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text('{"nodes": ["gpu-b", "gpu-a", "head"]}')
    assert _complete(f"bringup report {run} --limit gpu") == ["gpu-a", "gpu-b"]
    assert _complete(f"bringup check --replay {run} --limit h") == ["head"]


def test_a_tab_left_to_the_app_assembles_only_the_command_on_its_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A TAB the quick answer leaves to the app (bringup/commands/tab.py) builds the app
    with that command alone (start-up is each TAB's cost: benchmarks/completion.py)."""
    from bringup.commands import app as assembly

    built: list[str | None] = []
    monkeypatch.setattr(assembly, "build", lambda only=None: built.append(only) or typer.Typer())
    monkeypatch.setattr("sys.argv", ["bringup"])
    for line, expected in (("bringup check --pro", "check"), ("bringup ch", None)):
        monkeypatch.setenv("_BRINGUP_COMPLETE", "complete_bash")
        monkeypatch.setenv("COMP_WORDS", line)
        with contextlib.suppress(BaseException):
            assembly.run()
        assert built[-1] == expected
