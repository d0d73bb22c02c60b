"""What the YAML schemas cost as stdlib dataclasses, against msgspec Structs (issue 31).

    .venv/bin/python benchmarks/yaml_schema.py [--repeat 200]

The profile's and the suite's schema classes (bringup/profile.py, bringup/suite.py) are
made again, each of the same fields, types and defaults, two ways: as the frozen
keyword-only `msgspec.Struct`s they are (what importing the modules pays), and as frozen
slotted keyword-only stdlib dataclasses (the house's form for data, which `@dataclass`
makes by `exec`ing the source of each method). Then every shipped profile is read by the
one reader (`schema.validate`: bringup/schema.py's unknown-key search, then
`msgspec.convert`): into the Structs, the search alone, and into the dataclasses. CPU
seconds (process time), the median of five rounds of `--repeat` each; the machine's load
moves them, their ratios less. With `--instructions` (valgrind installed), the
instructions making the classes once adds to this script's own start, each way. Asserts
nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import statistics
import subprocess
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


def _fields(cls: type) -> list[Any]:
    """The fields of a schema Struct: name, type (its bounds kept), default or factory."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return [(f.name, hints[f.name], f) for f in msgspec.structs.fields(cls)]


def as_dataclass(cls: type, swap: dict[type, type]) -> type:
    spec: list[Any] = []
    for name, hint, f in _fields(cls):
        if f.default_factory is not msgspec.NODEFAULT:
            keep = dataclasses.field(default_factory=f.default_factory)
        elif f.default is not msgspec.NODEFAULT:
            default = f.default
            if isinstance(default, msgspec.Struct):  # a section's defaults: the stand-in's own
                default = msgspec.convert(schema.as_json(default), swap[type(default)])
            keep = dataclasses.field(default=default)
        else:
            keep = dataclasses.field()
        spec.append((name, _swapped(hint, swap), keep))
    return dataclasses.make_dataclass(cls.__name__, spec, frozen=True, slots=True, kw_only=True)


def as_struct(cls: type, swap: dict[type, type]) -> type:
    spec: list[Any] = []
    for name, hint, f in _fields(cls):
        if f.default_factory is not msgspec.NODEFAULT:
            spec.append(
                (name, _swapped(hint, swap), msgspec.field(default_factory=f.default_factory))
            )
        elif f.default is not msgspec.NODEFAULT:
            default = f.default
            if isinstance(default, msgspec.Struct):
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
    parser.add_argument(
        "--instructions", action="store_true", help="also count them under valgrind (slow)"
    )
    parser.add_argument("--make", choices=MAKERS, help=argparse.SUPPRESS)  # one, counted
    args = parser.parse_args()
    if args.make:
        if args.make != "nothing":
            make_all(MAKERS[args.make])
        return
    repeat = args.repeat

    docs = [read_yaml(profile.profiles_dir() / f"{n}.yaml", OSError) for n in profile.available()]
    as_dataclasses = make_all(as_dataclass)[profile.Profile]

    def read_dataclasses() -> None:
        for doc in docs:
            merged = dict(doc)  # the tolerances laid over the defaults, as profile.parse does
            if "tolerances" in merged:
                merged["tolerances"] = profile._over_defaults(merged["tolerances"], "x")
            schema.validate(as_dataclasses, merged, "x", ValueError)

    figures = {
        "make the 13 classes, msgspec Structs (as they are)": cpu(
            lambda: make_all(as_struct), repeat
        ),
        "make the 13 classes, stdlib dataclasses": cpu(lambda: make_all(as_dataclass), repeat),
        "read the 7 shipped profiles, Structs (profile.parse)": cpu(
            lambda: [profile.parse(doc, "x") for doc in docs], repeat
        ),
        "  of which the unknown-key search": cpu(
            lambda: [schema.unknown_key(profile.Profile, doc) for doc in docs], repeat
        ),
        "read the 7 shipped profiles, stdlib dataclasses": cpu(read_dataclasses, repeat),
    }
    width = max(len(name) for name in figures)
    for name, seconds in figures.items():
        print(f"{name:{width}}  {seconds * 1e6:9.1f} us")
    if args.instructions:
        floor = instructions("nothing")
        for maker in ("struct", "dataclass"):
            extra = instructions(maker) - floor
            print(f"make the 13 classes once, {maker}: {extra / 1e6:.1f} M instructions")


MAKERS: dict[str, Any] = {"struct": as_struct, "dataclass": as_dataclass, "nothing": None}


def instructions(maker: str) -> int:
    """Instructions of this script's process making the classes one way (cachegrind, the
    hash seed fixed): a figure the machine's load does not move."""
    argv = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    argv += [sys.executable, __file__, "--make", maker]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    return int(re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)[1].replace(",", ""))  # type: ignore[index]


if __name__ == "__main__":
    main()
