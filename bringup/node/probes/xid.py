"""The `xid` probe: NVIDIA Xid (GPU) and SXid (NVSwitch) events from the kernel log.

The driver logs every GPU error as one kernel line, `NVRM: Xid (PCI:dddd:bb:dd): N, ...`;
NVSwitches log `nvidia-nvswitchN: SXid (PCI:...): N, ...` (docs/reference.md#xid-catalogue).
This probe reads the kernel log of the last `window_s` seconds and lists those events. It
never judges: what a code means and what to do about it is `bringup.checks.xid`.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from bringup.node.result import ProbeError, ProbeOutput
from bringup.node.tool import CommandResult, run, which


@dataclass
class Params:
    window_s: float = 7 * 86400  # how far back to read the kernel log (journalctl only)
    timeout_s: float = 30


@dataclass
class XidEvent:
    """One Xid or SXid line of the kernel log."""

    xid: int  # the primary code: 45 in "45, ... caused by previous Xid 149"
    pci: str | None  # as printed, e.g. "0000:cb:00" (GPU) or "0000:02:00.0" (NVSwitch)
    message: str  # the text after the code, pid= and name= (may be cut short in a log)
    timestamp: str | None  # as printed: "[240314.528856]", "[Fri Aug 30 11:43:09 2024]", ...
    line: str  # the whole line, for the report
    sxid: bool = False  # True for an NVSwitch SXid
    caused_by: int | None = None  # the earlier Xid this one was "caused by"
    pid: int | None = None
    process: str | None = None


@dataclass
class XidFacts:
    """The Xid/SXid events found in one node's kernel log."""

    source: str  # "journalctl -k", "dmesg" or "file" (a log someone sent)
    window_s: float | None  # the period read; None = all the text (dmesg: since boot)
    xids: list[XidEvent] = field(default_factory=list)
    lines_scanned: int = 0
    # What turns a printed timestamp into wall-clock UTC (see `event_utc`): the node's boot
    # time (/proc/stat btime, seconds since the epoch) for "[86021.442918]" stamps, and its
    # local-time offset from UTC for "[Fri Aug 30 11:43:09 2024]" (dmesg --ctime) stamps;
    # both read on the node when the log was read. None: a log someone sent.
    boot_time_s: float | None = None
    utc_offset_s: int | None = None


FACTS = XidFacts

# "NVRM: Xid (PCI:0000:cb:00): 13, ..." and the old form "NVRM: Xid (0000:01:00): 32, ...".
_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\): (?P<code>[0-9]+)(?![0-9])[,\s]*(?P<rest>.*)$",
    re.ASCII,
)
# "nvidia-nvswitch1: SXid (PCI:0000:02:00.0): 22013, Non-fatal, Link 00 ..."
_SXID = re.compile(
    r"nvidia-nvswitch[0-9]*: SXid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\): (?P<code>[0-9]+)"
    r"(?![0-9])[,\s]*(?P<rest>.*)$",
    re.ASCII,
)
_PID = re.compile(r"^pid=(?:'?<unknown>'?|(?P<pid>[0-9]+)),\s*", re.ASCII)
_NAME = re.compile(r"^name=(?P<name>[^,]*),\s*")
_CAUSED_BY = re.compile(r"caused by previous Xid (?P<code>[0-9]+)", re.ASCII)

# Timestamps in the text before "NVRM:", best first: a wall clock beats seconds since boot.
_ISO_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}[0-9.,]*(?:[+-][0-9:]{4,5}|Z)?")
_SYSLOG_TIME = re.compile(r"^[A-Z][a-z]{2} [ 0-9][0-9] [0-9:]{8}")
_BRACKET_TIME = re.compile(r"\[[^\]]*\]")

# Lines worth keeping as raw output; the rest of the kernel log is noise for this probe.
_RELEVANT = re.compile(r"NVRM|nvidia|Xid", re.IGNORECASE)


def detect(text: str) -> bool:
    """True when the text holds at least one Xid or SXid line."""
    return any(_XID.search(line) or _SXID.search(line) for line in text.splitlines())


def parse_kernel_log(text: str) -> XidFacts:
    """Every Xid/SXid event of a kernel log (dmesg, journalctl, syslog or bare lines).

    Lines without an Xid are counted but ignored; a log without any Xid gives no events.
    """
    lines = text.splitlines()
    events = [event for line in lines if (event := parse_line(line)) is not None]
    return XidFacts(source="file", window_s=None, xids=events, lines_scanned=len(lines))


def parse_line(line: str) -> XidEvent | None:
    """The Xid or SXid event of one kernel-log line, or None when it has none."""
    match = _XID.search(line)
    sxid = match is None
    if sxid:
        match = _SXID.search(line)
        if match is None:
            return None
    rest = (match.group("rest") or "").strip()
    pid, process, message = _split_process(rest)
    caused = _CAUSED_BY.search(message)
    return XidEvent(
        xid=int(match.group("code")),
        pci=match.group("pci"),
        message=message,
        timestamp=_timestamp(line[: match.start()]),
        line=line.strip(),
        sxid=sxid,
        caused_by=int(caused.group("code")) if caused else None,
        pid=pid,
        process=process,
    )


def _split_process(rest: str) -> tuple[int | None, str | None, str]:
    """Take the optional `pid=N, name=X, ` prefix off an Xid message."""
    pid: int | None = None
    process: str | None = None
    if match := _PID.match(rest):
        pid = int(match.group("pid")) if match.group("pid") else None
        rest = rest[match.end() :]
    if match := _NAME.match(rest):
        name = match.group("name").strip()
        process = None if name in ("", "<unknown>") else name
        rest = rest[match.end() :]
    return pid, process, rest


def _timestamp(prefix: str) -> str | None:
    """The time printed before the message: ISO, syslog date, or the dmesg [...] field."""
    for pattern in (_ISO_TIME, _SYSLOG_TIME, _BRACKET_TIME):
        if match := pattern.search(prefix):
            return match.group(0)
    return None


def event_utc(event: XidEvent, facts: XidFacts) -> datetime | None:
    """When an event happened, in UTC, or None when the log and facts do not say.

    "[86021.442918]" is seconds since boot (the printk clock): boot time + seconds. It does
    not advance while the node is suspended (dmesg(1), --ctime), which a GPU node never is.
    ISO stamps (journalctl -o short-iso) carry their offset; "[Fri Aug 30 11:43:09 2024]"
    (dmesg --ctime) and an ISO stamp without offset are the node's local time.
    """
    stamp = (event.timestamp or "").strip()
    inner = stamp.strip("[]").strip()
    if stamp.startswith("[") and _is_seconds(inner):
        seconds = float(inner)
        if facts.boot_time_s is None or not math.isfinite(seconds):
            return None
        return datetime.fromtimestamp(facts.boot_time_s + seconds, tz=timezone.utc)
    when: datetime | None = None
    try:
        if _ISO_TIME.fullmatch(stamp):
            when = datetime.fromisoformat(stamp.replace(",", "."))
        elif stamp.startswith("["):
            when = datetime.strptime(" ".join(inner.split()), "%a %b %d %H:%M:%S %Y")
    except ValueError:
        return None  # an impossible date, or a stamp of another form (syslog: no year)
    if when is None:
        return None
    if when.tzinfo is None:
        if facts.utc_offset_s is None:
            return None
        when = when.replace(tzinfo=timezone(timedelta(seconds=facts.utc_offset_s)))
    return when.astimezone(timezone.utc)


def _is_seconds(text: str) -> bool:
    whole, _, fraction = text.partition(".")
    return whole.isascii() and whole.isdigit() and (not fraction or fraction.isdigit())


def read_boot_time(stat: Path = Path("/proc/stat")) -> float | None:
    """The node's boot time in seconds since the epoch (the "btime" line of /proc/stat)."""
    try:
        text = stat.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "btime" and value.strip().isdigit():
            return float(value.strip())
    return None


def collect(params: Params) -> ProbeOutput:
    """Read the kernel log of the last `window_s` seconds and list its Xid/SXid events."""
    text, source, window_s = read_kernel_log(params)
    facts = parse_kernel_log(text)
    facts.source = source
    facts.window_s = window_s
    facts.boot_time_s = read_boot_time()
    facts.utc_offset_s = time.localtime().tm_gmtoff
    # Only NVIDIA lines travel as raw output: a week of kernel log can be megabytes,
    # and the other lines say nothing about the GPUs.
    kept = "".join(line + "\n" for line in text.splitlines() if _RELEVANT.search(line))
    return ProbeOutput(facts=facts, raw={"kernel-log.txt": kept})


def read_kernel_log(params: Params) -> tuple[str, str, float | None]:
    """The kernel log text, the command it came from, and the period it covers.

    journalctl can limit the period; containers often lack a journal, so fall back to
    dmesg, which holds the ring buffer since boot (busybox dmesg lacks --ctime).
    """
    failures: list[str] = []
    since = (datetime.now() - timedelta(seconds=params.window_s)).strftime("%Y-%m-%d %H:%M:%S")
    attempts = [
        (["journalctl", "-k", "--no-pager", "-o", "short-iso", "--since", since], params.window_s),
        (["dmesg", "--ctime"], None),
        (["dmesg"], None),
    ]
    for argv, window_s in attempts:
        if which(argv[0]) is None:
            failures.append(f"{argv[0]}: not installed")
            continue
        result = run(argv, params.timeout_s)
        problem = _problem(result)
        if problem is None:
            source = "journalctl -k" if argv[0] == "journalctl" else "dmesg"
            return result.stdout, source, window_s
        failures.append(f"{' '.join(argv[:2])}: {problem}")
    raise ProbeError("cannot read the kernel log (run as root?): " + "; ".join(failures))


def _problem(result: CommandResult) -> str | None:
    """Why a kernel-log command gave no usable log, or None when it did."""
    stderr = " ".join(result.stderr.split())
    if result.timed_out:
        return "timed out"
    if result.returncode != 0:
        return stderr or f"exit status {result.returncode}"
    # journalctl in a container: exit 0, nothing read ("No journal files were found.").
    if "No journal files" in stderr:
        return stderr
    return None
