"""fleet.identity: one machine under several names, judged from the recorded demo node's
serials (bringup/sim/demo.py), cloned under other names as a cloned image would be."""

from __future__ import annotations

from dataclasses import replace

from bringup.checks.identity import judge_identity, node_marks
from bringup.facts import NodeFacts
from bringup.sim.demo import demo_nodes


def clones(count: int) -> list[NodeFacts]:
    healthy = demo_nodes()[0]
    return [replace(healthy, node=f"node{i:02d}") for i in range(1, count + 1)]


def test_two_names_of_one_machine_name_each_other() -> None:
    nodes = clones(2)
    marks = node_marks(nodes[0])
    found = judge_identity(nodes)
    assert [(f.node, f.status.name, f.value) for f in found] == [
        ("node01", "FAIL", len(marks)),
        ("node02", "FAIL", len(marks)),
    ]
    first = marks[0]
    assert f"{first.where} {first.value} also on node02;" in (found[0].message or "")
    assert f"{first.where} {first.value} also on node01;" in (found[1].message or "")


def test_a_value_on_many_nodes_names_five_and_counts_the_rest() -> None:
    """A cloned image on a whole fleet: each message names five others, not thousands
    (and the others are sorted once per value, not once per node)."""
    nodes = clones(12)
    first = node_marks(nodes[0])[0]
    found = {f.node: f.message or "" for f in judge_identity(nodes)}
    assert len(found) == 12
    assert (
        f"{first.where} {first.value} also on node02, node03, node04, node05, node06 "
        "(+6 more nodes);"
    ) in found["node01"]
    assert (
        f"{first.where} {first.value} also on node01, node02, node03, node04, node05 "
        "(+6 more nodes);"
    ) in found["node07"]
    assert all(len(message) < 1000 for message in found.values())


def test_different_machines_share_nothing() -> None:
    assert judge_identity(demo_nodes()) == []
