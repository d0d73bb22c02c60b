"""fio.jobs: a fio report someone sent, judged job by job (recorded real reports)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bringup.checks.fio import judge_jobs
from bringup.findings import Expected, Status
from bringup.node.parsers.fio import parse_fio_json
from bringup.profile import load

FIO = Path(__file__).resolve().parents[1] / "fixtures" / "fio"
PROFILE = load("b300")


def parse(name: str):
    return parse_fio_json((FIO / name).read_text())


def test_options_are_read_from_job_and_global_sections() -> None:
    (seq,) = parse("local-vm-virtio-ext4-fio3.33-seq_read.json").jobs
    assert (seq.rw, seq.block_size_bytes, seq.direct) == ("read", 1 << 20, True)
    (randrw,) = parse("superbench-nvme-randrw-4jobs-group.json").jobs  # direct is global
    assert (randrw.rw, randrw.block_size_bytes, randrw.direct) == ("randrw", 4096, True)
    old = parse("pkb-fio2.1.4-seqwrite-seqread-randwrite-randread-oldfmt.json").jobs[0]
    assert (old.rw, old.block_size_bytes, old.direct) == (None, None, None)


def test_a_slow_sequential_read_fails_against_the_floor() -> None:
    (found,) = judge_jobs(parse("local-vm-virtio-ext4-fio3.33-seq_read.json"), PROFILE)
    assert found.status is Status.FAIL
    assert found.value == 1.33  # bw_bytes 1329698359
    assert found.expected == Expected(op=">=", value=3, unit="GB/s")
    assert found.message.endswith("sequential read below 3 GB/s")


def test_a_fast_sequential_write_passes() -> None:
    facts = parse("local-vm-virtio-ext4-fio3.33-seq_write.json")
    facts.jobs[0] = dataclasses.replace(facts.jobs[0], write_bw_bytes=6.5e9)
    (found,) = judge_jobs(facts, PROFILE)
    assert (found.status, found.value) == (Status.PASS, 6.5)


def test_random_and_unknown_jobs_are_reported_not_judged() -> None:
    statuses = [
        f.status for f in judge_jobs(parse("superbench-nvme-randrw-4jobs-group.json"), PROFILE)
    ]
    assert statuses == [Status.SKIP]
    old = judge_jobs(parse("pkb-fio2.1.4-seqwrite-seqread-randwrite-randread-oldfmt.json"), PROFILE)
    assert [f.status for f in old] == [Status.SKIP] * 5
    assert old[0].message.startswith("job 'sequential_write' (rw mode not in the report)")


def test_buffered_io_and_fio_errors_are_never_a_pass() -> None:
    facts = parse("local-vm-virtio-ext4-fio3.33-seq_read.json")
    buffered = dataclasses.replace(facts.jobs[0], direct=False)
    failed = dataclasses.replace(facts.jobs[0], error=5)
    statuses = [
        f.status for f in judge_jobs(dataclasses.replace(facts, jobs=[buffered, failed]), PROFILE)
    ]
    assert statuses == [Status.WARN, Status.ERROR]
