"""A node's numbers that JSON has no form for: `NaN`, `Infinity`, `-Infinity` and a number
too large for a float (`1e999`). Python's json.dumps on the node side writes the first
three for a float that is not finite, and json.loads took all four as floats.

A NaN compares false with every floor, so a node that said its sequential read was
`NaN` was judged PASS ("sequential read >= 3.0 GB/s: /data nan GB/s"), and an
`Infinity` read passed too: ACCEPTED without the measurement. Its facts file held null
(JSON's only form for them), so what the node was judged on was not what its file kept.
Each is now taken as null when the line is read (fleet/transport.py), as the file holds
it: a figure not given, which every check judges as such.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from bringup.facts import record_json
from bringup.findings import Status
from bringup.fleet import run as fleet
from bringup.fleet.inventory import Host
from bringup.fleet.plan import plan_node
from bringup.fleet.transport import TransportError, decode_line
from bringup.node import protocol
from bringup.profile import load as load_profile
from bringup.rundir import RunDir, load_facts
from bringup.sim.demo import demo_nodes
from bringup.suite import load as load_suite

UNWRITABLE = ["NaN", "Infinity", "-Infinity", "1e999", "-1E400"]


@pytest.mark.parametrize("number", UNWRITABLE)
def test_a_number_json_has_no_form_for_is_read_as_null(number: str) -> None:
    line = f'{{"probe": "nvme", "ok": true, "facts": {{"a": [1.5, {number}], "b": {number}}}}}'
    record = decode_line(line.encode())
    assert record == {"probe": "nvme", "ok": True, "facts": {"a": [1.5, None], "b": None}}


def test_a_line_of_plain_json_reads_as_it_is() -> None:
    line = (
        b'{"probe": "host", "ok": true, "facts": '
        b'{"x": 2.5e+16, "n": 123456789012345678901234567890, "s": "\\u00e9", "z": -0.0}}'
    )
    record = decode_line(line)
    facts = record["facts"]
    assert facts["x"] == 2.5e16 and isinstance(facts["x"], float)
    assert facts["n"] == 123456789012345678901234567890 and facts["s"] == "\u00e9"
    assert math.copysign(1.0, facts["z"]) == -1.0


@pytest.mark.parametrize(
    "line",
    [b"{not json", b'{"probe": "x", "ok": NaN', b"[1, 2]", b'{"ok": true}', b"\xff\xfe{}"],
    ids=["garbage", "cut short", "not an object", "no probe", "not UTF-8"],
)
def test_a_line_that_is_no_record_is_refused(line: bytes) -> None:
    with pytest.raises(TransportError, match="node sent"):
        decode_line(line)


def nvme_line(seq_read: str) -> bytes:
    """The demo's healthy node's nvme record, as its node side prints it, its sequential
    read figure written `seq_read`."""
    record = record_json(demo_nodes()[0].probes["nvme"])
    record["facts"]["paths"][0]["seq_read_bytes_per_s"] = "SEQ_READ"
    return json.dumps(record).replace('"SEQ_READ"', seq_read).encode()


@pytest.mark.parametrize("number", ["NaN", "Infinity", "1e999"])
def test_a_node_that_says_its_read_is_nan_is_never_passed(tmp_path: Path, number: str) -> None:
    """Through the run as a live node's line takes it: never a PASS, judged on what its
    facts file holds."""
    line = nvme_line(number)

    def runner(
        request: dict[str, Any], deadline: float, stop: threading.Event, on_stage: fleet.Stage
    ) -> Iterator[dict[str, Any]]:
        on_stage("running")
        yield decode_line(line)

    plan = plan_node(
        Host("n0", "127.0.0.1"), runner, load_suite("acceptance"), load_profile("b300")
    )
    plan.request = {"probes": [s for s in plan.request["probes"] if s["name"] == "nvme"]}
    run = RunDir.create(tmp_path / "run", "check", "b300", "acceptance")
    (outcome,) = fleet.run([plan], run, forks=1)
    (read,) = [f for f in outcome.findings if f.check == "nvme.seq_read"]
    assert read.status == Status.ERROR, read
    assert read.message == "/data: no sequential read figure in the facts"
    (kept,) = load_facts(run.path)
    assert kept.probes["nvme"].facts["paths"][0]["seq_read_bytes_per_s"] is None
    # The healthy figure the same way: PASS (the test can tell the two apart).
    healthy = nvme_line("25000000000.0")
    plan.runner = lambda *a: iter([decode_line(healthy)])
    again = RunDir.create(tmp_path / "again", "check", "b300", "acceptance")
    (passed,) = [
        f for f in fleet.run([plan], again, forks=1)[0].findings if f.check == "nvme.seq_read"
    ]
    assert passed.status == Status.PASS, passed


# --- a pasted tool output: `bringup inspect` ---------------------------------------------------

FIO = (
    Path(__file__).parent.parent / "fixtures" / "fio" / "local-vm-virtio-ext4-fio3.33-seq_read.json"
)


@pytest.mark.parametrize("number", ["1e999", "Infinity", "NaN"])
def test_an_inspected_figure_that_is_no_finite_number_is_an_error(number: str) -> None:
    """fio's JSON read by json.loads: `"bw_bytes" : 1e999` was an infinite read, PASS."""
    from bringup.recognize import inspect_text

    text = FIO.read_text()
    assert '"bw_bytes" : 1329698359,' in text  # the job's read, in the fixture as recorded
    hostile = text.replace('"bw_bytes" : 1329698359,', f'"bw_bytes" : {number},')
    (judged,) = inspect_text(hostile, load_profile("b300")).findings
    assert judged.status == Status.ERROR, judged
    assert judged.message == (
        "could not parse as fio --output-format=json: a figure that is not a finite number, "
        "at jobs[0].read_bw_bytes: Expected `float`, got `null`"
    )
    (recorded,) = inspect_text(text, load_profile("b300")).findings  # as fio wrote it: judged
    assert recorded.status != Status.ERROR and "1.33 GB/s" in recorded.message, recorded


# --- what the node side itself prints --------------------------------------------------------


def test_the_node_side_prints_strict_json_with_a_figure_that_is_not_finite_as_null(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A probe that measured NaN (a rate over a zero time) or an infinity: Python's json
    writes `NaN` and `Infinity`, which no strict JSON reader takes (msgspec, jq, a
    browser). The node side prints null, as the controller reads it and the run's files
    keep it; its progress lines too."""
    nan, inf = float("nan"), float("inf")

    def run_all(request: dict[str, Any], on_progress: Any = None) -> Iterator[dict[str, Any]]:
        assert on_progress is not None
        on_progress({"probe": "nvme", "progress": {"done": 0.5, "rate": inf}})
        yield {"probe": "nvme", "ok": True, "facts": {"read": nan, "all": [1.5, -inf], "n": 3}}

    monkeypatch.setattr(protocol, "run_all", run_all)
    read, write = os.pipe()
    protocol.serve({"probes": [{"name": "nvme"}]}, write)
    os.close(write)
    progress_line, record_line = os.read(read, 1 << 16).splitlines()
    os.close(read)
    assert msgspec.json.decode(progress_line) == {
        "probe": "nvme",
        "progress": {"done": 0.5, "rate": None},
    }
    assert msgspec.json.decode(record_line) == {
        "probe": "nvme",
        "ok": True,
        "facts": {"read": None, "all": [1.5, None], "n": 3},
    }
