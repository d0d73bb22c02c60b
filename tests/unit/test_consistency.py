"""Fleet consistency on the demo fleet's facts: the odd node out, and the golden manifest."""

from __future__ import annotations

import copy

import pytest
import yaml

from bringup.checks.consistency import (
    cmdline_params,
    fleet_fields,
    from_manifest,
    judge_consistency,
    judge_golden,
    majority,
    to_manifest,
)
from bringup.facts import NodeFacts
from bringup.findings import Status
from bringup.sim.demo import demo_nodes


def with_change(node: NodeFacts, probe: str, **changes: object) -> NodeFacts:
    changed = copy.deepcopy(node)
    facts = changed.probes[probe].facts
    assert facts is not None
    facts.update(changes)
    return changed


def odd(findings) -> list[tuple[str, Status, str]]:
    return [(f.node, f.status, f.message) for f in findings]


def test_the_compared_fields_of_a_node() -> None:
    fields = fleet_fields(demo_nodes()[:1])["b300-node01"]
    assert fields["gpu"]["driver_version"] == "580.95.05"
    assert fields["gpu"]["gpu3.pci_bus_id"] == "00000000:5d:00.0"
    assert (fields["gpu"]["gpu3.pcie_gen"], fields["gpu"]["gpu3.pcie_width"]) == (6, 16)
    assert fields["gpu"]["gpu3.nvlink_count"] == 18 and fields["gpu"]["gpu3.nvlink17"] == "up"
    assert fields["host"]["kernel"] == "6.8.0-60-generic"
    assert fields["host"]["cmdline.iommu"] == "pt"
    assert fields["host"]["nic.mlx5_3/1.rate"] == "800 Gb/sec (4X XDR)"  # HGX B300: ConnectX-8 XDR
    assert fields["topology"]["gpu3.nic"] == "mlx5_3"
    assert fields["topology"]["gpu3.nic_rate"] == "800 Gb/sec (4X XDR)"
    # No serial, UUID or host name: they differ between identical nodes by design.
    assert not [k for f in fields.values() for k in f if "uuid" in k or "serial" in k]


def test_the_kernel_command_line_without_what_names_the_nodes_own_disks() -> None:
    line = "BOOT_IMAGE=/vmlinuz-6.8 root=UUID=1a2b ro iommu=pt iommu.passthrough=1 quiet"
    assert cmdline_params(line) == {"ro": "", "iommu": "pt", "iommu.passthrough": "1", "quiet": ""}


def test_one_node_with_another_driver_is_the_odd_one_out() -> None:
    nodes = [demo_nodes()[0]] * 1 + [
        with_change(demo_nodes()[0], "gpu", driver_version="575.57.08")
    ]
    nodes = [copy.deepcopy(demo_nodes()[0]) for _ in range(4)] + [nodes[1]]
    for i, node in enumerate(nodes):
        node.node = f"n{i + 1}"
    assert odd(judge_consistency(fleet_fields(nodes))) == [
        ("n5", Status.WARN, "driver_version is '575.57.08'; 4 of 5 nodes have '580.95.05'")
    ]
    # gpu.driver flagged n5 already: that finding is the fault's, not a second one.
    assert judge_consistency(fleet_fields(nodes), {"n5": {"gpu.driver"}}) == []
    # With two nodes there is no majority to speak of.
    assert judge_consistency(fleet_fields(nodes[3:])) == []


def test_a_missing_gpu_and_a_gpu_without_links_are_one_finding_each() -> None:
    fleet = fleet_fields(demo_nodes())
    assert odd(judge_consistency(fleet)) == [
        ("b300-node02", Status.WARN, "gpu7 is absent; 5 of 6 nodes have it"),
        ("b300-node03", Status.WARN, "gpu2.nvlink0-17 are 'down'; 5 of 6 nodes have 'up'"),
    ]
    flagged = {"b300-node02": {"gpu.count"}, "b300-node03": {"topology.nvlink"}}
    assert judge_consistency(fleet, flagged) == []


def test_golden_names_exactly_the_node_and_field() -> None:
    nodes = [copy.deepcopy(demo_nodes()[0]) for _ in range(3)]
    for i, node in enumerate(nodes):
        node.node = f"n{i + 1}"
    golden, split = majority(fleet_fields(nodes))
    assert split == {}
    host = nodes[1].probes["host"].facts
    assert host is not None
    host["cmdline"] = host["cmdline"].replace("iommu=pt", "iommu=on")
    findings = judge_golden(golden, fleet_fields(nodes), "golden.yaml")
    fields = len(golden)
    assert odd(findings) == [
        ("n1", Status.PASS, f"{fields} fields as in golden.yaml"),
        ("n2", Status.FAIL, "cmdline.iommu is 'on', golden: 'pt' (golden.yaml)"),
        ("n3", Status.PASS, f"{fields} fields as in golden.yaml"),
    ]
    del nodes[2].probes["gpu"]
    (error,) = [f for f in judge_golden(golden, fleet_fields(nodes), "g.yaml") if f.node == "n3"]
    assert error.status is Status.ERROR
    assert error.message.endswith("fields of g.yaml not compared: the gpu probe did not answer")


def test_the_manifest_round_trips_through_yaml_and_a_hand_edit() -> None:
    golden, _ = majority(fleet_fields(demo_nodes()))
    text = yaml.safe_dump(to_manifest(golden), sort_keys=False, default_flow_style=None)
    assert "nvlinks: [up, up, up," in text and "mlx5_0/1: {link_layer: InfiniBand" in text
    assert from_manifest(yaml.safe_load(text)) == golden
    edited = yaml.safe_load(text.replace("pcie_gen: 6", "pcie_gen: 5", 1))
    assert from_manifest(edited)["gpu0.pcie_gen"] == 5


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "a golden manifest is a mapping with `node:` and `gpus:`"),
        ({"nodes": {}}, "unknown section(s) nodes: only node, gpus"),
        ({"gpus": {"x": {}}}, "gpus: 'x' is not a GPU index"),
        ({"node": {"kernel": [1]}}, "kernel: expected a string or number, got list"),
    ],
)
def test_a_malformed_manifest_says_what_is_wrong(doc: object, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        from_manifest(doc)
    assert str(caught.value) == message


# --- nodes alike share their fields: the vote counts each node once ------------------------


def reference_votes(nodes):
    """The vote as it was taken node by node, field by field (before nodes sharing one
    Fields object were counted together): the oracle polls() must agree with."""
    from collections import Counter

    from bringup.checks.consistency import ABSENT, _order

    keys = {(p, k) for groups in nodes.values() for p, f in groups.items() for k in f}
    found = {}
    for probe, key in sorted(keys, key=lambda pk: _order(pk[1])):
        voters = {n: g[probe].get(key, ABSENT) for n, g in nodes.items() if probe in g}
        (top, count), *_ = Counter(voters.values()).most_common(1)
        found[key] = (top, count, voters)
    return found


def shared_fleet(copies: int) -> dict[str, dict[str, dict[str, object]]]:
    """The demo fleet's six nodes `copies` times over, the copies of a node holding the
    very same Fields objects (as fleet.run's Shared leaves them), with odd ones mixed in:
    a value equal to Python but not alike (1, 1.0, True), a key absent, and a tie."""
    demo = fleet_fields(demo_nodes())
    names = sorted(demo)
    fleet: dict[str, dict[str, dict[str, object]]] = {}
    for i in range(copies):
        for name in names:
            fleet[f"{name}-{i:03d}"] = demo[name]
    first = fleet[f"{names[0]}-000"]
    fleet["odd-true"] = {**first, "gpu": {**first["gpu"], "gpu0.pcie_gen": True}}
    fleet["odd-float"] = {**first, "gpu": {**first["gpu"], "gpu0.pcie_gen": 6.0}}
    fleet["odd-absent"] = {
        **first,
        "host": {k: v for k, v in first["host"].items() if k != "kernel"},
    }
    fleet["odd-noprobe"] = {p: f for p, f in first.items() if p != "topology"}
    return fleet


@pytest.mark.parametrize("copies", [1, 2, 40])
def test_nodes_sharing_their_fields_are_each_one_vote(copies: int) -> None:
    from bringup.checks.consistency import polls

    fleet = shared_fleet(copies)
    expected = reference_votes(fleet)
    got = {p.key: p for p in polls(fleet)}
    assert list(got) == list(expected)  # the same fields, in the same order
    for key, (top, count, voters) in expected.items():
        poll = got[key]
        assert (type(poll.top), poll.top, poll.count, poll.voters) == (
            type(top),
            top,
            count,
            len(voters),
        ), key
        # Every node's own value (True stays True beside an equal 1), each node once.
        own = {node: value for value, nodes in poll.answers for node in nodes}
        assert sorted(own) == sorted(voters)
        assert all(type(own[n]) is type(v) and own[n] == v for n, v in voters.items()), key


def test_shared_fields_judge_as_copies_do() -> None:
    fleet = shared_fleet(3)
    copied = copy.deepcopy(fleet)  # no two nodes share an object now
    assert odd(judge_consistency(fleet)) == odd(judge_consistency(copied))
    assert majority(fleet) == majority(copied)
    # The odd nodes are found, each once, with their own values.
    said = odd(judge_consistency(fleet))
    assert (
        "odd-absent",
        Status.WARN,
        "kernel is absent; 21 of 22 nodes have '6.8.0-60-generic'",
    ) in said
    assert len([s for s in said if s[0] == "odd-absent"]) == 1
