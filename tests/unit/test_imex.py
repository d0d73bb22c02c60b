"""IMEX on GB200/GB300 NVL72 trays: `nvidia-imex-ctl -N` as it really prints, what the gpu
probe reads of the service on a node, and gpu.imex's verdicts.

The reports are real (tests/fixtures/imex/SOURCES.md): AWS's 18-tray GB200 UltraServer
(IMEX 570.172) and a 2-node GH200 ComputeDomain (IMEX 570.00). A tray down is that AWS
report as IMEX prints the failure (a node UNAVAILABLE, the domain DEGRADED).
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from pathlib import Path

import pytest

from bringup.checks.auto import NO_PROFILE
from bringup.checks.catalog import judge_probe
from bringup.checks.gpu.imex import judge_imex
from bringup.findings import Finding, Status
from bringup.node.gpu_facts import GpuFacts
from bringup.node.imex import collect_imex
from bringup.node.imex_facts import ImexConnection, ImexFacts, ImexNode
from bringup.node.parsers.imex_ctl import detect, parse_imex_domain, parse_nodes_config
from bringup.node.parsers.smi_xml import parse_q_xml
from bringup.node.result import ParseError
from bringup.profile import AUTO, load
from bringup.recognize import InspectError, inspect_text, read_text
from tests.support import FIXTURES

AWS = FIXTURES / "imex" / "aws-pcluster-p6e-gb200-18node-570-ctl-N-up.txt"
GH200 = FIXTURES / "imex" / "jpsnips-gh200-2node-570-ctl-N-up-excerpt.txt"
GB200_XML = FIXTURES / "smi" / "k8stestinfra-gb200x4-580-q-x.xml"
B200_XML = FIXTURES / "smi" / "k8stestinfra-b200x8-580-q-x.xml"
AWS_IPS = [
    "172.31.48.81",
    "172.31.48.98",
    "172.31.48.221",
    "172.31.49.228",
    "172.31.50.39",
    "172.31.50.44",
    "172.31.51.66",
    "172.31.51.157",
    "172.31.52.239",
    "172.31.53.80",
    "172.31.54.95",
    "172.31.54.183",
    "172.31.54.203",
    "172.31.54.241",
    "172.31.55.59",
    "172.31.55.187",
    "172.31.55.197",
    "172.31.56.47",
]
# The two node lines of an IMEX 580.95.09 `-N -H` report published in a public collector's
# source (tests/fixtures/imex/SOURCES.md): the `*` marks the node that answered.
IMEX_580_LINES = (
    "Node #4   * 180.100.41.232 *   - READY   - Version: 580.95.09   - Hostname: MKE030104700131\n"
    "Node #0   - 180.100.41.183     - READY   - Version: 580.95.09   - Hostname: MKE030104700112\n"
)
GB200 = load("gb200")
MISSING = "nvidia-imex-ctl not found (the nvidia-imex package is not installed)"


def tray_down(text: str, ip: str = "172.31.49.228") -> str:
    """The AWS report as IMEX prints a tray whose service is gone: UNAVAILABLE, DEGRADED."""
    line = next(line for line in text.splitlines() if f" {ip} " in line)
    down = line.replace("READY                - Version: 570.172", "UNAVAILABLE")
    return text.replace(line, down).replace("Domain State: UP", "Domain State: DEGRADED")


def live(domain_text: str | None, **changes: object) -> GpuFacts:
    """The GB200 tray's real `-q -x` with IMEX facts as the gpu probe reads them on node #3."""
    facts = parse_q_xml(read_text(GB200_XML))
    imex = ImexFacts(
        service_state="active",
        daemon_status="READY",
        domain=parse_imex_domain(domain_text) if domain_text is not None else None,
        config_path="/etc/nvidia-imex/nodes_config.cfg",
        config_nodes=list(AWS_IPS),
        local_addresses=["127.0.0.1", "172.31.49.228", "tray04"],
    )
    return dataclasses.replace(facts, imex=dataclasses.replace(imex, **changes))


def only(findings: list[Finding]) -> Finding:
    (single,) = findings
    return single


# --- the parser, on the real reports -------------------------------------------------------


def test_the_aws_gb200_report_pins_what_an_operator_reads() -> None:
    domain = parse_imex_domain(read_text(AWS))
    assert (domain.state, domain.timestamp, len(domain.nodes)) == (
        "UP",
        "5/12/2025 06:08:10.580",
        18,
    )
    assert [n.address for n in domain.nodes] == AWS_IPS
    assert [n.index for n in domain.nodes] == list(range(18))
    assert {(n.status, n.version, n.hostname, n.local) for n in domain.nodes} == {
        ("READY", "570.172", None, None)
    }
    assert len(domain.connections) == 18 * 18
    assert {c.state for c in domain.connections} == {"C"}
    assert domain.connections[19] == ImexConnection(source=1, target=1, state="C")


def test_the_gh200_report_of_imex_570_00_has_no_version_column() -> None:
    domain = parse_imex_domain(read_text(GH200))
    assert domain.state == "UP"
    assert domain.timestamp == "3/25/2025 10:42:08.082"
    assert domain.nodes == [
        ImexNode(index=0, address="10.136.206.47", status="READY"),
        ImexNode(index=1, address="10.136.206.48", status="READY"),
    ]
    assert [(c.source, c.target, c.state) for c in domain.connections] == [
        (0, 0, "C"),
        (0, 1, "C"),
        (1, 0, "C"),
        (1, 1, "C"),
    ]


def test_imex_580_marks_the_node_that_answered() -> None:
    domain = parse_imex_domain(IMEX_580_LINES)
    assert [(n.index, n.address, n.version, n.hostname, n.local) for n in domain.nodes] == [
        (4, "180.100.41.232", "580.95.09", "MKE030104700131", True),
        (0, "180.100.41.183", "580.95.09", "MKE030104700112", False),
    ]
    assert domain.state is None  # the lines alone print no state


def test_a_tray_down_reads_as_imex_prints_it() -> None:
    domain = parse_imex_domain(tray_down(read_text(AWS)))
    assert domain.state == "DEGRADED"
    assert [(n.index, n.status, n.version) for n in domain.nodes if n.status != "READY"] == [
        (3, "UNAVAILABLE", None)
    ]


@pytest.mark.parametrize(
    "text",
    ["", "READY\n", "Nodes:\n", "\x00\xff binary", "Node #x - 1.2.3.4 - READY\n"],
)
def test_what_is_no_report_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="no `Node #` lines and no `Domain State:` line"):
        parse_imex_domain(text)


def test_detect_knows_the_report_and_nothing_else() -> None:
    assert detect(read_text(AWS)) and detect(read_text(GH200))
    assert not detect(read_text(GB200_XML))
    assert not detect(
        read_text(FIXTURES / "nccl" / "coreweave-gb200-nvl72-72rank-1rack-trimmed.txt")
    )


def test_nodes_config_entries() -> None:
    text = "# the rack\n172.31.48.81\n\n  tray02.example  # by name\n172.31.48.221\n"
    assert parse_nodes_config(text) == ["172.31.48.81", "tray02.example", "172.31.48.221"]


# --- gpu.imex on a live tray ----------------------------------------------------------------


def test_a_healthy_tray_passes() -> None:
    finding = only(judge_imex(live(read_text(AWS)), GB200))
    assert (finding.status, finding.message, finding.value) == (
        Status.PASS,
        "IMEX domain UP, 18/18 nodes READY, this node #3 (172.31.49.228) connected to all; "
        "nodes_config.cfg lists it",
        "UP",
    )


def test_this_tray_down_fails_with_the_guides_action() -> None:
    finding = only(judge_imex(live(tray_down(read_text(AWS))), GB200))
    assert finding.status is Status.FAIL
    assert finding.message == (
        "IMEX domain DEGRADED, 17/18 nodes READY: this node #3 (172.31.49.228) UNAVAILABLE"
    )
    assert finding.value == "DEGRADED"
    assert "/etc/nvidia-imex/nodes_config.cfg" in (finding.action or "")
    assert "`Domain State: UP`" in (finding.action or "")


def test_another_tray_down_warns_naming_it() -> None:
    # Tray 17's own gpu.imex FAILs it; this READY, connected tray is not failed (nor drained
    # by the health check) for its neighbour.
    text = tray_down(read_text(AWS), "172.31.56.47")
    # IMEX prints the lost peer's links as not connected: they are its fault, not this one's.
    row = "       3        " + "   ".join(["C"] * 18)
    text = text.replace(row, "       3        " + "   ".join(["C"] * 17 + ["I"]))
    finding = only(judge_imex(live(text), GB200))
    assert (finding.status, finding.message) == (
        Status.WARN,
        "IMEX domain DEGRADED, 17/18 nodes READY: node #17 (172.31.56.47) UNAVAILABLE "
        "(this node #3 (172.31.49.228) READY and connected)",
    )
    # The same report pasted (no "this node" in it) is the domain's whole state: FAIL.
    pasted = only(inspect_text(text, GB200).findings)
    assert (pasted.status, pasted.message) == (
        Status.FAIL,
        "IMEX domain DEGRADED, 17/18 nodes READY: node #17 (172.31.56.47) UNAVAILABLE",
    )


def test_a_degraded_domain_still_checks_this_nodes_config() -> None:
    text = tray_down(read_text(AWS), "172.31.56.47")
    facts = live(text, config_nodes=AWS_IPS[:3])
    finding = only(judge_imex(facts, GB200))
    assert finding.status is Status.FAIL
    assert finding.message.startswith("/etc/nvidia-imex/nodes_config.cfg (3 entries)")


def test_a_connection_of_this_node_not_connected_fails() -> None:
    text = read_text(AWS)
    row = "       3        " + "   ".join(["C"] * 18)
    assert row in text
    cut = "       3        " + "   ".join(["C"] * 5 + ["N"] + ["C"] * 12)
    finding = only(judge_imex(live(text.replace(row, cut)), GB200))
    assert (finding.status, finding.message) == (
        Status.FAIL,
        "IMEX domain UP, 18/18 nodes READY: not connected: #3->#5 N",
    )


def test_the_service_stopped_fails() -> None:
    facts = live(
        None,
        service_state="inactive",
        daemon_status=None,
        domain_error="`nvidia-imex-ctl -N`: Connection refused",
    )
    finding = only(judge_imex(facts, GB200))
    assert (finding.status, finding.value) == (Status.FAIL, "inactive")
    assert finding.message == (
        "nvidia-imex service inactive (`systemctl is-active nvidia-imex`); "
        "`nvidia-imex-ctl -N`: Connection refused"
    )
    assert "systemctl enable --now nvidia-imex" in (finding.action or "")


def test_a_service_run_by_another_manager_still_passes_on_its_report() -> None:
    # Kubernetes' ComputeDomain runs IMEX in a pod: systemd's unit is inactive, the domain UP.
    finding = only(judge_imex(live(read_text(AWS), service_state="inactive"), GB200))
    assert finding.status is Status.PASS


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"domain_error": MISSING},
            f"IMEX not read: {MISSING}",
        ),
        (
            {"domain_error": "`nvidia-imex-ctl -N` timed out after 10 s"},
            "IMEX domain not read: `nvidia-imex-ctl -N` timed out after 10 s; service active",
        ),
        (
            {"service_state": None, "domain_error": None},
            "IMEX domain not read: no `nvidia-imex-ctl -N` report",
        ),
    ],
)
def test_what_cannot_be_read_is_an_error_naming_why(
    changes: dict[str, object], message: str
) -> None:
    finding = only(judge_imex(live(None, **changes), GB200))
    assert (finding.status, finding.message) == (Status.ERROR, message)
    assert finding.action


def test_this_node_missing_from_the_domain_fails() -> None:
    facts = live(read_text(AWS), local_addresses=["10.0.0.9", "tray19"])
    finding = only(judge_imex(facts, GB200))
    assert (finding.status, finding.message) == (
        Status.FAIL,
        "this node (10.0.0.9, tray19) is not in the IMEX domain's 18 nodes",
    )


def test_nodes_config_not_listing_this_node_fails() -> None:
    facts = live(read_text(AWS), config_nodes=AWS_IPS[:3] + AWS_IPS[4:])
    finding = only(judge_imex(facts, GB200))
    assert (finding.status, finding.message) == (
        Status.FAIL,
        "/etc/nvidia-imex/nodes_config.cfg (17 entries) does not list this node "
        "(127.0.0.1, 172.31.49.228, tray04)",
    )


def test_nodes_config_unreadable_is_an_error() -> None:
    facts = live(
        read_text(AWS),
        config_nodes=None,
        config_error="/etc/nvidia-imex/nodes_config.cfg: permission denied (run as root)",
    )
    finding = only(judge_imex(facts, GB200))
    assert (finding.status, finding.message) == (
        Status.ERROR,
        "IMEX node list not read: /etc/nvidia-imex/nodes_config.cfg: permission denied "
        "(run as root)",
    )


def test_imex_580_finds_this_node_by_its_mark() -> None:
    facts = live(
        IMEX_580_LINES + "Domain State: UP\n",
        local_addresses=[],
        config_nodes=[
            "180.100.41.183",
            "180.100.41.232",
        ],
    )
    finding = only(judge_imex(facts, GB200))
    assert finding.message == (
        "IMEX domain UP, 2/2 nodes READY, this node #4 (180.100.41.232 MKE030104700131) "
        "connected to all; nodes_config.cfg lists it"
    )


# --- where IMEX does not apply --------------------------------------------------------------


def test_an_hgx_board_says_nothing_of_imex() -> None:
    b200 = parse_q_xml(read_text(B200_XML))
    b200.imex = ImexFacts(service_error=MISSING, domain_error=MISSING, config_error=MISSING)
    findings = judge_probe("gpu", b200, None, load("b200"))
    assert "gpu.imex" not in {f.check for f in findings}


def test_gb300_requires_imex_as_gb200_does() -> None:
    finding = only(judge_imex(live(None, domain_error="`nvidia-imex-ctl -N`: x"), load("gb300")))
    assert finding.status is Status.ERROR


def test_a_tray_paste_without_imex_says_so() -> None:
    facts = parse_q_xml(read_text(GB200_XML))
    finding = only(judge_imex(facts, GB200))
    assert (finding.status, finding.message) == (
        Status.SKIP,
        "IMEX was not read from this source (nvidia-smi -q -x): it is judged on the node (`bringup "
        "check`) or from a pasted `nvidia-imex-ctl -N`",
    )


# --- inspect reads a pasted report ----------------------------------------------------------


def test_inspect_a_healthy_report() -> None:
    result = inspect_text(read_text(AWS), AUTO)
    assert (result.kind, result.profile, result.read) == (
        "imex",
        None,
        "IMEX domain UP, 18 nodes (18 READY), IMEX 570.172",
    )
    assert [(f.check, f.status, f.message) for f in result.findings] == [
        ("gpu.imex", Status.PASS, "IMEX domain UP, 18/18 nodes READY")
    ]


def test_inspect_a_report_with_a_tray_down() -> None:
    for profile in (AUTO, GB200, load("gb300")):
        result = inspect_text(tray_down(read_text(AWS)), profile)
        assert result.read == "IMEX domain DEGRADED, 18 nodes (17 READY), IMEX 570.172"
        finding = only(result.findings)
        assert (finding.check, finding.status, finding.message) == (
            "gpu.imex",
            Status.FAIL,
            "IMEX domain DEGRADED, 17/18 nodes READY: node #3 (172.31.49.228) UNAVAILABLE",
        )


def test_inspect_garbage_as_imex_is_an_error_not_a_pass() -> None:
    result = inspect_text("\x00\x01 not a report", GB200, kind_name="imex")
    finding = only(result.findings)
    assert finding.status is Status.ERROR
    assert finding.message.startswith("could not parse as nvidia-imex-ctl -N: ")
    with pytest.raises(InspectError):
        inspect_text("\x00\x01 not a report", AUTO, kind_name="no-such-kind")


# --- the node side: the real collector, with stand-in tools ----------------------------------


def _tool(folder: Path, name: str, script: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A node whose PATH starts with stand-in `systemctl` and `nvidia-imex-ctl`, and an
    IMEX config folder of its own."""
    tools = tmp_path / "bin"
    tools.mkdir()
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "nodes_config.cfg").write_text("\n".join(AWS_IPS) + "\n")
    (etc / "config.cfg").write_text(f"IMEX_NODE_CONFIG_FILE={etc / 'nodes_config.cfg'}\n")
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


def test_the_collector_reads_service_report_and_node_list(node: Path) -> None:
    _tool(node / "bin", "systemctl", "echo active\n")
    report = node / "report.txt"
    report.write_text(read_text(AWS))
    _tool(
        node / "bin",
        "nvidia-imex-ctl",
        f'case "$1" in -q) echo READY ;; -N) cat "{report}" ;; *) exit 2 ;; esac\n',
    )
    raw: dict[str, str] = {}
    facts = collect_imex(str(node / "etc" / "config.cfg"), 10, raw)
    assert (facts.service_state, facts.daemon_status, facts.domain_error) == (
        "active",
        "READY",
        None,
    )
    assert facts.domain is not None and facts.domain.state == "UP"
    assert facts.config_nodes == AWS_IPS
    assert facts.config_path == str(node / "etc" / "nodes_config.cfg")
    assert raw["nvidia-imex-ctl-N.txt"] == read_text(AWS)
    assert set(raw) == {"nvidia-imex-ctl-N.txt", "config.cfg", "nodes_config.cfg"}
    assert facts.local_addresses  # this machine's own names


def test_the_collector_says_why_for_each_part(node: Path) -> None:
    _tool(node / "bin", "systemctl", "echo failed\nexit 3\n")
    _tool(node / "bin", "nvidia-imex-ctl", "echo 'Failed to connect to IMEX service' >&2\nexit 1\n")
    (node / "etc" / "nodes_config.cfg").unlink()
    facts = collect_imex(str(node / "etc" / "config.cfg"), 10, {})
    assert facts.service_state == "failed"
    assert facts.domain is None
    assert facts.domain_error == "`nvidia-imex-ctl -N`: Failed to connect to IMEX service"
    assert facts.config_error == f"{node / 'etc' / 'nodes_config.cfg'}: not found"
    finding = only(judge_imex(live(None, **_imex_fields(facts)), GB200))
    assert (finding.status, finding.value) == (Status.FAIL, "failed")


def test_a_hung_imex_ctl_is_cut_at_its_deadline(node: Path) -> None:
    _tool(node / "bin", "systemctl", "echo active\n")
    _tool(node / "bin", "nvidia-imex-ctl", "exec sleep 60\n")
    facts = collect_imex(str(node / "etc" / "config.cfg"), 0.5, {})
    # The ctl gets what the probe's deadline has left after systemctl (0.4 s was seen on a
    # loaded machine), never more, and the message says what it was given.
    said = re.fullmatch(r"`nvidia-imex-ctl -N` timed out after (\d\.\d) s", facts.domain_error)
    assert said, facts.domain_error
    assert 0.1 <= float(said.group(1)) <= 0.5
    assert facts.daemon_status is None


def _imex_fields(facts: ImexFacts) -> dict[str, object]:
    return {f.name: getattr(facts, f.name) for f in dataclasses.fields(facts)}


def test_an_unmeasured_gpu_probe_leaves_imex_unjudged_only_on_a_tray() -> None:
    error = "no NVIDIA driver found (no pynvml, nvidia-smi not on PATH)"
    on_tray = judge_probe("gpu", None, error, GB200)
    assert [(f.status, f.message) for f in on_tray if f.check == "gpu.imex"] == [
        (Status.ERROR, error)
    ]
    on_board = judge_probe("gpu", None, error, load("b300"))
    assert "gpu.imex" not in {f.check for f in on_board}
    assert len(on_board) == len(on_tray) - 1


def test_a_node_no_profile_fits_is_judged_by_its_domain_alone() -> None:
    up = live(read_text(AWS), local_addresses=["10.0.0.9"])
    assert [(f.status, f.message) for f in judge_imex(up, NO_PROFILE)] == [
        (Status.PASS, "IMEX domain UP, 18/18 nodes READY")
    ]
    down = live(tray_down(read_text(AWS)))
    (finding,) = judge_imex(down, NO_PROFILE)
    assert (finding.status, finding.message) == (
        Status.FAIL,
        "IMEX domain DEGRADED, 17/18 nodes READY: this node #3 (172.31.49.228) UNAVAILABLE",
    )


def test_a_trimmed_report_is_an_error_not_a_pass() -> None:
    (no_nodes,) = inspect_text("Domain State: UP\n", GB200).findings
    assert (no_nodes.status, no_nodes.message) == (
        Status.ERROR,
        "the IMEX report lists no node (Domain State UP): a trimmed output",
    )
    (no_state,) = inspect_text(IMEX_580_LINES, GB200, kind_name="imex").findings
    assert (no_state.status, no_state.message) == (
        Status.ERROR,
        "the IMEX report has no `Domain State:` line (2 nodes READY): a trimmed output",
    )


def test_garbage_as_imex_under_auto_says_why() -> None:
    (finding,) = inspect_text("\x00\x01 not a report", AUTO, kind_name="imex").findings
    assert (finding.check, finding.status) == ("gpu.imex", Status.ERROR)
    assert finding.message.startswith("could not parse as nvidia-imex-ctl -N: ")


def test_the_probe_reads_the_imex_guides_config_by_default() -> None:
    from bringup.node import imex
    from bringup.node.probes import gpu

    assert gpu.Params().imex_config == imex.CONFIG == "/etc/nvidia-imex/config.cfg"
