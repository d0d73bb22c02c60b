"""The xid probe's kernel-log parser (real Xid/SXid lines) and the xid checks."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from bringup.checks import xid as checks
from bringup.findings import Expected, Finding, Status
from bringup.node.gpu_facts import GpuFacts, gpu_by_pci, gpu_label, pci_key
from bringup.node.parsers.smi_xml import parse_q_xml
from bringup.node.probes import xid
from bringup.node.probes.xid import XidFacts, parse_kernel_log
from bringup.node.result import ParseError
from tests.support.profiles import h100_profile

FIXTURES = Path(__file__).parent.parent / "fixtures" / "xid"
ALL_FIXTURES = sorted(p.name for p in FIXTURES.glob("*.txt"))

GPUD = "gpud-xid13-xid109-dmesg-ctime.txt"
OPENSHIFT = "openshift-a10-xid119-gsp-timeout-dmesg.txt"
MLENG = "mleng-a100-xid63-row-remapper.txt"
DBE = "gpuoperator-1146-xid48-dbe-syslog-TRUNCATED.txt"
NVLINK = "nvsentinel-doc-xid74-nvlink-7-registers.txt"
USERNOTE = "usernote-xid51-xid154-pf-flr.txt"
MMU = "ogkm-363-xid31-mmu-fault-ce0.txt"
DXVK = "dxvk-1027-xid31-xid13-xid32-consumer.txt"
BUMBLEBEE = "bumblebee-677-xid32-xid31-old-format.txt"
DRA = "dradriver-904-xid43-mig-doc.txt"
CAUSED_BY = "ogkm-1150-xid45-caused-by-xid149-xid145-journal-excerpt.txt"
SXID = "nvtrust-124-sxid22013-nvswitch-excerpt.txt"

PROFILE = h100_profile()


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def parse(name: str) -> XidFacts:
    return parse_kernel_log(text(name))


def codes(facts: XidFacts) -> list[tuple[int, str | None]]:
    return [(e.xid, e.pci) for e in facts.xids]


def judge(facts: XidFacts) -> list[Finding]:
    return checks.judge_events(facts, PROFILE) + checks.judge_sxid(facts, PROFILE)


# --- the parser, fixture by fixture -------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected", "lines"),
    [
        (GPUD, [(13, "0000:cb:00")] * 3 + [(109, "0000:cb:00")], 5),
        (OPENSHIFT, [(119, "0000:61:00")] * 3, 12),
        (MLENG, [(63, "0000:10:1c")], 1),
        (DBE, [(48, "0000:07:00")], 1),
        (NVLINK, [(74, "0003:00:00")], 1),
        (USERNOTE, [(51, "0000:0d:00"), (154, "0000:0d:00")], 3),
        (MMU, [(31, "0000:08:00")] * 2, 3),
        (DXVK, [(31, "0000:01:00")] + [(13, "0000:01:00")] * 4 + [(32, "0000:01:00")], 8),
        (BUMBLEBEE, [(32, "0000:01:00"), (32, "0000:01:00"), (31, "0000:01:00")], 3),
        (DRA, [(43, "0009:01:00")], 1),
        (
            CAUSED_BY,
            [
                (45, "0000:dc:00"),
                (45, "0000:ed:00"),
                (45, "0000:ba:00"),
                (45, "0000:97:00"),
                (45, "0000:dc:00"),
                (45, "0000:ba:00"),
                (45, "0000:ed:00"),
            ],
            7,
        ),
        (SXID, [(22013, "0000:04:00.0")] * 8, 9),
    ],
)
def test_codes_and_pci_per_fixture(name: str, expected: list[tuple[int, str]], lines: int) -> None:
    facts = parse(name)
    assert codes(facts) == expected
    assert facts.lines_scanned == lines
    assert facts.source == "file" and facts.window_s is None


def test_every_fixture_is_covered_by_the_table() -> None:
    assert len(ALL_FIXTURES) == 12


def test_dmesg_ctime_with_process_and_unknown_pid() -> None:
    events = parse(GPUD).xids
    assert [e.timestamp for e in events] == ["[Fri Aug 30 11:43:09 2024]"] * 3 + [
        "[Fri Aug 30 11:43:14 2024]"
    ]
    # pid='<unknown>', name=<unknown> is no pid and no process.
    assert (events[0].pid, events[0].process) == (None, None)
    assert events[0].message == (
        "Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter"
    )
    assert (events[3].pid, events[3].process) == (1797828, "pt_main_thread")
    assert events[3].message == "Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005"
    assert not any(e.sxid for e in events)


def test_gsp_timeouts_and_non_xid_lines() -> None:
    events = parse(OPENSHIFT).xids
    assert [e.timestamp for e in events] == ["[ 3947.590120]", "[ 3953.591118]", "[ 4131.289367]"]
    assert [(e.pid, e.process) for e in events] == [
        (123417, "nv-hostengine"),
        (123417, "nv-hostengine"),
        (126121, "nvidia-smi"),
    ]
    assert events[2].message.startswith("Timeout after 6s of waiting for RPC response")
    assert events[2].message.endswith("Expected function 76 (GSP_RM_CONTROL) (0x2080a068 0x4).")


def test_bare_line_without_timestamp() -> None:
    (event,) = parse(MLENG).xids
    assert event.timestamp is None
    assert event.pid == 1896 and event.process is None
    assert event.message == "Row Remapper: New row marked for remapping, reset gpu to activate."
    assert event.line == text(MLENG).strip()


def test_syslog_line_cut_short() -> None:
    (event,) = parse(DBE).xids
    # The wall clock of syslog is preferred over the seconds-since-boot field.
    assert event.timestamp == "Dec  2 10:43:35"
    assert event.message.endswith("at physAddr 0x7fdd60000 partition")


def test_pci_domains_and_named_process() -> None:
    (dra,) = parse(DRA).xids
    assert (dra.pci, dra.pid, dra.process, dra.message) == (
        "0009:01:00",
        3188489,
        "trigger_xid",
        "channel 0x0b00000a",
    )
    (nvlink,) = parse(NVLINK).xids
    assert nvlink.timestamp == "[449410.332316]"
    assert nvlink.message.startswith("NVLink: fatal error detected on link 14(0x0, 0x0, 0x10000")


def test_old_engmask_format() -> None:
    events = parse(BUMBLEBEE).xids
    assert events[2].message == "Ch 00000003, engmask 00000101, intr 10000000"
    assert events[0].message == "Channel ID 00000000 intr 00004000"


def test_recovery_action_line() -> None:
    bad_tsg, recovery = parse(USERNOTE).xids
    assert bad_tsg.message == "BAD_TSG encountered on runlist: 0 with error code: 4"
    assert recovery.message == "GPU recovery action changed from 0x0 (None) to 0x1 (PF FLR)"
    assert checks.recovery_action(recovery.message) == "PF FLR"


def test_journal_prefix_and_caused_by() -> None:
    events = parse(CAUSED_BY).xids
    assert [e.caused_by for e in events] == [149, 145, 145, 145, 149, 145, 145]
    assert all(e.xid == 45 and e.process == "python3" and e.timestamp is None for e in events)
    assert events[0].pid == 1818990
    assert events[0].message == "Ch 00000001 caused by previous Xid 149"


def test_nvswitch_sxid() -> None:
    facts = parse(SXID)
    assert all(e.sxid for e in facts.xids)
    assert facts.xids[1].message == "Non-fatal, Link 44 Minion Link DLREQ interrupt"
    assert facts.xids[0].timestamp == "[   38.175561]"


def test_no_xid_is_no_event_not_an_error() -> None:
    facts = parse_kernel_log("[    0.000000] Linux version 6.8.0\n\nplain text\n")
    assert facts.xids == [] and facts.lines_scanned == 3
    assert parse_kernel_log("").xids == []


def test_undecodable_bytes_are_fine() -> None:
    raw = (FIXTURES / MLENG).read_bytes()
    facts = parse_kernel_log((b"\xff\xfe garbage \x80\n" + raw).decode(errors="replace"))
    assert codes(facts) == [(63, "0000:10:1c")]


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_detect_every_fixture(name: str) -> None:
    assert xid.detect(text(name))


def test_detect_rejects_other_outputs() -> None:
    nccl = Path(__file__).parent.parent / "fixtures" / "nccl" / "superbench-a100x8-allreduce.txt"
    assert not xid.detect(nccl.read_text())
    assert not xid.detect("NVRM: GPU at PCI:0000:08:00: GPU-UID")


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_facts_round_trip_through_pydantic(name: str) -> None:
    facts = parse(name)
    data = dataclasses.asdict(facts)
    assert TypeAdapter(XidFacts).validate_python(data) == facts


# --- robustness ------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parser_only_raises_parse_error_on_any_text(data: str) -> None:
    with contextlib.suppress(ParseError):
        parse_kernel_log(data)


FIXTURE_LINES = sorted({line for name in ALL_FIXTURES for line in text(name).splitlines()})
# Pieces of real lines glued to random text reach deeper than random text alone.
MIXED = st.lists(
    st.one_of(
        st.sampled_from(FIXTURE_LINES),
        st.text(),
        st.sampled_from(FIXTURE_LINES).map(lambda line: line[: len(line) // 2]),
    ),
    max_size=8,
).map("\n".join)


@settings(max_examples=300, deadline=None)
@given(MIXED)
def test_parser_only_raises_parse_error_on_mixed_lines(data: str) -> None:
    with contextlib.suppress(ParseError):
        facts = parse_kernel_log(data)
        judge(facts)  # the checks cope with whatever parses


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(ALL_FIXTURES), st.floats(min_value=0, max_value=1))
def test_parser_survives_truncated_fixtures(name: str, cut: float) -> None:
    whole = text(name)
    try:
        facts = parse_kernel_log(whole[: int(len(whole) * cut)])
    except ParseError:
        return
    assert len(facts.xids) <= len(parse_kernel_log(whole).xids)


# --- the checks ------------------------------------------------------------------------------


def only(findings: list[Finding], check: str) -> list[Finding]:
    return [f for f in findings if f.check == check]


def test_no_xid_passes_and_names_the_window() -> None:
    facts = parse_kernel_log("[    0.000000] Linux version 6.8.0\n")
    facts.window_s = 7 * 86400
    facts.source = "journalctl -k"
    (events,) = checks.judge_events(facts, PROFILE)
    assert events.status == Status.PASS
    assert events.message.startswith("no XID in the last 7 days")
    (sxid,) = checks.judge_sxid(facts, PROFILE)
    assert sxid.status == Status.PASS and sxid.message == "no NVSwitch SXid in the last 7 days"


def test_application_xids_warn_one_finding_per_code_and_gpu() -> None:
    found = only(judge(parse(GPUD)), "xid.events")
    assert [(f.status, f.value) for f in found] == [(Status.WARN, 3), (Status.WARN, 1)]
    assert "GPU 0000:cb:00: Xid 13 (Graphics Engine Exception) x3" in found[0].message
    assert "at [Fri Aug 30 11:43:09 2024]" in found[0].message
    assert found[1].action and found[1].action.startswith("GPU 0000:cb:00:")


@pytest.mark.parametrize(
    ("name", "status", "in_action"),
    [
        (MLENG, Status.FAIL, "activate the remapped row"),
        (DBE, Status.FAIL, "RMA if DBEs repeat"),
        (NVLINK, Status.FAIL, "nvlink -e"),
        (OPENSHIFT, Status.FAIL, "reset the GPU"),
        (DRA, Status.WARN, "user's program"),
        (MMU, Status.WARN, "compute-sanitizer"),
    ],
)
def test_status_and_action_from_the_catalogue(name: str, status: Status, in_action: str) -> None:
    (found,) = only(judge(parse(name)), "xid.events")
    assert found.status == status
    assert found.action and in_action in found.action
    assert found.expected == Expected(op="==", value=0, unit="events") and found.unit == "events"


def test_gsp_timeouts_report_first_and_last() -> None:
    (found,) = only(judge(parse(OPENSHIFT)), "xid.events")
    assert found.value == 3
    assert "first at [ 3947.590120], last at [ 4131.289367]" in found.message


def test_recovery_action_says_what_it_requires() -> None:
    bad_tsg, recovery = only(judge(parse(USERNOTE)), "xid.events")
    assert recovery.status == Status.FAIL
    assert recovery.action and "'PF FLR'" in recovery.action and "function-level" in recovery.action
    assert bad_tsg.status == Status.FAIL


def test_recovery_action_none_only_warns() -> None:
    facts = parse(USERNOTE)
    event = facts.xids[1]
    recovered = event.message.replace("to 0x1 (PF FLR)", "to 0x0 (None)")
    facts.xids = [dataclasses.replace(event, message=recovered)]
    (found,) = checks.judge_events(facts, PROFILE)
    assert found.status == Status.WARN
    assert found.action and "recovered on its own" in found.action


def test_caused_by_takes_the_severity_of_the_cause() -> None:
    found = only(judge(parse(CAUSED_BY)), "xid.events")
    assert len(found) == 4
    netir = next(f for f in found if "0000:dc:00" in f.message)
    rlw = next(f for f in found if "0000:97:00" in f.message)
    assert netir.status == Status.FAIL and netir.value == 2
    assert "caused by previous Xid 149" in netir.message
    assert netir.action and "NVLink NETIR error" in netir.action
    assert rlw.status == Status.WARN and rlw.value == 1


def test_blackwell_nvlink_fatal_word_decides() -> None:
    facts = parse(CAUSED_BY)
    cause = dataclasses.replace(facts.xids[1], xid=145, caused_by=None)
    facts.xids = [dataclasses.replace(cause, message="RLW Nonfatal XC0 i0 Link 0")]
    assert checks.judge_events(facts, PROFILE)[0].status == Status.WARN
    facts.xids = [dataclasses.replace(cause, message="RLW Fatal XC0 i0 Link 0")]
    assert checks.judge_events(facts, PROFILE)[0].status == Status.FAIL


def test_unknown_code_warns_and_points_to_the_catalogue() -> None:
    facts = parse(MLENG)
    facts.xids = [dataclasses.replace(facts.xids[0], xid=999)]
    (found,) = checks.judge_events(facts, PROFILE)
    assert found.status == Status.WARN
    assert "unknown XID 999" in found.message
    assert found.action and "XID catalogue" in found.action


def test_sxid_non_fatal_warns_fatal_fails() -> None:
    facts = parse(SXID)
    (found,) = only(judge(facts), "xid.sxid")
    assert (found.status, found.value) == (Status.WARN, 8)
    assert "NVSwitch 0000:04:00.0: SXid 22013 (non-fatal) x8" in found.message
    assert found.message.endswith("Non-fatal, Link 44 Minion Link DLREQ interrupt")
    assert only(judge(facts), "xid.events")[0].status == Status.PASS

    event = facts.xids[1]
    facts.xids[1] = dataclasses.replace(event, message=event.message.replace("Non-fatal", "Fatal"))
    (fatal,) = only(judge(facts), "xid.sxid")
    assert fatal.status == Status.FAIL
    assert fatal.action and "Fabric Manager" in fatal.action


def test_catalogue_is_consistent() -> None:
    for code, info in checks.XID_CATALOGUE.items():
        assert info.severity in checks.SEVERITY_STATUS, code
        assert info.name and info.action, code
    assert checks.XID_CATALOGUE[79].severity == "fatal"
    assert checks.XID_CATALOGUE[64].severity == "fatal"
    assert checks.XID_CATALOGUE[13].severity == "app"


def test_checks_are_registered() -> None:
    assert [c.name for c in checks.CHECKS] == ["xid.events", "xid.sxid"]
    assert all(c.probe == "xid" for c in checks.CHECKS)


# --- GPU index and serial, and wall-clock UTC ------------------------------------------------

A100_XML = (
    Path(__file__).parent.parent / "fixtures" / "smi" / "telegraf-a100-sxm4-x4-mig-535-q-x.xml"
)


def a100_gpus() -> GpuFacts:
    # A recorded A100 whose GPU 0 sits at PCI 00000000:01:00.0, serial 1650522003820.
    return parse_q_xml(A100_XML.read_text())


def test_an_xid_names_the_gpu_index_serial_and_utc_time() -> None:
    # The kernel log and the nvidia-smi capture come from different machines; what is tested
    # is that the kernel's "0000:01:00" and NVML's "00000000:01:00.0" are the same GPU.
    facts = parse(BUMBLEBEE)
    facts.boot_time_s = 1_700_000_000.0  # btime of the node that wrote the log
    first, _ = checks.judge_events(facts, PROFILE, a100_gpus())
    assert first.message.startswith(
        "GPU 0 (serial 1650522003820) at PCI 0000:01:00: Xid 32 (Invalid or corrupted push "
        "buffer stream) x2 first at 2023-11-15 04:55:28 UTC ([24128.828315]), "
        "last at 2023-11-15 04:55:28 UTC ([24128.828608])"
    )
    assert first.action is not None
    assert first.action.startswith("GPU 0 (serial 1650522003820) at PCI 0000:01:00: ")


def test_without_gpu_facts_or_boot_time_the_log_is_quoted_as_printed() -> None:
    (first, _) = checks.judge_events(parse(BUMBLEBEE), PROFILE)
    assert first.message.startswith("GPU 0000:01:00: Xid 32 ")
    assert "first at [24128.828315], last at [24128.828608]" in first.message


def test_a_gpu_not_in_the_facts_keeps_its_pci_address() -> None:
    (first,) = checks.judge_events(parse(MMU), PROFILE, a100_gpus())
    assert first.message.startswith("GPU 0000:08:00: Xid 31 ")


@pytest.mark.parametrize(
    ("stamp", "boot", "offset", "expected"),
    [
        ("[86021.442918]", 1_795_788_600.0, None, "2026-11-28 14:03:41.442918+00:00"),
        ("[    5.120331]", 1_795_788_600.0, None, "2026-11-27 14:10:05.120331+00:00"),
        ("[86021.442918]", None, 0, None),  # a log someone sent: no boot time
        ("[Fri Aug 30 11:43:09 2024]", None, 7200, "2024-08-30 09:43:09+00:00"),
        ("[Fri Aug 30 11:43:09 2024]", None, None, None),  # local time, zone unknown
        ("2024-08-30T11:43:09+0000", None, None, "2024-08-30 11:43:09+00:00"),
        ("2024-08-30T11:43:09,5-05:00", None, None, "2024-08-30 16:43:09.500000+00:00"),
        ("2024-08-30T11:43:09", None, 3600, "2024-08-30 10:43:09+00:00"),
        ("Dec  2 10:43:35", 1_795_788_600.0, 0, None),  # syslog: no year
        ("[Feb 30 11:43:09 2024]", None, 0, None),
        ("[inf]", 1_795_788_600.0, 0, None),
        (None, 1_795_788_600.0, 0, None),
    ],
)
def test_event_utc(
    stamp: str | None, boot: float | None, offset: int | None, expected: str | None
) -> None:
    facts = XidFacts(source="dmesg", window_s=None, boot_time_s=boot, utc_offset_s=offset)
    event = xid.XidEvent(79, "0000:ba:00", "", stamp, "")
    utc = xid.event_utc(event, facts)
    assert (str(utc) if utc else None) == expected


def test_boot_time_from_proc_stat(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  1 2 3\nintr 5\nbtime 1795788600\nprocesses 9\n")
    assert xid.read_boot_time(stat) == 1_795_788_600.0
    stat.write_text("cpu  1 2 3\n")
    assert xid.read_boot_time(stat) is None
    assert xid.read_boot_time(tmp_path / "absent") is None


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("00000000:BA:00.0", (0, 0xBA, 0)),
        ("0000:ba:00", (0, 0xBA, 0)),
        ("PCI:0009:01:00", (9, 1, 0)),
        ("ba:00.0", (0, 0xBA, 0)),
        ("not a pci address", None),
        ("0000:zz:00", None),
    ],
)
def test_pci_addresses_in_every_printed_form(
    address: str, key: tuple[int, int, int] | None
) -> None:
    assert pci_key(address) == key


def test_gpu_by_pci_and_label() -> None:
    gpus = a100_gpus().gpus
    found = gpu_by_pci(gpus, "0000:01:00")
    assert found is not None and gpu_label(found) == "GPU 0 (serial 1650522003820)"
    assert gpu_by_pci(gpus, "0000:02:00") is None
    assert gpu_by_pci(gpus, None) is None
    assert gpu_label(dataclasses.replace(found, serial=None)) == "GPU 0"
