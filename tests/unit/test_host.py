"""The host probe and its checks.

The parsers are tested on the real /proc and /sys text of the machine running the tests,
against what the kernel reports through other interfaces (sysconf, statvfs),
and on small samples copied from public sources (named at each sample). The checks are
judged on facts that collect() gathered here, edited to make each failing case.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import structs

from bringup.checks import host as checks
from bringup.facts import validate_facts
from bringup.findings import Expected, Finding, Status
from bringup.node.probes import host
from bringup.node.result import ParseError
from bringup.profile import Profile, load

# --- public samples --------------------------------------------------------------------------

# FD.io CSIT report rls1810, "Calibration Data - Denverton", `cat /proc/cmdline` (verbatim).
CSIT_CMDLINE = (
    "BOOT_IMAGE=/boot/vmlinuz-4.15.0-36-generic root=UUID=d3cfffd0-1e77-423a-a53a-a117199b6025"
    " ro intel_iommu=on iommu=pt isolcpus=1-11 nohz_full=1-11 rcu_nocbs=1-11"
    " default_hugepagesz=1G hugepagesz=1G hugepages=8 intel_pstate=disable nmi_watchdog=0"
    " numa_balancing=disable tsc=reliable nosoftlockup quiet splash vt.handoff=7"
)

# InfiniBand port files as the kernel writes them (drivers/infiniband/core/sysfs.c:
# state "%d: %s", phys_state "%d: %s", rate "%d%s Gb/sec (%dX%s)"); the values are those of
# public node logs: 8x "ACTIVE / LinkUp / 400 Gb/sec (4X NDR)" on a GPU node, a port
# "DOWN + Disabled" on a failed node, "800 Gb/sec (4X XDR)" on ConnectX-8 nodes.
IB_ACTIVE_NDR = {
    "state": "4: ACTIVE\n",
    "phys_state": "5: LinkUp\n",
    "rate": "400 Gb/sec (4X NDR)\n",
    "link_layer": "InfiniBand\n",
}
IB_DOWN_DISABLED = {
    "state": "1: DOWN\n",
    "phys_state": "3: Disabled\n",
    "link_layer": "InfiniBand\n",
}
IB_ACTIVE_XDR = {**IB_ACTIVE_NDR, "rate": "800 Gb/sec (4X XDR)\n"}
IB_INIT_LINKUP = {**IB_ACTIVE_NDR, "state": "2: INIT\n"}


def write_ib_port(root: Path, device: str, port: int, files: dict[str, str]) -> None:
    port_dir = root / device / "ports" / str(port)
    port_dir.mkdir(parents=True)
    for name, text in files.items():
        (port_dir / name).write_text(text)


def read(path: str) -> str:
    return Path(path).read_text()


# --- parsers on this machine's real text ------------------------------------------------------


def test_cpuinfo_counts_the_online_cpus() -> None:
    cpu = host.parse_cpuinfo(read("/proc/cpuinfo"))
    assert cpu.threads == os.sysconf("SC_NPROCESSORS_ONLN")
    if cpu.cores is not None:  # x86 prints physical/core ids; arm64 does not
        assert cpu.sockets is not None
        assert 1 <= cpu.sockets <= cpu.cores <= cpu.threads
    if platform.machine() in ("x86_64", "i686"):
        first_model = next(
            line.split(":", 1)[1].strip()
            for line in read("/proc/cpuinfo").splitlines()
            if line.startswith("model name")
        )
        assert cpu.model == first_model


def test_cpu_online_list_matches_sysconf() -> None:
    cpus = host.parse_cpulist(read("/sys/devices/system/cpu/online"))
    assert len(cpus) == os.sysconf("SC_NPROCESSORS_ONLN")


def test_numa_online_list_matches_node_folders() -> None:
    nodes = host.parse_cpulist(read("/sys/devices/system/node/online"))
    folders = [p for p in Path("/sys/devices/system/node").glob("node*") if p.name[4:].isdigit()]
    assert sorted(nodes) == sorted(int(p.name[4:]) for p in folders)


def test_meminfo_total_matches_sysconf() -> None:
    mem = host.parse_meminfo(read("/proc/meminfo"))
    # MemTotal and sysconf's physical pages both come from the kernel's totalram_pages.
    assert mem.memory_total_bytes == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    hugepages = Path("/sys/kernel/mm/hugepages")
    if mem.hugepage_size_bytes is not None and hugepages.is_dir():
        assert f"hugepages-{mem.hugepage_size_bytes // 1024}kB" in os.listdir(hugepages)
        default = hugepages / f"hugepages-{mem.hugepage_size_bytes // 1024}kB" / "nr_hugepages"
        assert mem.hugepages_total == int(default.read_text())


def test_os_release_pretty_name() -> None:
    expected = platform.freedesktop_os_release().get("PRETTY_NAME")
    assert host.parse_os_release(read("/etc/os-release")) == expected


def test_path_space_matches_disk_usage(tmp_path: Path) -> None:
    space = host.path_space(str(tmp_path), timeout_s=10)
    usage = shutil.disk_usage(tmp_path)
    assert space.error is None
    assert space.total_bytes == usage.total
    assert space.free_bytes is not None
    assert abs(space.free_bytes - usage.free) < 1 << 30  # other writers may change it
    assert space.mount_point is not None
    assert os.path.ismount(space.mount_point)


def test_path_space_of_a_missing_path_says_why(tmp_path: Path) -> None:
    space = host.path_space(str(tmp_path / "absent"), timeout_s=10)
    assert space.free_bytes is None
    assert space.error == "No such file or directory"


def test_real_governors_and_iommu_groups_are_consistent() -> None:
    files = list(Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor"))
    assert sum(host.read_governors().values()) == len(files)
    groups, types = host.read_iommu_groups()
    if Path("/sys/kernel/iommu_groups").is_dir():
        assert groups == len(os.listdir("/sys/kernel/iommu_groups"))
        assert sum(types.values()) <= groups
    else:
        assert (groups, types) == (None, {})


# --- parsers on public samples ---------------------------------------------------------------


def test_iommu_flags_of_a_public_cmdline() -> None:
    assert host.iommu_flags(CSIT_CMDLINE) == "intel_iommu=on iommu=pt"
    assert host.has_acs_override(CSIT_CMDLINE) is False


def test_arguments_after_double_dash_are_not_kernel_parameters() -> None:
    # Kernel parameters end at "--"; what follows goes to init (kernel-parameters.txt).
    cmdline = "quiet iommu=pt -- iommu=off pcie_acs_override=downstream"
    assert host.iommu_flags(cmdline) == "iommu=pt"
    assert host.has_acs_override(cmdline) is False
    assert host.has_acs_override("quiet pcie_acs_override=downstream,multifunction") is True


def test_ib_sysfs_values() -> None:
    assert host.parse_sysfs_state("4: ACTIVE\n") == "ACTIVE"
    assert host.parse_sysfs_state("5: LinkUp\n") == "LinkUp"
    assert host.parse_ib_rate("400 Gb/sec (4X NDR)\n") == 50e9
    assert host.parse_ib_rate("800 Gb/sec (4X XDR)\n") == 100e9
    assert host.parse_ib_rate("2.5 Gb/sec (1X SDR)\n") == 312.5e6


@pytest.mark.parametrize("text", ["", "ACTIVE", "x: ACTIVE", "4:"])
def test_bad_ib_state_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        host.parse_sysfs_state(text)


@pytest.mark.parametrize("text", ["", "400", "400 Gb/s", "nan Gb/sec (4X NDR)", "x Gb/sec"])
def test_bad_ib_rate_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        host.parse_ib_rate(text)


def test_read_ib_ports_from_a_sysfs_tree(tmp_path: Path) -> None:
    for n in range(2):
        write_ib_port(tmp_path, f"mlx5_{n}", 1, IB_ACTIVE_NDR)
    write_ib_port(tmp_path, "mlx5_3", 1, IB_DOWN_DISABLED)
    ports = host.read_ib_ports(tmp_path)
    assert [(p.device, p.port) for p in ports] == [("mlx5_0", 1), ("mlx5_1", 1), ("mlx5_3", 1)]
    assert ports[0] == host.IbPort(
        device="mlx5_0",
        port=1,
        state="ACTIVE",
        phys_state="LinkUp",
        rate="400 Gb/sec (4X NDR)",
        rate_bytes_per_s=50e9,
        link_layer="InfiniBand",
    )
    assert (ports[2].state, ports[2].phys_state, ports[2].rate) == ("DOWN", "Disabled", None)
    assert host.read_ib_ports(tmp_path / "absent") == []


def test_read_governors_counts_cpus(tmp_path: Path) -> None:
    for cpu, governor in enumerate(["performance", "performance", "powersave"]):
        folder = tmp_path / f"cpu{cpu}" / "cpufreq"
        folder.mkdir(parents=True)
        (folder / "scaling_governor").write_text(governor + "\n")
    (tmp_path / "cpufreq").mkdir()  # the policy folder, not a CPU: must be ignored
    assert host.read_governors(tmp_path) == {"performance": 2, "powersave": 1}


def test_read_iommu_group_types(tmp_path: Path) -> None:
    for group, kind in enumerate(["DMA-FQ", "DMA-FQ", "identity"]):
        (tmp_path / str(group)).mkdir()
        (tmp_path / str(group) / "type").write_text(kind + "\n")
    (tmp_path / "3").mkdir()  # a kernel older than 5.11: no type file
    assert host.read_iommu_groups(tmp_path) == (4, {"DMA-FQ": 2, "identity": 1})


@pytest.mark.parametrize(
    ("text", "expected"), [("0\n", [0]), ("0-3,8,10-11\n", [0, 1, 2, 3, 8, 10, 11]), ("", [])]
)
def test_cpulist(text: str, expected: list[int]) -> None:
    assert host.parse_cpulist(text) == expected


@pytest.mark.parametrize("text", ["a", "3-1", "0-", "²", "0-99999999999"])
def test_bad_cpulist_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        host.parse_cpulist(text)


def test_garbage_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="processor"):
        host.parse_cpuinfo(read("/proc/meminfo"))
    with pytest.raises(ParseError, match="MemTotal"):
        host.parse_meminfo(read("/proc/cpuinfo"))


# --- parsers never raise anything but ParseError ---------------------------------------------

PARSERS = [
    host.parse_cpuinfo,
    host.parse_meminfo,
    host.parse_os_release,
    host.parse_cpulist,
    host.iommu_flags,
    host.has_acs_override,
    host.parse_sysfs_state,
    host.parse_ib_rate,
]
REAL_TEXTS = [
    read(p)
    for p in (
        "/proc/cpuinfo",
        "/proc/meminfo",
        "/proc/cmdline",
        "/etc/os-release",
        "/sys/devices/system/node/online",
        "/sys/devices/system/cpu/online",
    )
] + [CSIT_CMDLINE, *IB_ACTIVE_NDR.values(), *IB_DOWN_DISABLED.values()]


def call_expecting_only_parse_error(text: str) -> None:
    for parse in PARSERS:
        try:
            parse(text)
        except ParseError as exc:
            assert "\n" not in str(exc), "a ParseError message is one line"


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parsers_raise_only_parse_error_on_any_text(text: str) -> None:
    call_expecting_only_parse_error(text)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(REAL_TEXTS), st.floats(min_value=0, max_value=1))
def test_parsers_raise_only_parse_error_on_truncated_real_text(text: str, cut: float) -> None:
    call_expecting_only_parse_error(text[: int(len(text) * cut)])


# --- collect() on this machine ---------------------------------------------------------------


@pytest.fixture(scope="module")
def collected() -> host.ProbeOutput:
    return host.collect(host.Params(paths=["/tmp"]))


def test_collect_runs_here(collected: host.ProbeOutput) -> None:
    facts = collected.facts
    assert isinstance(facts, host.HostFacts)
    assert facts.hostname == os.uname().nodename
    assert facts.kernel == os.uname().release
    assert facts.threads == os.sysconf("SC_NPROCESSORS_ONLN")
    assert facts.memory_total_bytes == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert [s.path for s in facts.free_space] == ["/tmp"]
    assert facts.cmdline == read("/proc/cmdline").strip()
    if not facts.governors:
        assert any("cpufreq" in note for note in facts.notes)
    assert set(collected.raw) >= {"cpuinfo.txt", "meminfo.txt", "cmdline.txt", "memlock.txt"}
    assert collected.raw["cpuinfo.txt"].startswith("processor")
    assert collected.raw["cpuinfo.txt"].count("processor") == 1


def test_facts_round_trip_through_json_and_the_controllers_validator(
    collected: host.ProbeOutput,
) -> None:
    data = json.loads(json.dumps(dataclasses.asdict(collected.facts)))
    assert validate_facts("host", host.HostFacts, data) == collected.facts


def test_default_params() -> None:
    assert host.Params() == host.Params(paths=["/tmp"], timeout_s=10)
    assert host.FACTS is host.HostFacts


# --- checks ----------------------------------------------------------------------------------


@pytest.fixture
def facts(collected: host.ProbeOutput) -> host.HostFacts:
    return dataclasses.replace(collected.facts)


@pytest.fixture
def profile() -> Profile:
    return load("h100")


def with_host(profile: Profile, **changes: object) -> Profile:
    return structs.replace(profile, host=structs.replace(profile.host, **changes))


def only(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, findings
    return findings[0]


def test_checks_are_exported() -> None:
    names = [c.name for c in checks.CHECKS]
    assert names == [
        "host.cpu_governor",
        "host.memlock",
        "host.free_space",
        "host.iommu",
        "host.ib_ports",
    ]
    assert {c.probe for c in checks.CHECKS} == {"host"}


def test_cpu_governor(facts: host.HostFacts, profile: Profile) -> None:
    skipped = only(checks.judge_cpu_governor(dataclasses.replace(facts, governors={}), profile))
    assert skipped.status is Status.SKIP
    assert "cpufreq" in skipped.message
    ok = only(
        checks.judge_cpu_governor(dataclasses.replace(facts, governors={"performance": 8}), profile)
    )
    assert (ok.status, ok.message) == (Status.PASS, "8/8 CPUs at governor performance")
    mixed = {"performance": 6, "powersave": 2}
    warn = only(checks.judge_cpu_governor(dataclasses.replace(facts, governors=mixed), profile))
    assert warn.status is Status.WARN
    assert warn.message == "2/8 CPUs not at governor performance: 2 at powersave"
    assert warn.value == 2
    assert warn.action == (
        "set CPU governor to performance: `cpupower frequency-set -g performance`"
    )


def test_memlock(facts: host.HostFacts, profile: Profile) -> None:
    eight_mib = 8 * 1024 * 1024
    limited = dataclasses.replace(facts, memlock_soft_bytes=eight_mib, memlock_hard_bytes=eight_mib)
    warn = only(checks.judge_memlock(limited, profile))
    assert warn.status is Status.WARN
    assert "8 MiB" in warn.message
    assert (warn.value, warn.expected, warn.unit) == (
        eight_mib,
        Expected(op="==", value="unlimited"),
        "bytes",
    )
    assert "`* - memlock unlimited` in /etc/security/limits.conf" in (warn.action or "")
    unlimited = dataclasses.replace(facts, memlock_soft_bytes=None, memlock_hard_bytes=None)
    assert only(checks.judge_memlock(unlimited, profile)).status is Status.PASS
    enough = with_host(profile, min_memlock_bytes=eight_mib)
    assert only(checks.judge_memlock(limited, enough)).status is Status.PASS
    more = with_host(profile, min_memlock_bytes=2 * eight_mib)
    assert only(checks.judge_memlock(limited, more)).status is Status.WARN


def test_free_space(facts: host.HostFacts, profile: Profile) -> None:
    space = facts.free_space[0]
    assert space.free_bytes is not None
    ok = only(checks.judge_free_space(facts, with_host(profile, min_free_bytes=1)))
    assert ok.status is Status.PASS
    assert ok.message.startswith("1/1 paths have ≥ 0 GB free: /tmp ")
    short = with_host(profile, min_free_bytes=space.free_bytes + 1)
    fail = only(checks.judge_free_space(facts, short))
    assert fail.status is Status.FAIL
    assert fail.message.startswith("/tmp: ")
    assert (fail.value, fail.unit) == (round(space.free_bytes / 1e9, 1), "GB")
    missing = dataclasses.replace(facts, free_space=[host.PathSpace("/data", error="gone")])
    error = only(checks.judge_free_space(missing, profile))
    assert (error.status, error.message) == (Status.ERROR, "free space of /data not measured: gone")
    none = dataclasses.replace(facts, free_space=[])
    assert only(checks.judge_free_space(none, profile)).status is Status.SKIP


def test_iommu(facts: host.HostFacts, profile: Profile) -> None:
    translated = dataclasses.replace(facts, iommu_groups=40, iommu_group_types={"DMA-FQ": 40})
    warn = only(checks.judge_iommu(translated, profile))
    assert warn.status is Status.WARN
    assert warn.value == 40
    assert "iommu=pt" in (warn.action or "")
    passthrough = dataclasses.replace(facts, iommu_groups=40, iommu_group_types={"identity": 40})
    assert only(checks.judge_iommu(passthrough, profile)).status is Status.PASS
    on = dataclasses.replace(facts, iommu_groups=None, iommu_group_types={}, iommu="intel_iommu=on")
    assert only(checks.judge_iommu(on, profile)).status is Status.WARN
    csit = dataclasses.replace(on, iommu=host.iommu_flags(CSIT_CMDLINE))
    assert only(checks.judge_iommu(csit, profile)).status is Status.PASS
    off = dataclasses.replace(facts, iommu_groups=0, iommu_group_types={}, iommu=None)
    assert only(checks.judge_iommu(off, profile)).status is Status.PASS


def test_ib_ports(facts: host.HostFacts, profile: Profile, tmp_path: Path) -> None:
    none = dataclasses.replace(facts, ib_ports=[])
    assert only(checks.judge_ib_ports(none, profile)).status is Status.SKIP

    for n in range(8):
        write_ib_port(tmp_path / "good", f"mlx5_{n}", 1, IB_ACTIVE_NDR)
    good = dataclasses.replace(facts, ib_ports=host.read_ib_ports(tmp_path / "good"))
    ok = only(checks.judge_ib_ports(good, profile))
    assert ok.status is Status.PASS
    assert ok.message == "8/8 RDMA ports ACTIVE/LinkUp (InfiniBand): 8 at 400 Gb/sec (4X NDR)"

    ports = host.read_ib_ports(tmp_path / "good")
    write_ib_port(tmp_path / "bad", "mlx5_3", 1, IB_DOWN_DISABLED)
    write_ib_port(tmp_path / "bad", "mlx5_5", 1, IB_ACTIVE_XDR)
    write_ib_port(tmp_path / "bad", "mlx5_6", 1, IB_INIT_LINKUP)
    bad = {p.device: p for p in host.read_ib_ports(tmp_path / "bad")}
    mixed = [bad.get(p.device, p) for p in ports]
    findings = checks.judge_ib_ports(dataclasses.replace(facts, ib_ports=mixed), profile)
    by_status = {(f.status, f.message.split(" ")[0]) for f in findings}
    assert by_status == {
        (Status.FAIL, "mlx5_3"),
        (Status.FAIL, "mlx5_6"),
        (Status.WARN, "mlx5_5"),
    }
    down = next(f for f in findings if f.message.startswith("mlx5_3"))
    assert (down.value, down.expected) == (
        "DOWN/Disabled",
        Expected(op="==", value="ACTIVE/LinkUp"),
    )
    init = next(f for f in findings if f.message.startswith("mlx5_6"))
    assert "subnet manager" in (init.action or "")
    slow = next(f for f in findings if f.message.startswith("mlx5_5"))
    assert (
        slow.message
        == "mlx5_5 port 1 at 800 Gb/sec (4X XDR), the other ports at 400 Gb/sec (4X NDR)"
    )


def test_checks_judge_this_machine(facts: host.HostFacts, profile: Profile) -> None:
    """Every check gives a verdict on the real facts, without crashing."""
    for check in checks.CHECKS:
        findings = check.judge(facts, profile)
        assert findings
        assert all(f.check == check.name for f in findings)


def test_ib_ports_judges_each_compute_rail_against_the_profile_s_rate(
    facts: host.HostFacts, tmp_path: Path
) -> None:
    """HGX B300 carries one 800 Gb/s ConnectX-8 per GPU (docs/reference.md#nic-rates): a rail
    trained at 400G FAILs, port by port, though every port is up at one rate."""
    b300 = load("b300")
    for n in range(8):
        write_ib_port(tmp_path / "xdr", f"mlx5_{n}", 1, IB_ACTIVE_XDR)
        write_ib_port(tmp_path / "ndr", f"mlx5_{n}", 1, IB_ACTIVE_NDR)
    xdr = dataclasses.replace(facts, ib_ports=host.read_ib_ports(tmp_path / "xdr"))
    ok = only(checks.judge_ib_ports(xdr, b300))
    assert (ok.status, ok.message) == (
        Status.PASS,
        "8/8 RDMA ports ACTIVE/LinkUp (InfiniBand): 8 at 800 Gb/sec (4X XDR)",
    )
    # All eight at 400G: one rate, all up, and every one of them a slow rail.
    ndr = dataclasses.replace(facts, ib_ports=host.read_ib_ports(tmp_path / "ndr"))
    slow = checks.judge_ib_ports(ndr, b300)
    assert [(f.status, f.value, f.unit) for f in slow] == [(Status.FAIL, 400.0, "Gb/s")] * 8
    assert slow[3].message == (
        "mlx5_3 port 1 at 400 Gb/sec (4X NDR), the b300 profile's compute rails run at 800 Gb/s"
    )
    assert slow[3].expected == Expected(op=">=", value=800, unit="Gb/s")
    # One rail of eight trained low.
    one_low = [p if p.device != "mlx5_5" else ndr.ib_ports[5] for p in xdr.ib_ports]
    (low,) = checks.judge_ib_ports(dataclasses.replace(facts, ib_ports=one_low), b300)
    assert (low.status, low.message.split(" ")[0]) == (Status.FAIL, "mlx5_5")
    # Eight rails at 800G and a ninth, slower port: another network's (front-end), named.
    write_ib_port(tmp_path / "xdr", "mlx5_8", 1, IB_ACTIVE_NDR)
    front = dataclasses.replace(facts, ib_ports=host.read_ib_ports(tmp_path / "xdr"))
    passed = only(checks.judge_ib_ports(front, b300))
    assert (passed.status, passed.message) == (
        Status.PASS,
        "9/9 RDMA ports ACTIVE/LinkUp (InfiniBand): 8 at 800 Gb/sec (4X XDR), 1 at 400 Gb/sec "
        "(4X NDR); 8 compute rails at >= 800 Gb/s, mlx5_8 port 1 slower: taken as another "
        "network's (front-end)",
    )
