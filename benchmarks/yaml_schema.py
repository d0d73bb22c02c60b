"""What the YAML schemas cost as stdlib dataclasses, against msgspec Structs (issue 31).

    .venv/bin/python benchmarks/yaml_schema.py [--repeat 200]

The profile's and the suite's schema classes (bringup/profile.py, bringup/suite.py) are
made again, each of the same fields, types and defaults, two ways: as the frozen slotted
keyword-only stdlib dataclasses they are (what importing the modules pays), and as
`msgspec.Struct`s with `forbid_unknown_fields=True` (msgspec refuses an unknown key
itself, where a dataclass needs bringup/schema.py's search first). Then every shipped
profile is read: the whole reader (`schema.validate`: the unknown-key search, then
`msgspec.convert`), the search alone, and the same documents read into the Structs. CPU
seconds (process time), the median of five rounds of `--repeat` each; the machine's load
moves them, their ratios less. Asserts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bringup import profile, schema, suite
from bringup.schema import read_yaml

SCHEMAS = [
    profile.GpuSpec,
    profile.NvlinkSpec,
    profile.ThermalSpec,
    profile.SoftwareSpec,
    profile.NcclSpec,
    profile.NetworkSpec,
    profile.NvmeSpec,
    profile.HostSpec,
    profile.UplinkSpec,
    profile.MetricTolerance,
    profile.Profile,
    suite.ProbeStep,
    suite.Suite,
]


def _fields(cls: type) -> list[tuple[str, Any, dataclasses.Field[Any]]]:
    hints = typing.get_type_hints(cls, include_extras=True)
    return [(f.name, hints[f.name], f) for f in dataclasses.fields(cls)]


def as_dataclass(cls: type, swap: dict[type, type]) -> type:
    spec = []
    for name, hint, f in _fields(cls):
        keep = {"default": f.default} if f.default is not dataclasses.MISSING else {}
        if f.default_factory is not dataclasses.MISSING:
            keep = {"default_factory": f.default_factory}
        spec.append((name, _swapped(hint, swap), dataclasses.field(**keep)))
    return dataclasses.make_dataclass(cls.__name__, spec, frozen=True, slots=True, kw_only=True)


def as_struct(cls: type, swap: dict[type, type]) -> type:
    spec: list[Any] = []
    for name, hint, f in _fields(cls):
        if f.default_factory is not dataclasses.MISSING:
            spec.append(
                (name, _swapped(hint, swap), msgspec.field(default_factory=f.default_factory))
            )
        elif f.default is not dataclasses.MISSING:
            default = f.default
            if dataclasses.is_dataclass(default):  # a section's defaults: the Struct's own
                default = msgspec.convert(schema.as_json(default), swap[type(default)])
            spec.append((name, _swapped(hint, swap), default))
        else:
            spec.append((name, _swapped(hint, swap)))
    return msgspec.defstruct(
        cls.__name__, spec, kw_only=True, frozen=True, forbid_unknown_fields=True
    )


def _swapped(hint: Any, swap: dict[type, type]) -> Any:
    """The type with each schema dataclass in it replaced by its stand-in."""
    if isinstance(hint, type) and hint in swap:
        return swap[hint]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return typing.Annotated[(_swapped(args[0], swap), *hint.__metadata__)]
    if origin in (types.UnionType, typing.Union):
        return typing.Union[tuple(_swapped(a, swap) for a in args)]  # noqa: UP007
    if origin in (list, dict):
        return origin[tuple(_swapped(a, swap) for a in args)]
    return hint


def make_all(make: Callable[[type, dict[type, type]], type]) -> dict[type, type]:
    swap: dict[type, type] = {}
    for cls in SCHEMAS:  # inner classes first: each refers to those made before it
        swap[cls] = make(cls, swap)
    return swap


def cpu(work: Callable[[], object], repeat: int) -> float:
    """Median of five rounds, CPU seconds of one call."""
    rounds = []
    for _ in range(5):
        start = time.process_time()
        for _ in range(repeat):
            work()
        rounds.append((time.process_time() - start) / repeat)
    return statistics.median(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    repeat = parser.parse_args().repeat

    docs = [read_yaml(profile.profiles_dir() / f"{n}.yaml", OSError) for n in profile.available()]
    structs = make_all(as_struct)
    struct_profile = structs[profile.Profile]

    def read_structs() -> None:
        for doc in docs:
            merged = dict(doc)  # the tolerances laid over the defaults, as profile.parse does
            if "tolerances" in merged:
                merged["tolerances"] = profile._over_defaults(merged["tolerances"], "x")
            msgspec.convert(merged, struct_profile, strict=True, str_keys=True)

    figures = {
        "make the 13 classes, stdlib dataclasses": cpu(lambda: make_all(as_dataclass), repeat),
        "make the 13 classes, msgspec Structs": cpu(lambda: make_all(as_struct), repeat),
        "read the 7 shipped profiles, dataclasses (schema.validate)": cpu(
            lambda: [profile.parse(doc, "x") for doc in docs], repeat
        ),
        "  of which the unknown-key search": cpu(
            lambda: [schema.unknown_key(profile.Profile, doc) for doc in docs], repeat
        ),
        "read the 7 shipped profiles, Structs (unknown keys refused by msgspec)": cpu(
            read_structs, repeat
        ),
    }
    width = max(len(name) for name in figures)
    for name, seconds in figures.items():
        print(f"{name:{width}}  {seconds * 1e6:9.1f} us")


if __name__ == "__main__":
    main()
