"""A run's records are plain dataclasses (issue 31): `ProbeRecord`, `NodeFacts`, `Source`,
`Provenance`, `Resumed`, `Manifest` and `Override`, built by the tool's code without
pydantic, read from files and nodes by msgspec, strictly, and written byte for byte as the
pydantic models wrote them: facts/<node>.json, the journal's lines and manifest.json are
evidence (the manifest's SHA-256 is what `verify`, a handover and a replay quote).

The reference is the pydantic models as they stood on main before the change, copied here
(`Main*`), and main's reader of a journal line (`main_entry`): every property compares the
new code with them. Refused alike: whatever main refused is refused; what main took is
read the same unless it is a form no run writes (pydantic's lax mode coerced it: "true"
for a bool), which is refused too (docs/json.md, "How a run's records are read")."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, ValidationError

from bringup import __version__, jsondata
from bringup.facts import (
    NodeFacts,
    ProbeRecord,
    node_facts_text,
    read_node_facts,
    read_record,
    record_json,
    record_text,
)
from bringup.journal import _entry
from bringup.provenance import Provenance, Resumed, Source
from bringup.rundir import Manifest, Override, manifest_text, parse_manifest

# --- the reference: the models on main before issue 31 -------------------------------------

SourceKind = Literal["demo", "replayed", "file", "simulated"]
Mode = Literal["live", "demo", "replay", "resume"]
Layout = Literal["flat", "sharded"]


class MainSource(BaseModel):
    kind: SourceKind
    of: str | None = None
    sha256: str | None = None


class MainProbeRecord(BaseModel):
    probe: str
    ok: bool
    error: str | None = None
    facts: dict[str, Any] | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    started_at: str | None = None
    duration_s: float = 0.0
    provenance: list[MainSource] = Field(default_factory=list)


class MainNodeFacts(BaseModel):
    node: str
    bringup_version: str
    collected_at: str
    probes: dict[str, MainProbeRecord] = Field(default_factory=dict)


class MainResumed(BaseModel):
    at: str
    argv: list[str] = Field(default_factory=list)
    controller: str = ""


class MainProvenance(BaseModel):
    mode: Mode = "live"
    argv: list[str] = Field(default_factory=list)
    controller: str = ""
    replay_of: str | None = None
    replay_manifest_sha256: str | None = None
    resumed: list[MainResumed] = Field(default_factory=list)


class MainOverride(BaseModel):
    field: str
    profile: Any = None
    value: Any = None


class MainManifest(BaseModel):
    version: str = __version__
    command: str
    profile: str | None = None
    suite: str | None = None
    started_at: str
    ended_at: str | None = None
    status: str = "running"
    exit_code: int | None = None
    findings_bad: int | None = None
    nodes: list[str] = Field(default_factory=list)
    inventory: str | None = None
    limit: str | None = None
    data_dirs: list[str] = Field(default_factory=list)
    suite_source: str | None = None
    probes: list[str] | None = None
    provenance: MainProvenance | None = None
    files_sha256: dict[str, str] | None = None
    slurm_job_id: str | None = None
    slurm_nodes: list[str] = Field(default_factory=list)
    overrides: dict[str, list[MainOverride]] = Field(default_factory=dict)
    jobs: list[list[str]] = Field(default_factory=list)
    layout: Layout = "flat"


def main_entry(line: str) -> tuple[str, MainProbeRecord | None] | None:
    """journal.py's reader of a journal line on main."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    if set(data) == {"settled"} and isinstance(data["settled"], str):
        return data["settled"], None
    if set(data) != {"node", "record"} or not isinstance(data["node"], str):
        return None
    try:
        return data["node"], MainProbeRecord.model_validate(data["record"])
    except ValidationError:
        return None


# --- values as the tool builds them ---------------------------------------------------------

# Numbers of every kind a probe reports: tiny and huge (pydantic wrote 1e-05 as 0.00001 and
# 1e20 as 1e+20), -0.0, integral floats (3.0 is not 3), inf and nan (written null).
floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=1e-12, max_value=1e-3),
    st.floats(min_value=1e16, max_value=1e300),
    st.sampled_from([1e-05, -1.234e-05, 1e-07, 1e16, 1e20, -0.0, 0.0, 3.0]),
    st.integers(-(10**18), 10**18).map(float),
)
finite = floats.filter(math.isfinite)
texts = st.one_of(
    st.text(max_size=12), st.sampled_from(["", "°C", "GPU 3 — ΔT", 'a\nb\t"c"\\', "\x7f\u2028"])
)
maybe_text = st.one_of(st.none(), texts)


def json_values(number: st.SearchStrategy[float] = floats) -> st.SearchStrategy[Any]:
    """JSON data: nested dicts and lists of text, numbers (huge ints too), booleans, None."""
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(), st.integers(2**63, 2**80), number, texts
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(texts, inner, max_size=3)
        ),
        max_leaves=10,
    )


def some_of(draw: st.DrawFn, given: dict[str, st.SearchStrategy[Any]]) -> dict[str, Any]:
    """Each optional field given, or left to its default."""
    return {name: draw(values) for name, values in given.items() if draw(st.booleans())}


@st.composite
def source_fields(draw: st.DrawFn) -> dict[str, Any]:
    kinds = st.sampled_from(["demo", "replayed", "file", "simulated"])
    return {"kind": draw(kinds), **some_of(draw, {"of": maybe_text, "sha256": maybe_text})}


@st.composite
def record_fields(draw: st.DrawFn) -> dict[str, Any]:
    fields = {"probe": draw(texts), "ok": draw(st.booleans())}
    fields |= some_of(
        draw,
        {
            "error": maybe_text,
            "facts": st.one_of(st.none(), st.dictionaries(texts, json_values(), max_size=4)),
            "params": st.dictionaries(texts, json_values(), max_size=3),
            "started_at": maybe_text,
            # An int too: the model made it a float (0 written 0.0).
            "duration_s": st.one_of(floats, st.integers(-(10**15), 10**15)),
            "provenance": st.lists(source_fields(), max_size=3),
        },
    )
    return fields


@st.composite
def node_fields(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "node": draw(texts),
        "bringup_version": draw(texts),
        "collected_at": draw(texts),
        **some_of(draw, {"probes": st.dictionaries(texts, record_fields(), max_size=3)}),
    }


@st.composite
def manifest_fields(draw: st.DrawFn) -> dict[str, Any]:
    names = st.lists(texts, max_size=3)
    resumed = st.fixed_dictionaries({"at": texts}, optional={"argv": names, "controller": texts})
    provenance = st.fixed_dictionaries(
        {},
        optional={
            "mode": st.sampled_from(["live", "demo", "replay", "resume"]),
            "argv": names,
            "controller": texts,
            "replay_of": maybe_text,
            "replay_manifest_sha256": maybe_text,
            "resumed": st.lists(resumed, max_size=2),
        },
    )
    override = st.fixed_dictionaries(
        {"field": texts}, optional={"profile": json_values(), "value": json_values()}
    )
    numbers = st.one_of(st.none(), st.integers(), st.integers(2**63, 2**80))
    return {
        "command": draw(texts),
        "started_at": draw(texts),
        **some_of(
            draw,
            {
                "version": texts,
                "profile": maybe_text,
                "suite": maybe_text,
                "ended_at": maybe_text,
                "status": texts,
                "exit_code": numbers,
                "findings_bad": numbers,
                "nodes": names,
                "inventory": maybe_text,
                "limit": maybe_text,
                "data_dirs": names,
                "suite_source": maybe_text,
                "probes": st.one_of(st.none(), names),
                "provenance": st.one_of(st.none(), provenance),
                "files_sha256": st.one_of(st.none(), st.dictionaries(texts, texts, max_size=3)),
                "slurm_job_id": maybe_text,
                "slurm_nodes": names,
                "overrides": st.dictionaries(texts, st.lists(override, max_size=2), max_size=2),
                "jobs": st.lists(names, max_size=2),
                "layout": st.sampled_from(["flat", "sharded"]),
            },
        ),
    }


def both_records(fields: dict[str, Any]) -> tuple[ProbeRecord, MainProbeRecord]:
    chain = fields.get("provenance", [])
    mine = ProbeRecord(**{**fields, "provenance": [Source(**s) for s in chain]})
    return mine, MainProbeRecord(**{**fields, "provenance": [MainSource(**s) for s in chain]})


def both_nodes(fields: dict[str, Any]) -> tuple[NodeFacts, MainNodeFacts]:
    pairs = {name: both_records(r) for name, r in fields.get("probes", {}).items()}
    mine = NodeFacts(**{**fields, "probes": {name: p[0] for name, p in pairs.items()}})
    return mine, MainNodeFacts(**{**fields, "probes": {name: p[1] for name, p in pairs.items()}})


def both_manifests(fields: dict[str, Any]) -> tuple[Manifest, MainManifest]:
    made = fields.get("provenance")
    overrides = fields.get("overrides", {})
    mine_made = main_made = None
    if made is not None:
        resumed = made.get("resumed", [])
        mine_made = Provenance(**{**made, "resumed": [Resumed(**r) for r in resumed]})
        main_made = MainProvenance(**{**made, "resumed": [MainResumed(**r) for r in resumed]})
    mine = Manifest(
        **{
            **fields,
            "provenance": mine_made,
            "overrides": {n: [Override(**o) for o in c] for n, c in overrides.items()},
        }
    )
    main = MainManifest(
        **{
            **fields,
            "provenance": main_made,
            "overrides": {n: [MainOverride(**o) for o in c] for n, c in overrides.items()},
        }
    )
    return mine, main


SOME = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def as_text(data: object) -> str:
    """JSON data as text: nan == nan here, and 3 != 3.0."""
    return json.dumps(data, ensure_ascii=False)


# --- written byte for byte ------------------------------------------------------------------


@SOME
@given(fields=node_fields())
def test_a_facts_file_is_written_byte_for_byte_as_the_pydantic_model_wrote_it(
    fields: dict[str, Any],
) -> None:
    mine, main = both_nodes(fields)
    assert node_facts_text(mine) == main.model_dump_json(indent=2) + "\n"  # facts/<node>.json


@SOME
@given(fields=record_fields())
# found by hypothesis after the merges: record_json kept an infinity JSON has no form for
@example(fields={"probe": "", "ok": False, "facts": {"": float("inf")}})
@example(fields={"probe": "", "ok": False, "duration_s": float("inf")})
def test_a_record_is_written_byte_for_byte_as_the_pydantic_model_wrote_it(
    fields: dict[str, Any],
) -> None:
    mine, main = both_records(fields)
    assert record_text(mine) == main.model_dump_json()  # a journal line's record
    # As JSON data: what main's JSON text held (a number that is not finite is null there;
    # its model_dump kept a float field's infinity, which no JSON document can hold).
    assert as_text(record_json(mine)) == as_text(json.loads(main.model_dump_json()))


@SOME
@given(fields=manifest_fields())
def test_a_manifest_is_written_byte_for_byte_as_the_pydantic_model_wrote_it(
    fields: dict[str, Any],
) -> None:
    mine, main = both_manifests(fields)
    assert manifest_text(mine) == main.model_dump_json(indent=2) + "\n"


@pytest.mark.parametrize(
    ("number", "written"),
    [
        (1e-05, "0.00001"),
        (-1.234e-05, "-0.00001234"),
        (1e-07, "1e-7"),
        (1e16, "1e+16"),
        (1e20, "1e+20"),
        (1.5e300, "1.5e+300"),
        (-0.0, "-0.0"),
        (3.0, "3.0"),
        (math.inf, "null"),
        (math.nan, "null"),
    ],
)
def test_numbers_are_written_as_pydantic_wrote_them(number: float, written: str) -> None:
    """Where msgspec's text differs from pydantic's (1e16): put back, never inside a text."""
    record = ProbeRecord(probe="gpu 1e16", ok=True, facts={"x": number, "1e5": "2e5"})
    line = record_text(record)
    assert f'"facts":{{"x":{written},"1e5":"2e5"}}' in line
    assert '"probe":"gpu 1e16"' in line
    assert line == MainProbeRecord(probe="gpu 1e16", ok=True, facts=record.facts).model_dump_json()


def test_an_exponent_is_told_from_the_same_characters_in_a_text() -> None:
    """A GPU's UUID holds "3e5"; a key may hold what looks like a number's line."""
    facts = {
        "uuid": "GPU-3e5a1e9f-1e2",
        'x": 1e5': 1e17,
        "y\\": [1.5e20, "2e16", -2e16, {"1e5,": "1e5"}],
        "z": '": 1e5',
    }
    record = ProbeRecord(probe="3e3", ok=True, facts=facts, duration_s=1e16)
    node = NodeFacts(node="n1e1", bringup_version="1", collected_at="T", probes={"g": record})
    main = MainProbeRecord(probe="3e3", ok=True, facts=facts, duration_s=1e16)
    theirs = MainNodeFacts(node="n1e1", bringup_version="1", collected_at="T", probes={"g": main})
    assert record_text(record) == main.model_dump_json()
    assert node_facts_text(node) == theirs.model_dump_json(indent=2) + "\n"
    assert '"x\\": 1e5": 1e+17' in node_facts_text(node)


# Texts of the characters a number with an exponent is made of, and of what comes before
# one in JSON: what jsondata's quick look for an exponent must not take for a number.
number_like = st.text(alphabet='0123e5:,[]-." \\', max_size=10)


@settings(max_examples=300, deadline=None)
@given(
    facts=st.dictionaries(
        number_like,
        st.one_of(number_like, floats, st.lists(st.one_of(number_like, floats), max_size=3)),
        max_size=4,
    )
)
@example(facts={"uuid": "GPU-3e5a1e9f-1e2", "a": ":1e5", "b": "[2e16,3e3]"})
def test_texts_that_read_like_exponents_are_written_as_pydantic_wrote_them(
    facts: dict[str, Any],
) -> None:
    record = ProbeRecord(probe="gpu", ok=True, facts=facts)
    node = NodeFacts(node="n", bringup_version="1", collected_at="T", probes={"g": record})
    main = MainProbeRecord(probe="gpu", ok=True, facts=facts)
    theirs = MainNodeFacts(node="n", bringup_version="1", collected_at="T", probes={"g": main})
    assert record_text(record) == main.model_dump_json()
    assert node_facts_text(node) == theirs.model_dump_json(indent=2) + "\n"


def test_a_text_that_is_no_unicode_is_refused_as_pydantic_refused_it() -> None:
    """A lone surrogate (a node's JSON may hold "\\ud800") has no UTF-8: no file of it."""
    with pytest.raises(ValueError):
        MainProbeRecord(probe="gpu", ok=True, error="GPU \ud800").model_dump_json()
    with pytest.raises(ValueError):
        record_text(ProbeRecord(probe="gpu", ok=True, error="GPU \ud800"))


# --- read back as main read them --------------------------------------------------------------


@SOME
@given(fields=node_fields())
def test_what_main_wrote_reads_back_and_is_written_again_unchanged(
    fields: dict[str, Any],
) -> None:
    _, main = both_nodes(fields)
    text = main.model_dump_json(indent=2) + "\n"
    # A float field main held as an infinity it wrote as null, which main's own model then
    # refused to read (found by hypothesis): such a file was never readable; all others are.
    if outcome(lambda: type(main).model_validate_json(text)) is not None:
        assert node_facts_text(read_node_facts(text)) == text
    _, manifest = both_manifests({"command": "check", "started_at": "T"})
    written = manifest.model_dump_json(indent=2) + "\n"
    assert manifest_text(parse_manifest(written)) == written


@SOME
@given(fields=manifest_fields())
def test_a_manifest_main_wrote_reads_back_unchanged(fields: dict[str, Any]) -> None:
    _, main = both_manifests(fields)
    text = main.model_dump_json(indent=2) + "\n"
    assert manifest_text(parse_manifest(text)) == text


def test_the_recorded_run_main_wrote_reads_as_main_read_it() -> None:
    """tests/fixtures/rundir/flat-2node, written by main: each file read and written again
    gives what main's models give (the manifest gains `layout`, as on main)."""
    run = Path(__file__).parents[1] / "fixtures" / "rundir" / "flat-2node"
    for file in sorted((run / "facts").glob("*.json")):
        text = file.read_text()
        assert node_facts_text(read_node_facts(text)) == text
    text = (run / "manifest.json").read_text()
    main = MainManifest.model_validate_json(text).model_dump_json(indent=2) + "\n"
    assert manifest_text(parse_manifest(text)) == main


# --- hostile input: refused where main refused it ----------------------------------------------

CONFUSING = st.sampled_from(
    ["true", "1", "3.5", "", "live", "flat", "demo", 1, 0, 1.0, 3.5, True, None, [], {}, 2**70, -1]
)


@st.composite
def mutated(draw: st.DrawFn, value: Any) -> Any:
    """`value` (JSON data a run wrote) as an edit, a foreign tool or an attacker leaves it:
    values swapped for others of any type, keys dropped, keys added."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.one_of(CONFUSING, json_values(finite)))
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if draw(st.integers(0, 11)) == 0:
                continue
            out[key] = draw(mutated(item))
        if draw(st.integers(0, 9)) == 0:
            out[draw(st.sampled_from(["other", "ok", "node", "kind", ""]))] = draw(CONFUSING)
        return out
    if isinstance(value, list):
        return [draw(mutated(item)) for item in value]
    return value


def hostile(fields: st.SearchStrategy[dict[str, Any]], build: Callable[..., Any]) -> Any:
    """Texts of a file or line of the kind `build` makes: mutated, at times cut short."""

    @st.composite
    def texts_of(draw: st.DrawFn) -> str:
        data = jsondata.to_json(build(draw(fields))[0])
        text = json.dumps(draw(mutated(data)), ensure_ascii=draw(st.booleans()))
        if draw(st.integers(0, 5)) == 0:  # cut short by a crash
            text = text[: draw(st.integers(0, len(text)))]
        return text

    return texts_of()


def outcome(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except (ValidationError, ValueError):
        return None


def check_as_strict(text: str, main: type[BaseModel], mine: Callable[[str], Any]) -> None:
    """Refused where main refused; read the same where both read; read wherever main's
    model in strict mode (the forms a run writes, no coercion) reads."""
    lax = outcome(lambda: main.model_validate_json(text))
    strict = outcome(lambda: main.model_validate_json(text, strict=True))
    new = outcome(lambda: mine(text))
    if lax is None:
        assert new is None, text
    if new is not None:
        assert lax is not None and jsondata.dumps(new) == lax.model_dump_json(), text
    # NaN and Infinity are no JSON and no run writes them: refused on purpose, though main's
    # strict mode read them (test_a_form_no_run_writes_is_refused_though_main_took_it).
    if strict is not None and not _NOT_JSON.search(text):
        assert new is not None, text


# The literals Python's json reads and JSON has not (found by hypothesis: "duration_s": Infinity).
_NOT_JSON = re.compile(r"-?Infinity|NaN")


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=hostile(node_fields(), both_nodes))
@example(
    text='{"node": "", "bringup_version": "", "collected_at": "", '
    '"probes": {"": {"probe": "", "ok": false, "duration_s": Infinity}}}'
)
def test_a_facts_file_is_refused_or_read_as_strictly_as_main(text: str) -> None:
    check_as_strict(text, MainNodeFacts, read_node_facts)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=hostile(manifest_fields(), both_manifests))
def test_a_manifest_is_refused_or_read_as_strictly_as_main(text: str) -> None:
    check_as_strict(text, MainManifest, parse_manifest)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=hostile(record_fields(), both_records))
def test_a_nodes_record_is_refused_or_read_as_strictly_as_main(text: str) -> None:
    """A node's answer, as the transport parsed it (RunDir.add_record): Python data, NaN
    and the infinities included (json.loads takes them)."""
    try:
        data = json.loads(text)
    except ValueError:
        return
    lax = outcome(lambda: MainProbeRecord.model_validate(data))
    strict = outcome(lambda: MainProbeRecord.model_validate(data, strict=True))
    new = outcome(lambda: read_record(data))
    if lax is None:
        assert new is None, text
    if new is not None:
        assert lax is not None and record_text(new) == lax.model_dump_json(), text
    if strict is not None:
        assert new is not None, text


@st.composite
def journal_lines(draw: st.DrawFn) -> str:
    record = jsondata.to_json(both_records(draw(record_fields()))[0])
    line: dict[str, Any] = draw(
        st.one_of(
            st.fixed_dictionaries({"node": texts, "record": st.just(record)}),
            st.fixed_dictionaries({"settled": texts}),
        )
    )
    text = json.dumps(draw(mutated(line)))
    if draw(st.integers(0, 5)) == 0:
        text = text[: draw(st.integers(0, len(text)))]
    return text


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line=journal_lines())
def test_a_journal_line_is_refused_or_read_as_strictly_as_main(line: str) -> None:
    theirs, mine = main_entry(line), _entry(line)
    if theirs is None:
        assert mine is None, line
    if mine is not None:
        assert theirs is not None and theirs[0] == mine[0], line
        if mine[1] is None:
            assert theirs[1] is None
        else:
            assert theirs[1] is not None
            assert record_text(mine[1]) == theirs[1].model_dump_json(), line


def test_a_journal_line_a_run_wrote_reads() -> None:
    record = ProbeRecord(probe="gpu", ok=True, facts={"t": 1e-05}, duration_s=0.5)
    line = f'{{"node":"n\\u00e9","record":{record_text(record)}}}'
    assert _entry(line) == ("né", record)
    assert _entry('{"settled":"n1"}') == ("n1", None)
    assert _entry('{"settled":"n1","node":"n1"}') is None
    assert _entry(line[:-1]) is None


# The forms main's lax models took that no run writes, refused now (docs/json.md, "How a
# run's records are read"): each with where it is said to be wrong.
LAX_FORMS = [
    ('"ok": "true"', "at probes[...].ok: Expected `bool`, got `str`"),
    ('"ok": 1', "at probes[...].ok: Expected `bool`, got `int`"),
    ('"duration_s": "3.5"', "at probes[...].duration_s: Expected `float`, got `str`"),
    ('"duration_s": true', "at probes[...].duration_s: Expected `float`, got `bool`"),
    ('"duration_s": NaN', "at the top: JSON is malformed: invalid character (byte 121)"),
    ('"duration_s": Infinity', "at the top: JSON is malformed: invalid character (byte 121)"),
    ('"duration_s": 1e400', "at probes[...].duration_s: Number out of range"),
    ('"facts": {"x": NaN}', "at the top: JSON is malformed: invalid character (byte 122)"),
]


@pytest.mark.parametrize(("form", "said"), LAX_FORMS)
def test_a_form_no_run_writes_is_refused_though_main_took_it(form: str, said: str) -> None:
    record = (
        f'{{"probe": "gpu", {form}}}'
        if '"ok"' in form
        else f'{{"probe": "gpu", "ok": true, {form}}}'
    )
    head = '{"node": "n1", "bringup_version": "1", "collected_at": "T", "probes": '
    text = f'{head}{{"gpu": {record}}}}}'
    MainNodeFacts.model_validate_json(text)  # main took it
    with pytest.raises(jsondata.Invalid) as refused:
        read_node_facts(text)
    assert str(refused.value) == said


def test_a_manifest_that_is_no_manifest_is_one_line_naming_where() -> None:
    for text, said in [
        ('{"started_at": "T"}', "at the top: Object missing required field `command`"),
        ('{"command": "c", "started_at": "T", "nodes": "n1"}', "at nodes: Expected `array`"),
        ('{"command": "c", "started_at": "T", "layout": "flat\\n"}', "at layout: Invalid enum"),
        ("[]", "at the top: Expected `object`, got `array`"),
        ('{"command": "c", "started_at', "at the top: Input data was truncated"),
        ("\x00\xff garbage", "at the top: JSON is malformed: invalid character (byte 0)"),
        ("[" * 100_000, "at the top:"),
    ]:
        with pytest.raises(jsondata.Invalid) as refused:
            parse_manifest(text)
        assert str(refused.value).startswith(said), (text[:40], str(refused.value))
        assert "\n" not in str(refused.value)


# --- no pydantic where the tool builds and writes its records -------------------------------


def test_records_are_slotted_and_the_ones_nothing_changes_are_frozen() -> None:
    from dataclasses import FrozenInstanceError

    record = ProbeRecord(probe="gpu", ok=True)
    with pytest.raises(FrozenInstanceError):
        record.ok = False  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        Source(kind="demo").of = "x"  # type: ignore[misc]
    for value in (
        record,
        NodeFacts(node="n", bringup_version="1", collected_at="T"),
        Manifest(command="c", started_at="T"),
        Provenance(),
        Resumed(at="T"),
        Override(field="gpu.count"),
    ):
        assert not hasattr(value, "__dict__"), type(value)
    assert ProbeRecord(probe="gpu", ok=True, duration_s=2).duration_s == 2.0
    assert isinstance(ProbeRecord(probe="gpu", ok=True, duration_s=2).duration_s, float)


def test_building_writing_and_reading_a_run_directory_imports_no_pydantic(
    tmp_path: Path,
) -> None:
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from bringup.facts import ProbeRecord, read_record\n"
        "from bringup.journal import read_journal\n"
        "from bringup.provenance import Provenance, demo_source\n"
        "from bringup.rundir import RunDir, load_facts, load_manifest, iter_facts\n"
        "path = Path(sys.argv[1])\n"
        "run = RunDir.create(path, 'check', 'b300', 'prolog', Provenance(argv=['check']))\n"
        "run.add_record('n1', {'probe': 'gpu', 'ok': True, 'facts': {'x': 1e-05}})\n"
        "run.journal('n2')\n"
        "run.add_record('n2', {'probe': 'xid', 'ok': False, 'error': 'no'})\n"
        "ProbeRecord(probe='gpu', ok=True).with_source(demo_source())\n"
        "read_journal(path)\n"
        "run.settle('n2')\n"
        "run.finish('complete', 0)\n"
        "assert [n.node for n in load_facts(path)] == ['n1', 'n2']\n"
        "assert [e.facts.node for e in iter_facts(path)] == ['n1', 'n2']\n"
        "assert load_manifest(path).status == 'complete'\n"
        "print(sorted(m for m in sys.modules if m.startswith('pydantic')))\n"
    )
    argv = [sys.executable, "-c", code, str(tmp_path / "run")]
    out = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert out.stdout == "[]\n"
