"""Checks of the `xid` probe: what each Xid/SXid in the kernel log means, and what to do.

Status by severity (see `XidInfo`): "fatal" (RMA, reseat, power-cycle) and "reset" (the GPU
must be reset before it is trusted again) FAIL; "app" (usually the user's program, not the
hardware) and "info" (worth a look, not a fault by itself) WARN. No Xid at all PASSes.
Any Xid in an acceptance window deserves a look, which is why even "info" is not a PASS.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bringup.checks import Check, finding
from bringup.findings import Finding, Status
from bringup.node.gpu_facts import GpuFacts, gpu_by_pci, gpu_label
from bringup.node.probes.xid import XidEvent, XidFacts, event_utc
from bringup.profile import Profile

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

CATALOGUE_URL = "https://docs.nvidia.com/deploy/xid-errors/"


@dataclass(frozen=True)
class XidInfo:
    """What an Xid code means (NVIDIA's name for it), how bad it is, and what to do."""

    name: str
    severity: str  # "fatal" | "reset" | "app" | "info"
    action: str


_APP_ACTION = (
    "usually the user's program, not the hardware: check the job (compute-sanitizer); "
    "run `dcgmi diag -r 3` if it repeats with different programs"
)
_NVLINK_ACTION = (
    "check the NVLink (`nvidia-smi nvlink -e`, Fabric Manager log); reset the GPU, "
    "reseat the GPU/baseboard if it repeats, RMA if it persists"
)

# NVIDIA's Xid catalogue (r590, docs.nvidia.com/deploy/xid-errors/, "Resolution Bucket"),
# summarised in docs/reference.md#xid-catalogue; names follow the catalogue's descriptions.
XID_CATALOGUE: dict[int, XidInfo] = {
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
