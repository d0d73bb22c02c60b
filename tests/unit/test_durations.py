"""What each probe cost, as `bringup check` prints it after the findings."""

from __future__ import annotations

from dataclasses import replace

from bringup.commands.show import duration_lines, probe_durations, seconds_text
from bringup.facts import NodeFacts, ProbeRecord


def node(name: str, **seconds: float) -> NodeFacts:
    probes = {p: ProbeRecord(probe=p, ok=True, duration_s=s) for p, s in seconds.items()}
    return NodeFacts(node=name, bringup_version="0", collected_at="now", probes=probes)


def test_one_node_lists_every_probe_and_the_total() -> None:
    durations = probe_durations([node("n1", gpu=0.4, dcgm=903.0, gemm=95.2)])
    assert duration_lines(durations) == [
        "probe times on n1: gpu 0.40 s, dcgm 15 min 3 s, gemm 1 min 35 s; total 16 min 39 s"
    ]


def test_a_fleet_shows_the_median_and_the_slowest_node() -> None:
    nodes = [node("n1", dcgm=900.0, nvme=130.0), node("n2", dcgm=960.0, nvme=120.0)]
    nodes.append(node("n3", dcgm=905.0, nvme=125.0))
    assert duration_lines(probe_durations(nodes)) == [
        "probe times over 3 nodes (median, slowest):",
        "  dcgm         15 min 5 s  16 min 0 s (n2)",
        "  nvme          2 min 5 s  2 min 10 s (n1)",
        "  total                    18 min 0 s (n2)",
    ]


def test_replayed_probes_are_not_timed_here() -> None:
    recorded = node("n1", gpu=0.3, topology=0.0)
    recorded.probes["topology"] = replace(recorded.probes["topology"], params={"replayed": True})
    assert probe_durations([recorded]) == {"n1": {"gpu": 0.3}}
    assert duration_lines({}) == []


def test_seconds_as_a_person_reads_them() -> None:
    assert [seconds_text(s) for s in (0.004, 12.34, 245.0, 3725.0)] == [
        "0.00 s",
        "12.3 s",
        "4 min 5 s",
        "1 h 2 min",
    ]
