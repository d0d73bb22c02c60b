"""A node's facts file laid out from the texts its records were journaled with is the
file encoding the node afresh writes, byte for byte; and it never is when those texts are
not every record the node holds now."""

from __future__ import annotations

import copy

import pytest

from bringup.facts import NodeFacts, ProbeRecord, node_facts_text, record_text
from bringup.sim.demo import demo_nodes


def journaled(node: NodeFacts) -> dict[str, tuple[ProbeRecord, str]]:
    return {name: (record, record_text(record)) for name, record in node.probes.items()}


def awkward() -> NodeFacts:
    """Records whose text is where the encoders differ: positive exponents (msgspec 1e16,
    pydantic 1e+16), an "e" between digits inside a text, numbers past a float's, text
    past ASCII and control characters, an empty record and an error."""
    facts = {
        "big": 1e16,
        "small": 1e-7,
        "huge": [2.5e20, -3e300, 1.0, 0.00001],
        "uuid": "GPU-3e5a0000-1e10",
        "int": 123456789012345678901234567890,
        "text": 'n\u00e9ud \u2013 \u0001 "quoted" \\',
        "nested": {"e": {"1e5": [1e5, "1e5"]}},
    }
    return NodeFacts(
        node="n\u00e9ud-01",
        bringup_version="0.1.0",
        collected_at="2026-12-03T07:00:00+00:00",
        probes={
            "gpu": ProbeRecord(probe="gpu", ok=True, facts=facts, duration_s=1e17),
            "host": ProbeRecord(probe="host", ok=False, error="timed out \u00e9"),
            "nvme": ProbeRecord(probe="nvme", ok=True, facts={}, params={"size": 4e9}),
        },
    )


@pytest.mark.parametrize("node", [*demo_nodes(), awkward()], ids=lambda n: n.node)
def test_laid_out_from_the_journaled_texts_is_the_encoded_file(node: NodeFacts) -> None:
    assert node_facts_text(node, journaled(node)) == node_facts_text(node)


def test_the_awkward_records_keep_their_exponents_signed() -> None:
    text = node_facts_text(awkward(), journaled(awkward()))
    assert '"big": 1e+16' in text and '"small": 1e-7' in text and '"duration_s": 1e+17' in text
    assert '"uuid": "GPU-3e5a0000-1e10"' in text and '"1e5": [' in text


def test_texts_that_are_not_every_record_held_are_not_used() -> None:
    node = demo_nodes()[1]
    texts = journaled(node)
    encoded = node_facts_text(node)
    # A record replaced since its text was taken: the file holds the record held now.
    newer = copy.deepcopy(node)
    gpu = newer.probes["gpu"]
    newer.probes["gpu"] = ProbeRecord(probe="gpu", ok=False, error="replaced", facts=gpu.facts)
    assert node_facts_text(newer, texts) == node_facts_text(newer) != encoded
    # An equal record that is not the very one: encoded afresh, to the same text.
    assert node_facts_text(copy.deepcopy(node), texts) == encoded
    # A record without its text, and a text of a record the node no longer holds.
    fewer = dict(texts)
    del fewer["gpu"]
    assert node_facts_text(node, fewer) == encoded
    less = copy.deepcopy(node)
    del less.probes["gpu"]
    assert node_facts_text(less, texts) == node_facts_text(less) != encoded
