"""Findings are plain dataclasses (issue 31): built by the tool's own code without pydantic,
read from files through pydantic as strictly as before, and written byte for byte as the
pydantic models wrote them (findings.jsonl of older runs and of newer ones are alike).

The reference is the pydantic model as it stood on main before the change, copied here
(`MainExpected`, `MainFinding`): every property compares the dataclass with it."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic import model_validator as pydantic_model_validator

from bringup.findings import (
    Cell,
    Expected,
    Finding,
    Status,
    finding_json,
    finding_line,
    read_finding,
)
from bringup.findings import _number as number_of
from bringup.findings import _typed as typed

# --- the reference: bringup/findings.py's models on main before issue 31 -----------------

Op = Literal[">=", ">", "<=", "<", "==", "!=", "in", "within", "text"]
Scalar = int | float | str | bool


class MainExpected(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, json_schema_serialization_defaults_required=True
    )

    op: Op
    value: Scalar | list[Scalar]
    unit: str | None = None
    tolerance_pct: float | None = Field(default=None, description='"within" only: the percent')
    note: str | None = Field(default=None, description="A qualifier for people: 'of the time'")

    @classmethod
    def parse(cls, text: str) -> MainExpected:
        text = " ".join(text.split())
        within = re.fullmatch(r"within (\S+)% of (\S+)(?: (\S+))?(?: (.+))?", text)
        if within and number_of(within[1]) is not None:
            pct, value, unit, note = within.groups()
            return cls(
                op="within", value=typed(value), unit=unit, tolerance_pct=float(pct), note=note
            )
        compared = re.fullmatch(r"(>=|<=|!=|==|>|<) ?(\S+)(?: (\S+))?(?: (.+))?", text)
        if compared:
            op, value, unit, note = compared.groups()
            if value.endswith("%") and number_of(value[:-1]) is not None:
                value, unit, note = value[:-1], "%", " ".join(filter(None, (unit, note)))
            return cls(op=op, value=typed(value), unit=unit, note=note)  # type: ignore[arg-type]
        counted = re.fullmatch(r"(\S+)(?: (.+))?", text)
        if counted and number_of(counted[1]) is not None:
            return cls(op="==", value=typed(counted[1]), unit=counted[2])
        return cls(op="==" if " " not in text else "text", value=text)


class MainFinding(BaseModel):
    model_config = ConfigDict(
        extra="forbid", use_enum_values=False, json_schema_serialization_defaults_required=True
    )

    node: str = ""
    check: str
    status: Status
    message: str
    value: Scalar | None = None
    expected: MainExpected | None = None
    unit: str | None = None
    action: str | None = None

    @field_validator("expected", mode="before")
    @classmethod
    def _typed_expected(cls, given: Any) -> Any:
        return MainExpected.parse(given) if isinstance(given, str) else given

    @pydantic_model_validator(mode="after")
    def _expected_unit(self) -> MainFinding:
        given = self.expected
        if given is None or given.unit is not None or not self.unit:
            return self
        if given.op not in ("text", "in") and not isinstance(given.value, str):
            self.expected = given.model_copy(update={"unit": self.unit})
        return self


# --- what the tool's code builds ------------------------------------------------------------

OPS: list[Op] = [">=", ">", "<=", "<", "==", "!=", "in", "within", "text"]
# Numbers of every kind a check writes: tiny (1e-05 and below: pydantic wrote them its own
# way), huge, integral floats (3.0 is not 3), inf and nan (no JSON numbers).
floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=1e-12, max_value=1e-3),
    st.floats(min_value=-1e-3, max_value=-1e-12),
    st.integers(-(10**18), 10**18).map(float),
)
scalars = st.one_of(st.integers(), floats, st.text(), st.booleans())
texts = st.one_of(st.text(), st.sampled_from(["W", "GB/s", "%", "°C", "ratio", ""]))
# Expectations as the checks write them in words ('>= 3.0 GB/s', 'within 5% of 8'), and
# any text at all.
words = st.one_of(
    st.text(),
    st.builds(
        "{} {} {}".format,
        st.sampled_from([">=", "<", "==", "!=", "within 5% of", "within 2.5% of"]),
        st.one_of(st.integers().map(str), floats.map(repr), st.sampled_from(["Gen5", "inf"])),
        st.sampled_from(["", "GB/s", "W of the time", "%"]),
    ),
)


@st.composite
def expectations(draw: st.DrawFn) -> dict[str, Any]:
    given: dict[str, Any] = {
        "op": draw(st.sampled_from(OPS)),
        "value": draw(st.one_of(scalars, st.lists(scalars, max_size=4))),
    }
    for name, values in (
        ("unit", texts),
        ("tolerance_pct", st.one_of(floats, st.integers(-(10**6), 10**6))),
        ("note", st.text()),
    ):
        if draw(st.booleans()):
            given[name] = draw(st.one_of(st.none(), values))
    return given


@st.composite
def findings_given(draw: st.DrawFn) -> dict[str, Any]:
    """The keyword arguments of a Finding: the expectation None, typed, or in words."""
    given: dict[str, Any] = {
        "check": draw(st.text()),
        "status": draw(st.sampled_from(list(Status))),
        "message": draw(st.text()),
    }
    for name, values in (
        ("node", st.text()),
        ("value", st.one_of(st.none(), scalars)),
        ("expected", st.one_of(st.none(), expectations(), words)),
        ("unit", st.one_of(st.none(), texts)),
        ("action", st.one_of(st.none(), st.text())),
    ):
        if draw(st.booleans()):
            given[name] = draw(values)
    return given


def both(given: dict[str, Any]) -> tuple[Finding, MainFinding]:
    expected = given.get("expected")
    if isinstance(expected, dict):
        return (
            Finding(**{**given, "expected": Expected(**expected)}),
            MainFinding(**{**given, "expected": MainExpected(**expected)}),
        )
    return Finding(**given), MainFinding(**given)


def as_text(data: object) -> str:
    """JSON data as text: nan == nan here, and 3 != 3.0."""
    return json.dumps(data, ensure_ascii=False)


SOME = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SOME
@given(given=findings_given())
def test_a_finding_is_written_byte_for_byte_as_the_pydantic_model_wrote_it(
    given: dict[str, Any],
) -> None:
    mine, main = both(given)
    assert finding_line(mine) == main.model_dump_json()  # findings.jsonl
    assert as_text(finding_json(mine)) == as_text(main.model_dump(mode="json"))  # --json
    # Inside the envelope and the report, pydantic dumps the dataclass: the same again.
    from pydantic import TypeAdapter

    assert as_text(TypeAdapter(Finding).dump_python(mine, mode="json")) == as_text(
        finding_json(mine)
    )


@SOME
@given(given=findings_given())
def test_a_written_finding_reads_back_as_the_pydantic_model_read_it(
    given: dict[str, Any],
) -> None:
    _, main = both(given)
    line = main.model_dump_json()
    mine, theirs = read_or_none(line)
    # Refused alike too: an expectation of inf was written null, which no `value` is.
    assert (mine is None) == (theirs is None), line
    if mine is not None and theirs is not None:
        assert finding_line(mine) == theirs.model_dump_json() == line


def read_or_none(line: str) -> tuple[Finding | None, MainFinding | None]:
    """The line read by read_finding and by the reference model, None where refused."""
    try:
        theirs: MainFinding | None = MainFinding.model_validate_json(line)
    except ValidationError:
        theirs = None
    try:
        mine: Finding | None = read_finding(line)
    except ValidationError:
        mine = None
    return mine, theirs


# Lines of findings.jsonl as an attacker or a crash leaves them: keys known and unknown,
# values of any JSON type.
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), floats, st.text()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
keys = st.sampled_from(
    ["node", "check", "status", "message", "value", "expected", "unit", "action", "other"]
)
expected_keys = st.sampled_from(["op", "value", "unit", "tolerance_pct", "note", "other"])


@st.composite
def hostile_lines(draw: st.DrawFn) -> str:
    line: dict[str, Any] = {
        "check": draw(st.one_of(st.text(), json_values)),
        "status": draw(st.one_of(st.sampled_from([s.value for s in Status]), json_values)),
        "message": draw(st.one_of(st.text(), json_values)),
    }
    for key in draw(st.lists(keys, max_size=5)):
        line[key] = draw(json_values)
    if draw(st.booleans()):
        line["expected"] = {
            **{key: draw(json_values) for key in draw(st.lists(expected_keys, max_size=4))},
            "op": draw(st.one_of(st.sampled_from(OPS), json_values)),
            "value": draw(st.one_of(scalars, json_values)),
        }
    text = json.dumps(line, allow_nan=True)
    if draw(st.booleans()):  # cut short by a crash
        text = text[: draw(st.integers(0, len(text)))]
    return text


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line=hostile_lines())
def test_a_line_is_refused_or_read_exactly_as_the_pydantic_model_did(line: str) -> None:
    mine, theirs = read_or_none(line)
    assert (mine is None) == (theirs is None), line
    if mine is not None and theirs is not None:
        assert finding_line(mine) == theirs.model_dump_json()


@pytest.mark.parametrize(
    ("number", "written"),
    [
        (1e-05, "0.00001"),
        (-1.234e-05, "-0.00001234"),
        (9.876543210000001e-05, "0.00009876543210000001"),
        (1e-06, "1e-6"),
        (-2.5e-09, "-2.5e-9"),
        (1e-10, "1e-10"),
        (0.0001, "0.0001"),
        (1e16, "1e+16"),
        (3.0, "3.0"),
        (-0.0, "-0.0"),
        (math.inf, "null"),
        (math.nan, "null"),
    ],
)
def test_numbers_are_written_as_pydantic_wrote_them(number: float, written: str) -> None:
    f = Finding(check="gpu.power", status=Status.PASS, message="m", value=number)
    assert f'"value":{written},' in finding_line(f)
    assert finding_line(f) == MainFinding(**_fields(f)).model_dump_json()


@settings(max_examples=3000, deadline=None)
@given(number=st.floats(), text=st.text())
def test_a_line_written_by_msgspec_is_the_line_pydantic_wrote(number: float, text: str) -> None:
    """finding_line writes a finding whose numbers are plain with msgspec: every float and
    text as pydantic wrote them (the exponent forms and the non-finite go the long way)."""
    f = Finding(check="gpu.power", status=Status.WARN, message=text, value=number, unit=text)
    try:
        theirs = MainFinding(**_fields(f), unit=text).model_dump_json()
    except ValueError:  # a lone surrogate: refused by both
        with pytest.raises(ValueError):
            finding_line(f)
        return
    assert finding_line(f) == theirs


def _fields(f: Finding) -> dict[str, Any]:
    return {"check": f.check, "status": f.status, "message": f.message, "value": f.value}


def test_a_text_that_is_no_unicode_is_refused_as_pydantic_refused_it() -> None:
    """A lone surrogate (a node's JSON may hold "\\ud800") has no UTF-8: no line of it."""
    given = {"check": "gpu.name", "status": Status.FAIL, "message": "GPU \ud800"}
    with pytest.raises(ValueError):
        MainFinding(**given).model_dump_json()
    with pytest.raises(ValueError):
        finding_line(Finding(**given))


def test_the_two_rules_of_the_validators_hold_for_the_tools_findings() -> None:
    """A text expectation is typed; a typed one without a unit takes the finding's."""
    f = Finding(
        check="nvme.read", status=Status.FAIL, message="slow", expected=">= 3.0", unit="GB/s"
    )
    assert f.expected == Expected(op=">=", value=3.0, unit="GB/s")
    kept = Finding(
        check="nvme.read", status=Status.FAIL, message="m", expected="a disk", unit="GB/s"
    )
    assert kept.expected == Expected(op="text", value="a disk")  # words take no unit
    assert Expected(op="within", value=8, tolerance_pct=5).tolerance_pct == 5.0
    assert isinstance(Expected(op="within", value=8, tolerance_pct=5).tolerance_pct, float)


def test_expectations_and_cells_are_frozen_and_findings_are_slotted() -> None:
    from dataclasses import FrozenInstanceError

    with pytest.raises(FrozenInstanceError):
        Expected(op="==", value=8).value = 9  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        Cell(status=Status.PASS, count=1).count = 2  # type: ignore[misc]
    f = Finding(check="gpu.count", status=Status.PASS, message="8")
    assert not hasattr(f, "__dict__")


def test_an_unknown_key_is_refused_as_before() -> None:
    with pytest.raises(ValidationError):
        read_finding('{"check": "c", "status": "PASS", "message": "m", "verdict": "ACCEPTED"}')
    with pytest.raises(ValidationError):
        read_finding(
            '{"check": "c", "status": "PASS", "message": "m",'
            ' "expected": {"op": "==", "value": 1, "extra": 2}}'
        )


def test_importing_findings_and_building_them_imports_no_pydantic() -> None:
    code = (
        "import sys\n"
        "from bringup.findings import Finding, Status, finding_line, one_per_probe\n"
        "f = Finding(check='gpu.count', status=Status.FAIL, message='7', expected='8')\n"
        "finding_line(one_per_probe([f])[0])\n"
        "print(sorted(m for m in sys.modules if m.startswith('pydantic')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "[]\n"
