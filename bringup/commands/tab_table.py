"""The table a TAB answers from (bringup/commands/tab.py): every command, subcommand and
parameter of the app as the completion protocol needs them, read from the Typer app itself.

A TAB must not build the app (typer, click, rich and pydantic cost more than a TAB may:
benchmarks/completion.py), so the names live in `tab_table.json`, written from the app by

    .venv/bin/python -m bringup.commands.tab_table

and tests/unit/test_tab_completion.py fails when the file and the app differ. What the
quick answer does not model (a choice or file type, a counted option, an environment
variable, a completer outside commands/complete.py, help text that rich would restyle)
is marked, and a TAB that meets it is answered by the app itself: slower, never different.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

TABLE = Path(__file__).with_name("tab_table.json")
COMPLETERS = "bringup.commands.complete"
ROLES = {"ctx", "args", "incomplete"}  # what Typer hands a completer, by parameter name


def table(root: Any) -> dict[str, Any]:
    """The JSON document of tab_table.json for `root` (the click group of the whole app)."""
    from bringup.recognize import KIND_NAMES

    return {"root": _command(root, root), "kinds": list(KIND_NAMES)}


def _command(command: Any, root: Any) -> dict[str, Any]:
    import typer

    ctx = typer.Context(command)
    node: dict[str, Any] = {
        "help": command.get_short_help_str(),
        "plain": _plain(command.get_short_help_str()),
        "hidden": bool(command.hidden),
        "group": hasattr(command, "commands"),
        "params": [_param(p) for p in command.get_params(ctx)],
        "modelled": _settings_modelled(command, ctx),
    }
    if node["group"]:  # a list: the order is the one a TAB lists them in
        node["commands"] = [
            {"name": name, **_command(command.get_command(ctx, name), root)}
            for name in command.list_commands(ctx)
        ]
    return node


def _settings_modelled(command: Any, ctx: Any) -> bool:
    """Context settings the quick parser assumes: click's defaults, and no chained groups."""
    return (
        ctx.token_normalize_func is None
        and ctx.auto_envvar_prefix is None
        and not ctx.ignore_unknown_options
        and ctx.allow_interspersed_args == (not hasattr(command, "commands"))
        and not getattr(command, "chain", False)
        and ctx.default_map is None
    )


def _param(param: Any) -> dict[str, Any]:
    is_option = hasattr(param, "is_flag")
    completer, modelled = _completer(param)
    desc = param.type_descriptor
    modelled = (
        modelled
        and not (desc.is_choice and desc.choices is not None)
        and not desc.is_file
        and not param.envvar
        and (not is_option or all(o[:1] == "-" for o in [*param.opts, *param.secondary_opts]))
    )
    entry: dict[str, Any] = {
        "name": param.name,
        "option": is_option,
        "opts": list(param.opts),
        "secondary": list(param.secondary_opts),
        "nargs": param.nargs,
        "multiple": bool(param.multiple),
        "complete": completer,
    }
    if is_option:
        modelled = modelled and not param.count and param.nargs == 1
        entry |= {
            "flag": bool(param.is_flag),
            # what the parser stores for the flag: None reads as "not given" (click)
            "const": param._depr_flag_value if param.is_flag else None,
            "hidden": bool(param.hidden),
            "help": param.help,
            "plain": param.help is None or _plain(param.help),
        }
    else:
        modelled = modelled and param.nargs in (1, -1)
    entry["modelled"] = modelled
    return entry


def _completer(param: Any) -> tuple[str | None, bool]:
    """The name of the commands/complete.py function Typer calls for the parameter's value,
    and whether the quick answer can call it the same way."""
    custom = param._custom_shell_complete
    if custom is None:
        return None, True
    cells = [c.cell_contents for c in custom.__closure__ or ()]
    found = [inspect.unwrap(c) for c in cells if callable(c)]
    if len(found) != 1 or found[0].__module__ != COMPLETERS:
        return None, False
    function = found[0]
    roles = set(inspect.signature(function).parameters)
    return function.__name__, roles <= ROLES and "incomplete" in roles


def _plain(text: str) -> bool:
    """Whether rich, which Typer passes help through for zsh, fish and PowerShell, prints
    the text as it is (no markup, emoji code or tab; one cell per character) in each form
    those shells give it, so that only its line wrapping is left to do (tab.wrap)."""
    from rich.cells import cell_len
    from rich.console import Console

    from bringup.commands.tab import zsh_escape

    wide = Console(width=100_000)
    for form in (text, zsh_escape(text), re.sub(r"\s", " ", text)):
        try:
            shown = "".join(s.text for s in wide.render(form)).rstrip("\n")
        except Exception:  # rich's markup errors: not plain
            return False
        if shown != form.rstrip("\n") or cell_len(form) != len(form):
            return False
    return True


def render(root: Any) -> str:
    return json.dumps(table(root), indent=1) + "\n"


if __name__ == "__main__":
    from importlib import import_module

    import typer

    # The app is assembled in bringup.cli, above this layer: loaded by name, not imported.
    app = import_module("bringup.cli").app
    TABLE.write_text(render(typer.main.get_command(app)))
    print(f"wrote {TABLE}")
