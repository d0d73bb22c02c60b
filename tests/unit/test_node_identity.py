"""The node's identity (bringup/node/identity.py): parsers pinned on recorded tool outputs,
readers on temporary sysfs trees, and every missing source recorded as "not available"."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bringup.facts import ProbeRecord, decode
from bringup.node import identity
from bringup.node.identity import (
    Nic,
    SystemIdentity,
    clean_dmi,
    parse_colon_fields,
    parse_ethtool_info,
    parse_fabric_manager_version,
    parse_mc_info,
    read_dmi,
    read_identity,
    read_rdma_nics,
)
from bringup.sim.demo import _host

FIXTURES = Path(__file__).parents[1] / "fixtures" / "identity"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_ipmitool_mc_info_of_an_hp_ilo2() -> None:
    assert parse_mc_info(fixture("hpe-ilo2-ipmitool-mc-info.txt")) == ("1.28", "Hewlett-Packard")


def test_the_indented_device_support_list_is_not_a_field() -> None:
    fields = parse_colon_fields(fixture("hpe-ilo2-ipmitool-mc-info.txt"))
    assert fields["Product ID"] == "8192 (0x2000)"
    assert fields["Additional Device Support"] == ""
    assert "Sensor Device" not in fields and len(fields) == 11


def test_mc_info_without_a_firmware_line() -> None:
    assert parse_mc_info("Device ID : 19\n") == (None, None)


def test_fabric_manager_version_of_a_transcript() -> None:
    text = fixture("jear-median-nv-fabricmanager-version.txt")
    assert parse_fabric_manager_version(text) == "450.102.04"


def test_fabric_manager_output_without_a_version() -> None:
    assert parse_fabric_manager_version("nv-fabricmanager: command failed\n") is None


def test_ethtool_i_of_a_virtio_interface() -> None:
    nic = parse_ethtool_info("eth0", fixture("local-virtio-net-ethtool-i-eth0.txt"))
    # The empty "firmware-version:" line is "not reported", not an empty string.
    assert nic == Nic(
        name="eth0", kind="ethernet", model="virtio_net", firmware=None, bus_info="0000:00:03.0"
    )


def test_ethtool_error_text_gives_no_fields() -> None:
    nic = parse_ethtool_info("lo", fixture("local-ethtool-i-lo-unsupported.stderr.txt"))
    assert (nic.model, nic.firmware, nic.bus_info) == (None, None, None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("To Be Filled By O.E.M.\n", None),
        ("Default string\n", None),
        ("0\n", None),
        ("\n", None),
        ("1654922001234\n", "1654922001234"),
    ],
)
def test_dmi_placeholders_are_not_identities(text: str, expected: str | None) -> None:
    assert clean_dmi(text) == expected


def test_dmi_reader_names_each_missing_file(tmp_path: Path) -> None:
    (tmp_path / "bios_version").write_text("1.2.3\n")
    (tmp_path / "chassis_serial").write_text("Default string\n")
    values, missing = read_dmi(tmp_path)
    assert values["bios_version"] == "1.2.3"
    assert values["chassis_serial"] is None
    assert missing["chassis_serial"] == "the firmware left it empty (placeholder value)"
    assert missing["system_serial"].startswith(f"cannot read {tmp_path}/product_serial")
    assert "bios_version" not in missing


def test_rdma_reader_takes_model_firmware_and_psid(tmp_path: Path) -> None:
    # The values of a ConnectX-6 as `ibstat` and `ibv_devinfo` print them (CA type MT4123,
    # firmware 20.35.1012, board_id MT_0000000222), one per sysfs file.
    device = tmp_path / "mlx5_0"
    device.mkdir()
    (device / "hca_type").write_text("MT4123\n")
    (device / "fw_ver").write_text("20.35.1012\n")
    (device / "board_id").write_text("MT_0000000222\n")
    (tmp_path / "mlx5_1").mkdir()  # a device whose files cannot be read
    assert read_rdma_nics(tmp_path) == [
        Nic("mlx5_0", "rdma", model="MT4123", firmware="20.35.1012", psid="MT_0000000222"),
        Nic(name="mlx5_1", kind="rdma"),
    ]
    assert read_rdma_nics(tmp_path / "absent") == []


def test_missing_tools_are_recorded_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(identity, "SYS_DMI", tmp_path / "dmi")
    monkeypatch.setattr(identity, "SYS_INFINIBAND", tmp_path / "ib")
    monkeypatch.setattr(identity, "SYS_NET", tmp_path / "net")
    monkeypatch.setattr(identity, "which", lambda name: None)
    ident = read_identity(timeout_s=1)
    assert ident.bmc_firmware is None
    assert ident.unavailable["bmc_firmware"] == "ipmitool not installed"
    assert ident.unavailable["fabric_manager_version"] == ("nv-fabricmanager not installed")
    assert ident.unavailable["nics"] == f"no RDMA device under {tmp_path / 'ib'}"
    assert ident.unavailable["chassis_serial"].startswith("cannot read")
    assert ident.nvswitch_firmware is None
    assert ident.unavailable["nvswitch_firmware"] == identity.NVSWITCH_FIRMWARE


def test_a_tool_that_hangs_is_cut_at_its_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hang = tmp_path / "ipmitool"
    hang.write_text("#!/bin/sh\nsleep 30\n")
    hang.chmod(0o755)
    monkeypatch.setattr(identity, "SYS_DMI", tmp_path / "dmi")
    monkeypatch.setattr(identity, "SYS_NET", tmp_path / "net")
    monkeypatch.setattr(identity, "which", lambda name: str(hang) if name == "ipmitool" else None)
    raw: dict[str, str] = {}
    ident = read_identity(timeout_s=0.5, raw=raw)
    assert ident.unavailable["bmc_firmware"] == "ipmitool mc info: timed out"
    assert "ipmitool-mc-info.txt" not in raw
    assert raw["dmi.txt"].startswith("system_vendor: (not measured)\n")


def test_host_facts_recorded_before_the_identity_still_decode() -> None:
    facts = dataclasses.asdict(_host("n1"))
    facts.pop("identity")
    decoded = decode(ProbeRecord(probe="host", ok=True, facts=facts))
    assert decoded.identity == SystemIdentity()
