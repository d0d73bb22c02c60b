"""The facts validator (facts.validate_facts: msgspec, strict) against the one it replaced
(pydantic's TypeAdapter over the same dataclass, lax mode), over every probe's FACTS type.

- Values built from the type, in the forms the node's probes write (dataclasses.asdict
  and json), validate to the same object under both: the same dataclasses, the same
  values, the same Python types (an int given for a float is a float under both).
- One mutation of such a value (a wrong type, a number as text, a bool for an int, a
  missing or extra key, NaN and infinities, a huge int, nested garbage): whatever pydantic
  refused the new validator refuses too; where both take it, the same object; where only
  pydantic took it, the form is one docs/json.md lists as refused ("How a probe's facts
  are read"), and STRICTER below holds that list.
- Every real record at hand (the demo fleet, whose healthy node is the simulated B300's
  gpu record; the recorded run in tests/fixtures/rundir; every public tool output in
  tests/fixtures parsed by the node's own parsers) reads the same under both.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from bringup.facts import FactsError, ProbeRecord, decode, validate_facts
from bringup.node.catalog import PROBES

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FACT_TYPES = {name: PROBES[name].FACTS for name in PROBES}
_PYDANTIC: dict[type, TypeAdapter[Any]] = {}

# (the type expected, the form given) pairs that pydantic's lax mode took and the new
# validator refuses; each is a row of docs/json.md's table, and no probe writes it.
STRICTER = {
    ("int", "numeric text"),  # "3": pydantic made it 3
    ("int", "integral float"),  # 3.0: pydantic made it 3
    ("int", "bool"),  # true: pydantic made it 1
    ("float", "numeric text"),  # "3.5", "nan", "inf": pydantic made it a float
    ("float", "bool"),  # true: pydantic made it 1.0
    ("bool", "bool text"),  # "true", "yes", "on", "false", "no", "off"
    ("bool", "numeric text"),  # "0" and "1"
    ("bool", "int"),  # 0 and 1
    ("bool", "integral float"),  # 0.0 and 1.0
}


def _pydantic(facts_type: type) -> TypeAdapter[Any]:
    adapter = _PYDANTIC.get(facts_type)
    if adapter is None:
        adapter = _PYDANTIC[facts_type] = TypeAdapter(facts_type)
    return adapter


def typed(value: Any) -> Any:
    """A value as a tree that compares its Python types too (3 is not 3.0) and NaN equal
    to NaN, for "the same object under both"."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return (
            type(value).__name__,
            tuple((f.name, typed(getattr(value, f.name))) for f in fields),
        )
    if isinstance(value, list):
        return ("list", tuple(typed(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, typed(v)) for k, v in value.items()))
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else value)
    return (type(value).__name__, value)


# --- values built from a type, and the places in them a mutation can go ---------------


@dataclasses.dataclass
class Site:
    """One place in a built value: where it is, and the type it has there."""

    path: tuple[str | int, ...]
    type: Any


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _required(field: dataclasses.Field[Any]) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def build(draw: Callable[..., Any], tp: Any, path: tuple[str | int, ...], sites: list[Site]) -> Any:
    """A JSON value of type `tp` in the forms json writes a probe's facts: an int or a
    float for a float field, keys for every required field and some of the others."""
    sites.append(Site(path, tp))
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        hints = _hints(tp)
        out: dict[str, Any] = {}
        for field in dataclasses.fields(tp):
            if _required(field) or draw(st.booleans()):
                out[field.name] = build(draw, hints[field.name], (*path, field.name), sites)
        return out
    if origin in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        assert len(args) == 1, f"a union the test does not build: {tp}"  # facts have X | None only
        return None if draw(st.booleans()) else build(draw, args[0], path, sites)
    if origin is list:
        (item,) = typing.get_args(tp)
        return [build(draw, item, (*path, i), sites) for i in range(draw(st.integers(0, 2)))]
    if origin is dict:
        key, item = typing.get_args(tp)
        assert key is str, f"a dict key the test does not build: {tp}"
        keys = draw(st.lists(st.text(max_size=6), max_size=2, unique=True))
        return {k: build(draw, item, (*path, k), sites) for k in keys}
    if tp is bool:
        return draw(st.booleans())
    if tp is int:
        return draw(st.integers())
    if tp is float:
        return draw(st.one_of(st.floats(), st.integers(-(2**53), 2**53)))
    if tp is str:
        return draw(st.text(max_size=8))
    raise AssertionError(f"a type the test does not build: {tp!r}")


# The forms a mutation puts in place of a value, each with the name STRICTER uses.
GARBAGE: list[tuple[str, Any]] = [
    ("numeric text", "3"),
    ("numeric text", "3.5"),
    ("numeric text", "-0"),
    ("numeric text", "nan"),
    ("numeric text", "inf"),
    ("numeric text", "1e3"),
    ("bool text", "true"),
    ("bool text", "yes"),
    ("bool text", "off"),
    ("numeric text", "0"),
    ("numeric text", "1"),
    ("text", ""),
    ("text", "garbage"),
    ("bool", True),
    ("bool", False),
    ("int", 0),
    ("int", 1),
    ("int", 7),
    ("int", -1),
    ("integral float", 3.0),
    ("integral float", 0.0),
    ("integral float", 1.0),
    ("float", 3.5),
    ("float", float("nan")),
    ("float", float("inf")),
    ("float", float("-inf")),
    ("huge int", 2**64),
    ("huge int", 2**70),
    ("huge int", -(2**70)),
    ("huge int", 10**400),
    ("null", None),
    ("list", []),
    ("list", [1, "a", None]),
    ("list", [[[]]]),
    ("dict", {}),
    ("dict", {"a": 1}),
    ("dict", {"": {"": [None, {}]}}),
]


def _kind_of(tp: Any) -> str:
    """The name STRICTER uses for the type at a site: its own, None left out."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (types.UnionType, typing.Union) and len(args) == 1:
        tp = args[0]
    for name, base in (("bool", bool), ("int", int), ("float", float), ("str", str)):
        if tp is base:
            return name
    return getattr(typing.get_origin(tp), "__name__", getattr(tp, "__name__", repr(tp)))


def _at(value: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def mutate(draw: Callable[..., Any], value: Any, sites: list[Site]) -> tuple[Any, tuple[str, str]]:
    """`value` with one place changed, and (the type there, the form put there)."""
    site = draw(st.sampled_from(sites))
    kind = _kind_of(site.type)
    held = _at(value, site.path)
    choices = ["replace"]
    if dataclasses.is_dataclass(site.type):
        choices.append("extra key")
        if held:
            choices.append("missing key")
    how = draw(st.sampled_from(choices))
    if how == "extra key":
        # A key the dataclass does not name (one it names is a value of the wrong form).
        named = {f.name for f in dataclasses.fields(site.type)}
        name = draw(st.sampled_from(["zzz_extra", "", "gpus", "index", "__class__", "probe"]))
        if name in named:
            how = "replace"
        else:
            held[name] = draw(st.sampled_from([g for _, g in GARBAGE]))
            return value, (kind, "extra key")
    if how == "missing key":
        name = draw(st.sampled_from(sorted(held)))
        del held[name]
        return value, (kind, "missing key")
    form, garbage = draw(st.sampled_from(GARBAGE))
    if not site.path:
        return garbage, (kind, form)
    parent = _at(value, site.path[:-1])
    parent[site.path[-1]] = garbage
    return value, (kind, form)


def _pydantic_reads(facts_type: type, data: Any) -> tuple[bool, Any]:
    try:
        return True, _pydantic(facts_type).validate_python(data)
    except ValidationError:
        return False, None


def _new_reads(facts_type: type, data: Any) -> tuple[bool, Any]:
    try:
        return True, validate_facts("p", facts_type, data)
    except FactsError as exc:
        text = str(exc)
        assert "\n" not in text and text.startswith("facts of probe 'p' invalid at "), text
        return False, None


# Every probe's type, so few examples each in the unit tier; BRINGUP_TEST_EXAMPLES=200 for a
# thorough run. test_every_form_in_every_place_of_each_kind covers the forms exhaustively.
EXAMPLES = int(os.environ.get("BRINGUP_TEST_EXAMPLES", "20"))
PROPS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("probe", sorted(FACT_TYPES))
@PROPS
@given(data=st.data())
def test_values_built_from_the_type_read_the_same_under_both(
    probe: str, data: st.DataObject
) -> None:
    facts_type = FACT_TYPES[probe]
    value = build(data.draw, facts_type, (), [])
    ok_old, old = _pydantic_reads(facts_type, value)
    ok_new, new = _new_reads(facts_type, value)
    assert ok_old and ok_new, (ok_old, ok_new)
    assert typed(new) == typed(old)


@pytest.mark.parametrize("probe", sorted(FACT_TYPES))
@PROPS
@given(data=st.data())
def test_a_mutated_value_pydantic_refused_is_refused(probe: str, data: st.DataObject) -> None:
    facts_type = FACT_TYPES[probe]
    sites: list[Site] = []
    value, (kind, form) = mutate(data.draw, build(data.draw, facts_type, (), sites), sites)
    ok_old, old = _pydantic_reads(facts_type, value)
    ok_new, new = _new_reads(facts_type, value)
    event(f"pydantic {'took' if ok_old else 'refused'}, new {'took' if ok_new else 'refused'}")
    if not ok_old:
        assert not ok_new, f"{form} for {kind}: pydantic refused it, the new validator took it"
    elif ok_new:
        assert typed(new) == typed(old)
    else:
        assert (kind, form) in STRICTER, f"{form} for {kind}: refused, and not in docs/json.md"


@dataclasses.dataclass
class Inner:
    n: int
    x: float | None = None


# One place of each kind a facts type has, each a field of its own small dataclass.
KINDS: list[Any] = [
    int,
    float,
    str,
    bool,
    int | None,
    float | None,
    str | None,
    bool | None,
    list[int],
    list[float],
    dict[str, int],
    dict[str, str],
    Inner,
    Inner | None,
    list[Inner],
]


def test_every_form_in_every_place_of_each_kind() -> None:
    """Each form of GARBAGE as the value of a field of each kind: whatever pydantic refused
    is refused; what both take is the same; and what only pydantic took is exactly
    STRICTER (so docs/json.md's table lists every difference, and no other)."""
    observed: set[tuple[str, str]] = set()
    for kind in KINDS:
        holder = dataclasses.make_dataclass("Holder", [("v", kind)])
        for form, garbage in GARBAGE:
            ok_old, old = _pydantic_reads(holder, {"v": garbage})
            ok_new, new = _new_reads(holder, {"v": garbage})
            if not ok_old:
                assert not ok_new, f"{form} {garbage!r} for {kind}: only the new one took it"
            elif ok_new:
                assert typed(new) == typed(old), f"{form} {garbage!r} for {kind}"
            else:
                observed.add((_kind_of(kind), form))
    assert observed == STRICTER


def test_stricter_is_what_docs_json_md_lists() -> None:
    """Every pair of STRICTER has its row in docs/json.md's table, and only those."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "json.md").read_text()
    section = doc.split("## How a probe's facts are read", 1)[1].split("\n## ", 1)[0]
    rows = {
        tuple(cell.strip().strip("`") for cell in line.strip("|").split("|")[:2])
        for line in section.splitlines()
        if line.startswith("| `")
    }
    assert rows == STRICTER


# --- real records ----------------------------------------------------------------------


def _real_records() -> Iterator[tuple[str, type, Any]]:
    """(where, its facts type, its facts as JSON) of every real record at hand."""
    from bringup.recognize import KINDS, InspectError, detect
    from bringup.sim.demo import demo_nodes

    for node in demo_nodes():  # the healthy one first: the simulated B300's gpu record
        for name, record in node.probes.items():
            yield f"demo {node.node} {name}", FACT_TYPES[name], record.facts
    for file in sorted((FIXTURES / "rundir").rglob("facts/*.json")):
        doc = json.loads(file.read_text())
        for name, record in doc["probes"].items():
            if record["ok"]:
                yield f"{file.relative_to(FIXTURES)} {name}", FACT_TYPES[name], record["facts"]
    for file in sorted(FIXTURES.rglob("*")):
        if not file.is_file() or file.suffix in (".md", ".yaml", ".ini", ".py"):
            continue
        text = file.read_text(errors="replace")
        try:
            kind = detect(text)
            facts = kind.parse(text)
        except (InspectError, ValueError, LookupError, TypeError, AttributeError):
            continue  # not a tool output, or one its parser refuses (tests say which)
        if facts is not None and kind in KINDS:
            as_sent = json.loads(json.dumps(dataclasses.asdict(facts)))
            yield f"{file.relative_to(FIXTURES)} ({kind.name})", type(facts), as_sent


def test_every_real_record_reads_the_same_under_both() -> None:
    seen = 0
    for where, facts_type, data in _real_records():
        ok_old, old = _pydantic_reads(facts_type, data)
        ok_new, new = _new_reads(facts_type, data)
        assert ok_old and ok_new, where
        assert typed(new) == typed(old), where
        seen += 1
    assert seen > 100  # the demo fleet, the recorded run and the parsed tool outputs


def test_the_simulated_b300s_gpu_record_reads_into_the_same_dataclasses() -> None:
    from bringup.sim.demo import demo_nodes

    record = demo_nodes()[0].probes["gpu"]
    facts = decode(record)
    assert typed(facts) == typed(_pydantic(FACT_TYPES["gpu"]).validate_python(record.facts))
    assert len(facts.gpus) == 8 and facts.gpus[0].name == "NVIDIA B300 SXM6 AC"
    assert facts.gpus[0].memory_total_bytes == 288400343040


@pytest.mark.parametrize(
    ("facts", "message"),
    [
        ({"gpus": "not a list"}, "at gpus: Expected `array`, got `str`"),
        (
            {"source": "nvml", "gpus": [{"index": "0"}]},
            "at gpus[0].index: Expected `int`, got `str`",
        ),
        (None, "at the top: Expected `object`, got `null`"),
        ("text", "at the top: Expected `object`, got `str`"),
        ([{"gpus": []}], "at the top: Expected `object`, got `array`"),
    ],
)
def test_facts_that_do_not_fit_are_one_line_naming_where(facts: Any, message: str) -> None:
    with pytest.raises(FactsError) as raised:
        validate_facts("gpu", FACT_TYPES["gpu"], facts)
    assert str(raised.value) == f"facts of probe 'gpu' invalid {message}"


def test_the_place_is_named_down_to_the_field() -> None:
    from bringup.sim.demo import demo_nodes

    facts = json.loads(json.dumps(demo_nodes()[0].probes["gpu"].facts))
    facts["gpus"][3]["memory_total_bytes"] = "288400343040"
    record = ProbeRecord(probe="gpu", ok=True, facts=facts)
    with pytest.raises(FactsError) as raised:
        decode(record)
    assert str(raised.value) == (
        "facts of probe 'gpu' invalid at gpus[3].memory_total_bytes:"
        " Expected `int | null`, got `str`"
    )
