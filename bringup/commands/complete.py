"""Shell completion of option values: profiles, suites, recipes, models, methods, formats,
kinds, and the hosts and groups of the inventory given with --nodes.

Each function is a Typer `autocompletion` callback: the shell runs `bringup` again on every
TAB, so this module imports nothing at the top but the standard library and the data
folders' location, and reads names from file names (a shipped profile is
checks/profiles/NAME.yaml) rather than loading and validating the files. Only --limit
reads a file the user named (the inventory, through Ansible, as a run would), and only
when that TAB asks for it. A value that cannot be read completes to nothing: completion
never prints an error into the user's command line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bringup.data import data_dir

METHODS = ("full", "lora", "qlora")
FORMATS = ("html", "md", "junit", "json", "all")
AUTO = "auto"  # bringup.profile.AUTO, not imported: a TAB reads no profile


def _names(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.yaml"))


def _starting(names: list[str] | tuple[str, ...], incomplete: str) -> list[str]:
    return [n for n in names if n.startswith(incomplete)]


def profiles(incomplete: str) -> list[str]:
    """--profile: auto, then each shipped profile."""
    return _starting([AUTO, *_names(data_dir("checks") / "profiles")], incomplete)


def gpus(incomplete: str) -> list[str]:
    """plan --gpu: a shipped profile (the GPU's)."""
    return _starting(_names(data_dir("checks") / "profiles"), incomplete)


def suites(incomplete: str) -> list[str]:
    """--suite: each shipped suite."""
    return _starting(_names(data_dir("checks") / "suites"), incomplete)


def job_suites(incomplete: str) -> list[str]:
    """slurm render --suite: a shipped suite, or one of the jobs it writes besides."""
    return _starting([*_names(data_dir("checks") / "suites"), "nccl", "burnin"], incomplete)


def recipes(incomplete: str) -> list[str]:
    """--recipe, plan --model: each shipped recipe."""
    return _starting(_names(data_dir("burnin")), incomplete)


def methods(incomplete: str) -> list[str]:
    return _starting(METHODS, incomplete)


def formats(incomplete: str) -> list[str]:
    """report --format: one name, or the next after a comma (`html,ju` -> `html,junit`)."""
    done, _, last = incomplete.rpartition(",")
    prefix = f"{done}," if done else ""
    taken = set(done.split(",")) if done else set()
    return [prefix + f for f in FORMATS if f.startswith(last) and f not in taken]


def kinds(incomplete: str) -> list[str]:
    """inspect --kind: the tool outputs bringup recognises."""
    from bringup.recognize import KIND_NAMES

    return _starting(KIND_NAMES, incomplete)


def limit(ctx: Any, incomplete: str) -> list[str]:
    """--limit: the hosts and groups of the inventory given with --nodes before it, or the
    nodes a run records (report RUN_DIR, check --replay RUN_DIR)."""
    nodes_file = ctx.params.get("nodes_file")
    run = ctx.params.get("replay") or ctx.params.get("run_dir") or _run_among(_typed())
    if nodes_file is not None:
        names = inventory_names(Path(nodes_file))
    elif run is not None:
        names = recorded_names(Path(run))
    else:
        names = []
    return _starting(names, incomplete)


def _typed() -> list[str]:
    """The words of the command line being completed, as the shell hands them over (bash:
    COMP_WORDS; zsh, fish, PowerShell: Typer's _TYPER_COMPLETE_ARGS)."""
    import os
    import shlex

    line = os.environ.get("COMP_WORDS") or os.environ.get("_TYPER_COMPLETE_ARGS", "")
    try:
        return shlex.split(line)
    except ValueError:  # an open quote: the word being typed
        return line.split()


def _run_among(words: list[str]) -> Path | None:
    """The run directory among the words typed: click parses a command's arguments after
    its options, and the option being completed (`--limit` with no value yet) stops it."""
    for word in words:
        if not word.startswith("-") and (Path(word) / "manifest.json").is_file():
            return Path(word)
    return None


def recorded_names(run: Path) -> list[str]:
    """The nodes a run directory's manifest names; [] when it cannot be read."""
    import json

    from bringup.files import InputError, read_in

    try:
        nodes = json.loads(read_in(run, "manifest.json", "manifest")).get("nodes", [])
    except (InputError, OSError, ValueError, AttributeError, RecursionError):
        return []
    return sorted(n for n in nodes if isinstance(n, str)) if isinstance(nodes, list) else []


def inventory_names(path: Path) -> list[str]:
    """The groups (but `all` and `ungrouped`) and hosts of an Ansible inventory: read as
    plain INI when it is one (importing Ansible takes longer than a TAB may), else as
    Ansible reads it; [] when it cannot be read."""
    from bringup.files import InputError, read_text

    if path.is_dir():
        return _ansible_names(path)
    try:
        text = read_text(path, "inventory")  # a FIFO would hang the TAB: refused there
    except (InputError, OSError):
        return []
    simple = _ini_names(text)
    return simple if simple is not None else _ansible_names(path)


def _ini_names(text: str) -> list[str] | None:
    """Groups and hosts of an INI inventory of plain names; None for anything Ansible
    must read itself (YAML, host ranges `node[01:08]`, a script's output)."""
    groups: set[str] = set()
    hosts: set[str] = set()
    section = "ungrouped"
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            if not line.endswith("]"):
                return None
            name, _, kind = line[1:-1].partition(":")
            section = kind or "hosts"
            if kind in ("", "children"):
                groups.add(name)
            continue
        word = line.split()[0]
        if section == "vars":
            continue
        if (":" in word and section != "children") or any(c in word for c in "[]{}"):
            return None  # a YAML key, a range: Ansible's to read
        (groups if section == "children" else hosts).add(word)
    if not hosts:
        return None
    return [*sorted(groups - {"all", "ungrouped"}), *sorted(hosts)]


def _ansible_names(path: Path) -> list[str]:
    import contextlib
    import io

    # Ansible warns on stderr about a file it cannot parse: on a TAB that would land in
    # the middle of the user's command line.
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        from ansible.inventory.manager import InventoryManager
        from ansible.parsing.dataloader import DataLoader

        try:
            inventory = InventoryManager(loader=DataLoader(), sources=[str(path)])
        except Exception:  # Ansible's own errors, or its parsers' on a broken file
            return []
    groups = sorted(g for g in inventory.groups if g not in ("all", "ungrouped"))
    return [*groups, *sorted(h.name for h in inventory.get_hosts("all"))]
