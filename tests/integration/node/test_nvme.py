"""The nvme probe with the real fio binary: a run in a temporary folder, filesystems that
refuse O_DIRECT or are full (mounted for the test: root only), and a loop device."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path

import pytest

from bringup.facts import validate_facts
from bringup.node import tool as command
from bringup.node.parsers.fio import parse_fio_json
from bringup.node.probes import nvme
from bringup.node.probes.nvme import NvmeFacts, Params

MIB = 2**20
TESTS = ("seq_read", "seq_write", "rand_read", "concurrent_read", "checkpoint")

Mounter = Callable[..., Path]  # mount(fstype, options) -> the mounted directory
needs_fio = pytest.mark.skipif(command.which("fio") is None, reason="fio is not installed")


def round_trip(facts: NvmeFacts) -> NvmeFacts:
    """Facts as the controller gets them back: JSON through its one facts validator."""
    return validate_facts("nvme", NvmeFacts, json.loads(json.dumps(asdict(facts))))


def small_params(*paths: Path, **changes: object) -> Params:
    """A run of a few seconds: 16 MiB files, 1 s per time-based test, no ramp."""
    values: dict[str, object] = {
        "paths": [str(p) for p in paths],
        "size_bytes": 16 * MIB,
        "runtime_s": 1,
        "ramp_s": 0,
        "readers": 2,
        "checkpoint_bytes": 16 * MIB,
        **changes,
    }
    return Params(**values)  # type: ignore[arg-type]


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Mounter]:
    """Mount a small filesystem under tmp_path (root only); unmounted afterwards."""
    mounted_dirs: list[Path] = []

    def mount(fstype: str, options: str = "") -> Path:
        where = tmp_path / fstype
        where.mkdir()
        argv = ["mount", "-t", fstype, *(["-o", options] if options else []), fstype, str(where)]
        if subprocess.run(argv, capture_output=True).returncode != 0:
            pytest.skip(f"cannot mount {fstype} here (needs root)")
        mounted_dirs.append(where)
        return where

    yield mount
    for where in mounted_dirs:
        subprocess.run(["umount", str(where)], check=False)


@pytest.mark.fio
@needs_fio
def test_real_fio_run_measures_and_cleans_up(tmp_path: Path) -> None:
    data, ckpt = tmp_path / "data", tmp_path / "ckpt"
    data.mkdir()
    ckpt.mkdir()

    output = nvme.collect(small_params(data, ckpt))

    facts = round_trip(output.facts)
    first, second = facts.paths
    assert (first.path, first.error, first.test_errors) == (str(data), None, {})
    assert first.direct == nvme.accepts_o_direct(str(data))
    assert first.engine in ("libaio", "psync")
    for figure in (
        first.seq_read_bytes_per_s,
        first.seq_write_bytes_per_s,
        first.rand_read_iops,
        first.concurrent_read_bytes_per_s,
        first.checkpoint_bytes_per_s,
        first.checkpoint_seconds,
    ):
        assert figure is not None and figure > 0
    assert first.concurrent_readers == 2
    assert first.checkpoint_bytes == 16 * MIB
    assert first.free_bytes is not None and first.free_bytes > 16 * MIB
    assert first.filesystem and first.mount_point
    # Same filesystem: measured once, reported under both paths.
    assert second.path == str(ckpt)
    assert second.same_mount_as == str(data)
    assert second.seq_read_bytes_per_s == first.seq_read_bytes_per_s
    assert sorted(output.raw) == sorted(f"fio-{nvme.slug(str(data))}-{t}.json" for t in TESTS)
    for name, report in output.raw.items():
        assert parse_fio_json(report).jobs, name
    concurrent = json.loads(output.raw[f"fio-{nvme.slug(str(data))}-concurrent_read.json"])
    assert concurrent["jobs"][0]["job options"]["numjobs"] == "2"
    assert list(data.iterdir()) == []  # scratch directory and fio's files removed


@pytest.mark.fio
@needs_fio
def test_o_direct_refused_runs_buffered_and_says_so(mounted: Mounter) -> None:
    ramfs = mounted("ramfs")  # ramfs refuses O_DIRECT (tmpfs accepts it since Linux 6.6)
    assert not nvme.accepts_o_direct(str(ramfs))

    output = nvme.collect(small_params(ramfs, readers=1))

    [path] = output.facts.paths
    assert (path.filesystem, path.direct, path.error) == ("ramfs", False, None)
    assert any(f"O_DIRECT refused on {ramfs} (ramfs)" in note for note in path.notes)
    assert path.seq_read_bytes_per_s and path.seq_read_bytes_per_s > 0
    seq_read = json.loads(output.raw[f"fio-{nvme.slug(str(ramfs))}-seq_read.json"])
    assert seq_read["jobs"][0]["job options"]["direct"] == "0"
    assert list(ramfs.iterdir()) == []


@pytest.mark.fio
@needs_fio
def test_full_disk_is_an_error_of_that_path_only(tmp_path: Path, mounted: Mounter) -> None:
    tiny = mounted("tmpfs", "size=1m")
    data = tmp_path / "data"
    data.mkdir()

    output = nvme.collect(small_params(tiny, data, readers=1))

    full, measured = output.facts.paths
    assert full.error == f"not enough free space on {tiny}: need 16.8 MB, 1.0 MB free"
    assert full.seq_read_bytes_per_s is None
    assert measured.error is None
    assert measured.seq_read_bytes_per_s and measured.seq_read_bytes_per_s > 0
    assert not any(nvme.slug(str(tiny)) in name for name in output.raw)


@needs_fio
def test_raw_device_needs_destructive_and_missing_path_is_recorded(tmp_path: Path) -> None:
    params = Params(paths=[str(tmp_path / "absent")], devices=["/dev/nvme9n9"])
    output = nvme.collect(params)
    absent, device = output.facts.paths
    assert absent.error == f"cannot test {tmp_path / 'absent'}: No such file or directory"
    assert device.error is not None and "set destructive: true" in device.error
    assert output.raw == {}


@pytest.mark.fio
@needs_fio
def test_destructive_run_on_a_loop_device(tmp_path: Path) -> None:
    if shutil.which("losetup") is None:
        pytest.skip("losetup is not installed")
    backing = tmp_path / "disk.img"
    backing.write_bytes(b"\0" * (48 * MIB))
    made = subprocess.run(
        ["losetup", "--find", "--show", str(backing)], capture_output=True, text=True
    )
    if made.returncode != 0:
        pytest.skip("cannot create a loop device here (needs root)")
    loop = made.stdout.strip()
    try:
        params = small_params(destructive=True, devices=[loop], paths=[])
        [device] = nvme.collect(params).facts.paths
    finally:
        subprocess.run(["losetup", "-d", loop], check=False)
    assert (device.path, device.error, device.test_errors) == (loop, None, {})
    assert device.seq_write_bytes_per_s and device.seq_write_bytes_per_s > 0
    assert device.concurrent_readers == 2
    assert device.checkpoint_seconds and device.checkpoint_seconds > 0
