"""report.json's indented text without json's pure-Python encoder (report/jsontext.py):
the same bytes as `json.dumps(value, indent=2, sort_keys=True)` for every plain JSON
value, text from a node included (escapes, non-ASCII, lone surrogates, control
characters), and json's own answer for what is not plain."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bringup.report import jsontext


def _whole(value: object, indent: str = "") -> str:
    return json.dumps(value, indent=2, sort_keys=True).replace("\n", "\n" + indent)


HOSTILE = [
    "",
    'quote " backslash \\ slash /',
    "\x00\x1b[31mred\x07\x7f\x9b",
    "line\nbreak\r\ttab\u2028\u2029",
    "°C × µs — ü 漢字 \U0001f525",
    "\ud800 lone surrogate",
    "</script><b>&amp;",
]

NUMBERS = [0, -1, 2**70, 1.0, -0.0, 1e16, 1e-7, 3.141592653589793]
NUMBERS += [float("nan"), float("inf"), -float("inf")]


@pytest.mark.parametrize("indent", ["", "  ", "    "])
def test_the_text_of_nested_values_is_json_dumps(indent: str) -> None:
    value = {
        "z": HOSTILE,
        "a": {"numbers": NUMBERS, "empty": {}, "none": [], "flags": [True, False, None]},
        "m": [{"b": 1, "a": [[], [{}], [[1]]]}, (1, "two")],
        "\u00e9\x00key": "v",
    }
    assert jsontext.dumps(value, indent) == _whole(value, indent)


@pytest.mark.parametrize("value", [*HOSTILE, *NUMBERS, True, False, None, [], {}])
def test_a_scalar_or_an_empty_container_is_json_dumps(value: object) -> None:
    assert jsontext.dumps(value, "    ") == _whole(value, "    ")


def test_what_is_not_plain_json_is_json_dumps_own_answer() -> None:
    # Keys that are not text: json writes them as text, sorted as they were.
    assert jsontext.dumps({2: "b", 1: "a"}) == _whole({2: "b", 1: "a"})
    with pytest.raises(TypeError):
        jsontext.dumps({"a": object()})  # as json.dumps refuses it
    with pytest.raises(TypeError):
        jsontext.dumps({1: "a", "b": 2})  # keys json cannot sort

    class Text(str):
        pass

    assert jsontext.dumps({Text("k"): [Text("v")]}) == _whole({Text("k"): [Text("v")]})


plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=30,
)


@given(plain, st.sampled_from(["", "  ", "    "]))
def test_any_plain_value_is_json_dumps(value: object, indent: str) -> None:
    assert jsontext.dumps(value, indent) == _whole(value, indent)
