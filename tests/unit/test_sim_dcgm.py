"""The simulated dcgmi's tables read back by the real parser, as DCGM 4.x tables."""

from __future__ import annotations

from pathlib import Path

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


def test_the_stand_in_dcgmi_makes_itself_known(tmp_path: Path) -> None:
    """The dcgm probe reads the stand-in's own first line: its records say "simulated
    dcgmi"; a real dcgmi (an ELF binary) or a missing one does not."""
    from bringup.node.simulated import tool_is_simulated
    from bringup.sim import dcgm

    script = dcgm.install(tmp_path, 8, "580.95.05")
    assert tool_is_simulated(str(script))
    binary = tmp_path / "real-dcgmi"
    binary.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 600 + b"bringup.sim")
    assert not tool_is_simulated(str(binary))
    assert not tool_is_simulated(str(tmp_path / "absent"))
