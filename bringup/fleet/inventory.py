"""The inventory: which nodes a run reaches and how, read by Ansible's own parser.

`load("hosts.ini")` accepts whatever `ansible-inventory -i` accepts (INI, YAML, a
directory of them, group_vars/ and host_vars/ beside it), selects hosts with Ansible's
`--limit` patterns, and returns one `Host` per node with its connection settings:

    ansible_host, ansible_port, ansible_user, ansible_ssh_private_key_file,
    ansible_ssh_common_args / ansible_ssh_extra_args (ProxyJump, UserKnownHostsFile, ...),
    ansible_password (kept out of repr and logs), ansible_python_interpreter

and every other variable in `Host.vars` (the `bringup_*` ones override profile values and
probe parameters per node: see bringup/fleet/run.py).
"""

from __future__ import annotations

import functools
import os
import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bringup.files import MAX_BYTES


class InventoryError(Exception):
    """The inventory could not be read or selected nothing; one line, naming file and line."""


@dataclass
class Host:
    """One node of the inventory and how to reach it over SSH."""

    name: str
    address: str
    port: int = 22
    user: str | None = None
    key_file: str | None = None
    proxy_jump: str | None = None
    ssh_args: list[str] = field(default_factory=list)
    vars: dict[str, object] = field(default_factory=dict)
    # ansible_password: for password authentication; never printed (repr=False).
    password: str | None = field(default=None, repr=False)
    python: str = "python3"  # ansible_python_interpreter when set to a path

    def ssh_option(self, name: str) -> str | None:
        """The value of `-o Name=value` (or `-o Name value`) in the host's ssh args."""
        return ssh_options(self.ssh_args).get(name.lower())


# Variables whose values are secrets: never copied into Host.vars (which may be logged).
SECRET_VARS = frozenset(
    {"ansible_password", "ansible_ssh_pass", "ansible_become_password", "ansible_become_pass"}
)


def load(path: Path, limit: str | None = None) -> list[Host]:
    """Every host of the inventory at `path` (selected by an Ansible `limit` pattern)."""
    if not path.exists():
        raise InventoryError(f"{path}: no such inventory file or directory")
    # Ansible reads the file itself: what it would wait on (a FIFO) or read without end
    # (a device) is refused here, as bringup/files.py refuses it for every other file.
    if not (path.is_dir() or path.is_file()):
        raise InventoryError(f"{path}: not a regular file or directory, not an inventory")
    if path.is_file() and path.stat().st_size > MAX_BYTES:
        raise InventoryError(f"{path}: over the {MAX_BYTES >> 20} MiB cap")
    # Imported here: Ansible takes a third of a second to import, and only fleet runs need it.
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    with _collect_failures() as failures, _parse_quickly():
        try:
            inventory = InventoryManager(loader=loader, sources=[str(path)])
        except AnsibleError as exc:
            raise InventoryError(f"{path}: {_one_line(exc.message)}") from None
        if failures:
            raise InventoryError(_describe_failure(path, failures))
        try:
            if limit is not None:
                _check_limit(inventory, limit, path)
                inventory.subset(limit)
            selected = in_file_order(inventory.get_hosts("all"), inventory.hosts)
        except AnsibleError as exc:
            raise InventoryError(f"--limit {limit!r}: {_one_line(exc.message)}") from None
    if not selected:
        where = f"--limit {limit!r} matched no host of {path}" if limit else f"{path}: no hosts"
        raise InventoryError(where)
    variables = VariableManager(loader=loader, inventory=inventory)
    templates = Templates(loader)
    hosts = []
    for entry, values in zip(selected, host_variables(variables, selected), strict=True):
        values = {k: v for k, v in values.items() if k not in MAGIC_VARS}
        hosts.append(_host(entry.name, _plain(templates.render(values, entry.name))))
    return hosts


def in_file_order(selected: list[Any], known: dict[str, Any]) -> list[Any]:
    """The selected hosts in the order the inventory names them, each at its first
    appearance (Ansible's own map of hosts, filled as it parses the sources in order).
    `get_hosts("all")` walks the groups through sets: with groups of groups (racks in
    pods) its order changes from one process to the next, and a run's nodes, its
    console and its files would with it."""
    place = {name: number for number, name in enumerate(known)}
    return sorted(selected, key=lambda host: place.get(host.name, len(place)))


# --- each host's variables: Ansible's precedence, what hosts share worked out once --------
#
# VariableManager.get_vars(host=h) redoes, for every host, the work its groups share: it
# merges the vars of `all` and of each group, runs the vars plugins (group_vars/ files) on
# them, and cleans an empty fact cache through every connection plugin's name. On a
# thousand hosts in a handful of racks that is the bulk of reading the inventory. Below is
# the same merge in the same order, with the group part computed once per set of groups;
# tests/unit/test_inventory_vars.py pins it to get_vars on a generated inventory.

# The group precedence entries below implement (Ansible's default order, any order of
# them); a configuration naming another entry takes Ansible's own path.
GROUP_ENTRIES = frozenset(
    {
        "all_inventory",
        "groups_inventory",
        "all_plugins_inventory",
        "all_plugins_play",
        "groups_plugins_inventory",
        "groups_plugins_play",
    }
)


def host_variables(manager: Any, hosts: list[Any]) -> list[dict[str, Any]]:
    """What `manager.get_vars(host=h, include_hostvars=False)` returns for each host (no
    play, no task), the part that depends only on a host's groups computed once per set."""
    from ansible import constants as C
    from ansible.inventory.helpers import get_group_vars, sort_groups
    from ansible.utils.vars import combine_vars
    from ansible.vars.clean import namespace_facts
    from ansible.vars.plugins import get_vars_from_inventory_sources, get_vars_from_path
    from ansible.vars.reserved import warn_if_reserved

    if not set(C.VARIABLE_PRECEDENCE) <= GROUP_ENTRIES:
        return [manager.get_vars(host=h, include_hostvars=False) for h in hosts]
    loader, inventory = manager._loader, manager._inventory
    basedirs = [loader.get_basedir()] if manager.safe_basedir else []
    # Without a play or task the magic variables name no host (hostvars is left out).
    magic = manager._get_magic_variables(play=None, host=None, task=None, include_hostvars=False)
    stage = "task"  # get_vars' default

    def combine(data: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        return data if new == {} else combine_vars(data, new)

    def from_inventory(entities: list[Any]) -> dict[str, Any]:
        return get_vars_from_inventory_sources(loader, inventory._sources, entities, stage)

    def from_play(entities: list[Any]) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for path in basedirs:
            data = combine(data, get_vars_from_path(loader, path, entities, stage))
        return data

    may_have_file = host_vars_files(inventory._sources, basedirs)
    all_group = inventory.groups.get("all")
    by_groups: dict[tuple[str, ...], dict[str, Any]] = {}

    def group_part(groups: list[Any]) -> dict[str, Any]:
        entries = {
            "all_inventory": lambda: all_group.get_vars(),
            "groups_inventory": lambda: get_group_vars(groups),
            "all_plugins_inventory": lambda: from_inventory([all_group]),
            "all_plugins_play": lambda: from_play([all_group]),
            "groups_plugins_inventory": lambda: from_inventory(groups),
            "groups_plugins_play": lambda: from_play(groups),
        }
        data: dict[str, Any] = {}
        for entry in C.VARIABLE_PRECEDENCE:
            data = combine(data, entries[entry]())
        return data

    results = []
    for host in hosts:
        try:
            facts = manager._fact_cache.get(host.name)
        except KeyError:
            facts = {}
        if facts:  # a fact cache that holds this host: Ansible cleans and injects them
            results.append(manager.get_vars(host=host, include_hostvars=False))
            continue
        groups = sort_groups([g for g in host.get_groups() if g.name != "all"])
        key = tuple(g.name for g in groups)
        if key not in by_groups:
            by_groups[key] = group_part(groups)
        data = combine(by_groups[key], host.get_vars())
        if may_have_file(host.name):
            data = combine(data, from_inventory([host]))
            data = combine(data, from_play([host]))
        data = data | namespace_facts({})
        if not C.INJECT_FACTS_AS_VARS:
            data = combine(data, {"ansible_local": {}})
        data = combine(data, manager._vars_cache.get(host.get_name(), {}))
        data = combine(data, manager._nonpersistent_fact_cache.get(host.name, {}))
        data = combine(data, manager._extra_vars)
        warn_if_reserved(data)
        results.append(combine(data, magic))
    return results


def host_vars_files(sources: list[str | None], basedirs: list[str]) -> Callable[[str], bool]:
    """Whether Ansible's vars plugins might find a host's own file: False only where they
    are certain to give it nothing (so skipping them changes no value).

    Asking them per host is most of reading a large inventory: the default plugin,
    host_group_vars, looks for `host_vars/<name>`, `.yml`, `.yaml` and `.json` in each
    folder, four path look-ups through Ansible's path helpers a host, although a site has
    host_vars files for a few of its hosts, or none. Here each folder is listed once and a
    host is asked about only when an entry could be its file (compared case-insensitively,
    for file systems that are). Anything else (a vars plugin besides host_group_vars, a
    host_vars that is not a folder or cannot be listed, a name with a path separator) is
    asked about for every host, as Ansible does."""
    import unicodedata

    from ansible import constants as C
    from ansible.plugins.vars import host_group_vars
    from ansible.utils.path import basedir

    def always(name: str) -> bool:
        return True

    plugins = _vars_plugins()
    if plugins is None or any(type(p) is not host_group_vars.VarsModule for p in plugins):
        return always

    def key(text: str) -> str:
        if text.isascii():  # most names: NFC leaves ASCII as it is, casefold is lower
            return text.lower()
        return unicodedata.normalize("NFC", text).casefold()

    # The folders host_group_vars reads: each inventory source's and the play's, by the real
    # path it keeps per process (CANONICAL_PATHS), as get_vars_from_inventory_sources and
    # VarsModule.get_vars work them out.
    folders = []
    for path in sources:
        if path is None or ("," in path and not os.path.exists(path)):
            continue  # a host list, not a path
        folders.append(path if os.path.isdir(path) else os.path.dirname(path))
    entries: set[str] = set()
    for path in [*folders, *basedirs]:
        if path not in host_group_vars.CANONICAL_PATHS:
            host_group_vars.CANONICAL_PATHS[path] = os.path.realpath(basedir(path))
        folder = os.path.join(host_group_vars.CANONICAL_PATHS[path], "host_vars")
        if not os.path.lexists(folder):
            continue
        if not os.path.isdir(folder):
            return always  # Ansible warns about it
        try:
            entries.update(key(entry) for entry in os.listdir(folder))
        except OSError:
            return always  # Ansible says why
    suffixes = [""]
    for ext in C.YAML_FILENAME_EXTENSIONS:  # as DataLoader.find_vars_files adds them
        suffixes.append(ext if "." in ext else f".{ext}" if ext else "")

    def may_have_file(name: str) -> bool:
        if os.sep in name or (os.altsep and os.altsep in name) or name in ("", ".", ".."):
            return True
        return any(key(name + suffix) in entries for suffix in suffixes)

    return may_have_file


def _vars_plugins() -> list[Any] | None:
    """The vars plugins Ansible asks for each host or group, as
    `ansible.vars.plugins.get_vars_from_path` finds them; None where this ansible-core
    keeps them otherwise (then nothing is skipped)."""
    from ansible.plugins.loader import vars_loader
    from ansible.vars import plugins

    prime = getattr(plugins, "_prime_vars_loader", None)
    if prime is None or getattr(vars_loader, "_plugin_instance_cache", None) is None:
        return None
    if vars_loader._paths is None:  # the cache has been reset: get_vars_from_path primes it
        prime()
    found = [vars_loader.get(name) for name in vars_loader._plugin_instance_cache]
    return [plugin for plugin in found if plugin is not None]  # None: skipped there too


def _check_limit(inventory: Any, limit: str, path: Path | str) -> None:
    """Refuse a --limit Ansible would quietly widen: a pattern that matches nothing is
    dropped with a warning (`a,typo` runs on `a`, `!typo` excludes nothing), and one with
    no pattern left (`,`) or a mangled one (`~[` becomes `~`, a regex matching every
    host) selects the whole inventory."""
    from ansible.inventory.manager import split_host_pattern

    patterns = split_host_pattern(limit)
    if not patterns:
        raise InventoryError(f"--limit {limit!r}: no host pattern in it")
    # Ansible's splitter drops what it cannot read (a lone `[`): compare what is left.
    if _pattern_chars(limit) != _pattern_chars("".join(patterns)):
        read_as = ",".join(patterns)
        raise InventoryError(
            f"--limit {limit!r}: not a valid host pattern (Ansible reads {read_as!r})"
        )
    for pattern in patterns:
        bare = pattern.lstrip("!&")
        if bare in ("", "~"):
            raise InventoryError(f"--limit {limit!r}: {pattern!r} is not a host pattern")
        if pattern.startswith("@"):
            continue  # a file of patterns: Ansible reads it
        warnings: list[str] = []
        with _warnings_to(warnings):
            matched = inventory.list_hosts(bare)
        if not matched:
            said = next((w for w in warnings if "host pattern" in w), None)
            said = _one_line(said or f"Could not match supplied host pattern, ignoring: {bare}")
            raise InventoryError(
                f"--limit {limit!r}: no host of {path} matches {bare!r} (Ansible: {said})"
            )


def _pattern_chars(text: str) -> str:
    return "".join(c for c in text if not c.isspace() and c not in ",:")


@contextmanager
def _warnings_to(warnings: list[str]) -> Iterator[None]:
    """Ansible's warnings (its Display) into a list while the block runs."""
    from ansible.inventory import manager

    display = manager.display
    saved = display.warning
    display.warning = lambda msg, *args, **kwargs: warnings.append(str(msg))  # type: ignore[method-assign]
    try:
        yield
    finally:
        display.warning = saved  # type: ignore[method-assign]


# Ansible's magic variables that say nothing about the node (`groups` alone would make
# every Host carry the whole inventory).
MAGIC_VARS = frozenset(
    {
        "groups",
        "ansible_facts",
        "playbook_dir",
        "ansible_playbook_python",
        "ansible_config_file",
        "ansible_version",
        "omit",
    }
)


def _host(name: str, values: dict[str, Any]) -> Host:
    args = [*_words(str(values.get("ansible_ssh_common_args") or ""))]
    args += _words(str(values.get("ansible_ssh_extra_args") or ""))
    options = ssh_options(args)
    port = values.get("ansible_port") or values.get("ansible_ssh_port")
    if port is None and "port" in options:
        port = options["port"]
    try:
        port_number = int(port) if port is not None else 22
    except ValueError:
        raise InventoryError(f"host {name}: ansible_port {port!r} is not a number") from None
    python = str(values.get("ansible_python_interpreter") or "python3")
    password = values.get("ansible_password") or values.get("ansible_ssh_pass")
    return Host(
        name=name,
        address=str(values.get("ansible_host") or values.get("ansible_ssh_host") or name),
        port=port_number,
        user=_str_or_none(values.get("ansible_user") or values.get("ansible_ssh_user")),
        key_file=_str_or_none(values.get("ansible_ssh_private_key_file")),
        proxy_jump=options.get("proxyjump") or _jump_flag(args),
        ssh_args=args,
        vars={k: v for k, v in values.items() if k not in SECRET_VARS},
        password=_str_or_none(password),
        # Ansible's "auto" discovery is not ours: a bare node is asked for python3.
        python="python3" if python.startswith("auto") else python,
    )


@functools.lru_cache(maxsize=256)
def _words(text: str) -> tuple[str, ...]:
    """shlex.split, once per text: group vars give thousands of hosts the same ssh args
    (splitting them again for each host was a sixth of reading a 10,000-host inventory)."""
    return tuple(shlex.split(text))


def ssh_options(args: list[str]) -> dict[str, str]:
    """`-o Key=Value` and `-o Key Value` options of an ssh command line, keys lowercased."""
    options: dict[str, str] = {}
    items = iter(args)
    for arg in items:
        if arg == "-o":
            text = next(items, "")
        elif arg.startswith("-o"):
            text = arg[2:]
        else:
            continue
        key, _, value = text.replace("=", " ", 1).partition(" ")
        options.setdefault(key.strip().lower(), value.strip())  # ssh: first value wins
    return options


def _jump_flag(args: list[str]) -> str | None:
    """The destination of ssh's `-J host` flag, if any."""
    for i, arg in enumerate(args):
        if arg == "-J" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("-J") and len(arg) > 2:
            return arg[2:]
    return None


def _str_or_none(value: object) -> str | None:
    return None if value is None or value == "" else str(value)


PLAIN_TYPES = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """Plain Python values from Ansible's tagged ones (str/int/dict subclasses)."""
    if type(value) in PLAIN_TYPES:  # most values, at ten thousand hosts
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind(value)
    return value


# The variables that decide how to connect: Jinja in them is rendered as Ansible would.
CONNECTION_VARS = (
    "ansible_host",
    "ansible_port",
    "ansible_user",
    "ansible_ssh_private_key_file",
    "ansible_ssh_common_args",
    "ansible_ssh_extra_args",
)


class Templates:
    """Renders `{{ ... }}` in the connection variables as Ansible's templar does, at a cost
    that grows with the distinct templates, not with the hosts.

    `ansible_host: "{{ inventory_hostname }}.mgmt"` in group_vars/ is one template for ten
    thousand hosts. ansible-core (2.19) compiles a template each time it renders one, a
    Templar per host builds a Jinja environment too, and each render wraps every variable
    of the host in a lazy container: about 0.7 ms a host at first, 0.05 ms once the
    templar and the compiled templates are kept (below), still half of reading a large
    inventory. So a template is read once (`simple_template`): one that only puts
    variables between text (`{{ name }}.mgmt`) is, for each host whose variables it names
    are plain strings, that text and those strings joined, which is what Ansible's render
    gives for it (tests/unit/test_inventory_templates.py holds the two equal on generated
    templates and values). Every other template, and every host whose values are not
    plain strings, goes through Ansible's templar: one for every host, with each distinct
    template compiled once (the compiled template depends on its text alone; a template
    that does not compile is compiled again each time, so each host's error names its own
    file). An ansible-core without those steps (before 2.19) renders as it always did,
    one Templar per host.
    """

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self._templar: Any = None
        self._simple: dict[str, tuple[Part, ...] | None] = {}

    def render(self, values: dict[str, Any], name: str) -> dict[str, Any]:
        if not any("{{" in str(values.get(key, "")) for key in CONNECTION_VARS):
            return values
        from ansible.errors import AnsibleError

        rendered = dict(values)
        for key in CONNECTION_VARS:
            if "{{" in str(values.get(key, "")):
                try:
                    rendered[key] = self.one(values[key], values)
                except AnsibleError as exc:
                    raise InventoryError(f"host {name}: {key}: {_one_line(exc.message)}") from None
        return rendered

    def one(self, template: Any, values: dict[str, Any]) -> Any:
        """`template` rendered with `values`, as Ansible's templar renders it."""
        parts = self._parts(template)
        if parts is not None:
            joined = join_parts(parts, values)
            if joined is not None:
                return joined
        return self._for(values).template(template)

    def _parts(self, template: Any) -> tuple[Part, ...] | None:
        """The template's parts when it is simple and trusted (Ansible renders only the
        templates it trusts: the others go to it, to be refused as it refuses them)."""
        if not _trusted_plain_string(template, trusted=True):
            return None
        text = str(template)
        if text not in self._simple:
            self._simple[text] = simple_template(text, self._environment())
        return self._simple[text]

    def _environment(self) -> Any:
        """The Jinja environment Ansible's templar parses templates with, or None."""
        templar = self._for({})
        return getattr(getattr(templar, "_engine", None), "environment", None)

    def _for(self, values: dict[str, Any]) -> Any:
        """The templar, with this host's variables."""
        from ansible.template import Templar

        if self._templar is None:
            self._templar = Templar(loader=self.loader, variables=values)
            if not _cache_compiles(self._templar):
                templar, self._templar = self._templar, None  # not kept: one per host
                return templar
        self._templar.available_variables = values
        return self._templar


# A part of a simple template: ("text", literal) or ("name", variable name).
Part = tuple[str, str]

# Names Jinja gives a meaning of its own in a template, whatever the variables say.
JINJA_NAMES = frozenset({"self", "loop", "caller", "varargs", "kwargs", "super"})


def simple_template(text: str, environment: Any) -> tuple[Part, ...] | None:
    """The parts of a template that only puts variables between text, as Ansible's own
    Jinja environment parses it (`{{ inventory_hostname }}.mgmt` is a name and a text),
    or None for anything else: a filter, a test, an attribute, a constant, a statement, a
    header (`#jinja2:`), a backslash (Ansible escapes those), a trailing newline (Ansible
    adds back what Jinja drops), text that looks like a template itself (`{% raw %}`)."""
    if environment is None or "\\" in text or text.startswith("#jinja2:"):
        return None
    if text.endswith(("\n", "\r")):
        return None
    from jinja2 import nodes

    try:
        tree = environment.parse(text)
    except Exception:  # Ansible's own render says why
        return None
    if len(tree.body) != 1 or type(tree.body[0]) is not nodes.Output:
        return None
    parts: list[Part] = []
    for node in tree.body[0].nodes:
        if type(node) is nodes.TemplateData and "{" not in node.data:
            parts.append(("text", node.data))
        elif type(node) is nodes.Name and node.ctx == "load" and node.name not in JINJA_NAMES:
            parts.append(("name", node.name))
        else:
            return None
    return tuple(parts) if any(kind == "name" for kind, _ in parts) else None


def join_parts(parts: tuple[Part, ...], values: dict[str, Any]) -> str | None:
    """The simple template rendered with `values`, or None when a variable it names is
    not a plain string (undefined, a number, a list, a template itself, or tagged with
    more than its origin and trust: Ansible renders those)."""
    out = []
    for kind, text in parts:
        if kind == "text":
            out.append(text)
            continue
        value = values.get(text)
        if not _trusted_plain_string(value, trusted=False):
            return None
        out.append(str(value))
    return "".join(out)


def _trusted_plain_string(value: Any, trusted: bool) -> bool:
    """A str with no tag but its origin and template trust (and, if `trusted`, that
    trust); one that could be a template itself (a `{`) only if `trusted`."""
    if type(value) is str:  # the magic variables: inventory_hostname, inventory_dir
        return not trusted and "{" not in value
    if not isinstance(value, str):
        return False
    tagging = _tagging()
    if tagging is None:  # an ansible-core before 2.19: its templar renders
        return False
    tag_types, allowed, trust = tagging
    tags = tag_types(value)
    if not tags <= allowed:
        return False
    if trusted:
        return trust in tags
    return "{" not in value


@functools.cache
def _tagging() -> tuple[Callable[[Any], frozenset[type]], frozenset[type], type] | None:
    """Ansible's tag reader, the tags a plain string may carry (its origin, its template
    trust) and the trust tag; None before ansible-core 2.19. Looked up once: two imports
    a variable were a tenth of our share of reading 10,000 hosts."""
    try:
        from ansible._internal._datatag._tags import Origin, TrustedAsTemplate
        from ansible.module_utils._internal._datatag import AnsibleTagHelper
    except ImportError:
        return None
    return AnsibleTagHelper.tag_types, frozenset({Origin, TrustedAsTemplate}), TrustedAsTemplate


def _cache_compiles(templar: Any) -> bool:
    """Keep the templar's compiled templates by (text, options); False where this
    ansible-core has no such step to keep (the templar is then used as it is)."""
    import jinja2

    engine = getattr(templar, "_engine", None)
    compile_template = getattr(engine, "_compile_template", None)
    if compile_template is None:
        return False
    compiled: dict[tuple[str, Any], Any] = {}

    def cached(template: str, options: Any) -> Any:
        key = (str(template), options)
        if key in compiled:
            return compiled[key]
        made = compile_template(template, options)
        if isinstance(made, jinja2.Template):  # not a compile error, deferred to render
            compiled[key] = made
        return made

    engine._compile_template = cached
    return True


@contextmanager
def _parse_quickly() -> Iterator[None]:
    """Two per-host steps of InventoryManager's parse done once, with the same results.

    Each new host's `inventory_dir` is `basedir(source)`, two file-system look-ups a host
    for the same source: kept per source while the sources are parsed. And after parsing,
    the vars plugins are run for every host at the "inventory" stage, where by default
    (RUN_VARS_PLUGINS: demand) none of them runs: each host's call then returns {} after
    the per-source work. Where no plugin would run at that stage, {} is answered at once;
    where one would, Ansible's own function runs."""
    from ansible.inventory import data, manager
    from ansible.vars import plugins

    saved = (data.basedir, manager.get_vars_from_inventory_sources)
    original_basedir, original_vars = saved
    folders: dict[object, str] = {}
    quiet: list[bool] = []  # [whether no vars plugin runs at the "inventory" stage], once known

    def basedir(source: Any) -> str:
        key = (type(source), source)
        if key not in folders:
            folders[key] = original_basedir(source)
        return folders[key]

    def get_vars_from_inventory_sources(
        loader: Any, sources: Any, entities: Any, stage: str
    ) -> dict[str, Any]:
        if stage != "inventory":
            return original_vars(loader, sources, entities, stage)
        if not quiet:
            found = _vars_plugins()
            should_run = getattr(plugins, "_plugin_should_run", None)
            if found is None or should_run is None:
                quiet.append(False)
            else:
                quiet.append(not any(should_run(plugin, stage) for plugin in found))
        return {} if quiet[0] else original_vars(loader, sources, entities, stage)

    data.basedir = basedir  # type: ignore[assignment]
    manager.get_vars_from_inventory_sources = get_vars_from_inventory_sources  # type: ignore[assignment]
    try:
        yield
    finally:
        data.basedir, manager.get_vars_from_inventory_sources = saved


@contextmanager
def _collect_failures() -> Iterator[list[tuple[str, Exception]]]:
    """Capture Ansible's per-plugin parse failures instead of letting it print warnings.

    Ansible only warns when no plugin could parse a source and then goes on with an
    empty inventory; a run must instead stop with the reason. The INI plugin also drops
    the line number of its error before raising (ansible-core 2.19), so `_parse` is
    wrapped to note the line it was on.
    """
    from ansible.inventory import manager
    from ansible.plugins.inventory import ini

    failures: list[tuple[str, Exception]] = []
    display = manager.display
    saved = (display.error_as_warning, display.warning, ini.InventoryModule._parse)
    original_parse = ini.InventoryModule._parse

    def note_line(self: Any, lines: list[str]) -> Any:
        try:
            return original_parse(self, lines)
        except Exception as exc:
            origin = getattr(self, "_origin", None)
            exc.bringup_line = getattr(origin, "line_num", None)  # type: ignore[attr-defined]
            raise

    def error_as_warning(msg: str, exception: BaseException, **_: Any) -> None:
        failures.append((msg, exception))  # type: ignore[arg-type]

    display.error_as_warning = error_as_warning  # type: ignore[method-assign]
    display.warning = lambda *args, **kwargs: None  # type: ignore[method-assign]
    ini.InventoryModule._parse = note_line  # type: ignore[method-assign]
    try:
        yield failures
    finally:
        display.error_as_warning, display.warning, ini.InventoryModule._parse = saved


def _describe_failure(path: Path, failures: list[tuple[str, Exception]]) -> str:
    """One line from the failure of the plugin meant for this file, with its line number."""
    wanted = ("yaml", "auto") if path.suffix in (".yml", ".yaml", ".json") else ("ini",)
    located = [(_line(exc), msg, exc) for msg, exc in failures]

    def rank(item: tuple[int | None, str, Exception]) -> tuple[bool, bool]:
        line, msg, _ = item
        return (not any(f"'{w}'" in msg for w in wanted), line is None)

    line, _, exc = sorted(located, key=rank)[0]
    message = _one_line(getattr(exc, "message", str(exc)))
    message = message.removeprefix("Failed to parse inventory: ")
    where = f"{_origin_path(exc) or path}" + (f" line {line}" if line else "")
    return f"{where}: {message}"


def _line(exc: Exception) -> int | None:
    cause = exc.__cause__
    line = getattr(cause, "bringup_line", None)
    if line:
        return int(line)
    origin = getattr(exc, "obj", None)
    return getattr(origin, "line_num", None)


def _origin_path(exc: Exception) -> str | None:
    return getattr(getattr(exc, "obj", None), "path", None)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def select(names: list[str], limit: str, where: str = "the recorded nodes") -> list[str]:
    """The names an Ansible --limit pattern selects among `names` (the nodes of a recorded
    run, the demo fleet): the same matcher and the same refusals as for an inventory,
    over an inventory of those names alone (no groups: a group name matches nothing)."""
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader

    with _collect_failures():
        inventory = InventoryManager(loader=DataLoader(), sources=[])
        for name in names:
            inventory.add_host(name, group="all")
        try:
            _check_limit(inventory, limit, where)
            inventory.subset(limit)
            selected = {h.name for h in inventory.get_hosts("all")}
        except AnsibleError as exc:
            raise InventoryError(f"--limit {limit!r}: {_one_line(exc.message)}") from None
    return [n for n in names if n in selected]
