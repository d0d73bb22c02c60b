"""Checks of the east-west fabric: every rail up at its rate and width, no error counter
growing, no link flapping, GPUDirect RDMA ready, no PCIe ACS redirect between a GPU and its
NIC, and ib_write_bw near line rate.

A multi-node job runs at the speed of its slowest rail, so each finding names the rail:
device, port, network interface and PCI address. Thresholds are the profile's `network`
section (docs/reference.md#fabric). Every check here reads the profile only behind
has_profile(): a port's state, its counters and the kernel log are faults on any
hardware, judged for a GPU no profile fits and for a tool output with no GPU in it.

Two faults are owned elsewhere (one fault, one finding): a GPU without a NIC at PIX/PXB is
topology.nic_affinity's, DMA translation by the IOMMU is host.iommu's; the GPUDirect
finding names the IOMMU mode as evidence.
"""

from __future__ import annotations

import shlex
from collections import Counter

from bringup.checks import Check, finding, has_profile
from bringup.findings import Finding, Status, equal
from bringup.node.fabric_facts import (
    ERROR_COUNTERS,
    AcsFacts,
    FabricFacts,
    PciBridgeAcs,
    PerftestFacts,
    RdmaDevice,
    RdmaPort,
)
from bringup.profile import Profile
from bringup.words import plural

NO_DEVICES = "no RDMA devices under /sys/class/infiniband"
# The smallest message a bandwidth figure is judged at: perftest's default size for its
# bandwidth tests (65536 B); smaller messages measure the message rate, not the wire.
MIN_BW_MESSAGE = 65536


# --- ports ---------------------------------------------------------------------------------------


def judge_ports(facts: FabricFacts, profile: Profile) -> list[Finding]:
    """Every port ACTIVE/LinkUp; with a profile, every compute rail at its rate and width."""
    name = "fabric.ports"
    spec = profile.network if has_profile(profile) else None
    if not facts.ports:
        return [finding(name, Status.SKIP, _no_ports(facts, profile))]
    devices = {d.name: d for d in facts.devices}
    problems = [_port_down(p, devices.get(p.device)) for p in facts.ports if not _up(p)]
    up = [p for p in facts.ports if _up(p)]
    note = ""
    if spec is not None and spec.compute_rate_gbit_s is not None:
        slow, note = _slow_rails(up, spec.compute_rate_gbit_s, spec.compute_ports)
        problems += [_rail_slow(p, spec.compute_rate_gbit_s, profile.name, devices) for p in slow]
        rails = [
            p for p in up if p not in slow and (p.rate_gbit_s or 0) >= spec.compute_rate_gbit_s
        ]
        if spec.compute_width is not None:
            problems += [
                _narrow(p, spec.compute_width, devices)
                for p in rails
                if _lanes(p) not in (None, spec.compute_width)
            ]
    else:
        rates = Counter(p.rate_gbit_s for p in up if p.rate_gbit_s is not None)
        if len(rates) > 1:
            common = rates.most_common(1)[0][0]
            problems += [_odd_rate(p, common) for p in up if p.rate_gbit_s not in (None, common)]
    if problems:
        return problems
    return [finding(name, Status.PASS, _ports_summary(facts.ports, profile) + note)]


def _no_ports(facts: FabricFacts, profile: Profile) -> str:
    why = facts.notes[0] if facts.notes else NO_DEVICES
    if has_profile(profile) and profile.network.compute_rate_gbit_s is not None:
        rails = profile.network.compute_ports or "its"
        why += (
            f": the {profile.name} profile expects {rails} compute rails at "
            f"{profile.network.compute_rate_gbit_s:g} Gb/s, none measured here"
        )
    return why


def _up(port: RdmaPort) -> bool:
    # Plain `ibv_devinfo` prints no physical state: its logical state decides.
    return port.state == "ACTIVE" and port.phys_state in ("LinkUp", None)


def _where(port: RdmaPort, device: RdmaDevice | None) -> str:
    """ "mlx5_3 port 1 (ibp64s0, 0000:40:00.0)": what an operator finds the rail by."""
    extra = [x for x in (port.netdev, device.pci_address if device else None) if x]
    return port.name + (f" ({', '.join(extra)})" if extra else "")


def _port_down(port: RdmaPort, device: RdmaDevice | None) -> Finding:
    where = _where(port, device)
    # INIT with LinkUp: the cable trained but no subnet manager configured the port.
    if port.state == "INIT" and port.phys_state == "LinkUp":
        action = "start a subnet manager for this fabric (opensm / UFM), `sminfo` finds one"
    elif port.phys_state == "Polling":
        action = (
            f"no peer on {where}: check the cable is seated at both ends and the switch "
            f"port is enabled (`ibstat {port.device}`, `mlxlink -d {port.device}`)"
        )
    else:
        action = (
            f"check the cable, transceiver and switch port of {where} "
            f"(`ibstat {port.device}`, `mlxlink -d {port.device}`)"
        )
    layer = f" ({port.link_layer})" if port.link_layer else ""
    return finding(
        "fabric.ports",
        Status.FAIL,
        f"{where}{layer}: {port.state}/{port.phys_state or 'physical state not shown'}, "
        "not ACTIVE/LinkUp",
        value=f"{port.state}/{port.phys_state}",
        expected="ACTIVE/LinkUp",
        action=action,
    )


def _slow_rails(up: list[RdmaPort], rate: float, rails: int | None) -> tuple[list[RdmaPort], str]:
    """The compute rails below the profile's rate. With at least `rails` ports at the rate,
    a slower port is another network's (a front-end NIC), named in the PASS; otherwise every
    slower port may be a rail that trained low, and FAILs (as host.ib_ports rules)."""
    known = [p for p in up if p.rate_gbit_s is not None]
    fast = [p for p in known if (p.rate_gbit_s or 0) >= rate]
    slow = [p for p in known if (p.rate_gbit_s or 0) < rate]
    if rails is not None and len(fast) >= rails:
        if not slow:
            return [], ""
        names = ", ".join(p.name for p in slow)
        return [], f"; {names} slower: taken as another network's (front-end)"
    return slow, ""


def _rail_slow(
    port: RdmaPort, rate: float, profile: str, devices: dict[str, RdmaDevice]
) -> Finding:
    where = _where(port, devices.get(port.device))
    return finding(
        "fabric.ports",
        Status.FAIL,
        f"{where} at {port.rate}, the {profile} profile's compute rails run at {rate:g} Gb/s",
        value=port.rate_gbit_s,
        expected=f">= {rate:g}",
        unit="Gb/s",
        action=f"check {where}'s cable/transceiver, switch port and link speed setting "
        f"(`mlxlink -d {port.device}`): a {rate:g}G rail trained lower",
    )


def _lanes(port: RdmaPort) -> int | None:
    width = (port.width or "").upper().removesuffix("X")
    return int(width) if width.isdigit() else None


def _narrow(port: RdmaPort, lanes: int, devices: dict[str, RdmaDevice]) -> Finding:
    where = _where(port, devices.get(port.device))
    return finding(
        "fabric.ports",
        Status.FAIL,
        f"{where} trained at {port.width} ({port.rate}), a rail has {lanes}X: lanes lost",
        value=_lanes(port),
        expected=equal(lanes),
        unit="lanes",
        action=f"reseat or replace the cable/transceiver of {where}: "
        f"`mlxlink -d {port.device}` shows the lanes and their errors",
    )


def _odd_rate(port: RdmaPort, common: float | None) -> Finding:
    return finding(
        "fabric.ports",
        Status.WARN,
        f"{port.name} at {port.rate}, the other ports at {common:g} Gb/s",
        value=port.rate_gbit_s,
        expected=equal(common) if common is not None else None,
        unit="Gb/s",
        action=f"reseat or replace the cable/transceiver of {port.name}, check its switch "
        "port; give --profile to judge the rate against the node's design",
    )


def _ports_summary(ports: list[RdmaPort], profile: Profile) -> str:
    rates = Counter(p.rate or "rate not shown" for p in ports)
    layers = "/".join(sorted({p.link_layer or "link layer not shown" for p in ports}))
    listed = ", ".join(f"{n} at {rate}" for rate, n in rates.items())
    judged = "" if has_profile(profile) else " (rate not judged: no profile; give --profile)"
    return f"{len(ports)}/{len(ports)} RDMA ports ACTIVE/LinkUp ({layers}): {listed}{judged}"


# --- counters ------------------------------------------------------------------------------------


def judge_counters(facts: FabricFacts, profile: Profile) -> list[Finding]:
    """No port error counter grew between the probe's two readings. A single reading (a
    perfquery someone sent) cannot tell an old count from a new one: a non-zero count WARNs."""
    name = "fabric.counters"
    if not facts.ports:
        return [finding(name, Status.SKIP, facts.notes[0] if facts.notes else NO_DEVICES)]
    counted = [p for p in facts.ports if p.counters]
    if not counted:
        reasons = sorted({p.unread["counters"] for p in facts.ports if "counters" in p.unread})
        if facts.source == "sysfs":
            why = reasons[0] if reasons else "no counter files"
            return [finding(name, Status.ERROR, f"port counters not read: {why}")]
        return [finding(name, Status.SKIP, f"no port counters in {facts.source} output")]
    problems: list[Finding] = []
    once = 0
    for port in counted:
        if port.counters_end is None:
            once += 1
            problems += _standing(port)
            continue
        for counter in ERROR_COUNTERS:
            start, end = port.counters.get(counter), port.counters_end.get(counter)
            if start is not None and end is not None and end > start:
                problems.append(_grew(port, counter, start, end, facts.interval_s))
    if problems:
        return problems
    n = len(counted)
    if once:
        message = f"{n} port(s): every error counter 0 (one reading, not a delta)"
    else:
        message = (
            f"{n}/{n} ports: no error counter grew in {facts.interval_s or 0:g} s "
            f"({', '.join(ERROR_COUNTERS[:3])}, ...)"
        )
    missing = [p.name for p in facts.ports if not p.counters]
    if missing:
        message += f"; counters not read on {', '.join(missing)}"
    return [finding(name, Status.PASS, message)]


def _grew(port: RdmaPort, counter: str, start: int, end: int, interval: float | None) -> Finding:
    during = f" in {interval:g} s" if interval else ""
    return finding(
        "fabric.counters",
        Status.FAIL,
        f"{port.name}{f' ({port.netdev})' if port.netdev else ''}: {counter} grew by "
        f"{end - start}{during} ({start} -> {end})",
        value=end - start,
        expected=equal(0),
        unit="errors",
        action=bad_link_action(counter, "now", port.name, port.device),
    )


def bad_link_action(counter: str, when: str, where: str, device: str) -> str:
    """What to do about an error counter that grew: one text for fabric.counters (the idle
    window) and fabric.rail_counters (under the rails' own traffic)."""
    return (
        f"{counter} counting {when} means a bad link: reseat or replace the cable/"
        f"transceiver of {where}, check its switch port (`mlxlink -d {device} "
        "--show_ber_monitor`), then clear the counters (`perfquery -x -R`) and measure again"
    )


def _standing(port: RdmaPort) -> list[Finding]:
    counts = {c: port.counters[c] for c in ERROR_COUNTERS if port.counters.get(c)}
    if not counts:
        return []
    listed = ", ".join(f"{c} {v}" for c, v in counts.items())
    return [
        finding(
            "fabric.counters",
            Status.WARN,
            f"{port.name}: {listed} since the counters were last cleared "
            "(one reading: not known to be growing)",
            value=sum(counts.values()),
            expected=equal(0),
            unit="errors",
            action="clear the counters (`perfquery -x -R`), run traffic, read them again: "
            "errors that come back are a bad link",
        )
    ]


# --- link flaps ----------------------------------------------------------------------------------


def judge_link_flaps(facts: FabricFacts, profile: Profile) -> list[Finding]:
    """mlx5 link-down events in the kernel log window: one or more WARN, more than the
    profile's count on one port FAIL (docs/reference.md#fabric)."""
    name = "fabric.link_flaps"
    if facts.source == "sysfs" and not facts.ports and not facts.link_events:
        return [finding(name, Status.SKIP, facts.notes[0] if facts.notes else NO_DEVICES)]
    if facts.source != "kernel log" and facts.log_source is None:
        why = next((n for n in facts.notes if n.startswith("link flaps not read")), None)
        return [finding(name, Status.SKIP, why or "the kernel log was not read")]
    limit = profile.network.link_flaps_fail_count if has_profile(profile) else 3
    downs = Counter(
        _rail(e.device, e.pci, e.netdev) for e in facts.link_events if e.state == "down"
    )
    window = _window(facts)
    problems = []
    for rail, count in downs.items():
        status = Status.FAIL if count > limit else Status.WARN
        problems.append(
            finding(
                name,
                status,
                f"{rail}: link down {count} time(s) in the kernel log{window}",
                value=count,
                expected=f"<= {limit}" if status is Status.FAIL else equal(0),
                unit="flaps",
                action=f"a rail that drops its link stalls every job on it: reseat or replace "
                f"the cable/transceiver of {rail}, check the switch port's log; "
                "`journalctl -k | grep mlx5_core` shows each event",
            )
        )
    if problems:
        return problems
    ups = sum(1 for e in facts.link_events if e.state == "up")
    extra = f" ({ups} link-up events: links training)" if ups else ""
    return [finding(name, Status.PASS, f"no mlx5 link down in the kernel log{window}{extra}")]


def _rail(device: str | None, pci: str, netdev: str | None) -> str:
    named = ", ".join(x for x in (netdev, pci) if x)
    return f"{device} ({named})" if device else named


def _window(facts: FabricFacts) -> str:
    if facts.log_window_s:
        return f" ({facts.log_source}, last {facts.log_window_s / 86400:g} days)"
    return f" ({facts.log_source})" if facts.log_source else ""


# --- GPUDirect RDMA ------------------------------------------------------------------------------


def judge_gpudirect(facts: FabricFacts, profile: Profile) -> list[Finding]:
    """The GPU can be an RDMA target: nvidia_peermem loaded, or DMA-BUF (Linux >= 5.12 with
    NVIDIA's open kernel modules). Without either, NCCL stages GPU data through host memory."""
    name = "fabric.gpudirect"
    gd = facts.gpudirect
    if gd is None:
        return [finding(name, Status.SKIP, f"not shown by {facts.source}")]
    if not facts.ports:
        return [finding(name, Status.SKIP, f"{NO_DEVICES}: GPUDirect RDMA not applicable")]
    if gd.nvidia_loaded is False:
        return [
            finding(name, Status.SKIP, "no NVIDIA driver loaded: GPUDirect RDMA not applicable")
        ]
    iommu = f"; IOMMU {facts.iommu}" if facts.iommu else ""
    if gd.peermem_loaded:
        return [finding(name, Status.PASS, f"nvidia_peermem loaded{iommu}")]
    if gd.dmabuf_kernel and gd.open_kernel_module:
        module = f"NVIDIA's open kernel module {gd.driver_version or ''}".rstrip()
        message = f"DMA-BUF: kernel {gd.kernel} with {module}{iommu}"
        return [finding(name, Status.PASS, message)]
    why = []
    if gd.peermem_loaded is None:
        why.append(f"loaded modules not read ({gd.unread.get('modules', 'unknown')})")
    else:
        why.append("nvidia_peermem not loaded")
    if gd.dmabuf_kernel is False:
        why.append(f"kernel {gd.kernel} older than 5.12 (no DMA-BUF)")
    elif gd.open_kernel_module is False:
        driver = f"driver {gd.driver_version}" if gd.driver_version else "the driver"
        why.append(f"{driver} is the proprietary module (DMA-BUF needs the open one)")
    return [
        finding(
            name,
            Status.WARN,
            "GPUDirect RDMA not ready: " + "; ".join(why) + iommu,
            expected="nvidia_peermem or DMA-BUF",
            action="`modprobe nvidia_peermem` and add it to /etc/modules-load.d/ (or install "
            "NVIDIA's open kernel modules on Linux 5.12+ for DMA-BUF); without it RDMA "
            "stages GPU data through host memory",
        )
    ]


# --- perftest runs -------------------------------------------------------------------------------


def judge_write_bw(facts: FabricFacts, profile: Profile) -> list[Finding]:
    """Each ib_write_bw run's best average at least the profile's share of the rail rate;
    latency runs are reported (no published per-rail latency floor)."""
    name = "fabric.write_bw"
    if not facts.runs:
        return [
            finding(
                name,
                Status.SKIP,
                "no ib_write_bw output in these facts (the per-rail job between nodes is "
                "fabric.rail_bw, docs/fabric.md)",
            )
        ]
    return [_judge_run(run, profile) for run in facts.runs]


def _judge_run(run: PerftestFacts, profile: Profile) -> Finding:
    name = "fabric.write_bw"
    device = run.device or "device not shown"
    gpu = ", GPU memory (--use_cuda)" if run.use_cuda else ""
    if run.kind == "lat":
        row = min(run.lat, key=lambda r: r.size_bytes)
        typical = f", typical {row.t_typical_us:g}" if row.t_typical_us is not None else ""
        message = (
            f"{run.test} on {device}: {row.size_bytes} B average {row.t_avg_us:g} us{typical} "
            f"({len(run.lat)} sizes; reported, no latency floor)"
        )
        return finding(name, Status.PASS, message, value=row.t_avg_us, unit="us")
    best = run.best_average_bytes_per_s or 0.0
    gbit = best * 8 / 1e9
    size = max(run.bw, key=lambda r: r.average_bytes_per_s).size_bytes
    shown = f"{run.test} on {device} ({run.link_type or 'link type not shown'}{gpu})"
    spec = profile.network if has_profile(profile) else None
    if size < MIN_BW_MESSAGE:
        message = (
            f"{shown}: best average {gbit:.2f} Gb/s at {size} B (not judged: a message-rate "
            f"run; bandwidth is judged at {MIN_BW_MESSAGE} B or more)"
        )
        return finding(name, Status.PASS, message, value=round(gbit, 2), unit="Gb/s")
    if spec is None or spec.compute_rate_gbit_s is None:
        why = (
            "no profile: give --profile"
            if spec is None
            else f"the {profile.name} profile has no rail rate"
        )
        message = f"{shown}: best average {gbit:.2f} Gb/s at {size} B (not judged: {why})"
        return finding(name, Status.PASS, message, value=round(gbit, 2), unit="Gb/s")
    floor = spec.compute_rate_gbit_s * spec.write_bw_min_fraction
    message = (
        f"{shown}: best average {gbit:.2f} Gb/s at {size} B, the {profile.name} rail "
        f"({spec.compute_rate_gbit_s:g} Gb/s) needs >= {floor:g}"
    )
    if gbit >= floor:
        return finding(name, Status.PASS, message, value=round(gbit, 2), unit="Gb/s")
    return finding(
        name,
        Status.FAIL,
        message,
        value=round(gbit, 2),
        expected=f">= {floor:g}",
        unit="Gb/s",
        action=f"a slow rail: check {device}'s link (`ibstat`, `mlxlink -d {device}`), its "
        "PCIe link (`lspci -vv`: width and speed), and that the run used large messages "
        "(`ib_write_bw -s 8388608 --report_gbits`); with --use_cuda, GPUDirect (nvidia_peermem)",
    )


# --- PCIe ACS on the GPU-NIC path ---------------------------------------------------------------


def judge_acs(facts: FabricFacts, profile: Profile) -> list[Finding]:
    """No ACS redirect on the PCIe switch ports between a GPU and the NIC on its switch.

    With Request/Completion Redirect or Egress Control set on such a port, every GPUDirect
    RDMA transfer is sent up to the CPU's root complex and back instead of across the
    switch: slow, or a hang with the IOMMU on (NCCL's troubleshooting guide, "PCI Access
    Control Services"; Linux's P2P DMA refuses such a path: docs/reference.md#fabric).
    Other ACS bits set (SrcValid, ...) redirect nothing: WARN, the guide asks them cleared.
    """
    name = "fabric.acs"
    acs = facts.acs
    if not facts.devices and facts.source == "sysfs":
        return [finding(name, Status.SKIP, f"{NO_DEVICES}: no GPU-NIC path")]
    if acs is None:
        return [finding(name, Status.SKIP, f"not shown by {facts.source}")]
    if not acs.gpus:
        return [finding(name, Status.SKIP, "no NVIDIA GPU on the PCI bus: no GPU-NIC path")]
    if not acs.paths:
        return [
            finding(
                name,
                Status.SKIP,
                f"no GPU shares a PCIe switch with an RDMA NIC ({plural(len(acs.gpus), 'GPU')}, "
                f"{plural(len(facts.devices), 'RDMA device')}): no switch port on a GPU-NIC path "
                "(topology.nic_affinity judges the placement)",
            )
        ]
    unread = [b for b in acs.bridges if b.unread]
    if unread:
        return [_acs_unread(acs, unread)]
    problems = [_acs_set(acs, b) for b in acs.bridges if b.enabled]
    if problems:
        return problems
    gpus = {p.gpu for p in acs.paths}
    nics = {p.nic for p in acs.paths}
    without = sum(1 for b in acs.bridges if b.acs_ctl is None)
    note = f"; {without} without an ACS capability" if without else ""
    return [
        finding(
            name,
            Status.PASS,
            f"ACS off on {plural(len(acs.bridges), 'switch port')} between "
            f"{plural(len(gpus), 'GPU')} and {plural(len(nics), 'NIC')} on their switches "
            f"(lspci ACSCtl){note}",
        )
    ]


def _acs_unread(acs: AcsFacts, unread: list[PciBridgeAcs]) -> Finding:
    why = acs.unread or unread[0].unread or "unknown"
    listed = ", ".join(b.address for b in unread[:4]) + (" ..." if len(unread) > 4 else "")
    if "not found" in why:
        action = (
            "install pciutils (`bringup provision --tags node_tools` installs it) and check again"
        )
    elif "without root" in why:
        action = "run the check as root (ACS is in PCIe extended config space, root-only)"
    else:
        action = "run `sudo lspci -vvv -s <bridge>` by hand and look at its ACSCtl line"
    return finding(
        "fabric.acs",
        Status.ERROR,
        f"ACS on the GPU-NIC path not read ({plural(len(unread), 'switch port')}: {listed}): {why}",
        action=action,
    )


def _acs_set(acs: AcsFacts, bridge: PciBridgeAcs) -> Finding:
    paths = [p for p in acs.paths if bridge.address in p.bridges]
    between = ", ".join(f"GPU {p.gpu} - {p.nic}" for p in paths[:4])
    if len(paths) > 4:
        between += f" and {len(paths) - 4} more"
    what = f"{bridge.address} ({bridge.description})" if bridge.description else bridge.address
    set_bits = " ".join(f"{flag}+" for flag in bridge.enabled)
    # The address came from the node: quoted, it cannot turn the suggested command into
    # another one (a real address quotes to itself).
    address = shlex.quote(bridge.address)
    setpci = f"`setpci -s {address} ECAP_ACS+0x6.w=0000`"
    if bridge.redirect:
        return finding(
            "fabric.acs",
            Status.FAIL,
            f"ACS redirect on {what}, on the path {between}: ACSCtl {set_bits}",
            value=" ".join(f"{flag}+" for flag in bridge.redirect),
            expected="ReqRedir- CmpltRedir- EgressCtrl-",
            action=f"GPUDirect RDMA through this port is sent up to the CPU: disable ACS on "
            f"the bare-metal node, in the BIOS (ACS, or IO virtualization / VT-d) or with "
            f"{setpci} as root after every boot (or the kernel parameter "
            f"`pci=disable_acs_redir={address}`)",
        )
    return finding(
        "fabric.acs",
        Status.WARN,
        f"ACS on {what}, on the path {between}: ACSCtl {set_bits} (no redirect bit)",
        value=set_bits,
        expected="every ACSCtl bit -",
        action=f"NCCL's guide asks ACS off on the switches of a bare-metal node: {setpci} "
        "as root after every boot, or in the BIOS (ACS, or IO virtualization / VT-d)",
    )


CHECKS = [
    Check(
        "fabric.ports",
        "fabric",
        judge_ports,
        "every RDMA port ACTIVE/LinkUp; compute rails at the profile's rate and width",
        profile_free=True,
    ),
    Check(
        "fabric.counters",
        "fabric",
        judge_counters,
        "no port error counter (symbol_error, link_downed, ...) grew during the run",
        profile_free=True,
    ),
    Check(
        "fabric.link_flaps",
        "fabric",
        judge_link_flaps,
        "no mlx5 link down in the kernel log window (WARN; FAIL above the profile's count)",
        profile_free=True,
    ),
    Check(
        "fabric.gpudirect",
        "fabric",
        judge_gpudirect,
        "GPUDirect RDMA ready: nvidia_peermem loaded, or DMA-BUF (Linux 5.12+, open module)",
        profile_free=True,
    ),
    Check(
        "fabric.write_bw",
        "fabric",
        judge_write_bw,
        "an ib_write_bw output at least the profile's share of the rail rate (inspect)",
        profile_free=True,
    ),
    Check(
        "fabric.acs",
        "fabric",
        judge_acs,
        "no PCIe ACS redirect on the switch ports between each GPU and the NIC on its switch",
        profile_free=True,
    ),
]
