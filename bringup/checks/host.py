"""Checks of the host probe's facts: CPU governor, memlock, free space, IOMMU, RDMA ports.

These are the host settings that silently cost GPU-cluster throughput: a power-saving CPU
governor slows the launch path, a small memlock limit stops RDMA from pinning buffers,
DMA translation by the IOMMU slows GPUDirect, and a port that trained at a lower rate
makes one node the slowest of every collective.
"""

from __future__ import annotations

from collections import Counter

from bringup.checks import Check, finding
from bringup.findings import Finding, Status, equal
from bringup.node.fabric_facts import FabricFacts
from bringup.node.probes.host import HostFacts, IbPort
from bringup.profile import Profile

# IOMMU default-domain types (Linux `iommu_group_show_type`) under which the IOMMU
# translates every device DMA: the opposite of passthrough ("identity").
TRANSLATED_DOMAINS = ("DMA", "DMA-FQ")

# Kernel parameters that turn DMA translation on / put the IOMMU in passthrough
# (Documentation/admin-guide/kernel-parameters.txt).
IOMMU_ON = ("intel_iommu=on", "amd_iommu=on", "amd_iommu=force_isolation", "iommu=force")
IOMMU_PASSTHROUGH = ("iommu=pt", "iommu.passthrough=1", "iommu.passthrough=on")


def judge_cpu_governor(facts: HostFacts, profile: Profile) -> list[Finding]:
    """Every CPU runs the profile's cpufreq governor (performance by default)."""
    name, want = "host.cpu_governor", profile.host.cpu_governor
    if not facts.governors:
        reason = "cpufreq is not exposed on this host (typical of a VM): no governor to check"
        return [finding(name, Status.SKIP, reason)]
    total = sum(facts.governors.values())
    others = {g: n for g, n in sorted(facts.governors.items()) if g != want}
    if not others:
        return [finding(name, Status.PASS, f"{total}/{total} CPUs at governor {want}")]
    wrong = sum(others.values())
    detail = ", ".join(f"{n} at {g}" for g, n in others.items())
    return [
        finding(
            name,
            Status.WARN,
            f"{wrong}/{total} CPUs not at governor {want}: {detail}",
            value=wrong,
            expected="0",  # CPUs not at the governor
            unit="CPUs",
            action=f"set CPU governor to {want}: `cpupower frequency-set -g {want}`",
        )
    ]


def judge_memlock(facts: HostFacts, profile: Profile) -> list[Finding]:
    """The locked-memory limit lets RDMA and NCCL pin their buffers."""
    name, need = "host.memlock", profile.host.min_memlock_bytes
    soft, hard = facts.memlock_soft_bytes, facts.memlock_hard_bytes
    if soft is None:
        return [finding(name, Status.PASS, "memlock limit unlimited: RDMA/NCCL can pin memory")]
    if need is not None and soft >= need:
        message = f"memlock limit {_binary(soft)} ≥ {_binary(need)} required"
        return [finding(name, Status.PASS, message)]
    wanted = "unlimited" if need is None else f">= {need}"
    message = (
        f"memlock soft limit {_binary(soft)} (hard {_limit_text(hard)}), "
        f"RDMA/NCCL need {'unlimited' if need is None else _binary(need)}: "
        "memory registration can fail or fall back to slower paths"
    )
    return [
        finding(
            name,
            Status.WARN,
            message,
            value=soft,
            expected=wanted,
            unit="bytes",
            action="set `* - memlock unlimited` in /etc/security/limits.conf "
            "(containers: `--ulimit memlock=-1`), then log in again",
        )
    ]


def judge_free_space(facts: HostFacts, profile: Profile) -> list[Finding]:
    """Each data and checkpoint path has at least the profile's free space."""
    name, need = "host.free_space", profile.host.min_free_bytes
    if not facts.free_space:
        return [finding(name, Status.SKIP, "no data or checkpoint paths given to the probe")]
    problems: list[Finding] = []
    for space in facts.free_space:
        if space.error is not None or space.free_bytes is None:
            message = f"free space of {space.path} not measured: {space.error}"
            action = (
                f"create or mount {space.path}, or give the data disk to measure: "
                "`bringup check --data-dir /path/on/nvme`"
            )
            problems.append(finding(name, Status.ERROR, message, action=action))
        elif space.free_bytes < need:
            where = f" on {space.mount_point}" if space.mount_point else ""
            problems.append(
                finding(
                    name,
                    Status.FAIL,
                    f"{space.path}: {_gb(space.free_bytes)} GB free{where}, "
                    f"{_gb(need)} GB required",
                    value=round(space.free_bytes / 1e9, 1),
                    expected=f">= {_gb(need)}",
                    unit="GB",
                    action=f"free space{where}, or judge the real data disk: "
                    "`bringup check --data-dir /path/on/nvme` (the default path is /tmp)",
                )
            )
    if problems:
        return problems
    listed = ", ".join(f"{s.path} {_gb(s.free_bytes or 0)} GB" for s in facts.free_space)
    count = len(facts.free_space)
    message = f"{count}/{count} paths have ≥ {_gb(need)} GB free: {listed}"
    return [finding(name, Status.PASS, message)]


def judge_iommu(facts: HostFacts, profile: Profile) -> list[Finding]:
    """The IOMMU is off or in passthrough: DMA translation slows GPUDirect P2P and RDMA."""
    name = "host.iommu"
    flags = facts.iommu or "no IOMMU parameters on the kernel command line"
    action = "add `iommu=pt` to the kernel command line (GRUB_CMDLINE_LINUX) and reboot"
    translated = sum(facts.iommu_group_types.get(t, 0) for t in TRANSLATED_DOMAINS)
    if translated:
        message = (
            f"IOMMU translates DMA for {translated}/{facts.iommu_groups} IOMMU groups ({flags}): "
            "GPUDirect P2P/RDMA traffic pays for address translation"
        )
        expected = "identity (passthrough) or IOMMU off"
        return [
            finding(name, Status.WARN, message, value=translated, expected=expected, action=action)
        ]
    if facts.iommu_group_types:
        groups = facts.iommu_group_types.get("identity", 0)
        message = f"IOMMU in passthrough: {groups} groups identity-mapped ({flags})"
        return [finding(name, Status.PASS, message)]
    # No per-group types (IOMMU off, or a kernel older than 5.11): judge the command line.
    args = (facts.iommu or "").split()
    enabled = any(a in IOMMU_ON for a in args)
    passthrough = any(a in IOMMU_PASSTHROUGH for a in args)
    if enabled and not passthrough:
        message = f"IOMMU enabled without passthrough ({flags}): slows GPUDirect P2P/RDMA"
        return [finding(name, Status.WARN, message, expected="iommu=pt", action=action)]
    state = "passthrough" if passthrough else f"off ({facts.iommu_groups or 0} IOMMU groups)"
    return [finding(name, Status.PASS, f"IOMMU {state}: {flags}")]


def judge_ib_ports(
    facts: HostFacts, profile: Profile, fabric: FabricFacts | None = None
) -> list[Finding]:
    """Every RDMA port is ACTIVE/LinkUp; the compute rails run at the profile's rate, port
    by port (a 400G rail on an 800G design FAILs); without a rate in the profile, all ports
    trained at one rate.

    Where the fabric probe read the same ports, a port fault is one fault seen twice:
    fabric.ports judges it (with width, interface and PCI address), and this check says so.
    """
    found = _judge_ib_ports(facts, profile)
    if fabric is None or not fabric.ports or all(f.status is Status.PASS for f in found):
        return found
    faults = "; ".join(f.message for f in found if f.status is not Status.PASS)
    message = f"judged by fabric.ports (the fabric probe read the same ports): {faults}"
    return [finding("host.ib_ports", Status.SKIP, message)]


def _judge_ib_ports(facts: HostFacts, profile: Profile) -> list[Finding]:
    name = "host.ib_ports"
    ports = facts.ib_ports
    if not ports:
        return [finding(name, Status.SKIP, "no RDMA devices under /sys/class/infiniband")]
    problems = [_port_down(name, p) for p in ports if not _port_up(p)]
    active = [p for p in ports if _port_up(p)]
    rates = Counter(p.rate for p in active)
    spec = profile.network
    slow: list[IbPort] = []
    extra = ""
    if spec.compute_rate_gbit_s is not None:
        slow, extra = _slow_rails(active, spec.compute_rate_gbit_s, spec.compute_ports)
        problems += [_rail_slow(name, p, spec.compute_rate_gbit_s, profile.name) for p in slow]
    if len(rates) > 1 and not slow and not extra:
        common = rates.most_common(1)[0][0]
        problems += [_port_slow(name, p, common) for p in active if p.rate != common]
    if problems:
        return problems
    summary = ", ".join(f"{n} at {rate}" for rate, n in rates.items())
    layers = "/".join(sorted({p.link_layer or "unknown link layer" for p in ports}))
    message = f"{len(ports)}/{len(ports)} RDMA ports ACTIVE/LinkUp ({layers}): {summary}{extra}"
    return [finding(name, Status.PASS, message)]


def _gbit_s(port: IbPort) -> float | None:
    """A port's rate in Gb/s (sysfs's figure), or None when not reported."""
    if port.rate_bytes_per_s is None:
        return None
    return port.rate_bytes_per_s * 8 / 1e9


def _slow_rails(
    active: list[IbPort], rate_gbit_s: float, rails: int | None
) -> tuple[list[IbPort], str]:
    """The compute rails below the profile's rate, and a note on the slower ports that are
    not rails. The node has `rails` compute rails (one per GPU): when at least that many
    ports run at the rate, a slower port is another network's (a front-end NIC), named in
    the PASS; otherwise every slower port may be a rail that trained low, and FAILs."""
    known = [p for p in active if _gbit_s(p) is not None]
    fast = [p for p in known if (_gbit_s(p) or 0.0) >= rate_gbit_s]
    slow = [p for p in known if (_gbit_s(p) or 0.0) < rate_gbit_s]
    if rails is not None and len(fast) >= rails:
        if not slow:
            return [], ""
        names = ", ".join(f"{p.device} port {p.port}" for p in slow)
        return [], (
            f"; {len(fast)} compute rails at >= {rate_gbit_s:g} Gb/s, {names} slower: "
            "taken as another network's (front-end)"
        )
    return slow, ""


def _rail_slow(name: str, port: IbPort, rate_gbit_s: float, profile: str) -> Finding:
    where = f"{port.device} port {port.port}"
    return finding(
        name,
        Status.FAIL,
        f"{where} at {port.rate}, the {profile} profile's compute rails run at "
        f"{rate_gbit_s:g} Gb/s",
        value=_gbit_s(port),
        expected=f">= {rate_gbit_s:g}",
        unit="Gb/s",
        action=f"check {where}'s cable/transceiver, switch port and the NIC's link speed "
        f"setting (`ibstat {port.device}`, `mlxlink -d {port.device}`): an {rate_gbit_s:g}G "
        "rail trained lower, or a slower NIC than the reference design",
    )


def _port_up(port: IbPort) -> bool:
    return port.state == "ACTIVE" and port.phys_state == "LinkUp"


def _port_down(name: str, port: IbPort) -> Finding:
    where = f"{port.device} port {port.port}"
    # INIT with LinkUp: the cable is fine but no subnet manager has configured the port.
    hint = (
        "start a subnet manager (opensm / UFM) for this fabric"
        if port.state == "INIT" and port.phys_state == "LinkUp"
        else f"check the cable, transceiver and switch port of {where} (`ibstat {port.device}`)"
    )
    return finding(
        name,
        Status.FAIL,
        f"{where} ({port.link_layer}): {port.state}/{port.phys_state}, not ACTIVE/LinkUp",
        value=f"{port.state}/{port.phys_state}",
        expected="ACTIVE/LinkUp",
        action=hint,
    )


def _port_slow(name: str, port: IbPort, common: str | None) -> Finding:
    where = f"{port.device} port {port.port}"
    return finding(
        name,
        Status.WARN,
        f"{where} at {port.rate}, the other ports at {common}",
        value=port.rate,
        expected=equal(common) if common else None,
        action=f"reseat or replace the cable/transceiver of {where}, check its switch port: "
        "the link trained at a different rate",
    )


def _gb(n: int) -> str:
    """Bytes as GB (1e9), as df -H and the messages print them."""
    return f"{n / 1e9:.1f}".removesuffix(".0")


def _binary(n: int) -> str:
    """A memory limit in KiB/MiB/GiB: ulimit and limits.conf count in KiB."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} B"


def _limit_text(n: int | None) -> str:
    return "unlimited" if n is None else _binary(n)


CHECKS: list[Check] = [
    Check(
        "host.cpu_governor", "host", judge_cpu_governor, "CPUs run the profile's cpufreq governor"
    ),
    Check("host.memlock", "host", judge_memlock, "the memlock limit lets RDMA/NCCL pin memory"),
    Check(
        "host.free_space", "host", judge_free_space, "data/checkpoint paths have enough free space"
    ),
    Check("host.iommu", "host", judge_iommu, "the IOMMU is off or in passthrough (iommu=pt)"),
    Check(
        "host.ib_ports",
        "host",
        judge_ib_ports,
        "RDMA ports are ACTIVE/LinkUp at one rate (fabric.ports judges them where it ran)",
        context="fabric",
    ),
]
