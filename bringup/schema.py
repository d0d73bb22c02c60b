"""Shared pieces of the YAML data schemas (profiles, suites, recipes)."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from bringup.files import InputError, read_text

Model = TypeVar("Model", bound=BaseModel)


class Strict(BaseModel):
    """A schema that rejects unknown keys, so a typo is an error and not a silent default."""

    model_config = ConfigDict(extra="forbid")


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


# How pydantic names an unknown key: in a model, and in a dataclass (the recipe's schema).
_UNKNOWN_KEY = ("extra_forbidden", "unexpected_keyword_argument")


def describe(exc: ValidationError) -> str:
    """One line naming the offending key: 'gpu.pcie_gn: unknown key'.

    An unknown key is named first: a renamed key also shows up as a missing one, and the
    typo is what the user has to fix.
    """
    err = sorted(exc.errors(), key=lambda e: e["type"] not in _UNKNOWN_KEY)[0]
    where = ".".join(str(p) for p in err["loc"]) or "(top level)"
    kind = "unknown key" if err["type"] in _UNKNOWN_KEY else err["msg"]
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return " ".join(f"{where}: {kind}{more}".split())


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


def validate(model: type[Model], data: object, origin: str, error: type[Exception]) -> Model:
    """The model from parsed YAML, or `error` with one line naming the offending key."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(f"{origin}: {describe(exc)}") from None
