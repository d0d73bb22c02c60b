"""A connection variable's template rendered by `inventory.Templates` equals what Ansible's
own templar gives for it, for every template and every host's values: the simple ones
(`{{ inventory_hostname }}.mgmt`) joined without the templar, everything else rendered by
it (a filter, an attribute, a statement, a name that is not a plain string, an untrusted
template), errors included."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from bringup.fleet import inventory
from bringup.fleet.inventory import Templates, simple_template


def ansible(template: Any, values: dict[str, Any]) -> tuple[str, Any]:
    """What a fresh Templar with these variables gives (its result or its error)."""
    from ansible.errors import AnsibleError
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    try:
        return "value", Templar(loader=DataLoader(), variables=values).template(template)
    except AnsibleError as exc:
        return "error", _message(exc)


def ours(templates: Templates, template: Any, values: dict[str, Any]) -> tuple[str, Any]:
    from ansible.errors import AnsibleError

    try:
        return "value", templates.one(template, values)
    except AnsibleError as exc:
        return "error", _message(exc)


def _message(exc: Any) -> str:
    """The error's line; a template that refers to itself is stopped by Python's recursion
    limit, whose words depend on how deep the stack was when it tripped."""
    line = inventory._one_line(exc.message)
    recursion = "maximum recursion depth exceeded"
    return line[: line.index(recursion) + len(recursion)] if recursion in line else line


def trusted(text: str) -> str:
    from ansible.template import trust_as_template

    return trust_as_template(text)


def untrusted_from_a_file(text: str) -> str:
    """A string as a vars file gives it when it is not to be templated: its origin only."""
    from ansible._internal._datatag._tags import Origin

    return Origin(path="/inventory/host_vars/x.yml", line_num=1).tag(text)


SIMPLE = ["{{ a }}", "{{b}}", "{{- a -}}", "{{ inventory_hostname }}"]
TEXT = [".mgmt.example", "-", " ", "node", "é", "}", "{", "%", "#", "\\", "\n"]
OTHER = [  # Ansible's templar renders these
    "{{ a | upper }}",
    "{{ a ~ '-x' }}",
    "{{ a.b }}",
    "{{ 'lit' }}",
    "{{ true }}",
    "{{ self }}",
    "{{ missing }}",
    "{{ lookup('vars', 'a') }}",
    "{% if a %}y{% endif %}",
    "{% raw %}{{ a }}{% endraw %}",
    "{# note #}",
    "{{ oops",
]
PIECE = st.one_of(st.sampled_from(SIMPLE), st.sampled_from(TEXT), st.sampled_from(OTHER))
# Templates that are mostly simple, so that the joined ones are many among the examples.
SAFE_TEXT = [".mgmt.example", "-", " ", "node", "é", "}", "%", "#"]
MOSTLY_SIMPLE = st.lists(
    st.one_of(st.sampled_from(SIMPLE), st.sampled_from(SAFE_TEXT)),
    min_size=1,
    max_size=5,
)

PLAIN = st.text(alphabet="abcXYZ09.-_ é", max_size=8)
PLAIN_VALUE = st.one_of(PLAIN, PLAIN.map(trusted), PLAIN.map(untrusted_from_a_file))
VALUE = st.one_of(
    PLAIN,
    PLAIN.map(trusted),
    PLAIN.map(untrusted_from_a_file),
    PLAIN,
    st.sampled_from(["{{ b }}", "x{{ a }}", "{a}", "{% if 1 %}z{% endif %}"]).map(trusted),
    st.sampled_from(["{{ b }}", "{x}"]),
    st.integers(-3, 3),
    st.booleans(),
    st.none(),
    st.lists(PLAIN, max_size=2),
    st.dictionaries(st.sampled_from(["b", "c"]), PLAIN, max_size=2),
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.one_of(MOSTLY_SIMPLE, st.lists(PIECE, min_size=1, max_size=5)),
    trust=st.sampled_from(["trusted", "trusted", "from a file, untrusted", "a plain str"]),
    values=st.one_of(
        st.fixed_dictionaries(
            {"a": PLAIN_VALUE, "b": PLAIN_VALUE, "inventory_hostname": PLAIN},
            optional={"self": VALUE},
        ),
        st.dictionaries(st.sampled_from(["a", "b", "self", "inventory_hostname"]), VALUE),
    ),
)
def test_a_template_renders_as_ansibles_templar_renders_it(
    pieces: list[str], trust: str, values: dict[str, Any]
) -> None:
    text = "".join(pieces)
    made = {"trusted": trusted, "from a file, untrusted": untrusted_from_a_file}
    template = made.get(trust, str)(text)
    templates = Templates(loader=_loader())
    expected = ansible(template, values)
    parts = templates._parts(template)
    got = ours(templates, template, values)
    fast = parts is not None and inventory.join_parts(parts, values) is not None
    event("joined without the templar" if fast else "Ansible's templar")
    assert got == expected
    if got[0] == "value":
        assert type(inventory._plain(got[1])) is type(inventory._plain(expected[1]))


def _loader() -> Any:
    from ansible.parsing.dataloader import DataLoader

    return DataLoader()


@pytest.mark.parametrize(
    "text, parts",
    [
        (
            "{{ inventory_hostname }}.mgmt.example",
            (("name", "inventory_hostname"), ("text", ".mgmt.example")),
        ),
        (
            "bmc-{{ rack }}-{{inventory_hostname}}",
            (("text", "bmc-"), ("name", "rack"), ("text", "-"), ("name", "inventory_hostname")),
        ),
        ("{# where #}{{ a }}", (("name", "a"),)),
        ("{{ a }}  {{- b }}", (("name", "a"), ("name", "b"))),
    ],
)
def test_a_simple_template_is_its_names_between_texts(text: str, parts: tuple[Any, ...]) -> None:
    assert simple_template(text, Templates(_loader())._environment()) == parts


@pytest.mark.parametrize(
    "text",
    [
        "{{ a | upper }}",  # a filter
        "{{ a.b }}",  # an attribute
        "{{ a['b'] }}",
        "{{ 'x' }}",  # a constant
        "{{ a ~ b }}",
        "{% if a %}{{ a }}{% endif %}",
        "{% raw %}{{ a }}{% endraw %}x{{ a }}",  # text that is a template itself
        "#jinja2:variable_start_string:'[%'\n[% a %]",  # a header
        "{{ a }}\\n",  # a backslash
        "{{ a }}\n",  # a trailing newline Ansible adds back
        "{{ self }}",  # Jinja's own name
        "no template",
        "{{ a",
    ],
)
def test_anything_else_is_left_to_ansibles_templar(text: str) -> None:
    assert simple_template(text, Templates(_loader())._environment()) is None


def test_ten_thousand_hosts_render_one_template_without_the_templar(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cost is per distinct template: the templar is not asked for a simple one."""
    templates = Templates(_loader())
    template = trusted("{{ inventory_hostname }}.mgmt.example")
    asked: list[object] = []
    original = Templates._for

    def counting(self: Templates, values: dict[str, Any]) -> Any:
        asked.append(values)
        return original(self, values)

    monkeypatch.setattr(Templates, "_for", counting)
    names = [f"node{n:05d}" for n in range(10_000)]
    got = [templates.one(template, {"inventory_hostname": name}) for name in names]
    assert got == [f"{name}.mgmt.example" for name in names]
    assert asked == [{}]  # once, for the environment that parsed the template


@pytest.mark.parametrize("make", [untrusted_from_a_file, str], ids=["from a file", "plain str"])
def test_an_untrusted_template_is_left_as_ansible_leaves_it(make: Any) -> None:
    """Ansible renders only the templates it trusts (those its loader read from the
    inventory's files): the others are its to refuse or to leave."""
    template = make("{{ a }}.mgmt")
    assert Templates(_loader()).one(template, {"a": "node01"}) == "{{ a }}.mgmt"
    assert ansible(template, {"a": "node01"}) == ("value", "{{ a }}.mgmt")
