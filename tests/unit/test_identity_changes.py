"""A node's system identity and GPU map compared with its handover: each changed field named."""

from bringup.measurements import GpuRef, Identity, NodeMeasurements, identity_changes
from bringup.node.identity import Nic, SystemIdentity


def _node(bios: str | None, firmware: str, pci: str, serial: str | None = "S1") -> NodeMeasurements:
    system = SystemIdentity(
        system_serial=serial,
        bios_version=bios,
        nics=[Nic(name="mlx5_0", kind="rdma", model="MT4123", firmware=firmware, psid="MT_1")],
        unavailable={} if bios else {"bios_version": "no /sys/class/dmi/id"},
    )
    gpus = [GpuRef(index=0, pci_bus_id=pci, serial="G0", uuid="GPU-0")]
    return NodeMeasurements(node="n1", identity=Identity(system=system, gpus=gpus))


def test_bios_nic_firmware_and_gpu_address_changes_are_named() -> None:
    then = _node("1.2.3", "20.31.1014", "00000000:18:00.0")
    now = _node("1.2.4", "22.36.1010", "00000000:2A:00.0")
    assert [(c.field, c.baseline, c.current) for c in identity_changes("n1", then, now)] == [
        ("GPU 0 PCI address", "00000000:18:00.0", "00000000:2A:00.0"),
        ("bios version", "1.2.3", "1.2.4"),
        ("NIC mlx5_0 firmware", "20.31.1014", "22.36.1010"),
    ]


def test_what_either_run_could_not_read_is_not_a_change() -> None:
    then = _node("1.2.3", "20.31.1014", "00000000:18:00.0", serial=None)
    now = _node(None, "20.31.1014", "00000000:18:00.0")
    assert identity_changes("n1", then, now) == []
