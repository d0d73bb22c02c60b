"""The YAML files operators write (profiles, suites, recipes): found, parsed, and read into
their dataclasses by one validator."""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import yaml

from bringup.files import InputError, read_text

T = TypeVar("T")

# libyaml's parser where PyYAML was built with it (the wheels are): the same safe
# constructors build the same values, about ten times faster than the pure-Python parser.
# A health check reads its suite and, under --profile auto, every shipped profile at each
# job start (benchmarks/node_side.py). libyaml refuses nesting past 1,000 levels itself.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Values a YAML document may expand to: anchors and aliases can make a few lines stand
# for billions of values (the "billion laughs"); no profile, suite or recipe comes near this.
MAX_VALUES = 1_000_000


def read_yaml(path: Path, error: type[Exception]) -> object:
    """Parsed YAML, or `error` with one line saying why not (bringup/files.py reads it)."""
    try:
        data = yaml.load(read_text(path, "YAML"), Loader=_LOADER)
    except InputError as exc:
        raise error(str(exc)) from None
    except yaml.YAMLError as exc:
        raise error(f"{path}: malformed YAML: {' '.join(str(exc).split())}") from None
    except ValueError as exc:  # a constructor's own: `!!int zz`, a date 2020-13-45
        raise error(f"{path}: malformed YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise error(f"{path}: malformed YAML: nested too deeply") from None
    if _too_many_values(data, MAX_VALUES):
        raise error(f"{path}: YAML expands to more than {MAX_VALUES} values (aliases)")
    return data


def _too_many_values(data: object, limit: int) -> bool:
    """Whether the document, its aliases expanded, holds more than `limit` values."""
    pending, seen = [data], 0
    while pending:
        value = pending.pop()
        seen += 1
        if seen > limit:
            return True
        if isinstance(value, dict):
            pending.extend(value.keys())
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return False


def shipped(folder: Path) -> list[str]:
    """Names of the YAML files shipped in a data folder (profiles, suites, recipes)."""
    return sorted(p.stem for p in folder.glob("*.yaml"))


def locate(name_or_path: str, folder: Path, kind: str, error: type[Exception]) -> Path:
    """A shipped file by name (`b300`) or a user's file by path (anything with a suffix)."""
    path = Path(name_or_path)
    if path.suffix:
        return path
    path = folder / f"{name_or_path}.yaml"
    if not path.exists():
        names = ", ".join(shipped(folder))
        raise error(f"unknown {kind} {name_or_path!r}; available: {names}")
    return path


# --- reading a document into its schema ------------------------------------------------
#
# A profile and a suite are msgspec Structs (`Schema`); a recipe is the node side's stdlib
# dataclasses (no msgspec on a node). Both are read from their parsed YAML by `validate`
# alone: msgspec's `convert` in strict mode checks the types, the bounds (`Annotated[int,
# Meta(ge=1)]`), the Literals and a dataclass's `__post_init__`. A key the schema does not
# name is a typo to name in a file an operator writes ("pcie_gn"), not a default silently
# used: msgspec passes over one on a dataclass, and names the first it meets on a Struct,
# so `unknown_key` looks for one first, in pydantic's order. docs/profiles.md ("How a YAML
# file is read") says what is taken and lists what pydantic, the reader before, took besides.


class Schema(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A section of a YAML file an operator writes: its keys are the fields, no others;
    never changed once made (`msgspec.structs.replace` makes a changed copy). A Struct, not
    a stdlib dataclass, for what it costs to make the classes at every start of a health
    check (docs/contributing.md, "validation"). A subclass says `kw_only=True` again
    (msgspec does not pass it on), so that its fields keep the files' order."""


# A dict key in a path: msgspec writes every one as `[...]`; the key itself is named here.
_STEP = re.compile(r"\.(\w+)|\[(\d+|\.\.\.)\]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEY_CHARS = 40  # a key or value shown in a message is cut here: one short line
_HINTS: dict[type, dict[str, Any]] = {}


def validate(kind: type[T], data: object, origin: str, error: type[Exception]) -> T:
    """`data` (parsed YAML) as `kind` (a Schema or a dataclass), or `error` with one line
    naming the offending key: '{origin}: gpu.pcie_gn: unknown key'. A dict of int keys
    takes them as text too ("8"), as JSON writes them (`bringup_profile_overrides`)."""
    where = unknown_key(kind, data)
    if where is not None:
        raise error(f"{origin}: {where}: unknown key")
    try:
        return msgspec.convert(data, kind, strict=True, str_keys=True)
    except msgspec.ValidationError as exc:
        raise error(f"{origin}: {describe(exc, kind, data)}") from None


def as_json(value: object) -> Any:
    """A Schema (or dataclass) as JSON data (dicts, lists, text, numbers; dict keys as
    text): what `validate` reads back into the same value."""
    return msgspec.to_builtins(value, str_keys=True)


def unknown_key(kind: Any, data: object) -> str | None:
    """The path of the first key in `data` that its schema does not name, or None.

    The order is pydantic's (`extra="forbid"`), which named an unknown key before any
    other error: an object's fields first, in their order, each searched in turn, then
    its own keys. So a typo ("gpu.pcie_gn") is named, not the key it leaves missing.
    """
    check = _checker(kind)
    found = check(data) if check is not None else None
    return None if found is None else "".join(reversed(found)).removeprefix(".")


# A type's search for an unknown key, made once per type: it walks only the fields, items
# and values that can hold an object (a profile's numbers are not visited). It gives the
# path found, its pieces last to first (".gpu", "[0]", "['nccl.busbw']"), or None.
Checker = typing.Callable[[object], "list[str] | None"]
_CHECKERS: dict[Any, Checker | None] = {}


def _checker(kind: Any) -> Checker | None:
    """The search of type `kind`; None where nothing under it is an object. Stored once
    made whole (threads reading their first profiles together each make their own), so a
    schema may not hold a type of itself."""
    if kind not in _CHECKERS:
        _CHECKERS[kind] = _make_checker(_bare(kind))
    return _CHECKERS[kind]


def _make_checker(kind: Any) -> Checker | None:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if _is_class(kind):
        named = _hints(kind)
        inner = {name: c for name, hint in named.items() if (c := _checker(hint)) is not None}

        def in_object(data: object) -> list[str] | None:
            if not isinstance(data, dict):
                return None  # not an object: msgspec names the type error
            for name, check in inner.items():
                if name in data and (found := check(data[name])) is not None:
                    return [*found, f".{name}"]
            return next(([_piece(key)] for key in data if key not in named), None)

        return in_object
    if origin in (list, dict) and (item := _checker(args[-1])) is not None:
        if origin is list:

            def in_list(data: object) -> list[str] | None:
                for i, value in enumerate(data if isinstance(data, list) else ()):
                    if (found := item(value)) is not None:
                        return [*found, f"[{i}]"]
                return None

            return in_list

        def in_dict(data: object) -> list[str] | None:
            for key, value in data.items() if isinstance(data, dict) else ():
                if (found := item(value)) is not None:
                    return [*found, f"[{_key(key)}]"]
            return None

        return in_dict
    if origin in (types.UnionType, typing.Union):
        members = [c for m in args if (c := _checker(m)) is not None]
        if len(members) <= 1:
            return members[0] if members else None
        return lambda data: next((f for c in members if (f := c(data)) is not None), None)
    return None


def describe(exc: msgspec.ValidationError, kind: Any, data: object) -> str:
    """msgspec's error as one line, the key path first: "Expected `int` >= 1 - at
    `$.gpu.count`" as "gpu.count: expected int >= 1". The path names a dict's key where
    msgspec writes `[...]`, a missing key by its own name, and a Literal's choices."""
    text = " ".join(str(exc).split())
    message, sep, place = text.rpartition(" - at `")
    if not sep:
        message, place = text, "$`"
    on_key = place.startswith("key` in `")
    place = place.removeprefix("key` in `").removesuffix("`").removeprefix("$")
    where, hint, held = _follow(kind, data, place)
    missing = re.fullmatch(r"Object missing required field `(\w+)`", message)
    unknown = re.fullmatch(r"Object contains unknown field `(.*)`", message)
    if missing:
        where, message = _join(where, missing[1]), "missing (a required key)"
    elif unknown:  # unknown_key found it first; this is what msgspec says of a Struct
        where, message = _join(where, unknown[1]), "unknown key"
    elif on_key:
        message = f"key {_key(_failing_key(hint, held))}: {_lower(message)}"
    else:
        value = re.fullmatch(r"Invalid enum value (.*)", message)  # the value as given
        message = f"invalid value {_cut(value[1])}" if value else _lower(message)
        choices = _choices(hint)
        if choices:
            message = f"{message} (one of: {choices})"
    return f"{where or '(top level)'}: {message}"


def _follow(kind: Any, data: object, place: str) -> tuple[str, Any, object]:
    """Along msgspec's path (".gpu.count", ".probes[0]", ".tolerances[...]"): the path as
    `describe` writes it, the type there, and the value there."""
    where, hint = "", kind
    for name, index in _STEP.findall(place):
        hint = _container(hint)
        if name:
            where, hint = _join(where, name), _hints(hint).get(name) if _is_class(hint) else None
            data = data.get(name) if isinstance(data, dict) else None
        elif index != "...":
            where, hint = f"{where}[{index}]", _item(hint)
            data = data[int(index)] if isinstance(data, list) and int(index) < len(data) else None
        else:
            key = _failing_key(hint, data)
            where, hint = f"{where}[{_key(key)}]", _item(hint)
            data = data.get(key) if isinstance(data, dict) else None
    return where, hint, data


def _failing_key(hint: Any, data: object) -> object:
    """The key of the first entry of a dict that its type refuses: the one msgspec, which
    reads the entries in order and stops at the first error, wrote as `[...]`."""
    hint = _container(hint)
    if not isinstance(data, dict) or typing.get_origin(hint) is not dict:
        return "?"
    for key, value in data.items():
        try:
            msgspec.convert({key: value}, hint, strict=True, str_keys=True)
        except msgspec.ValidationError:
            return key
    return "?"


def _bare(hint: Any) -> Any:
    """The type without its `Annotated` bounds."""
    return typing.get_args(hint)[0] if typing.get_origin(hint) is typing.Annotated else hint


def _container(hint: Any) -> Any:
    """An object, list or dict type, out of `X | None` and `Annotated`."""
    hint = _bare(hint)
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        members = [m for m in typing.get_args(hint) if m is not type(None)]
        hint = _bare(members[0]) if len(members) == 1 else hint
    return hint


def _item(hint: Any) -> Any:
    args = typing.get_args(hint)
    return args[-1] if typing.get_origin(hint) in (list, dict) and args else None


def _choices(hint: Any) -> str:
    """A Literal's values, for the message ("'ecc', 'remapped_rows', 'power_limit'")."""
    hint = _container(hint)
    if typing.get_origin(hint) is not typing.Literal:
        return ""
    return ", ".join(repr(choice) for choice in typing.get_args(hint))


def _is_class(hint: Any) -> bool:
    """Whether a type is an object of named fields: a Struct or a dataclass."""
    return isinstance(hint, type) and (
        issubclass(hint, msgspec.Struct) or dataclasses.is_dataclass(hint)
    )


def _hints(kind: type) -> dict[str, Any]:
    """A Struct's or a dataclass's fields and their types, in order (ClassVars left out)."""
    hints = _HINTS.get(kind)
    if hints is None:
        every = typing.get_type_hints(kind, include_extras=True)
        names = getattr(kind, "__struct_fields__", None)
        if names is None:
            names = tuple(f.name for f in dataclasses.fields(kind))
        hints = _HINTS[kind] = {name: every[name] for name in names}
    return hints


def _join(where: str, key: object) -> str:
    """A key appended to a path: `gpu.count`, or `tolerances['nccl.busbw']` for a key that
    is not a plain name."""
    return (where + _piece(key)).removeprefix(".")


def _piece(key: object) -> str:
    return f".{key}" if isinstance(key, str) and _NAME.fullmatch(key) else f"[{_key(key)}]"


def _key(key: object) -> str:
    return _cut(repr(key))


def _cut(text: str) -> str:
    """A key or value the file gave, as shown in a message: one short line."""
    text = " ".join(text.split())
    return text if len(text) <= _KEY_CHARS else f"{text[: _KEY_CHARS - 3]}..."


def _lower(message: str) -> str:
    """msgspec's sentence as a clause: "Expected `int`, got `str`" -> "expected int, got str"."""
    message = message.replace("`", "")
    if message[:1].isupper() and not message[1:2].isupper():  # not an initialism ("ID")
        return message[:1].lower() + message[1:]
    return message
