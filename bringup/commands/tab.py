"""One TAB, answered without building the app.

The shell runs `bringup` again on every TAB, with `_BRINGUP_COMPLETE=complete_SHELL` and
the line in COMP_WORDS/COMP_CWORD (bash) or _TYPER_COMPLETE_ARGS (zsh, fish, PowerShell).
Building the Typer app to answer imports typer, click, rich and pydantic: most of a
second's CPU here, where the goal is 0.3 s (benchmarks/completion.py). This module
answers from tab_table.json (the app's commands and parameters, written from the app by
tab_table.py, kept equal by a test) and the value completers of complete.py, importing
nothing but the standard library.

It follows Typer's completion protocol step by step (typer/_completion_classes.py, and
click's shell_completion.py and parser.py as Typer vendors them): the same words read
from the same variables, the same parse of the line (resilient: an error stops it where
it is), the same choice of what completes the last word, the same output per shell. A
line it does not model (an option before the command, `--`, an unknown command, help text
rich would restyle or wrap across a word, a parameter the table marks) returns None and
the app answers as before: slower, never different. tests/unit/test_tab_completion.py
runs both on each shell's protocol and compares the bytes.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TABLE = Path(__file__).with_name("tab_table.json")
SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")


class NotModelled(Exception):
    """The line needs the app's own answer."""


@dataclass
class Item:
    value: str
    help: str | None = None
    plain: bool = True


@dataclass
class Parsed:
    """A command's context after the resilient parse: which parameters the line gave."""

    node: dict[str, Any]
    given: dict[str, Any] = field(default_factory=dict)


class Ctx:
    """What a completer of complete.py reads from Typer's context: the values typed."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params


def answer(program: str | None = None) -> int | None:
    """Answer the TAB the environment asks for: the exit status, or None when no TAB is
    asked for or the app must answer it. `program`: the name Typer would detect."""
    instruction = os.environ.get(complete_var(program or program_name()))
    if not instruction:
        return None
    kind, _, shell = instruction.partition("_")
    if kind != "complete" or shell not in SHELLS:
        return None  # `source_bash`, an unknown shell: Typer's own messages
    try:
        return _answer(shell)
    except (NotModelled, KeyError, ValueError):  # KeyError, ValueError: the variables
        return None


def program_name() -> str:
    """click's _detect_program_name: the script's name, or `python -m module`."""
    main = sys.modules["__main__"]
    path = sys.argv[0]
    package = getattr(main, "__package__", None)
    if package in (None, ""):
        return os.path.basename(path)
    name = os.path.splitext(os.path.basename(path))[0]
    module = package if name == "__main__" else f"{package}.{name}"
    return f"python -m {module.lstrip('.')}"


def complete_var(program: str) -> str:
    return f"_{program}_COMPLETE".replace("-", "_").upper()


def _answer(shell: str) -> int:
    table = json.loads(TABLE.read_text())
    args, incomplete = completion_args(shell)
    parsed = resolve(table["root"], args)
    items = completions(parsed, args, incomplete)
    if shell == "fish":
        action = os.environ.get("_TYPER_COMPLETE_FISH_ACTION", "")
        if action == "is-args":
            return 0 if items else 1  # values or files: the exit status alone
        shown = [_fish(i) for i in items]
        _echo("\n".join(shown) if action == "get-args" and shown else "")
    elif shell == "bash":
        _echo("\n".join(i.value for i in items))
    elif shell == "zsh":
        shown = [_zsh(i) for i in items]
        _echo(f"_arguments '*: :(({chr(10).join(shown)}))'" if shown else "_files")
    else:  # PowerShell
        _echo(
            "\n".join(f"{i.value}:::{_rendered(i.help, i.plain) if i.help else ' '}" for i in items)
        )
    return 0


def _echo(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


# --- the words: each shell's variables, as Typer's completion classes read them -----------


def split_arg_string(string: str) -> list[str]:
    """click's split_arg_string: shlex's words, an unclosed quote's word as it is."""
    import shlex

    lex = shlex.shlex(string, posix=True)
    lex.whitespace_split = True
    lex.commenters = ""
    out = []
    try:
        for token in lex:
            out.append(token)
    except ValueError:
        out.append(lex.token)
    return out


def completion_args(shell: str) -> tuple[list[str], str]:
    """The complete words after the program's name, and the word being completed."""
    if shell == "bash":
        words = split_arg_string(os.environ["COMP_WORDS"])
        cword = int(os.environ["COMP_CWORD"])
        try:
            return words[1:cword], words[cword]
        except IndexError:
            return words[1:cword], ""
    line = os.getenv("_TYPER_COMPLETE_ARGS", "")
    words = split_arg_string(line)
    if shell in ("zsh", "fish"):
        args = words[1:]
        if args and not line.endswith(" "):
            return args[:-1], args[-1]
        return args, ""
    incomplete = os.getenv("_TYPER_COMPLETE_WORD_TO_COMPLETE", "")  # PowerShell
    return (words[1:-1] if incomplete else words[1:]), incomplete


# --- the context: click's resilient parse of the line --------------------------------------


def resolve(root: dict[str, Any], args: list[str]) -> Parsed:
    """The (sub)command the words name, with the parameters they give it."""
    node = root
    rest = list(args)
    while True:
        _check(node)
        if not node["group"]:
            return Parsed(node, parse(node, rest))
        if any(a == "--" for a in rest) or (rest and rest[0][:1] == "-" and len(rest[0]) > 1):
            raise NotModelled  # a group's own option (--version prints): the app's to answer
        if not rest:
            return Parsed(node)
        sub = next((c for c in node["commands"] if c["name"] == rest[0]), None)
        if sub is None:
            raise NotModelled  # click's answer to an unknown command is the group's
        node, rest = sub, rest[1:]


def _check(node: dict[str, Any]) -> None:
    if not node["modelled"] or not all(p["modelled"] for p in node["params"]):
        raise NotModelled


class _Stop(Exception):
    """A click UsageError: resilient parsing keeps what it has and stops."""


def parse(node: dict[str, Any], args: list[str]) -> dict[str, Any]:
    """click's _OptionParser.parse_args on a command (interspersed arguments allowed):
    name -> value of each parameter the line gives."""
    if "--" in args:
        raise NotModelled
    longs: dict[str, tuple[dict[str, Any], Any]] = {}
    shorts: dict[str, tuple[dict[str, Any], Any]] = {}
    for param in node["params"]:
        if not param["option"]:
            continue
        for opts, const in ((param["opts"], param.get("const")), (param["secondary"], False)):
            for opt in opts:
                prefix, value = _split_opt(opt)
                target = shorts if len(prefix) == 1 and len(value) == 1 else longs
                target[opt] = (param, const)
    given: dict[str, Any] = {}
    rargs, largs = list(args), []

    def store(param: dict[str, Any], const: Any, value: Any) -> None:
        if param["flag"]:
            value = const
        if param["multiple"]:
            given.setdefault(param["name"], []).append(value)
        else:
            given[param["name"]] = value

    def take(opt: str) -> str:
        if not rargs:
            raise _Stop(f"{opt} requires an argument")
        return rargs.pop(0)

    def short(arg: str) -> None:
        for i, ch in enumerate(arg[1:], start=2):
            found = shorts.get(arg[0] + ch)
            if found is None:
                raise _Stop(f"no such option {arg[0] + ch}")
            param, const = found
            if param["flag"]:
                store(param, const, None)
                continue
            if i < len(arg):
                rargs.insert(0, arg[i:])
            store(param, const, take(arg[0] + ch))
            return

    try:
        while rargs:
            arg = rargs.pop(0)
            if arg[:1] != "-" or len(arg) == 1:
                largs.append(arg)
                continue
            opt, eq, explicit = arg.partition("=")
            found = longs.get(opt)
            if found is None:
                if arg[:2] == "--":
                    raise _Stop(f"no such option {opt}")
                short(arg)
                continue
            param, const = found
            if param["flag"]:
                if eq:
                    raise _Stop(f"{opt} does not take a value")
                store(param, const, None)
                continue
            if eq:
                rargs.insert(0, explicit)
            store(param, const, take(opt))
        positional = [p for p in node["params"] if not p["option"]]
        for param, value in zip(
            positional, _unpack(largs, [p["nargs"] for p in positional]), strict=True
        ):
            if value not in (None, ()):
                given[param["name"]] = value
    except _Stop:
        pass
    # a flag whose stored value is None reads as not given (click's consume_value)
    return {name: value for name, value in given.items() if value is not None}


def _split_opt(opt: str) -> tuple[str, str]:
    first = opt[:1]
    if first.isalnum():
        return "", opt
    if opt[1:2] == first:
        return opt[:2], opt[2:]
    return first, opt[1:]


def _unpack(args: list[str], nargs: list[int]) -> list[Any]:
    """click's _unpack_args: each argument's value, the one of nargs -1 taking what the
    others leave (from the front before it, from the back after it)."""
    pending, specs = list(args), list(nargs)
    values: list[Any] = []
    star: int | None = None

    def fetch(items: list[Any]) -> Any:
        if not items:
            return None
        return items.pop(0) if star is None else items.pop()

    while specs:
        spec = fetch(specs)
        if spec == 1:
            values.append(fetch(pending))
        else:  # -1: the table marks any other count
            star = len(values)
            values.append(None)
    if star is not None:
        values[star] = tuple(pending)
        values[star + 1 :] = reversed(values[star + 1 :])
    return values


# --- what completes the word: click's _resolve_incomplete and shell_complete ---------------


def completions(parsed: Parsed, args: list[str], incomplete: str) -> list[Item]:
    args = list(args)
    if incomplete == "=":
        incomplete = ""
    elif "=" in incomplete and incomplete[:1] == "-":
        name, _, incomplete = incomplete.partition("=")
        args.append(name)
    params = parsed.node["params"]
    if "--" in args or incomplete[:1] != "-":
        for param in params:
            # click's _is_incomplete_option: the last word is this option's name
            if param["option"] and not param["flag"] and args and args[-1] in param["opts"]:
                return _values(param, parsed, incomplete)
        for param in params:
            if not param["option"] and (param["nargs"] == -1 or param["name"] not in parsed.given):
                return _values(param, parsed, incomplete)
    return _names(parsed, incomplete)


def _values(param: dict[str, Any], parsed: Parsed, incomplete: str) -> list[Item]:
    if param["complete"] is None:
        return []
    from bringup.commands import complete

    function = getattr(complete, param["complete"])
    roles = {"ctx": Ctx(dict(parsed.given)), "args": [], "incomplete": incomplete}
    wanted = function.__code__.co_varnames[: function.__code__.co_argcount]
    items = []
    for found in function(**{name: roles[name] for name in wanted}):
        item = Item(found[0], found[1]) if isinstance(found, tuple) else Item(found)
        if item.value.startswith(incomplete):
            items.append(item)
    return items


def _names(parsed: Parsed, incomplete: str) -> list[Item]:
    node = parsed.node
    items = []
    if node["group"]:
        for sub in node["commands"]:  # in the app's order
            if sub["name"].startswith(incomplete) and not sub["hidden"]:
                items.append(Item(sub["name"], sub["help"], sub["plain"]))
    if incomplete and not incomplete[0].isalnum():
        for param in node["params"]:
            if not param["option"] or param["hidden"]:
                continue
            if not param["multiple"] and param["name"] in parsed.given:
                continue
            for name in [*param["opts"], *param["secondary"]]:
                if name.startswith(incomplete):
                    items.append(Item(name, param["help"], param["plain"]))
    return items


# --- the shells' formats (typer/_completion_classes.py) ------------------------------------


def zsh_escape(text: str) -> str:
    return (
        text.replace('"', '""')
        .replace("'", "''")
        .replace("$", "\\$")
        .replace("`", "\\`")
        .replace(":", r"\\:")
    )


def _zsh(item: Item) -> str:
    if item.help:
        return f'"{zsh_escape(item.value)}":"{_rendered(zsh_escape(item.help), item.plain)}"'
    return f'"{zsh_escape(item.value)}"'


_WHITESPACE = re.compile(r"\s")


def _fish(item: Item) -> str:
    if item.help:
        return f"{item.value}\t{_rendered(_WHITESPACE.sub(' ', item.help), item.plain)}"
    return item.value


def _rendered(text: str, plain: bool) -> str:
    """The help as Typer prints it through rich (rich_utils.rich_render_text): for plain
    text (tab_table._plain), wrapped at the console's width."""
    width = console_width()
    if not plain or width is None:
        raise NotModelled
    return wrap(text, width)


def console_width() -> int | None:
    """The width of Typer's rich console: TERMINAL_WIDTH (Typer's), else COLUMNS, else the
    terminal's (stdin, stdout, stderr), else 80; None where rich does more (a dumb
    terminal) or would refuse the value."""
    env = os.environ
    fixed = env.get("TERMINAL_WIDTH")
    if fixed:
        return int(fixed) if fixed.isdigit() and int(fixed) > 0 else None
    if env.get("TERM", "").lower() in ("dumb", "unknown"):
        return None
    columns = env.get("COLUMNS")
    if columns is not None and columns.isdigit():
        return int(columns) or None
    width = 0
    for fd in (0, 1, 2):
        try:
            width = os.get_terminal_size(fd).columns
        except (AttributeError, ValueError, OSError):
            continue
        break
    return width or 80


_WORD = re.compile(r"\s*\S+\s*")
_TRAILING_SPACE = re.compile(r"\s+$")


def wrap(text: str, width: int) -> str:
    """rich's Text.wrap of one-cell characters (rich/_wrap.py divide_line, then each line's
    rstrip_end and truncate); a word wider than the line (rich folds it) is not modelled."""
    lines = []
    for line in text.split("\n"):
        breaks, offset = [], 0
        for match in _WORD.finditer(line):
            word = match.group(0)
            length = len(word.rstrip())
            if width - offset >= length:
                offset += len(word)
            elif length > width:
                raise NotModelled
            elif offset and match.start():
                breaks.append(match.start())
                offset = len(word)
        for start, end in zip([0, *breaks], [*breaks, len(line)], strict=True):
            piece = line[start:end]
            if len(piece) > width:
                space = _TRAILING_SPACE.search(piece)
                if space is not None:
                    piece = piece[: len(piece) - min(len(space.group(0)), len(piece) - width)]
            lines.append(piece[:width])
    return "\n".join(lines).rstrip("\n")
