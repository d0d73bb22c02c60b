"""Suites: which probes run, with which parameters and time budget. Data in checks/suites/.

Frozen msgspec Structs (`schema.Schema`), read from YAML by bringup/schema.py's one
validator and built plainly by the commands that make a suite of their own (a one-probe
suite).
"""

# No `from __future__ import annotations`: the schema's types are made once, as the
# classes are, where as text each would be compiled at the first read, twice (msgspec's
# and schema.unknown_key's look-up of the types): 114 compiles, about 20 ms of a health
# check (docs/scale.md).
from pathlib import Path
from typing import Annotated, Literal

from msgspec import Meta, field

from bringup.data import data_dir
from bringup.schema import Schema, locate, read_yaml, shipped, validate


class ProbeStep(Schema, kw_only=True):
    name: str
    params: dict[str, object] = field(default_factory=dict)
    timeout_s: Annotated[float, Meta(gt=0)] = 120.0


class Suite(Schema, kw_only=True):
    name: str
    description: str
    budget_s: Annotated[float, Meta(gt=0)]  # the whole suite on one node should end within
    probes: list[ProbeStep]
    # Jobs across nodes `bringup check` runs after the probes, when two nodes or more
    # answered: "ibperf" (every rail against a partner's, docs/fabric.md).
    jobs: list[Literal["ibperf"]] = field(default_factory=list)


class SuiteError(Exception):
    """A suite could not be found or is invalid; the message is one line."""


def suites_dir() -> Path:
    return data_dir("checks") / "suites"


def available() -> list[str]:
    """Names of the suites shipped with bringup."""
    return shipped(suites_dir())


def load(name_or_path: str) -> Suite:
    """A shipped suite by name (`quick`) or a suite file by path; probe params are checked."""
    path = locate(name_or_path, suites_dir(), "suite", SuiteError)
    suite = validate(Suite, read_yaml(path, SuiteError), str(path), SuiteError)
    _validate_params(suite, path)
    return suite


def _validate_params(suite: Suite, path: Path) -> None:
    # Imported here: the probe catalog pulls in every probe module.
    from bringup.node.catalog import PROBES
    from bringup.node.protocol import build_params

    for step in suite.probes:
        if step.name not in PROBES:
            raise SuiteError(f"{path}: unknown probe {step.name!r}; known: {', '.join(PROBES)}")
        try:
            build_params(step.name, dict(step.params))
        except (TypeError, ValueError) as exc:
            raise SuiteError(f"{path}: {exc}") from None
