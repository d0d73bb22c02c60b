"""The option table: every option of every command, and where two uses disagree.

Each long option means one thing in every command, and each short option stands for one
long option everywhere (or does not exist): `-f` is --forks wherever it is accepted. The
table is read from the commands themselves (their click parameters), so it cannot drift
from them; docs/cli.md is `markdown(table(app))`, and a test fails on any clash.

    rows = table(typer.main.get_command(app))
    assert clashes(rows) == []
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, get_args, get_origin


@dataclass(frozen=True)
class Use:
    """One option of one command."""

    command: str  # "check", "profiles list"
    long: str  # "--forks"
    short: str | None  # "-f"
    takes: str  # "flag", "int", "path", "str", ...
    help: str


def table(root: Any) -> list[Use]:
    """Every option of every command and subcommand under `root` (a click group)."""
    uses: list[Use] = []
    _walk(root, "", uses)
    return uses


def _walk(command: Any, path: str, uses: list[Use]) -> None:
    for param in command.params:
        if not hasattr(param, "is_flag"):
            continue  # an argument: positional, no option name
        longs = [o for o in param.opts if o.startswith("--")]
        shorts = [o for o in param.opts if not o.startswith("--")]
        for long in longs:
            short = shorts[0] if shorts else None
            uses.append(Use(path or "bringup", long, short, _takes(param), param.help or ""))
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        _walk(sub, f"{path} {name}".strip(), uses)


def _takes(param: Any) -> str:
    """What the option takes: `flag`, or the type of one value (a repeatable option's too)."""
    if param.is_flag:
        return "flag"
    annotation = param.type_descriptor.annotation
    if get_origin(annotation) is list:
        (annotation,) = get_args(annotation)
    name = getattr(annotation, "__name__", str(annotation))
    return {"Path": "path", "bool": "bool"}.get(name, name)


def clashes(uses: list[Use]) -> list[str]:
    """What breaks "one option, one meaning": each a sentence naming the commands."""
    found: list[str] = []
    by_short: dict[str, set[str]] = {}
    for use in uses:
        if use.short:
            by_short.setdefault(use.short, set()).add(use.long)
    for short, longs in sorted(by_short.items()):
        if len(longs) > 1:
            found.append(f"{short} stands for {', '.join(sorted(longs))}")
    for long, group in _by_long(uses).items():
        for what, values in (("short", {u.short for u in group}), ("value", _kinds(group))):
            if len(values) > 1:
                where = "; ".join(
                    f"{u.command}: {u.short if what == 'short' else u.takes}" for u in group
                )
                found.append(f"{long} has more than one {what} ({where})")
        for use in group:
            if use.takes == "bool":
                found.append(f"{long} in {use.command} takes true/false: make it a flag")
    return found


def _kinds(group: list[Use]) -> set[str]:
    return {u.takes for u in group}


def _by_long(uses: list[Use]) -> dict[str, list[Use]]:
    grouped: dict[str, list[Use]] = {}
    for use in uses:
        grouped.setdefault(use.long, []).append(use)
    return dict(sorted(grouped.items()))


HEADER = """# The command line: one table of options

Generated from the commands themselves (`make docs-cli`); a test fails when this page and
the commands disagree, or when two commands give one option two meanings. Each long option
means one thing in every command that has it, and each short option stands for one long
option everywhere. Flags take no value (`--demo`, not `--demo true`).

Conventions every command keeps:

- `--nodes FILE` / `--local` choose where to run; `--limit PATTERN` (an Ansible host
  pattern: `gpu*`, `a,b`, `all:!bad`, `~regex`) keeps some of those nodes, and works as
  well on recorded nodes: `check --replay`, `check --demo`, `report`.
- `--profile NAME|PATH|auto` (default `auto`): each node is judged by the profile of its
  own GPU model; a node whose GPU no profile knows is one ERROR naming the model and the
  profiles there are (docs/profiles.md).
- Every command takes `--json` and `-q/--quiet`. `--json` prints one JSON document and
  nothing else: stderr stays empty but for the progress line on a terminal (and a
  refusal's one `error:` line). `--quiet` prints one line: the verdict of a command that
  judges (`ACCEPTED: ...` or `NOT ACCEPTED: ...`), else what it made (the file written,
  the bundle's verdict, `profiles list`'s names); a command whose output is the product
  (`slurm render`'s script, `sim nvml state`'s state) prints just that either way.
- Shell completion: `bringup --install-completion` (bash, zsh, fish, PowerShell), or
  `bringup --show-completion bash` to see the script. TAB completes commands, options and
  their values: profiles, suites, recipes (`--model` too), methods, formats, `inspect
  --kind`, and `--limit`'s hosts and groups from the inventory given with `--nodes`
  (or the nodes a run records, for `report RUN --limit` and `check --replay`). A TAB is
  answered without building the app (`bringup/commands/tab.py`, from the table
  `tab_table.json` written from the app), the same answer as Typer's in each shell.

| option | short | takes | commands | meaning |
|---|---|---|---|---|
"""


@dataclass(frozen=True)
class Example:
    """A command line docs/cli.md shows, which a test runs as written (in one directory,
    in this order: later ones read what earlier ones wrote) on the demo fleet and the data
    bringup ships; `exit` is the status it ends with, `says` why."""

    line: str
    exit: int
    says: str


EXAMPLES = (
    Example("bringup check --demo --out demo", 1, "the demo fleet has faults: NOT ACCEPTED"),
    Example("bringup check --demo --out demo-again -q", 1, "the verdict line alone"),
    Example("bringup report demo --format html,junit", 1, "the report follows the verdict"),
    Example("bringup report demo-again --baseline demo -q", 1, "compared with the first"),
    Example("bringup learn demo --out golden.yaml -q", 0, "the fleet's majority, one line"),
    Example("bringup check --replay demo --golden golden.yaml -q", 1, "judged again, by it"),
    Example("bringup handover --demo --out bundle -q", 1, "a bundle of the demo: never accepted"),
    Example("bringup verify bundle -q", 0, "every file as the manifest records it"),
    Example("bringup inspect demo -q", 1, "a fault found in recorded facts"),
    Example("bringup exporter --run demo --textfile bringup.prom", 0, "node_exporter's file"),
    Example("bringup plan --model llama-8b-lora --method lora --gpu b300 -q", 0, "it fits"),
    Example(
        "bringup plan --model llama-8b-lora --method lora --gpu h100 -q",
        1,
        "it does not fit at micro-batch 2 (the full plan lists what would)",
    ),
    Example("bringup profiles list -q", 0, "the names, for a script"),
    Example("bringup profiles show b300 --json", 0, "every threshold, as JSON"),
    Example("bringup slurm render --suite quick", 0, "an sbatch script"),
)


def examples_markdown() -> str:
    """The examples section of docs/cli.md: each line, its exit status and why."""
    lines = [f"{e.line}  # exit {e.exit}: {e.says}" for e in EXAMPLES]
    return EXAMPLES_HEADER + "\n".join(lines) + "\n```\n"


EXAMPLES_HEADER = """
## Examples

Run in one directory, in this order (a test runs each as written and checks its exit
status; `-q` prints one line, `--json` one document and nothing on stderr):

```sh
"""


def markdown(uses: list[Use]) -> str:
    """docs/cli.md: the conventions, one row per long option, then the examples."""
    rows = []
    for long, group in _by_long(uses).items():
        short = next((u.short for u in group if u.short), "")
        takes = "/".join(sorted(_kinds(group)))
        commands = ", ".join(dict.fromkeys(u.command for u in group))
        meaning = " / ".join(dict.fromkeys(_cell(u.help) for u in group if u.help))
        rows.append(
            f"| `{long}` | {f'`{short}`' if short else ''} | {takes} | {commands} | {meaning} |"
        )
    return HEADER + "\n".join(rows) + "\n" + examples_markdown()


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


if __name__ == "__main__":  # `make docs-cli`: python -m bringup.commands.options docs/cli.md
    import sys
    from importlib import import_module
    from pathlib import Path

    import typer

    # The app is assembled in bringup.cli, above this layer: loaded by name, not imported.
    app = import_module("bringup.cli").app
    Path(sys.argv[1]).write_text(markdown(table(typer.main.get_command(app))))
