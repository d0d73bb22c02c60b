"""The simulated dcgmi's tables read back by the real parser, as DCGM 4.x tables."""

from __future__ import annotations

from bringup.node.parsers.dcgm_diag import parse_diag
from bringup.sim.dcgm import diag_table


def test_each_level_adds_its_tests_with_a_row_per_gpu() -> None:
    quick = parse_diag(diag_table(7, 1, "580.95.05"))
    assert (quick.dcgm_version, quick.driver_version, quick.device_ids) == (
        "4.4.2",
        "580.95.05",
        ["3182"] * 7,
    )
    assert [(t.category, t.name, t.status) for t in quick.tests] == [
        ("Deployment", "software", "pass")
    ]
    assert [(r.gpu, r.status) for r in quick.tests[0].results] == [(i, "pass") for i in range(7)]
    long = parse_diag(diag_table(8, 3, "580.95.05"))
    assert [t.name for t in long.tests] == [
        "software",
        "memory",
        "diagnostic",
        "pcie",
        "memory_bandwidth",
        "targeted_stress",
        "targeted_power",
    ]
    assert all(len(t.results) == 8 and t.status == "pass" for t in long.tests)
