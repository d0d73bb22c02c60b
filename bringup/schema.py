"""Shared pieces of the YAML data schemas (profiles, suites, recipes)."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

Model = TypeVar("Model", bound=BaseModel)


class Strict(BaseModel):
    """A schema that rejects unknown keys, so a typo is an error and not a silent default."""

    model_config = ConfigDict(extra="forbid")


def read_yaml(path: Path, error: type[Exception]) -> object:
    """Parsed YAML, or `error` with one line saying why not."""
    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise error(f"{path}: malformed YAML: {' '.join(str(exc).split())}") from None


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
    return f"{where}: {kind}{more}"


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
