"""Checks of the `xid` probe: what each Xid/SXid in the kernel log means, and what to do.

Status by severity (see `XidInfo`): "fatal" (RMA, reseat, power-cycle) and "reset" (the GPU
must be reset before it is trusted again) FAIL; "app" (usually the user's program, not the
hardware) and "info" (worth a look, not a fault by itself) WARN. No Xid at all PASSes.
Any Xid in an acceptance window deserves a look, which is why even "info" is not a PASS.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from bringup.checks import Check, finding
from bringup.findings import Finding, Status
from bringup.node.gpu_facts import GpuFacts, gpu_by_pci, gpu_label
from bringup.node.probes.xid import XidEvent, XidFacts, event_utc
from bringup.profile import Profile
from bringup.xid_catalogue import CATALOGUE_URL, CatalogueEntry, catalogue

SEVERITY_STATUS: dict[str, Status] = {
    "fatal": Status.FAIL,
    "reset": Status.FAIL,
    "app": Status.WARN,
    "info": Status.WARN,
}
_SEVERITY_RANK = {"info": 0, "app": 1, "reset": 2, "fatal": 3}
_MEANING = {
    "fatal": "hardware fault",
    "reset": "the GPU needs a reset",
    "app": "usually the application",
    "info": "informational",
}


@dataclass(frozen=True)
class XidInfo:
    """What an Xid code means (NVIDIA's name for it), how bad it is, and what to do."""

    name: str
    severity: str  # "fatal" | "reset" | "app" | "info"
    action: str
    mnemonic: str = ""  # NVIDIA's: "NVLINK_PRIV_ERR"
    # What brings the GPU back (RECOVERIES): a GPU reset, a drain then reset, a reboot, ...
    recovery: str = "none"
    # Where severity and action come from: NVIDIA's buckets, or bringup's own reading where
    # the catalogue gives no bucket (Xid 162-172) or is refined by real logs (curated below).
    source: str = "catalogue"

    @property
    def needs_reset(self) -> bool:
        """The GPU must be reset (or the node rebooted) before it is trusted again."""
        return self.recovery in ("reset", "drain and reset", "reboot")

    @property
    def needs_drain(self) -> bool:
        """The jobs must leave the GPU (or the node) first."""
        return self.recovery in ("drain and reset", "reboot")


# The recoveries, from NVIDIA's "Fault Resolution Buckets" (catalogue, Guidance Class).
RECOVERIES = (
    "none",
    "restart the application",
    "restart the VM",
    "reset",
    "drain and reset",
    "reboot",
    "reseat",
    "update software",
    "as the message says",
)


_APP_ACTION = (
    "usually the user's program, not the hardware: check the job (compute-sanitizer); "
    "run `dcgmi diag -r 3` if it repeats with different programs"
)
_NVLINK_ACTION = (
    "check the NVLink (`nvidia-smi nvlink -e`, Fabric Manager log); reset the GPU, "
    "reseat the GPU/baseboard if it repeats, RMA if it persists"
)

# The codes whose severity and action bringup states itself, from the catalogue's buckets
# and the real logs of tests/fixtures/xid/ (docs/reference.md#xid-catalogue); every other
# code takes the catalogue's buckets as _BUCKETS reads them.
_CURATED: dict[int, XidInfo] = {
    8: XidInfo("GPU stopped processing (channel idle timeout)", "app", _APP_ACTION),
    13: XidInfo("Graphics Engine Exception", "app", _APP_ACTION),
    31: XidInfo("GPU memory page fault (MMU fault)", "app", _APP_ACTION),
    32: XidInfo(
        "Invalid or corrupted push buffer stream",
        "app",
        "restart the job; if it repeats, look for PCIe errors (`lspci -vvv` AER) "
        "and reseat the GPU",
    ),
    43: XidInfo("GPU stopped processing (the application's channel was reset)", "app", _APP_ACTION),
    45: XidInfo(
        "Preemptive cleanup, due to previous errors",
        "app",
        "the job's channel was torn down (process killed or an earlier Xid): "
        "look at the Xid that caused it",
    ),
    48: XidInfo(
        "Double-bit ECC error (DBE)",
        "reset",
        "reset the GPU (`nvidia-smi -r`) so the row is remapped; RMA if DBEs repeat",
    ),
    # 51 is not in the public catalogue; the one public log (usernote fixture) shows the
    # driver asking for a reset right after it ("Reset required", Xid 154 PF FLR).
    51: XidInfo(
        "Runlist error (BAD_TSG)",
        "reset",
        "reset the GPU; update the driver if it repeats",
    ),
    62: XidInfo(
        "Internal micro-controller halt",
        "reset",
        "reset the GPU; update the driver/firmware if it repeats",
    ),
    63: XidInfo(
        "Row remapping (ECC page retirement) recorded",
        "reset",
        "reset the GPU (`nvidia-smi -r` or reboot) to activate the remapped row",
    ),
    64: XidInfo(
        "Row remapping (ECC page retirement) failure",
        "fatal",
        "RMA the GPU: a memory row could not be remapped",
    ),
    74: XidInfo("NVLink error", "fatal", _NVLINK_ACTION),
    79: XidInfo(
        "GPU has fallen off the bus",
        "fatal",
        "power-cycle the node, reseat the GPU and check its power cables; RMA if it repeats",
    ),
    92: XidInfo(
        "High single-bit ECC error rate",
        "reset",
        "reset the GPU at the next opportunity; RMA if the rate stays high",
    ),
    94: XidInfo(
        "Contained ECC error",
        "reset",
        "restart the affected job; reset the GPU at the next opportunity to remap the row",
    ),
    95: XidInfo(
        "Uncontained ECC error",
        "reset",
        "reset the GPU (or reboot the node): every process on it is affected",
    ),
    109: XidInfo(
        "Context switch timeout",
        "app",
        "usually a hung kernel in the job; reset the GPU if it repeats",
    ),
    119: XidInfo(
        "GSP RPC timeout",
        "reset",
        "reset the GPU (or reboot); update the driver if it repeats",
    ),
    120: XidInfo(
        "GSP error",
        "reset",
        "reset the GPU (or reboot); update the driver if it repeats",
    ),
    # Blackwell NVLink errors; the message says "Fatal" or "Nonfatal" (see _severity).
    144: XidInfo("NVLink SAW error", "reset", _NVLINK_ACTION),
    145: XidInfo("NVLink RLW error", "info", _NVLINK_ACTION),
    146: XidInfo("NVLink TLW error", "reset", _NVLINK_ACTION),
    147: XidInfo("NVLink TREX error", "reset", _NVLINK_ACTION),
    148: XidInfo("NVLink NVLPW control error", "reset", _NVLINK_ACTION),
    149: XidInfo("NVLink NETIR error", "fatal", _NVLINK_ACTION),
    150: XidInfo("NVLink MSE error", "reset", _NVLINK_ACTION),
    154: XidInfo(
        "GPU recovery action changed",
        "reset",
        "do the recovery action the driver asks for",
    ),
}

# NVIDIA's resolution buckets ("Fault Resolution Buckets" / Guidance Class sheet of the
# catalogue) as bringup judges them: (severity, recovery, what to do, in NVIDIA's sense).
_BUCKETS: dict[str, tuple[str, str, str]] = {
    "RESTART_APP": ("app", "restart the application", "restart the application"),
    "RESET_GPU": ("reset", "reset", "reset the GPU (`nvidia-smi -r`); a reboot is not needed"),
    "RESTART_BM": ("fatal", "reboot", "drain and restart the node"),
    "RESTART_VM": ("reset", "restart the VM", "restart the VM that owns the GPU"),
    "IGNORE": ("info", "none", "no action required"),
    "CONTACT_SUPPORT": ("info", "none", "contact your support organisation with the log"),
    "CHECK_MECHANICALS": (
        "fatal",
        "reseat",
        "check the GPU's seating and every connection to it (auxiliary power)",
    ),
    "UPDATE_SWFW": ("app", "update software", "update firmware and software to the latest"),
    "CHECK_UVM": ("info", "none", "with UVM or vGPU in use reset the GPU, otherwise nothing"),
    "XID_154": ("reset", "as the message says", "do the recovery action the message names"),
    "WORKFLOW_XID_45": (
        "app",
        "none",
        "alone: restart Fabric Manager; with other Xids: follow those",
    ),
    "WORKFLOW_XID_48": (
        "reset",
        "drain and reset",
        "reset the GPU (with Xid 63 or 64: drain it, then reset)",
    ),
    "WORKFLOW_NVLINK_ERR": (
        "fatal",
        "reset",
        "decode the message's registers (catalogue); reset the GPU or reboot the node",
    ),
    "WORKFLOW_NVLINK5_ERR": (
        "reset",
        "as the message says",
        "decode intrInfo/errorStatus with the catalogue's 'XID 144-150 Decode' sheet; a "
        "Fatal line needs a GPU reset",
    ),
}
# The investigatory buckets: what to look at when the Xid recurs.
_INVESTIGATE: dict[str, str] = {
    "CONTACT_SUPPORT": "contact your support organisation",
    "CHECK_APP/CUDA": "the application likely passed bad data to the GPU (the message's pid "
    "names it); report it if the driver is at fault",
    "WORKFLOW_XID_13": "repeats on the same TPC/GPC: run `dcgmi diag -r 3`, then field "
    "diagnostics; otherwise check the application (compute-sanitizer)",
    "WORKFLOW_XID_31": "repeat MMU faults on the same GPU: run `dcgmi diag -r 3`, then field "
    "diagnostics; on different GPUs: check the application",
    "WORKFLOW_XID_48": "alone: run field diagnostics; SRAM: check the SRAM threshold flag",
    "XID_137_FLOW": "an illegal NVLink peer-to-peer access, usually the application: run it "
    "under cuda-gdb or compute-sanitizer",
    "INVESTIGATE_SW": "a software problem (user or NVIDIA): the message's pid names the source",
    "INVESTIGATE_SW_USER": "a software or user action, if not expected",
    "INVESTIGATE_LINK_SI": "check the link's signal integrity (NVLink telemetry)",
    "IGNORE": "nothing more",
    "IGNORE (sympathetic)": "a sympathetic error: resolve the other Xids first",
    "SYMPATHETIC_REPORT_SOLO": "a sympathetic error: resolve the other Xids first; report it "
    "if it comes alone",
    "N/A Informational only regarding another Xid": "informational: see the other Xid",
    "Solo: RESTART_FM Not Solo: IGNORE (follow other Xid)": "alone: restart Fabric Manager",
    "UPDATE_SWFW": "update firmware and software; the guest driver may not match the host",
    "WORKFLOW_NVLINK5_ERR": "decode the message with the catalogue's 'XID 144-150 Decode' sheet",
}
# Xid 162-172: the catalogue gives words or nothing instead of a bucket; bringup's reading.
_NO_BUCKET: dict[int, tuple[str, str, str]] = {
    162: ("info", "none", "informational: power smoothing is engaged again"),
    167: (
        "reset",
        "reset",
        "a fatal PCIe timeout: reset the GPU; check the PCIe link (`nvidia-smi -q -d PCIE`, "
        "AER in the kernel log); contact the vendor if it repeats",
    ),
    169: ("reset", "reset", "an internal micro-controller halt (as Xid 62): reset the GPU"),
    171: ("reset", "drain and reset", "details of an Xid 48 (DRAM): follow Xid 48"),
    172: ("reset", "drain and reset", "details of an Xid 48 (SRAM): follow Xid 48"),
}
# The catalogue's own words (its note) decide these: power smoothing and CC-mode codes.
_NOTE_SEVERITY = {163: "info", 164: "info", 165: "info", 166: "info", 168: "reset", 170: "info"}


def _from_catalogue(entry: CatalogueEntry) -> XidInfo:
    """What the catalogue's buckets say about one code, as bringup judges it."""
    if entry.code in _NO_BUCKET:
        severity, recovery, action = _NO_BUCKET[entry.code]
        return XidInfo(entry.name, severity, action, entry.mnemonic, recovery, "bringup")
    if entry.immediate not in _BUCKETS:
        severity = _NOTE_SEVERITY.get(entry.code, "info")
        recovery = "reset" if severity == "reset" else "none"
        action = entry.note or f"look up Xid {entry.code} in NVIDIA's catalogue ({CATALOGUE_URL})"
        return XidInfo(entry.name, severity, action, entry.mnemonic, recovery)
    severity, recovery, action = _BUCKETS[entry.immediate]
    if entry.investigatory and entry.investigatory != entry.immediate:
        action += f"; if it recurs: {_INVESTIGATE.get(entry.investigatory, entry.investigatory)}"
    return XidInfo(entry.name, severity, action, entry.mnemonic, recovery)


def _merged() -> dict[int, XidInfo]:
    """Every catalogue code, the curated ones with bringup's words and the mnemonic."""
    table = {code: _from_catalogue(entry) for code, entry in catalogue().items()}
    for code, info in _CURATED.items():
        known = table.get(code)
        mnemonic = known.mnemonic if known else ""
        recovery = known.recovery if known else "none"
        # bringup's severity asks for more than the bucket (Xid 63: a pending remap is only
        # applied by a reset): the recovery follows the severity.
        if info.severity in ("reset", "fatal") and recovery not in (
            "reset",
            "drain and reset",
            "reboot",
            "as the message says",
        ):
            recovery = "reset"
        table[code] = replace(info, mnemonic=mnemonic, recovery=recovery, source="bringup")
    return table


XID_CATALOGUE: dict[int, XidInfo] = _merged()

_BLACKWELL_NVLINK = range(144, 151)
_FATAL_WORD = re.compile(r"(?<![Nn]on-)(?<![Nn]on)\b[Ff]atal\b")
_NONFATAL_WORD = re.compile(r"\b[Nn]on-?[Ff]atal\b")
# "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
_RECOVERY = re.compile(r"to 0x[0-9A-Fa-f]+ \((?P<action>[^)]*)\)")
_RECOVERY_ACTIONS = {
    "None": "nothing: the driver recovered on its own",
    "GPU Reset Required": "reset the GPU (`nvidia-smi -r`) before the next job",
    "Node Reboot Required": "reboot the node",
    "Drain P2P": "drain peer-to-peer traffic (stop the jobs), then reset the GPU",
    "Drain and Reset": "drain the GPU (stop the jobs), then reset it",
    "PF FLR": "a PCIe function-level reset: reset the GPU (`nvidia-smi -r`) or reboot",
}


def describe(code: int) -> XidInfo:
    """The catalogue entry of a code, or an 'unknown' entry that says where to look."""
    return XID_CATALOGUE.get(
        code,
        XidInfo(
            f"unknown XID {code}",
            "info",
            f"look up Xid {code} in NVIDIA's XID catalogue ({CATALOGUE_URL})",
        ),
    )


def recovery_action(message: str) -> str | None:
    """The action named by an Xid 154 message ("GPU Reset Required"), or None."""
    match = _RECOVERY.search(message)
    return match.group("action").strip() if match else None


def severity(event: XidEvent) -> str:
    """How bad one Xid event is: the catalogue's word, refined by what the line says."""
    info = describe(event.xid)
    level = info.severity
    if event.xid == 154:
        level = "info" if recovery_action(event.message) == "None" else "reset"
    elif event.xid in _BLACKWELL_NVLINK:
        if _FATAL_WORD.search(event.message):
            level = "fatal"
        elif _NONFATAL_WORD.search(event.message):
            level = "info"
    if event.caused_by is not None:
        # The cause may have left the window; its severity is the one that matters.
        cause = severity(XidEvent(event.caused_by, event.pci, "", None, ""))
        level = max(level, cause, key=_SEVERITY_RANK.__getitem__)
    return level


def action_for(event: XidEvent) -> str:
    """What the operator should do about one event."""
    if event.xid == 154 and (wanted := recovery_action(event.message)):
        todo = _RECOVERY_ACTIONS.get(wanted, f"do what the driver asks ({wanted})")
        return f"driver recovery action {wanted!r}: {todo}"
    action = describe(event.xid).action
    if event.caused_by is not None:
        cause = describe(event.caused_by)
        action = f"caused by Xid {event.caused_by} ({cause.name}): {cause.action}"
    return action


def judge_events(facts: XidFacts, profile: Profile, gpus: GpuFacts | None = None) -> list[Finding]:
    """xid.events: one finding per (Xid code, GPU), or one PASS when there is none.

    With the node's gpu facts, the kernel log's PCI address becomes the GPU's index and
    serial ("GPU 6 (serial 1654922001234)"), the names a provider's RMA form asks for.
    """
    events = [e for e in facts.xids if not e.sxid]
    if not events:
        return [
            finding(
                "xid.events",
                Status.PASS,
                f"no XID {_period(facts)} ({facts.lines_scanned} log lines read)",
                value=0,
                expected="0",
                unit="events",
            )
        ]
    return [_xid_finding(group, facts, gpus) for group in _groups(events)]


def judge_sxid(facts: XidFacts, profile: Profile) -> list[Finding]:
    """xid.sxid: one finding per (SXid code, NVSwitch), or one PASS when there is none."""
    events = [e for e in facts.xids if e.sxid]
    if not events:
        return [
            finding(
                "xid.sxid",
                Status.PASS,
                f"no NVSwitch SXid {_period(facts)}",
                value=0,
                expected="0",
                unit="events",
            )
        ]
    return [_sxid_finding(group, facts) for group in _groups(events)]


def _groups(events: list[XidEvent]) -> list[list[XidEvent]]:
    """Events grouped by (code, PCI address), in order of first appearance."""
    groups: dict[tuple[int, str | None], list[XidEvent]] = {}
    for event in events:
        groups.setdefault((event.xid, event.pci), []).append(event)
    return list(groups.values())


def _xid_finding(group: list[XidEvent], facts: XidFacts, gpus: GpuFacts | None) -> Finding:
    first = group[0]
    info = describe(first.xid)
    # The worst line of the group decides (e.g. one "Fatal" among "Nonfatal" NVLink lines).
    worst = max(group, key=lambda e: _SEVERITY_RANK[severity(e)])
    level = severity(worst)
    cause = f", caused by previous Xid {first.caused_by}" if first.caused_by is not None else ""
    gpu = gpu_name(first.pci, gpus)
    return finding(
        "xid.events",
        SEVERITY_STATUS[level],
        f"{gpu}: Xid {first.xid} ({info.name}{cause}) "
        f"x{len(group)}{_span(group, facts)} {_period(facts)} ({_MEANING[level]}): "
        f"{_cut(worst.message)}",
        value=len(group),
        expected="0",
        unit="events",
        action=f"{gpu}: {action_for(worst)}",
    )


def gpu_name(pci: str | None, gpus: GpuFacts | None) -> str:
    """The GPU of a kernel-log PCI address as a finding names it: index, serial and address.

    "GPU 6 (serial 1654922001234) at PCI 0000:ba:00"; "GPU 0000:ba:00" when the node's gpu
    facts are missing or hold no GPU at that address (one that fell off the bus).
    """
    if pci is None:
        return "GPU (unknown PCI)"
    gpu = gpu_by_pci(gpus.gpus, pci) if gpus is not None else None
    return f"{gpu_label(gpu)} at PCI {pci}" if gpu is not None else f"GPU {pci}"


def _sxid_finding(group: list[XidEvent], facts: XidFacts) -> Finding:
    first = group[0]
    fatal = any(_FATAL_WORD.search(e.message) for e in group)
    # The "Fatal"/"Non-fatal" line describes the error; the "Data {...}" lines do not.
    telling = next((e for e in group if "atal" in e.message), first)
    if fatal:
        action = (
            "reset the GPUs and NVSwitches (reboot the node) and read the Fabric Manager log; "
            "RMA the baseboard if it repeats"
        )
    else:
        action = "non-fatal: watch for repeats; read the Fabric Manager log and NVLink counters"
    return finding(
        "xid.sxid",
        Status.FAIL if fatal else Status.WARN,
        f"NVSwitch {first.pci or '(unknown PCI)'}: SXid {first.xid} "
        f"({'fatal' if fatal else 'non-fatal'}) x{len(group)}{_span(group, facts)} "
        f"{_period(facts)}: "
        f"{_cut(telling.message)}",
        value=len(group),
        expected="0",
        unit="events",
        action=f"NVSwitch {first.pci or '(unknown PCI)'}: {action}",
    )


def _span(group: list[XidEvent], facts: XidFacts) -> str:
    """' first at T1, last at T2' in UTC where the facts allow; '' when the log has no time."""
    stamps = [_when(e, facts) for e in group if e.timestamp]
    if not stamps:
        return ""
    if stamps[0] == stamps[-1]:
        return f" at {stamps[0]}"
    return f" first at {stamps[0]}, last at {stamps[-1]}"


def _when(event: XidEvent, facts: XidFacts) -> str:
    """'2026-11-28 14:03:41 UTC ([86021.442918])', or the stamp as printed when not known."""
    utc = event_utc(event, facts)
    if utc is None:
        return event.timestamp or "?"
    return f"{utc:%Y-%m-%d %H:%M:%S} UTC ({event.timestamp})"


def _period(facts: XidFacts) -> str:
    """The part of the kernel log that was read, in words: 'in the last 7 days'."""
    if facts.window_s is None:
        return "since boot (dmesg)" if facts.source == "dmesg" else "in the log"
    seconds = facts.window_s
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"in the last {count} {unit}{'s' if count != 1 else ''}"
    return f"in the last {seconds:g} s"


def _cut(text: str, limit: int = 120) -> str:
    """A message shortened for the table; the whole line stays in the facts."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


CHECKS: list[Check] = [
    Check(
        name="xid.events",
        probe="xid",
        judge=judge_events,
        description="Xid events in the kernel log, judged by NVIDIA's XID catalogue",
        context="gpu",
        profile_free=True,
    ),
    Check(
        name="xid.sxid",
        probe="xid",
        judge=judge_sxid,
        description="NVSwitch SXid events in the kernel log (fatal ones FAIL)",
        profile_free=True,
    ),
]
