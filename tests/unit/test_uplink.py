"""The uplink probe's iperf3 reader (real `iperf3 -J` outputs) and the uplink check."""

from __future__ import annotations

from pathlib import Path

import pytest

from bringup.checks.uplink import judge_throughput, transfer_time
from bringup.findings import Status
from bringup.node.probes.uplink import Params, UplinkFacts, iperf3_argv, parse_iperf3
from bringup.node.result import ProbeError
from tests.support.profiles import h100_profile

FIXTURES = Path(__file__).parent.parent / "fixtures" / "uplink"


def test_iperf3_download_over_two_streams() -> None:
    text = (FIXTURES / "iperf3.12-loopback-download-2streams.json").read_text()
    facts = parse_iperf3(text, "iperf3://127.0.0.1:52011", "download")
    assert facts == UplinkFacts(
        endpoint="iperf3://127.0.0.1:52011",
        method="iperf3",
        direction="download",
        bits_per_second=12704121713.88119,
        seconds=1.000116,
        bytes=1588199424,
        streams=2,
        retransmits=3,
        tool_version="iperf 3.12",
    )


def test_iperf3_that_cannot_connect_says_so() -> None:
    text = (FIXTURES / "iperf3.12-connection-refused.json").read_text()
    with pytest.raises(ProbeError) as caught:
        parse_iperf3(text, "iperf3://127.0.0.1:52012", "download")
    assert str(caught.value) == (
        "iperf3 to iperf3://127.0.0.1:52012: unable to connect to server: Connection refused"
    )


def test_iperf3_argv() -> None:
    assert iperf3_argv("iperf3", "iperf3://fs01.example:5999", Params()) == [
        *("iperf3", "-c", "fs01.example", "-p", "5999", "-t", "10", "-P", "4", "-J", "-R"),
    ]
    upload = iperf3_argv("iperf3", "iperf3://10.1.2.3", Params(direction="upload", streams=1))
    assert upload[3:] == ["-p", "5201", "-t", "10", "-P", "1", "-J"]


def test_transfer_times_as_a_person_plans_by() -> None:
    assert transfer_time(512e9, 610e6) == "1 h 52 min"  # 6715 s
    assert transfer_time(512e9, 100e6) == "11 h 23 min"
    assert transfer_time(512e9, 10e9) == "7 min"
    assert transfer_time(50e9, 100e9) == "4 s"
    assert transfer_time(10e12, 100e6) == "9 d 6 h"


def measured(rate: float) -> UplinkFacts:
    return UplinkFacts("iperf3://fs01:5201", "iperf3", "download", rate, 10.0, 0, 4)


def test_judged_against_the_site_figure_with_the_dataset_time() -> None:
    profile = h100_profile(uplink={"min_mbit_s": 1000})
    (slow,) = judge_throughput(measured(610e6), profile)
    assert (slow.status, slow.message) == (
        Status.FAIL,
        "610 Mbit/s from iperf3://fs01:5201 (iperf3 download, 10 s, 4 streams): 512 GB would "
        "take 1 h 52 min at 610 Mbit/s; below the site's 1000 Mbit/s, at which it would take "
        "1 h 8 min",
    )
    (fast,) = judge_throughput(measured(9.4e9), profile)
    assert fast.status is Status.PASS and fast.message.endswith(
        "512 GB would take 7 min at 9400 Mbit/s"
    )


def test_no_figure_reports_and_no_endpoint_says_how() -> None:
    (unjudged,) = judge_throughput(measured(610e6), h100_profile())
    assert unjudged.status is Status.SKIP
    assert unjudged.message.endswith("not judged: no site figure (uplink.min_mbit_s)")
    (none,) = judge_throughput(UplinkFacts(endpoint=""), h100_profile())
    assert (none.status, none.message) == (
        Status.SKIP,
        "no uplink endpoint named (--uplink iperf3://HOST[:PORT] or --uplink URL, or the host "
        "variable bringup_uplink)",
    )
