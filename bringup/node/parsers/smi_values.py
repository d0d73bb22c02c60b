"""How nvidia-smi prints a value, in every format: the readers the smi_* parsers share.

`nvidia-smi -q` (smi_text.py), `-q -x` (smi_xml.py) and `--query-gpu --format=csv`
(smi_csv.py) print the same values with the same words: "41 C", "Enabled", "N/A".
Values nvidia-smi prints as "N/A" (or "[N/A]", "[Not Supported]", ...) become None: not
reported is not the same as zero or false. A value that cannot be read raises `ParseError`
with one line naming it.
"""

from __future__ import annotations

import math
import re

from bringup.node.gpu_facts import CLOCK_EVENT_REASONS, RemappedRows, decode_clock_event_reasons
from bringup.node.result import ParseError

MIB = 1048576  # nvidia-smi prints memory in MiB
MHZ = 1_000_000

# What nvidia-smi prints for a value it does not have; the CSV form wraps it in brackets.
_NOT_REPORTED = {
    "",
    "n/a",
    "not supported",
    "requested functionality has been deprecated",
    "unknown error",
    "insufficient permissions",
    "none",
}

_TRUE = {"enabled", "yes", "active", "true"}
_FALSE = {"disabled", "no", "not active", "false"}

_MEASURE = re.compile(r"(-?[0-9]+(?:\.[0-9]+)?)\s*(\S*)")
_PCI_DEVICE_ID = re.compile(r"(?:0x)?([0-9A-Fa-f]{4})([0-9A-Fa-f]{4})")

_BIT_OF_REASON = {name: bit for bit, name in CLOCK_EVENT_REASONS.items()}


def short(value: str) -> str:
    """A value quoted for an error message, cut so that the message stays one line."""
    return repr(value[:40])


def reported(value: str | None) -> str | None:
    """The value with whitespace collapsed, or None when nvidia-smi says it has none."""
    if value is None:
        return None
    text = " ".join(value.split())
    if text.strip("[]").lower() in _NOT_REPORTED:
        return None
    return text


def measure(value: str | None, unit: str, what: str) -> float | None:
    """The number in "41 C", "700.00 W", "16x" or a bare "41"; the unit must match if given."""
    text = reported(value)
    if text is None:
        return None
    match = _MEASURE.fullmatch(text)
    if match is None or match.group(2) not in ("", unit):
        raise ParseError(f"{what}: expected a number in {unit}, got {short(text)}")
    number = float(match.group(1))
    if not math.isfinite(number):  # hundreds of digits: not a reading
        raise ParseError(f"{what}: number out of range: {short(text)}")
    return number


def whole(value: str | None, unit: str, what: str) -> int | None:
    """An integer measure: counters, PCIe generation and width."""
    number = measure(value, unit, what)
    if number is None:
        return None
    if not number.is_integer():
        raise ParseError(f"{what}: expected a whole number, got {short(value or '')}")
    return int(number)


def scaled(value: str | None, unit: str, scale: int, what: str) -> int | None:
    """A measure converted to SI with an integer factor: MiB -> bytes, MHz -> Hz."""
    number = measure(value, unit, what)
    return None if number is None else round(number * scale)


def flag(value: str | None, what: str) -> bool | None:
    """Enabled/Disabled, Yes/No, Active/Not Active as a bool."""
    text = reported(value)
    if text is None:
        return None
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise ParseError(f"{what}: expected Enabled/Disabled or Yes/No, got {short(text)}")


def pci_device_id(value: str | None) -> str | None:
    """The device half of a PCI id: 0x233010DE (device 0x2330, vendor 0x10DE) -> "0x2330"."""
    text = reported(value)
    if text is None:
        return None
    match = _PCI_DEVICE_ID.fullmatch(text)
    if match is None:
        raise ParseError(f"PCI device id: expected 8 hex digits, got {short(text)}")
    return "0x" + match.group(1).lower()


def fabric_state(value: str | None) -> str | None:
    """Fabric state as gpu_facts.Gpu spells it: In Progress -> "in_progress"."""
    text = reported(value)
    return None if text is None else text.lower().replace(" ", "_")


def fabric_status(value: str | None) -> str | None:
    """Success -> "success"; an error is kept as printed, so the operator sees it."""
    text = reported(value)
    if text is None:
        return None
    return "success" if text.lower() == "success" else text


def ordered_reasons(names: list[str]) -> list[str]:
    """Reason names in NVML bit order (as decode_clock_event_reasons gives them), unknown last."""
    mask = sum(_BIT_OF_REASON.get(name, 0) for name in set(names))
    unknown = [name for name in names if name not in _BIT_OF_REASON]
    return decode_clock_event_reasons(mask) + unknown


def summed(values: list[int | None]) -> int | None:
    """The sum of the counters that were reported; None when none was."""
    counts = [v for v in values if v is not None]
    return sum(counts) if counts else None


def first_reported(*values: str | None) -> str | None:
    """The first value that is reported: newer drivers renamed many fields."""
    for value in values:
        if reported(value) is not None:
            return value
    return None


def remapped_rows(
    correctable: str | None, uncorrectable: str | None, pending: str | None, failure: str | None
) -> RemappedRows | None:
    """Row remapping counters, or None unless all four are reported (pre-A100: not at all)."""
    corr = whole(correctable, "", "remapped rows correctable")
    unc = whole(uncorrectable, "", "remapped rows uncorrectable")
    is_pending = flag(pending, "remapped rows pending")
    failed = flag(failure, "remapped rows failure")
    if corr is None or unc is None or is_pending is None or failed is None:
        return None
    return RemappedRows(correctable=corr, uncorrectable=unc, pending=is_pending, failure=failed)
