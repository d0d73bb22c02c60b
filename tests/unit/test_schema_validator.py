"""The YAML reader (bringup/schema.py `validate`: msgspec, strict, unknown keys refused;
the profile and suite as Structs, the recipe as the node's dataclasses) against the
pydantic models it replaced, copied below as they stand on main before issue
31's step (`Strict` models, the tolerances merged by a field validator; the recipe read
by a `TypeAdapter` over the node's dataclasses with `extra="forbid"`).

- Every shipped profile, suite and recipe (checks/, burnin/) reads the same under both:
  the same fields, values and Python types (an int given for a float is a float).
- Each document, one place changed (each form of GARBAGE in place of each value, a key
  removed, an unknown key added, a key renamed): whatever main refused is refused, with
  one line; what both take is the same; what only main took is a pair of LAX, which is
  exactly the table in docs/profiles.md ("How a YAML file is read").
- An unknown key is named by its path, before the key it leaves missing.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import subprocess
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import msgspec
import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from bringup import profile, recipe, suite
from bringup.node.burnin import recipe as node_recipe
from bringup.schema import as_json, read_yaml, validate

DOCS = Path(__file__).resolve().parents[2] / "docs" / "profiles.md"

# --- main's models, copied (bringup/profile.py and bringup/suite.py before issue 31) ----


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GpuSpec(Strict):
    model: str
    count: int = Field(ge=1)
    memory_min_bytes: int
    compute_capability: str
    pci_device_id: str | None = None
    power_limit_w: float
    bf16_dense_tflops: float
    fp8_dense_tflops: float | None = None
    bf16_achievable_tflops: float | None = None
    pcie_gen: int
    pcie_width: int
    pcie_host_gen: int | None = None
    reports: list[Literal["ecc", "remapped_rows", "power_limit"]] = Field(
        default_factory=lambda: ["ecc", "remapped_rows", "power_limit"]
    )


class NvlinkSpec(Strict):
    version: int
    links_per_gpu: int
    per_pair: int
    link_speed_gb_s: float
    domain_gpus: int | None = Field(default=None, ge=1)
    fabric_required: bool = False
    imex_required: bool = False


class ThermalSpec(Strict):
    slowdown_margin_warn_c: float = 10.0
    memory_max_c: float | None = None


class SoftwareSpec(Strict):
    min_driver: str
    min_cuda: str
    driver_branch: str | None = None


class NcclSpec(Strict):
    allreduce_busbw_min_gb_s: float
    allreduce_busbw_min_gb_s_by_ranks: dict[int, float] = Field(default_factory=dict)
    allreduce_busbw_multinode_min_gb_s: float | None = None


class NetworkSpec(Strict):
    compute_rate_gbit_s: float | None = None
    compute_ports: int | None = Field(default=None, ge=1)
    compute_width: int | None = Field(default=None, ge=1)
    write_bw_min_fraction: float = Field(default=0.9375, gt=0, le=1)
    rail_median_tolerance: float = Field(default=0.05, gt=0, lt=1)
    link_flaps_fail_count: int = Field(default=3, ge=1)


class NvmeSpec(Strict):
    seq_read_min_gb_s: float = 3.0
    seq_write_min_gb_s: float = 3.0
    checkpoint_write_min_gb_s: float | None = None


class HostSpec(Strict):
    cpu_governor: str = "performance"
    min_memlock_bytes: int | None = None
    min_free_bytes: int = 100 * 10**9


class UplinkSpec(Strict):
    min_mbit_s: float | None = None
    dataset_bytes: int = Field(default=512 * 10**9, gt=0)


class MetricTolerance(Strict):
    better: Literal["higher", "lower"]
    baseline_pct: float = Field(ge=0)
    fleet_pct: float = Field(ge=0)


DEFAULT_TOLERANCES: dict[str, MetricTolerance] = {
    "nccl.busbw": MetricTolerance(better="higher", baseline_pct=5, fleet_pct=5),
    "burnin.mfu": MetricTolerance(better="higher", baseline_pct=3, fleet_pct=3),
    "burnin.tokens_per_s": MetricTolerance(better="higher", baseline_pct=3, fleet_pct=3),
    "gemm.tflops": MetricTolerance(better="higher", baseline_pct=5, fleet_pct=5),
    "nvme.seq_read": MetricTolerance(better="higher", baseline_pct=10, fleet_pct=10),
    "nvme.seq_write": MetricTolerance(better="higher", baseline_pct=10, fleet_pct=10),
}


def default_tolerances() -> dict[str, MetricTolerance]:
    return {name: t.model_copy() for name, t in DEFAULT_TOLERANCES.items()}


class Profile(Strict):
    name: str
    description: str
    gpu: GpuSpec
    nvlink: NvlinkSpec | None = None
    thermal: ThermalSpec = ThermalSpec()
    software: SoftwareSpec
    nccl: NcclSpec
    nvme: NvmeSpec = NvmeSpec()
    host: HostSpec = HostSpec()
    network: NetworkSpec = NetworkSpec()
    uplink: UplinkSpec = UplinkSpec()
    tolerances: dict[str, MetricTolerance] = Field(default_factory=default_tolerances)

    @field_validator("tolerances", mode="before")
    @classmethod
    def _merge_tolerances(cls, value: object) -> object:
        if value is None:
            return default_tolerances()
        if not isinstance(value, dict):
            return value
        merged: dict[str, object] = {k: t.model_dump() for k, t in DEFAULT_TOLERANCES.items()}
        for name, entry in value.items():
            if name not in DEFAULT_TOLERANCES:
                known = ", ".join(DEFAULT_TOLERANCES)
                raise ValueError(f"unknown metric {name!r} (known: {known})")
            if isinstance(entry, dict):
                entry = {**DEFAULT_TOLERANCES[name].model_dump(), **entry}
            merged[name] = entry
        return merged


class ProbeStep(Strict):
    name: str
    params: dict[str, object] = Field(default_factory=dict)
    timeout_s: float = Field(default=120.0, gt=0)


class Suite(Strict):
    name: str
    description: str
    budget_s: float = Field(gt=0)
    probes: list[ProbeStep]
    jobs: list[Literal["ibperf"]] = Field(default_factory=list)


def _main_recipe_reader() -> TypeAdapter[Any]:
    """main's recipe reader: the node's dataclasses with `extra="forbid"` (main set it on
    each class as `__pydantic_config__`), read in pydantic's lax mode."""
    classes = [c for c in vars(node_recipe).values() if dataclasses.is_dataclass(c)]
    for cls in classes:
        cls.__pydantic_config__ = {"extra": "forbid"}  # type: ignore[attr-defined]
    try:
        return TypeAdapter(node_recipe.Recipe)
    finally:
        for cls in classes:
            del cls.__pydantic_config__  # type: ignore[attr-defined]


# --- the two readers, side by side ------------------------------------------------------


@dataclasses.dataclass
class Kind:
    """One schema: main's reader, the new one, the new one's dataclass."""

    name: str
    main: Any
    new: Any
    schema: type


def _suite_parse(data: object, origin: str) -> suite.Suite:
    """The suite's reader (suite.load checks each probe's params after it, as on main)."""
    return validate(suite.Suite, data, origin, suite.SuiteError)


KINDS = {
    "profile": Kind("profile", TypeAdapter(Profile), profile.parse, profile.Profile),
    "suite": Kind("suite", TypeAdapter(Suite), _suite_parse, suite.Suite),
    "recipe": Kind("recipe", _main_recipe_reader(), recipe.parse, node_recipe.Recipe),
}
ERRORS = (profile.ProfileError, suite.SuiteError, recipe.RecipeError)


def main_reads(kind: Kind, data: Any) -> tuple[bool, Any]:
    try:
        return True, kind.main.validate_python(data)
    except ValidationError:
        return False, None


def new_reads(kind: Kind, data: Any) -> tuple[bool, Any]:
    try:
        return True, kind.new(data, "mine.yaml")
    except ERRORS as exc:
        text = str(exc)
        assert "\n" not in text and text.startswith("mine.yaml: "), text
        return False, text


def typed(value: Any) -> Any:
    """A value as a tree that compares Python types too (3 is not 3.0), NaN equal to NaN,
    a pydantic model and a dataclass of the same fields alike."""
    if isinstance(value, BaseModel):
        return ("object", tuple((n, typed(getattr(value, n))) for n in type(value).model_fields))
    if _is_object(type(value)):
        names = _hints(type(value))
        return ("object", tuple((n, typed(getattr(value, n))) for n in names))
    if isinstance(value, list):
        return ("list", tuple(typed(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((typed(k), typed(v)) for k, v in value.items()))
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else value)
    return (type(value).__name__, value)


def shipped() -> Iterator[tuple[Kind, str, Any]]:
    """(its kind, its name, its parsed YAML) of every shipped profile, suite and recipe."""
    for name in profile.available():
        yield KINDS["profile"], name, read_yaml(profile.profiles_dir() / f"{name}.yaml", OSError)
    for name in suite.available():
        yield KINDS["suite"], name, read_yaml(suite.suites_dir() / f"{name}.yaml", OSError)
    for name in recipe.available():
        yield KINDS["recipe"], name, read_yaml(recipe.recipes_dir() / f"{name}.yaml", OSError)


def test_every_shipped_document_reads_the_same_under_both() -> None:
    seen = 0
    for kind, name, data in shipped():
        ok_main, old = main_reads(kind, data)
        ok_new, new = new_reads(kind, data)
        assert ok_main and ok_new, (name, new)
        assert typed(new) == typed(old), name
        seen += 1
    assert seen == len(profile.available()) + len(suite.available()) + len(recipe.available())
    assert seen >= 7 + 4 + 5


# --- one place changed ------------------------------------------------------------------

# (the type expected, the form given) pairs that main's lax mode took and the new reader
# refuses; each is a row of docs/profiles.md's table.
LAX = {
    ("int", "numeric text"),  # "3": main made it 3
    ("int", "integral float"),  # 3.0: main made it 3
    ("int", "bool"),  # true: main made it 1
    ("float", "numeric text"),  # "3.5", "nan", "inf": main made it a float
    ("float", "bool"),  # true: main made it 1.0
    ("bool", "bool text"),  # "true", "yes", "on", "false", "no", "off"
    ("bool", "numeric text"),  # "0" and "1"
    ("bool", "int"),  # 0 and 1
    ("bool", "integral float"),  # 0.0 and 1.0
    ("int literal", "integral float"),  # zero_stage: 3.0: main made it 3
}

GARBAGE: list[tuple[str, Any]] = [
    ("numeric text", "3"),
    ("numeric text", "3.5"),
    ("numeric text", "-1"),
    ("numeric text", "nan"),
    ("numeric text", "inf"),
    ("numeric text", "0"),
    ("numeric text", "1"),
    ("numeric text", "2"),
    ("bool text", "true"),
    ("bool text", "yes"),
    ("bool text", "off"),
    ("text", ""),
    ("text", "garbage"),
    ("text", "higher"),
    ("text", "ecc"),
    ("text", "ibperf"),
    ("bool", True),
    ("bool", False),
    ("int", 0),
    ("int", 1),
    ("int", 2),
    ("int", 7),
    ("int", -1),
    ("integral float", 3.0),
    ("integral float", 0.0),
    ("integral float", 1.0),
    ("integral float", 2.0),
    ("integral float", -1.0),
    ("float", 0.5),
    ("float", 3.5),
    ("float", -0.5),
    ("float", float("nan")),
    ("float", float("inf")),
    ("float", float("-inf")),
    ("huge int", 2**70),
    ("huge int", -(2**70)),
    ("huge int", 10**400),
    ("null", None),
    ("list", []),
    ("list", [1, "a", None]),
    ("list", [[[]]]),
    ("list", ["ecc"]),
    ("set", {"ecc"}),
    ("dict", {}),
    ("dict", {"a": 1}),
    ("dict", {"": {"": [None, {}]}}),
    ("dict", {"name": "gpu"}),
    ("date", __import__("datetime").date(2026, 1, 2)),
    ("bytes", b"\x00\xff"),
]


def _is_object(tp: Any) -> bool:
    """A Struct (the profile's, the suite's) or a dataclass (the recipe's)."""
    return isinstance(tp, type) and (issubclass(tp, msgspec.Struct) or dataclasses.is_dataclass(tp))


def _hints(cls: type) -> dict[str, Any]:
    every = typing.get_type_hints(cls, include_extras=True)
    if issubclass(cls, msgspec.Struct):
        return {name: every[name] for name in cls.__struct_fields__}
    return {f.name: every[f.name] for f in dataclasses.fields(cls)}


def _bare(tp: Any) -> Any:
    if typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        members = [m for m in typing.get_args(tp) if m is not type(None)]
        if len(members) == 1:
            tp = _bare(members[0])
    return tp


def sites(tp: Any, value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(path, type) of every value in a document, by the new schema's types."""
    yield path, tp
    tp = _bare(tp)
    if _is_object(tp) and isinstance(value, dict):
        hints = _hints(tp)
        for key, item in value.items():
            if key in hints:
                yield from sites(hints[key], item, (*path, key))
    elif typing.get_origin(tp) is list and isinstance(value, list):
        for i, item in enumerate(value):
            yield from sites(typing.get_args(tp)[0], item, (*path, i))
    elif typing.get_origin(tp) is dict and isinstance(value, dict):
        for key, item in value.items():
            yield from sites(typing.get_args(tp)[1], item, (*path, key))


def kind_of(tp: Any) -> str:
    tp = _bare(tp)
    for name, base in (("bool", bool), ("int", int), ("float", float), ("str", str)):
        if tp is base:
            return name
    if typing.get_origin(tp) is Literal:
        return "int literal" if all(type(a) is int for a in typing.get_args(tp)) else "literal"
    return getattr(typing.get_origin(tp), "__name__", getattr(tp, "__name__", repr(tp)))


def at(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def replaced(data: Any, path: tuple[Any, ...], garbage: Any) -> Any:
    """`data` with the value at `path` replaced: the containers along the path copied, the
    rest shared (neither reader changes what it reads)."""
    if not path:
        return garbage
    data = copy.copy(data)
    data[path[0]] = replaced(data[path[0]], path[1:], garbage) if path[1:] else garbage
    return data


def documents() -> Iterator[tuple[Kind, str, Any]]:
    """The richest document of each kind: gb300 (every section, NVL72's fields, the
    by-ranks floors) written out whole, and with its tolerances as a partial section; the
    prolog and acceptance suites; the tiny recipe, and with every optional key set."""
    full = as_json(profile.load("gb300"))
    yield KINDS["profile"], "gb300 whole", full
    partial = {**full, "tolerances": {"burnin.mfu": {"baseline_pct": 2}, "nccl.busbw": {}}}
    partial["gpu"] = {**partial["gpu"], "pcie_host_gen": 5, "bf16_achievable_tflops": 1.5}
    yield KINDS["profile"], "gb300 partial tolerances", partial
    for name in ("prolog", "acceptance"):
        yield KINDS["suite"], name, read_yaml(suite.suites_dir() / f"{name}.yaml", OSError)
    tiny = as_json(recipe.load("tiny"))
    yield KINDS["recipe"], "tiny", tiny
    by_minutes = {**tiny["train"], "steps": None, "minutes": 2.5}
    jsonl = {"kind": "jsonl", "path": "/data/pairs.jsonl"}
    yield KINDS["recipe"], "tiny by minutes, jsonl", {**tiny, "train": by_minutes, "data": jsonl}


def test_each_form_in_each_place_main_refused_is_refused() -> None:
    """Each GARBAGE form in each place of each document: main refused -> refused; both
    took it -> the same value; only main took it -> one of LAX, and LAX is all that is."""
    observed: set[tuple[str, str]] = set()
    tried = 0
    for kind, name, data in documents():
        for path, tp in list(sites(kind.schema, data)):
            for form, garbage in GARBAGE:
                changed = replaced(data, path, garbage)
                ok_main, old = main_reads(kind, changed)
                ok_new, new = new_reads(kind, changed)
                where = f"{name} {path}: {form} {garbage!r} for {kind_of(tp)}"
                tried += 1
                if not ok_main:
                    assert not ok_new, f"{where}: main refused it, the new reader took it"
                elif ok_new:
                    assert typed(new) == typed(old), where
                else:
                    assert (kind_of(tp), form) in LAX, f"{where}: refused ({new})"
                    observed.add((kind_of(tp), form))
    assert observed == LAX
    assert tried > 10_000


def test_a_dict_of_int_keys_takes_them_as_text_too() -> None:
    """The by-ranks floors' keys: YAML writes ints, JSON (an inventory's overrides) text;
    main took both, and so does the new reader. Other keys main took, it refuses."""
    kind, full = KINDS["profile"], as_json(profile.load("gb300"))
    for keys, both in (([4, 8], True), (["4", "8"], True), ([4.0, 8], False), ([True], False)):
        nccl = {**full["nccl"], "allreduce_busbw_min_gb_s_by_ranks": dict.fromkeys(keys, 600)}
        data = {**full, "nccl": nccl}
        ok_main, old = main_reads(kind, data)
        ok_new, new = new_reads(kind, data)
        assert ok_main
        assert ok_new is both, (keys, new)
        if both:
            assert typed(new) == typed(old)
    for keys in (["x"], [None], ["4.5"], [-(2**70), "y"]):
        nccl = {**full["nccl"], "allreduce_busbw_min_gb_s_by_ranks": dict.fromkeys(keys, 600)}
        assert not main_reads(kind, {**full, "nccl": nccl})[0]
        assert not new_reads(kind, {**full, "nccl": nccl})[0]


def _path(path: tuple[Any, ...]) -> str:
    """A path as the reader writes it: gpu.count, probes[0].name, tolerances['nccl.busbw']."""
    out = ""
    for step in path:
        if isinstance(step, int):
            out += f"[{step}]"
        elif step.isidentifier():
            out += f".{step}" if out else step
        else:
            out += f"[{step!r}]"
    return out


def objects(kind: Kind, data: Any) -> Iterator[tuple[tuple[Any, ...], type]]:
    """(path, dataclass) of every object of a document."""
    for path, tp in sites(kind.schema, data):
        if _is_object(_bare(tp)) and isinstance(at(data, path), dict):
            yield path, _bare(tp)


def test_an_unknown_key_at_each_level_is_named_and_refused_by_both() -> None:
    for kind, _, data in documents():
        for path, _ in objects(kind, data):
            for key in ("zzz_extra", "pcie_gn", "Name", "__class__"):
                changed = copy.deepcopy(data)
                at(changed, path)[key] = 1
                assert not main_reads(kind, changed)[0]
                ok_new, text = new_reads(kind, changed)
                assert not ok_new
                assert text == f"mine.yaml: {_path((*path, key))}: unknown key"


def test_a_key_removed_at_each_level_is_refused_where_main_refused_it() -> None:
    for kind, name, data in documents():
        for path, _ in objects(kind, data):
            for key in list(at(data, path)):
                changed = copy.deepcopy(data)
                del at(changed, path)[key]
                ok_main, old = main_reads(kind, changed)
                ok_new, new = new_reads(kind, changed)
                assert ok_main is ok_new, (name, path, key, new)
                if ok_main:
                    assert typed(new) == typed(old)
                elif key in _required(_bare(at_type(kind, path))):
                    assert new == f"mine.yaml: {_path((*path, key))}: missing (a required key)"


def _required(cls: type) -> set[str]:
    if issubclass(cls, msgspec.Struct):
        return {f.name for f in msgspec.structs.fields(cls) if f.required}
    missing = dataclasses.MISSING
    fields = dataclasses.fields(cls)
    return {f.name for f in fields if f.default is missing and f.default_factory is missing}


def at_type(kind: Kind, path: tuple[Any, ...]) -> Any:
    tp: Any = kind.schema
    for step in path:
        tp = _bare(tp)
        tp = _hints(tp)[step] if _is_object(tp) else typing.get_args(tp)[-1]
    return tp


def test_a_renamed_key_is_named_as_unknown_before_the_missing_one() -> None:
    """A typo of a required key leaves it missing too: the typo is what is named."""
    for kind, _, data in documents():
        for path, _ in objects(kind, data):
            for key in list(at(data, path)):
                changed = copy.deepcopy(data)
                held = at(changed, path)
                held[f"{key}x"] = held.pop(key)
                ok_new, text = new_reads(kind, changed)
                assert not ok_new
                assert text == f"mine.yaml: {_path((*path, f'{key}x'))}: unknown key"


GB300 = as_json(profile.load("gb300"))
BY_RANKS = ("nccl", "allreduce_busbw_min_gb_s_by_ranks")


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("gpu", "count"), "eight", "gpu.count: expected int, got str"),
        (("gpu", "count"), 0, "gpu.count: expected int >= 1"),
        (("gpu", "count"), True, "gpu.count: expected int, got bool"),
        (("gpu", "power_limit_w"), "700", "gpu.power_limit_w: expected float, got str"),
        (
            ("gpu", "reports"),
            ["ecc", "temps"],
            "gpu.reports[1]: invalid value 'temps' (one of: 'ecc', 'remapped_rows', 'power_limit')",
        ),
        (("network", "write_bw_min_fraction"), 1.5, "network.write_bw_min_fraction: expected"),
        (("network", "rail_median_tolerance"), 0, "network.rail_median_tolerance: expected"),
        (("uplink", "dataset_bytes"), -1, "uplink.dataset_bytes: expected int >= 1"),
        (("nvlink", "domain_gpus"), 0, "nvlink.domain_gpus: expected int >= 1"),
        (
            BY_RANKS,
            {4: 1.0, "x": 2.0},
            "nccl.allreduce_busbw_min_gb_s_by_ranks: key 'x': expected int, got str",
        ),
        (
            BY_RANKS,
            {4: 1.0, 8: "fast"},
            "nccl.allreduce_busbw_min_gb_s_by_ranks[8]: expected float, got str",
        ),
        (
            ("tolerances",),
            {"burnin.mfu": {"baseline_pct": -1}},
            "tolerances['burnin.mfu'].baseline_pct: expected float >= 0",
        ),
        (
            ("tolerances",),
            {"gemm.tflops": {"better": "faster"}},
            "tolerances['gemm.tflops'].better: invalid value 'faster' (one of: 'higher', 'lower')",
        ),
        (("tolerances",), {"nccl.busbw": 5}, "tolerances['nccl.busbw']: expected object, got int"),
        (("tolerances",), ["nccl.busbw"], "tolerances: expected object, got array"),
        (
            ("tolerances",),
            {"nccl.bsubw": {}},
            "tolerances: unknown metric 'nccl.bsubw' (known: nccl.busbw, burnin.mfu, ",
        ),
        (("gpu",), None, "gpu: expected object, got null"),
        (("software", "min_cuda"), 12.9, "software.min_cuda: expected str, got float"),
    ],
)
def test_each_error_is_one_line_naming_the_key_path(
    path: tuple[str, ...], value: object, message: str
) -> None:
    with pytest.raises(profile.ProfileError) as caught:
        profile.parse(replaced(GB300, path, value), "mine.yaml")
    assert str(caught.value).startswith(f"mine.yaml: {message}"), str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_missing_key_and_the_top_level_are_named() -> None:
    data = as_json(profile.load("gb300"))
    del data["gpu"]["count"]
    with pytest.raises(profile.ProfileError, match=r"^x: gpu\.count: missing \(a required key\)$"):
        profile.parse(data, "x")
    for top, said in (([1], "array"), (None, "null"), ("text", "str"), (3, "int")):
        with pytest.raises(profile.ProfileError) as caught:
            profile.parse(top, "x")
        assert str(caught.value) == f"x: (top level): expected object, got {said}"


def test_a_long_or_odd_key_is_shown_quoted_and_cut() -> None:
    data = replaced(GB300, ("gpu", "a key\nwith a newline" + "z" * 100), 1)
    with pytest.raises(profile.ProfileError) as caught:
        profile.parse(data, "x")
    text = str(caught.value)
    assert text.startswith("x: gpu['a key\\nwith a newline zzz".replace(" zzz", "zzz"))
    assert text.endswith("...]: unknown key") and len(text) < 80 and "\n" not in text
    with pytest.raises(profile.ProfileError) as caught:
        profile.parse(replaced(GB300, ("gpu", "reports"), ["x\n" * 100]), "x")
    assert str(caught.value) == (
        "x: gpu.reports[0]: invalid value '" + "x\\n" * 12 + "... (one of: 'ecc', "
        "'remapped_rows', 'power_limit')"
    )


def test_lax_is_what_docs_profiles_md_lists() -> None:
    doc = DOCS.read_text()
    section = doc.split("## How a YAML file is read", 1)[1].split("\n## ", 1)[0]
    rows = {
        tuple(cell.strip().strip("`") for cell in line.strip("|").split("|")[:2])
        for line in section.splitlines()
        if line.startswith("| `")
    }
    assert rows == LAX


def test_a_profile_written_out_reads_back_the_same() -> None:
    """as_json (profiles show --json, a node's overrides merged on) reads back equal."""
    for name in profile.available():
        loaded = profile.load(name)
        text = yaml.safe_dump(as_json(loaded))
        assert profile.parse(yaml.safe_load(text), name) == loaded


def test_reading_every_shipped_file_imports_no_pydantic() -> None:
    """Profiles, suites and recipes read (and --profile auto's lookup) without pydantic:
    `bringup slurm healthcheck` reads its suite and every shipped profile at each job start."""
    code = (
        "import sys\n"
        "from bringup import profile, recipe, schema, suite\n"
        "for name in profile.available(): profile.load(name)\n"
        "for name in suite.available(): suite.load(name)\n"
        "for name in recipe.available(): recipe.load(name)\n"
        "profile.for_gpu('NVIDIA B300 SXM6 AC')\n"
        "try:\n"
        "    profile.parse({'gpu': {'count': '8'}}, 'x')\n"
        "except profile.ProfileError:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('pydantic')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "[]\n"
