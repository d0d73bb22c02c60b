"""The nvme probe's pure parts and the nvme checks on facts built from real fio reports
(tests/integration/node runs the real fio)."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from msgspec import structs

from bringup.checks import nvme as checks
from bringup.facts import validate_facts
from bringup.findings import Expected, Finding, Status
from bringup.node import tool as command
from bringup.node.parsers.fio import parse_fio_json
from bringup.node.probes import nvme
from bringup.node.probes.nvme import NvmeFacts, NvmePath, Params
from bringup.node.result import ProbeError
from bringup.profile import Profile, load

FIXTURES = Path(__file__).parent.parent / "fixtures" / "fio"
MIB = 2**20
TESTS = ("seq_read", "seq_write", "rand_read", "concurrent_read", "checkpoint")


def round_trip(facts: NvmeFacts) -> NvmeFacts:
    """Facts as the controller gets them back: JSON through its one facts validator."""
    return validate_facts("nvme", NvmeFacts, json.loads(json.dumps(asdict(facts))))


# --- the probe, without running fio ----------------------------------------------------


def test_missing_fio_is_a_probe_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # fio is installed here: hiding it is the only way to see this message.
    monkeypatch.setattr(command, "which", lambda name: None)
    with pytest.raises(ProbeError, match=r"fio not found: install fio \(apt-get install fio\)"):
        nvme.collect(Params())


def test_mounted_device_is_found_in_the_real_proc_mounts() -> None:
    mounts = nvme.read_mounts()
    root = nvme.mount_of("/", mounts)
    if root is None:
        pytest.skip("no /proc/mounts here")
    assert root.mount_point == "/"
    assert nvme.mount_of("/proc/self", mounts).filesystem == "proc"  # type: ignore[union-attr]


def test_space_needed_is_the_largest_test() -> None:
    params = Params(size_bytes=1024**3, checkpoint_bytes=2 * 1024**3)
    assert nvme.space_needed(params, readers=8) == 8 * 1024**3
    assert nvme.space_needed(params, readers=1) == 2 * 1024**3


# --- the checks, on facts built from real fio reports -------------------------------


def local_report(test: str) -> str:
    return (FIXTURES / f"local-vm-virtio-ext4-fio3.33-{test}.json").read_text()


def recorded_path(path: str = "/data") -> NvmePath:
    """The facts the probe made from the reports recorded on the development VM."""
    result = NvmePath(path=path, mount_device="/dev/vda", filesystem="ext4", engine="libaio")
    params = Params(checkpoint_bytes=512 * MIB)
    for test in TESTS:
        nvme.record_test(test, parse_fio_json(local_report(test)), 4, params, result)
    return result


def h200() -> Profile:
    return load("h200")


def with_floors(**floors: float | None) -> Profile:
    """The h200 profile with other NVMe floors, as a user's edited copy would have."""
    profile = h200()
    return structs.replace(profile, nvme=structs.replace(profile.nvme, **floors))


def judge(check: str, facts: NvmeFacts, profile: Profile) -> list[Finding]:
    [found] = [c for c in checks.CHECKS if c.name == check]
    assert found.probe == "nvme"
    return found.judge(round_trip(facts), profile)


def test_recorded_facts_pin_the_fixture_figures() -> None:
    path = recorded_path()
    assert path.seq_read_bytes_per_s == 1329698359
    assert path.seq_write_bytes_per_s == 2581431293
    assert path.rand_read_iops == 93301.899367
    assert path.concurrent_read_bytes_per_s == 2629882363
    assert (path.checkpoint_bytes, path.checkpoint_seconds) == (512 * MIB, 0.296)
    assert path.checkpoint_bytes_per_s == 1813753081


def test_slow_sequential_read_fails_with_the_floor_and_an_action() -> None:
    [found] = judge("nvme.seq_read", NvmeFacts([recorded_path()]), h200())
    assert found.status is Status.FAIL
    assert (found.value, found.expected, found.unit) == (
        1.33,
        Expected(op=">=", value=3.0, unit="GB/s"),
        "GB/s",
    )
    assert found.message == "/data: sequential read 1.33 GB/s, below the 3.0 GB/s floor"
    assert found.action is not None and "lspci -vv" in found.action


def test_sequential_write_below_floor_on_the_old_pkb_cloud_disk() -> None:
    path = NvmePath(path="/scratch")
    pkb = parse_fio_json(
        (FIXTURES / "pkb-fio2.1.4-seqwrite-seqread-randwrite-randread-oldfmt.json").read_text()
    )
    nvme.record_test("seq_write", replace(pkb, jobs=pkb.jobs[:1]), 1, Params(), path)
    [found] = judge("nvme.seq_write", NvmeFacts([path]), h200())
    assert (found.status, found.value) == (Status.FAIL, 0.07)  # 68118 KiB/s


def test_all_paths_above_the_floor_is_one_pass() -> None:
    facts = NvmeFacts(
        [recorded_path("/data"), replace(recorded_path("/ckpt"), same_mount_as="/data")]
    )
    findings = judge("nvme.seq_read", facts, with_floors(seq_read_min_gb_s=1.0))
    assert [f.status for f in findings] == [Status.PASS]
    assert findings[0].message == (
        "2/2 paths: sequential read >= 1.0 GB/s: /data 1.33 GB/s; "
        "/ckpt (same filesystem as /data) 1.33 GB/s"
    )
    assert (findings[0].value, findings[0].unit) == (1.33, "GB/s")


def test_page_cache_measured_is_an_error_never_a_pass_or_warn() -> None:
    buffered = replace(recorded_path("/x"), direct=False, filesystem="ramfs")
    [found] = judge("nvme.seq_write", NvmeFacts([buffered]), with_floors(seq_write_min_gb_s=1.0))
    assert (found.status, found.value) == (Status.ERROR, 2.58)  # the figure is kept
    assert found.message == (
        "/x: sequential write 2.58 GB/s, but O_DIRECT refused on /x (ramfs): "
        "measured memory, not a device: give --data-dir on the NVMe array"
    )
    tmpfs = replace(recorded_path("/dev/shm"), filesystem="tmpfs")
    [found] = judge("nvme.rand_read", NvmeFacts([tmpfs]), h200())
    assert found.status is Status.ERROR
    assert found.message == (
        "/dev/shm: random read 93302 IOPS, but /dev/shm is tmpfs: "
        "measured memory, not a device: give --data-dir on the NVMe array"
    )


@pytest.mark.parametrize("check", [c.name for c in checks.CHECKS])
def test_a_path_not_on_a_block_device_is_an_error_in_every_nvme_check(check: str) -> None:
    # overlay (a container's root) and any filesystem with no block device under it.
    for path in (
        replace(recorded_path("/data"), filesystem="overlay"),
        replace(recorded_path("/data"), filesystem="fuse.weird", on_block_device=False),
    ):
        findings = judge(check, round_trip(NvmeFacts([path])), with_floors(seq_read_min_gb_s=1.0))
        assert [f.status for f in findings] == [Status.ERROR], (check, path.filesystem)
        assert findings[0].message.endswith(
            "measured memory, not a device: give --data-dir on the NVMe array"
        )


def test_shm_and_this_disk_as_the_probe_sees_them(tmp_path: Path) -> None:
    mounts = nvme.read_mounts()
    assert nvme.on_block_device("/dev/shm", nvme.mount_of("/dev/shm", mounts)) is False
    assert nvme.on_block_device("/proc", nvme.mount_of("/proc", mounts)) is False
    here = nvme.mount_of(str(tmp_path), mounts)
    if here is None or here.filesystem in nvme.NOT_A_DEVICE:
        pytest.skip(f"{tmp_path} is not on a disk here")
    assert nvme.on_block_device(str(tmp_path), here) is True


def test_the_default_path_in_memory_is_not_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    # No --data-dir: fio must not write gigabytes into a tmpfs /tmp. /dev/shm stands in
    # for such a /tmp (a real tmpfs); fio would take minutes, and is never started.
    monkeypatch.setattr(nvme, "DEFAULT_PATH", "/dev/shm")
    monkeypatch.setattr(nvme, "_run_tests", lambda *a: pytest.fail("fio ran on memory"))
    [path] = nvme.collect(Params()).facts.paths
    assert (path.path, path.filesystem, path.on_block_device) == ("/dev/shm", "tmpfs", False)
    assert path.error == (
        "no --data-dir given and /dev/shm is tmpfs, not on a block device: not measured "
        "(it would measure memory, not a device): give --data-dir on the NVMe array"
    )
    [found] = judge("nvme.seq_read", round_trip(NvmeFacts([path])), h200())
    assert (found.status, found.message) == (Status.ERROR, f"/dev/shm: {path.error}")


def test_unmeasured_path_is_an_error_in_every_check() -> None:
    full = NvmePath(path="/ckpt", error="not enough free space on /ckpt: need 3.2 GB, 1.1 GB free")
    facts = NvmeFacts([recorded_path(), full])
    for check in checks.CHECKS:
        findings = check.judge(round_trip(facts), with_floors(seq_read_min_gb_s=1.0))
        errors = [f for f in findings if f.status is Status.ERROR]
        assert [f.message for f in errors] == [f"/ckpt: {full.error}"], check.name


def test_one_failed_fio_test_does_not_hide_the_others() -> None:
    path = recorded_path()
    path.seq_write_bytes_per_s = None
    path.test_errors["seq_write"] = "fio seq_write on /data failed: No space left on device"
    facts = NvmeFacts([path])
    [write] = judge("nvme.seq_write", facts, h200())
    assert (write.status, write.message) == (
        Status.ERROR,
        "/data: fio seq_write on /data failed: No space left on device",
    )
    [read] = judge("nvme.seq_read", facts, with_floors(seq_read_min_gb_s=1.0))
    assert read.status is Status.PASS


def test_checkpoint_informational_without_a_floor_and_judged_with_one() -> None:
    facts = NvmeFacts([recorded_path()])
    [info] = judge("nvme.checkpoint", facts, h200())
    assert info.status is Status.PASS
    assert "0.5 GB durable in 0.3 s" in info.message
    assert "no floor in the profile" in info.message
    assert (info.value, info.expected) == (1.81, None)
    [slow] = judge("nvme.checkpoint", facts, with_floors(checkpoint_write_min_gb_s=2.0))
    assert (slow.status, slow.value, slow.expected) == (
        Status.FAIL,
        1.81,
        Expected(op=">=", value=2.0, unit="GB/s"),
    )


def test_concurrent_read_below_the_floor_warns_and_names_the_readers() -> None:
    facts = NvmeFacts([recorded_path()])
    [found] = judge("nvme.concurrent_read", facts, h200())
    assert (found.status, found.value) == (Status.WARN, 2.63)
    assert "4 readers at once" in found.message
    [ok] = judge("nvme.concurrent_read", facts, with_floors(seq_read_min_gb_s=1.0))
    assert ok.status is Status.PASS
    assert "with 4 readers (0.66 GB/s each)" in ok.message


def test_random_read_is_informational() -> None:
    [found] = judge("nvme.rand_read", NvmeFacts([recorded_path()]), h200())
    assert (found.status, found.value, found.unit) == (Status.PASS, 93302, "IOPS")
    assert "/data 93302 IOPS, p99 2.67 ms" in found.message


def test_no_paths_is_a_skip() -> None:
    for check in checks.CHECKS:
        [found] = check.judge(NvmeFacts([]), h200())
        assert found.status is Status.SKIP, check.name
