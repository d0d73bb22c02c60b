"""Parsers of nvidia-smi output into the gpu probe's facts.

`nvidia-smi -q` (text), `nvidia-smi -q -x` (XML), `nvidia-smi --query-gpu=... --format=csv`
all become the same `GpuFacts` (see gpu.py), so a log someone sent is judged exactly like a
live node. `nvidia-smi nvlink -s` becomes an `NvlinkStatus`. `detect` tells which of these
a text is, for `bringup inspect`.

Every parser is a pure function of the text. On output it cannot read it raises
`ParseError` with one line naming what was wrong, and never any other exception.
Values nvidia-smi prints as "N/A" (or "[N/A]", "[Not Supported]", ...) become None:
not reported is not the same as zero or false.
"""

from __future__ import annotations

import csv
import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from bringup.node.probes.gpu import (
    CLOCK_EVENT_REASONS,
    Gpu,
    GpuFacts,
    NvLink,
    RemappedRows,
    decode_clock_event_reasons,
)
from bringup.node.result import ParseError

MIB = 1048576  # nvidia-smi prints memory in MiB
MHZ = 1_000_000

# ---------------------------------------------------------------------------------------------
# Values shared by all formats
# ---------------------------------------------------------------------------------------------

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


def _short(value: str) -> str:
    """A value quoted for an error message, cut so that the message stays one line."""
    return repr(value[:40])


def _reported(value: str | None) -> str | None:
    """The value with whitespace collapsed, or None when nvidia-smi says it has none."""
    if value is None:
        return None
    text = " ".join(value.split())
    if text.strip("[]").lower() in _NOT_REPORTED:
        return None
    return text


def _measure(value: str | None, unit: str, what: str) -> float | None:
    """The number in "41 C", "700.00 W", "16x" or a bare "41"; the unit must match if given."""
    text = _reported(value)
    if text is None:
        return None
    match = _MEASURE.fullmatch(text)
    if match is None or match.group(2) not in ("", unit):
        raise ParseError(f"{what}: expected a number in {unit}, got {_short(text)}")
    number = float(match.group(1))
    if not math.isfinite(number):  # hundreds of digits: not a reading
        raise ParseError(f"{what}: number out of range: {_short(text)}")
    return number


def _whole(value: str | None, unit: str, what: str) -> int | None:
    """An integer measure: counters, PCIe generation and width."""
    number = _measure(value, unit, what)
    if number is None:
        return None
    if not number.is_integer():
        raise ParseError(f"{what}: expected a whole number, got {_short(value or '')}")
    return int(number)


def _scaled(value: str | None, unit: str, scale: int, what: str) -> int | None:
    """A measure converted to SI with an integer factor: MiB -> bytes, MHz -> Hz."""
    number = _measure(value, unit, what)
    return None if number is None else round(number * scale)


def _flag(value: str | None, what: str) -> bool | None:
    """Enabled/Disabled, Yes/No, Active/Not Active as a bool."""
    text = _reported(value)
    if text is None:
        return None
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise ParseError(f"{what}: expected Enabled/Disabled or Yes/No, got {_short(text)}")


def _pci_device_id(value: str | None) -> str | None:
    """The device half of a PCI id: 0x233010DE (device 0x2330, vendor 0x10DE) -> "0x2330"."""
    text = _reported(value)
    if text is None:
        return None
    match = _PCI_DEVICE_ID.fullmatch(text)
    if match is None:
        raise ParseError(f"PCI device id: expected 8 hex digits, got {_short(text)}")
    return "0x" + match.group(1).lower()


def _fabric_state(value: str | None) -> str | None:
    """Fabric state as gpu.Gpu spells it: In Progress -> "in_progress"."""
    text = _reported(value)
    return None if text is None else text.lower().replace(" ", "_")


def _fabric_status(value: str | None) -> str | None:
    """Success -> "success"; an error is kept as printed, so the operator sees it."""
    text = _reported(value)
    if text is None:
        return None
    return "success" if text.lower() == "success" else text


def _slug(label: str) -> str:
    """A label as a name: Some New Reason -> "some_new_reason"."""
    return "_".join(re.findall(r"[a-z0-9]+", label.lower()))


def _ordered_reasons(names: list[str]) -> list[str]:
    """Reason names in NVML bit order (as decode_clock_event_reasons gives them), unknown last."""
    mask = sum(_BIT_OF_REASON.get(name, 0) for name in set(names))
    unknown = [name for name in names if name not in _BIT_OF_REASON]
    return decode_clock_event_reasons(mask) + unknown


def _summed(values: list[int | None]) -> int | None:
    """The sum of the counters that were reported; None when none was."""
    reported = [v for v in values if v is not None]
    return sum(reported) if reported else None


def _first(*values: str | None) -> str | None:
    """The first value that is reported: newer drivers renamed many fields."""
    for value in values:
        if _reported(value) is not None:
            return value
    return None


def _remapped_rows(
    correctable: str | None, uncorrectable: str | None, pending: str | None, failure: str | None
) -> RemappedRows | None:
    """Row remapping counters, or None unless all four are reported (pre-A100: not at all)."""
    corr = _whole(correctable, "", "remapped rows correctable")
    unc = _whole(uncorrectable, "", "remapped rows uncorrectable")
    is_pending = _flag(pending, "remapped rows pending")
    failed = _flag(failure, "remapped rows failure")
    if corr is None or unc is None or is_pending is None or failed is None:
        return None
    return RemappedRows(correctable=corr, uncorrectable=unc, pending=is_pending, failure=failed)


# ---------------------------------------------------------------------------------------------
# nvidia-smi -q (text)
# ---------------------------------------------------------------------------------------------

# The clocks event reasons as `nvidia-smi -q` labels them (older drivers: "Clocks Throttle
# Reasons", same labels), mapped to the names of gpu.CLOCK_EVENT_REASONS.
_TEXT_REASONS = {
    "Idle": "gpu_idle",
    "Applications Clocks Setting": "applications_clocks_setting",
    "SW Power Cap": "sw_power_cap",
    "HW Slowdown": "hw_slowdown",
    "HW Thermal Slowdown": "hw_thermal_slowdown",
    "HW Power Brake Slowdown": "hw_power_brake_slowdown",
    "Sync Boost": "sync_boost",
    "SW Thermal Slowdown": "sw_thermal_slowdown",
    "Display Clock Setting": "display_clock_setting",
}

# "Key     : value": the key is separated from the colon by spaces, which tells it from a
# header such as "GPU 00000000:00:09.0" whose colons have none.
_KEY_VALUE = re.compile(r"(\S.*?)\s+:(?:\s(.*))?")
_GPU_HEADER = re.compile(r"GPU ([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f]+)")
# Sections that only appear inside a GPU: an excerpt that starts inside one (no "GPU ..."
# header) is read as one GPU when it has any of them.
_GPU_SECTIONS = {
    "Product Name",
    "GPU UUID",
    "PCI",
    "ECC Errors",
    "Remapped Rows",
    "Temperature",
    "FB Memory Usage",
    "Clocks",
    "Clocks Event Reasons",
    "Clocks Throttle Reasons",
    "GPU Power Readings",
    "Power Readings",
}


@dataclass
class _Node:
    """One line of `nvidia-smi -q`: its value, and the lines indented under it by key."""

    value: str | None = None
    children: dict[str, _Node] = field(default_factory=dict)

    def get(self, *path: str) -> str | None:
        """The value at a path of keys, None when any key is absent."""
        node = self.node(*path)
        return None if node is None else node.value

    def node(self, *path: str) -> _Node | None:
        node: _Node | None = self
        for key in path:
            if node is None:
                return None
            node = node.children.get(key)
        return node


def _outline(text: str) -> _Node:
    """The -q text as a tree built from indentation, whatever its width (4 or 8 spaces)."""
    root = _Node()
    stack: list[tuple[int, _Node]] = [(-1, root)]
    for raw in text.expandtabs(8).splitlines():
        stripped = raw.strip()
        # Blank lines, the banner, and the "[...]" elisions of excerpts carry nothing.
        if not stripped or stripped == "[...]" or stripped.startswith("==="):
            continue
        indent = len(raw) - len(raw.lstrip())
        match = _KEY_VALUE.fullmatch(stripped)
        key, value = (match.group(1), match.group(2) or "") if match else (stripped, None)
        while stack[-1][0] >= indent:
            stack.pop()
        node = _Node(None if value is None else value.strip())
        # A repeated key (the entries under "Processes") keeps its first occurrence.
        stack[-1][1].children.setdefault(key, node)
        stack.append((indent, node))
    return root


def parse_q_text(text: str) -> GpuFacts:
    """Facts from `nvidia-smi -q`: one Gpu per "GPU <bus id>" section."""
    root = _outline(text)
    sections = [
        (match.group(1), node)
        for key, node in root.children.items()
        if (match := _GPU_HEADER.fullmatch(key))
    ]
    if not sections and _GPU_SECTIONS & root.children.keys():
        sections = [(None, root)]  # an excerpt from inside one GPU's section
    if not sections:
        raise ParseError("nvidia-smi -q: no GPU section found")
    return GpuFacts(
        source="nvidia-smi -q",
        driver_version=_reported(root.get("Driver Version")),
        cuda_driver_version=_reported(root.get("CUDA Version")),
        attached_gpus=_whole(root.get("Attached GPUs"), "", "Attached GPUs"),
        gpus=[_gpu_from_text(i, bus_id, node) for i, (bus_id, node) in enumerate(sections)],
    )


def _gpu_from_text(index: int, bus_id: str | None, gpu: _Node) -> Gpu:
    """One GPU section; sections and keys missing from an excerpt give None."""
    link = ("PCI", "GPU Link Info")
    power = gpu.node("GPU Power Readings") or gpu.node("Power Readings") or _Node()
    temp = gpu.node("Temperature") or _Node()
    volatile = gpu.node("ECC Errors", "Volatile")
    aggregate = gpu.node("ECC Errors", "Aggregate")
    return Gpu(
        index=index,
        # An excerpt may lack the name; "" says "not reported" without a made-up name.
        name=_reported(gpu.get("Product Name")) or "",
        uuid=_reported(gpu.get("GPU UUID")),
        serial=_reported(gpu.get("Serial Number")),
        pci_bus_id=_reported(gpu.get("PCI", "Bus Id")) or bus_id,
        pci_device_id=_pci_device_id(gpu.get("PCI", "Device Id")),
        vbios_version=_reported(gpu.get("VBIOS Version")),
        memory_total_bytes=_scaled(gpu.get("FB Memory Usage", "Total"), "MiB", MIB, "FB total"),
        persistence_mode=_flag(gpu.get("Persistence Mode"), "Persistence Mode"),
        mig_mode=_flag(gpu.get("MIG Mode", "Current"), "MIG Mode"),
        ecc_mode=_flag(gpu.get("ECC Mode", "Current"), "ECC Mode"),
        ecc_uncorrected_volatile=_text_ecc(volatile, "Uncorrectable"),
        ecc_uncorrected_aggregate=_text_ecc(aggregate, "Uncorrectable"),
        ecc_corrected_volatile=_text_ecc(volatile, "Correctable"),
        remapped_rows=_remapped_rows(
            gpu.get("Remapped Rows", "Correctable Error"),
            gpu.get("Remapped Rows", "Uncorrectable Error"),
            gpu.get("Remapped Rows", "Pending"),
            gpu.get("Remapped Rows", "Remapping Failure Occurred"),
        ),
        # "Device ..." is the GPU's own side of the link (newer drivers); "Max" alone may be
        # capped by the host, which is not what gpu.Gpu.pcie_gen_max means.
        pcie_gen_current=_whole(
            _first(
                gpu.get(*link, "PCIe Generation", "Device Current"),
                gpu.get(*link, "PCIe Generation", "Current"),
            ),
            "",
            "PCIe generation",
        ),
        pcie_gen_max=_whole(
            _first(
                gpu.get(*link, "PCIe Generation", "Device Max"),
                gpu.get(*link, "PCIe Generation", "Max"),
            ),
            "",
            "PCIe max generation",
        ),
        pcie_width_current=_whole(gpu.get(*link, "Link Width", "Current"), "x", "link width"),
        pcie_width_max=_whole(gpu.get(*link, "Link Width", "Max"), "x", "max link width"),
        # Newer drivers print an average and an instantaneous draw; the average is what
        # `--query-gpu=power.draw` reports, so all formats agree.
        power_draw_w=_measure(
            _first(
                power.get("Power Draw"),
                power.get("Average Power Draw"),
                power.get("Instantaneous Power Draw"),
            ),
            "W",
            "power draw",
        ),
        power_limit_w=_measure(
            _first(
                power.get("Current Power Limit"),
                power.get("Enforced Power Limit"),
                power.get("Power Limit"),
            ),
            "W",
            "power limit",
        ),
        power_default_limit_w=_measure(power.get("Default Power Limit"), "W", "default limit"),
        # Newer drivers (550+) print thresholds only relative to T.Limit: those go to the
        # tlimit fields, and the absolute ones stay None.
        temperature_c=_measure(temp.get("GPU Current Temp"), "C", "GPU temperature"),
        memory_temperature_c=_measure(temp.get("Memory Current Temp"), "C", "memory temp"),
        slowdown_temperature_c=_measure(temp.get("GPU Slowdown Temp"), "C", "slowdown temp"),
        shutdown_temperature_c=_measure(temp.get("GPU Shutdown Temp"), "C", "shutdown temp"),
        memory_max_temperature_c=_measure(
            temp.get("Memory Max Operating Temp"), "C", "memory max temp"
        ),
        gpu_max_operating_temperature_c=_measure(
            temp.get("GPU Max Operating Temp"), "C", "GPU max operating temp"
        ),
        tlimit_margin_c=_measure(temp.get("GPU T.Limit Temp"), "C", "T.Limit"),
        slowdown_tlimit_c=_measure(temp.get("GPU Slowdown T.Limit Temp"), "C", "slowdown T.Limit"),
        sm_clock_hz=_scaled(gpu.get("Clocks", "SM"), "MHz", MHZ, "SM clock"),
        sm_clock_max_hz=_scaled(gpu.get("Max Clocks", "SM"), "MHz", MHZ, "max SM clock"),
        memory_clock_hz=_scaled(gpu.get("Clocks", "Memory"), "MHz", MHZ, "memory clock"),
        memory_clock_max_hz=_scaled(
            gpu.get("Max Clocks", "Memory"), "MHz", MHZ, "max memory clock"
        ),
        clock_event_reasons=_text_reasons(
            gpu.node("Clocks Event Reasons") or gpu.node("Clocks Throttle Reasons")
        ),
        fabric_state=_fabric_state(gpu.get("Fabric", "State")),
        fabric_status=_fabric_status(gpu.get("Fabric", "Status")),
    )


def _text_ecc(counts: _Node | None, kind: str) -> int | None:
    """SRAM + DRAM errors of one kind in a Volatile or Aggregate block.

    Newer drivers split "SRAM Uncorrectable" into "... Parity" and "... SEC-DED"; summing
    every key that starts with the name counts both layouts the same.
    """
    if counts is None:
        return None
    prefixes = (f"SRAM {kind}", f"DRAM {kind}")
    return _summed(
        [
            _whole(node.value, "", f"ECC {key}")
            for key, node in counts.children.items()
            if key.startswith(prefixes)
        ]
    )


def _text_reasons(section: _Node | None) -> list[str] | None:
    """Names of the active clocks event reasons; None when the section is absent."""
    if section is None or not section.children:
        return None
    active: list[str] = []
    _collect_active(section, active)
    return _ordered_reasons(active)


def _collect_active(section: _Node, active: list[str]) -> None:
    # Newer drivers nest "HW Thermal Slowdown" under "HW Slowdown", so walk the whole tree.
    for label, node in section.children.items():
        if _flag(node.value, f"clocks event reason {label}"):
            active.append(_TEXT_REASONS.get(label) or _slug(label))
        _collect_active(node, active)


# ---------------------------------------------------------------------------------------------
# nvidia-smi -q -x (XML)
# ---------------------------------------------------------------------------------------------

# XML names that differ from gpu.CLOCK_EVENT_REASONS ("clocks" plural in the DTD).
_XML_REASON_ALIASES = {"display_clocks_setting": "display_clock_setting"}


def parse_q_xml(text: str) -> GpuFacts:
    """Facts from `nvidia-smi -q -x`: one Gpu per <gpu> element."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ParseError(f"nvidia-smi -q -x: malformed XML: {exc}") from None
    except ValueError as exc:  # e.g. text that cannot be encoded (lone surrogates)
        raise ParseError(f"nvidia-smi -q -x: unreadable XML: {exc}") from None
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"nvidia-smi -q -x: root element is <{root.tag}>, not <nvidia_smi_log>")
    gpus = root.findall("gpu")
    if not gpus:
        raise ParseError("nvidia-smi -q -x: no <gpu> element")
    return GpuFacts(
        source="nvidia-smi -q -x",
        driver_version=_xml(root, "driver_version"),
        cuda_driver_version=_xml(root, "cuda_version"),
        attached_gpus=_whole(_xml(root, "attached_gpus"), "", "attached_gpus"),
        gpus=[_gpu_from_xml(index, gpu) for index, gpu in enumerate(gpus)],
    )


def _xml(element: ET.Element | None, *paths: str) -> str | None:
    """The reported text of the first of paths present under element, else None."""
    if element is None:
        return None
    for path in paths:
        found = element.find(path)
        if found is not None and (text := _reported(found.text)) is not None:
            return text
    return None


def _gpu_from_xml(index: int, gpu: ET.Element) -> Gpu:
    """One <gpu> element; elements a driver version lacks give None."""
    gen = gpu.find("pci/pci_gpu_link_info/pcie_gen")
    width = gpu.find("pci/pci_gpu_link_info/link_widths")
    # 530+ drivers call it gpu_power_readings, older ones power_readings.
    power = gpu.find("gpu_power_readings")
    if power is None:
        power = gpu.find("power_readings")
    temp = gpu.find("temperature")
    ecc = gpu.find("ecc_errors")
    rows = gpu.find("remapped_rows")
    return Gpu(
        index=index,
        name=_xml(gpu, "product_name") or "",
        uuid=_xml(gpu, "uuid"),
        serial=_xml(gpu, "serial"),
        pci_bus_id=_xml(gpu, "pci/pci_bus_id") or _reported(gpu.get("id")),
        pci_device_id=_pci_device_id(_xml(gpu, "pci/pci_device_id")),
        vbios_version=_xml(gpu, "vbios_version"),
        memory_total_bytes=_scaled(_xml(gpu, "fb_memory_usage/total"), "MiB", MIB, "FB total"),
        persistence_mode=_flag(_xml(gpu, "persistence_mode"), "persistence_mode"),
        mig_mode=_flag(_xml(gpu, "mig_mode/current_mig"), "current_mig"),
        ecc_mode=_flag(_xml(gpu, "ecc_mode/current_ecc"), "current_ecc"),
        ecc_uncorrected_volatile=_xml_ecc(ecc, "volatile", "uncorrectable"),
        ecc_uncorrected_aggregate=_xml_ecc(ecc, "aggregate", "uncorrectable"),
        ecc_corrected_volatile=_xml_ecc(ecc, "volatile", "correctable"),
        remapped_rows=_remapped_rows(
            _xml(rows, "remapped_row_corr"),
            _xml(rows, "remapped_row_unc"),
            _xml(rows, "remapped_row_pending"),
            _xml(rows, "remapped_row_failure"),
        ),
        pcie_gen_current=_whole(
            _xml(gen, "device_current_link_gen", "current_link_gen"), "", "current_link_gen"
        ),
        pcie_gen_max=_whole(_xml(gen, "max_device_link_gen", "max_link_gen"), "", "max_link_gen"),
        pcie_width_current=_whole(_xml(width, "current_link_width"), "x", "current_link_width"),
        pcie_width_max=_whole(_xml(width, "max_link_width"), "x", "max_link_width"),
        power_draw_w=_measure(
            _xml(power, "power_draw", "average_power_draw", "instant_power_draw"), "W", "power"
        ),
        power_limit_w=_measure(
            _xml(power, "current_power_limit", "enforced_power_limit", "power_limit"),
            "W",
            "power limit",
        ),
        power_default_limit_w=_measure(_xml(power, "default_power_limit"), "W", "default limit"),
        temperature_c=_measure(_xml(temp, "gpu_temp"), "C", "gpu_temp"),
        memory_temperature_c=_measure(_xml(temp, "memory_temp"), "C", "memory_temp"),
        slowdown_temperature_c=_measure(_xml(temp, "gpu_temp_slow_threshold"), "C", "slowdown"),
        shutdown_temperature_c=_measure(_xml(temp, "gpu_temp_max_threshold"), "C", "shutdown"),
        memory_max_temperature_c=_measure(
            _xml(temp, "gpu_temp_max_mem_threshold"), "C", "memory max temp"
        ),
        gpu_max_operating_temperature_c=_measure(
            _xml(temp, "gpu_temp_max_gpu_threshold"), "C", "GPU max operating temp"
        ),
        sm_clock_hz=_scaled(_xml(gpu, "clocks/sm_clock"), "MHz", MHZ, "sm_clock"),
        sm_clock_max_hz=_scaled(_xml(gpu, "max_clocks/sm_clock"), "MHz", MHZ, "max sm_clock"),
        memory_clock_hz=_scaled(_xml(gpu, "clocks/mem_clock"), "MHz", MHZ, "mem_clock"),
        memory_clock_max_hz=_scaled(_xml(gpu, "max_clocks/mem_clock"), "MHz", MHZ, "max mem_clock"),
        clock_event_reasons=_xml_reasons(gpu),
        fabric_state=_fabric_state(_xml(gpu, "fabric/state")),
        fabric_status=_fabric_status(_xml(gpu, "fabric/status")),
    )


def _xml_ecc(ecc: ET.Element | None, scope: str, kind: str) -> int | None:
    """SRAM + DRAM errors of one kind; sram_uncorrectable_parity/_secded (newer) included."""
    counts = None if ecc is None else ecc.find(scope)
    if counts is None:
        return None
    prefixes = (f"sram_{kind}", f"dram_{kind}")
    return _summed(
        [
            _whole(child.text, "", f"ECC {child.tag}")
            for child in counts
            if child.tag.startswith(prefixes)
        ]
    )


def _xml_reasons(gpu: ET.Element) -> list[str] | None:
    """Active reasons from <clocks_event_reasons> (or the older <clocks_throttle_reasons>)."""
    for section, prefix in (
        ("clocks_event_reasons", "clocks_event_reason_"),
        ("clocks_throttle_reasons", "clocks_throttle_reason_"),
    ):
        element = gpu.find(section)
        if element is None or len(element) == 0:
            continue
        active = []
        for child in element:
            if _flag(child.text, child.tag):
                name = child.tag.removeprefix(prefix)
                active.append(_XML_REASON_ALIASES.get(name, name))
        return _ordered_reasons(active)
    return None


# ---------------------------------------------------------------------------------------------
# nvidia-smi --query-gpu=... --format=csv
# ---------------------------------------------------------------------------------------------

# A header cell: a query name, with its unit when `nounits` was not given: "power.draw [W]".
_HEADER_CELL = re.compile(r"([A-Za-z_][A-Za-z0-9_.]*)(?: \[([^\]]+)\])?")
_CSV_SOURCE = "nvidia-smi --query-gpu"
# Query names whose presence makes a line a header (a noheader data row never has them).
_KNOWN_COLUMNS = {"index", "name", "uuid", "serial", "pstate", "count", "timestamp"}


class _Row:
    """One CSV data row, read by query name; units come from the header."""

    def __init__(self, names: list[str], units: list[str], cells: list[str]) -> None:
        self._cells = {n: (c, u) for n, u, c in zip(names, units, cells, strict=True)}

    def text(self, *names: str) -> str | None:
        """The first reported value among the names (aliases of one query field)."""
        return _first(*(self.cell(n)[0] for n in names))

    def cell(self, *names: str) -> tuple[str | None, str]:
        """(value, unit of its column) of the first reported alias; (None, "") if none is."""
        for name in names:
            value, unit = self._cells.get(name, (None, ""))
            if _reported(value) is not None:
                return value, unit
        return None, ""


def parse_query_csv(text: str) -> GpuFacts:
    """Facts from `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`.

    The header names the columns, so a CSV without one cannot be read. Lines that are not
    rows of the header's width (a pasted prompt, "[...]" elisions) are skipped.
    """
    lines = [line for line in text.splitlines() if line.strip() and not _is_prompt(line)]
    if not lines:
        raise ParseError("nvidia-smi --query-gpu: empty output")
    header = _header_cells(_csv_cells(lines[0]))
    if header is None:
        raise ParseError(
            "nvidia-smi --query-gpu: no header row (rerun without `noheader` in --format)"
        )
    names = [name for name, _ in header]
    units = [unit for _, unit in header]
    rows = [
        _Row(names, units, cells)
        for line in lines[1:]
        if len(cells := _csv_cells(line)) == len(header)
    ]
    if not rows:
        raise ParseError("nvidia-smi --query-gpu: no data row under the header")
    first = rows[0]
    return GpuFacts(
        source=_CSV_SOURCE,
        driver_version=_reported(first.text("driver_version")),
        attached_gpus=_csv_int(first, "count"),
        gpus=[_gpu_from_csv(position, row) for position, row in enumerate(rows)],
    )


def _is_prompt(line: str) -> bool:
    """A shell prompt or command line pasted above the output ("$ nvidia-smi ...")."""
    stripped = line.lstrip()
    return stripped.startswith(("$", "#")) or "nvidia-smi " in stripped


def _csv_cells(line: str) -> list[str]:
    try:
        row = next(csv.reader([line], skipinitialspace=True), [])
    except csv.Error as exc:
        raise ParseError(f"nvidia-smi --query-gpu: unreadable CSV line: {exc}") from None
    return [cell.strip() for cell in row]


def _header_cells(cells: list[str]) -> list[tuple[str, str]] | None:
    """(name, unit) per column when the cells are a header row, else None."""
    matches = [_HEADER_CELL.fullmatch(cell) for cell in cells]
    if not cells or any(m is None for m in matches):
        return None
    header = [(m.group(1), m.group(2) or "") for m in matches if m is not None]
    # A noheader row of plain words ("Enabled") also matches the pattern; a real header
    # has dotted/underscored query names, units, or one of the short known names.
    if not any(n in _KNOWN_COLUMNS or "." in n or "_" in n or u for n, u in header):
        return None
    return header


def _gpu_from_csv(position: int, row: _Row) -> Gpu:
    """One CSV row; columns the query did not ask for give None."""
    # Without an `index` column the row position stands in (wrong after a "[...]" elision).
    index = _csv_int(row, "index")
    return Gpu(
        index=position if index is None else index,
        name=_reported(row.text("name", "gpu_name")) or "",
        uuid=_reported(row.text("uuid", "gpu_uuid")),
        serial=_reported(row.text("serial", "gpu_serial")),
        pci_bus_id=_reported(row.text("pci.bus_id", "gpu_bus_id")),
        pci_device_id=_pci_device_id(row.text("pci.device_id")),
        vbios_version=_reported(row.text("vbios_version")),
        compute_capability=_reported(row.text("compute_cap")),
        memory_total_bytes=_csv_scaled(row, MIB, "memory.total"),
        persistence_mode=_flag(row.text("persistence_mode"), "persistence_mode"),
        mig_mode=_flag(row.text("mig.mode.current"), "mig.mode.current"),
        ecc_mode=_flag(row.text("ecc.mode.current"), "ecc.mode.current"),
        ecc_uncorrected_volatile=_csv_int(row, "ecc.errors.uncorrected.volatile.total"),
        ecc_uncorrected_aggregate=_csv_int(row, "ecc.errors.uncorrected.aggregate.total"),
        ecc_corrected_volatile=_csv_int(row, "ecc.errors.corrected.volatile.total"),
        remapped_rows=_remapped_rows(
            row.text("remapped_rows.correctable"),
            row.text("remapped_rows.uncorrectable"),
            row.text("remapped_rows.pending"),
            row.text("remapped_rows.failure"),
        ),
        # gpucurrent/gpumax are the GPU's side; the plain names are deprecated aliases
        # (current) or capped by the host (max).
        pcie_gen_current=_csv_int(row, "pcie.link.gen.gpucurrent", "pcie.link.gen.current"),
        pcie_gen_max=_csv_int(row, "pcie.link.gen.gpumax", "pcie.link.gen.max"),
        pcie_width_current=_csv_int(row, "pcie.link.width.current"),
        pcie_width_max=_csv_int(row, "pcie.link.width.max"),
        power_draw_w=_csv_float(row, "power.draw", "power.draw.average", "power.draw.instant"),
        power_limit_w=_csv_float(row, "enforced.power.limit", "power.limit"),
        power_default_limit_w=_csv_float(row, "power.default_limit"),
        temperature_c=_csv_float(row, "temperature.gpu"),
        memory_temperature_c=_csv_float(row, "temperature.memory"),
        tlimit_margin_c=_csv_float(row, "temperature.gpu.tlimit"),
        sm_clock_hz=_csv_scaled(row, MHZ, "clocks.current.sm", "clocks.sm"),
        sm_clock_max_hz=_csv_scaled(row, MHZ, "clocks.max.sm"),
        memory_clock_hz=_csv_scaled(row, MHZ, "clocks.current.memory", "clocks.mem"),
        memory_clock_max_hz=_csv_scaled(row, MHZ, "clocks.max.memory", "clocks.max.mem"),
        clock_event_reasons=_csv_reasons(row),
        fabric_state=_fabric_state(row.text("fabric.state")),
        fabric_status=_fabric_status(row.text("fabric.status")),
    )


# The value may carry its unit ("631.95 W") or not (`nounits`); the header says which unit.


def _csv_float(row: _Row, *names: str) -> float | None:
    return _measure(*row.cell(*names), names[0])


def _csv_int(row: _Row, *names: str) -> int | None:
    return _whole(*row.cell(*names), names[0])


def _csv_scaled(row: _Row, scale: int, *names: str) -> int | None:
    value, unit = row.cell(*names)
    return _scaled(value, unit, scale, names[0])


def _csv_reasons(row: _Row) -> list[str] | None:
    """The active mask when queried, else the per-reason Active/Not Active columns."""
    for family in ("clocks_event_reasons", "clocks_throttle_reasons"):
        mask = _reported(row.text(f"{family}.active"))
        if mask is not None:
            try:
                return decode_clock_event_reasons(int(mask, 16))
            except ValueError:
                raise ParseError(
                    f"{family}.active: expected a hex mask, got {_short(mask)}"
                ) from None
        flags = {
            name: _flag(row.text(f"{family}.{name}"), f"{family}.{name}")
            for name in CLOCK_EVENT_REASONS.values()
        }
        if any(flag is not None for flag in flags.values()):
            return [name for name, flag in flags.items() if flag]
    return None


# ---------------------------------------------------------------------------------------------
# nvidia-smi nvlink -s
# ---------------------------------------------------------------------------------------------

# Per-link speed per direction, GB/s, as `nvidia-smi nvlink -s` prints it, by NVLink version
# (docs/reference.md#nvlink: A100 12 links x 25 GB/s; H100/H200 NVLink 4 18 x 26.562 GB/s;
# B200/B300 NVLink 5 18 x 53.125 GB/s).
NVLINK_SPEED_GB_S: dict[int, float] = {3: 25.0, 4: 26.562, 5: 53.125}

_NVLINK_GPU = re.compile(r"GPU ([0-9]{1,9}): (.*?) \(UUID: ([^)]*)\)")
_NVLINK_LINK = re.compile(r"Link ([0-9]{1,9}): (.*)")
_GB_S = re.compile(r"([0-9]+(?:\.[0-9]+)?) GB/s")


@dataclass
class NvlinkGpu:
    """One GPU of `nvidia-smi nvlink -s` and the links it listed."""

    index: int
    name: str
    uuid: str | None
    links: list[NvLink] = field(default_factory=list)


@dataclass
class NvlinkStatus:
    """`nvidia-smi nvlink -s`: per-GPU links, or why the node cannot report them."""

    supported: bool
    reason: str | None = None  # "Nvlink queries are not supported for Devices in MIG mode"
    gpus: list[NvlinkGpu] = field(default_factory=list)


def nvlink_version_from_speed(gb_s: float) -> int | None:
    """The NVLink version whose per-link speed this is (within 1%), else None."""
    for version, nominal in NVLINK_SPEED_GB_S.items():
        if abs(gb_s - nominal) <= 0.01 * nominal:
            return version
    return None


def parse_nvlink_status(text: str) -> NvlinkStatus:
    """Links of every GPU; a GPU that prints a message instead of links makes it unsupported."""
    gpus: list[NvlinkGpu] = []
    reason: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if gpu_match := _NVLINK_GPU.fullmatch(line):
            index, name, uuid = gpu_match.groups()
            gpus.append(NvlinkGpu(int(index), name, _reported(uuid)))
        elif not line or not gpus:
            continue  # blank lines, and the prompt pasted above the first GPU
        elif link_match := _NVLINK_LINK.fullmatch(line):
            gpus[-1].links.append(_nvlink(int(link_match.group(1)), link_match.group(2)))
        elif "nvlink" in line.lower():
            # "Device does not have or support Nvlink", "... not supported ... in MIG mode"
            reason = reason or line
        else:
            raise ParseError(f"nvidia-smi nvlink -s: unexpected line {_short(line)}")
    if not gpus:
        raise ParseError("nvidia-smi nvlink -s: no 'GPU N: ... (UUID: ...)' line")
    return NvlinkStatus(supported=reason is None, reason=reason, gpus=gpus)


def gpu_facts_from_nvlink(status: NvlinkStatus) -> GpuFacts:
    """The links of `nvlink -s` as GpuFacts, so the gpu.nvlink check can judge them."""
    gpus = []
    for listed in status.gpus:
        speeds = [link.speed_bytes_per_s for link in listed.links if link.speed_bytes_per_s]
        version = nvlink_version_from_speed(speeds[0] / 1e9) if speeds else None
        gpus.append(
            Gpu(
                index=listed.index,
                name=listed.name,
                uuid=listed.uuid,
                nvlink_version=version,
                nvlinks=listed.links,
            )
        )
    return GpuFacts(source="nvidia-smi nvlink -s", attached_gpus=len(gpus), gpus=gpus)


def _nvlink(link: int, status: str) -> NvLink:
    """One link: 53.125 GB/s -> active at 53.125e9 B/s; <inactive> -> not active."""
    if status.strip().lower() == "<inactive>":
        return NvLink(link=link, active=False)
    match = _GB_S.fullmatch(status.strip())
    if match is None:
        raise ParseError(f"nvidia-smi nvlink -s: link {link}: unexpected {_short(status)}")
    return NvLink(link=link, active=True, speed_bytes_per_s=float(match.group(1)) * 1e9)


# ---------------------------------------------------------------------------------------------
# Which of these is a text?
# ---------------------------------------------------------------------------------------------

# Lines only `nvidia-smi -q` prints: its banner, top-level keys, or GPU sections of excerpts.
_Q_MARKERS = re.compile(
    r"^(?:=+NVSMI LOG=+"
    r"|(?:Attached GPUs|Driver Version|[ \t]+Product Name)[ \t]+:.*"
    r"|[ \t]+(?:ECC Errors|Remapped Rows|Clocks Event Reasons|Clocks Throttle Reasons)[ \t]*)$",
    re.MULTILINE,
)
# A "GPU N: name (UUID: ...)" line followed by a link or by a message about NVLink.
_NVLINK_MARKERS = re.compile(
    r"^GPU [0-9]+: .* \(UUID: [^)]*\)[ \t]*\n[ \t]*(?:Link [0-9]+: |.*nvlink)",
    re.IGNORECASE | re.MULTILINE,
)


def detect(text: str) -> str | None:
    """Which output this is: "smi-q", "smi-xml", "smi-csv", "nvlink-s", or None."""
    if "<nvidia_smi_log" in text:
        return "smi-xml"
    if _NVLINK_MARKERS.search(text):
        return "nvlink-s"
    if _Q_MARKERS.search(text):
        return "smi-q"
    for line in text.splitlines()[:5]:  # the header is the first line, after any prompt
        if not line.strip() or _is_prompt(line):
            continue
        try:
            header = _header_cells(_csv_cells(line))
        except ParseError:
            return None
        return "smi-csv" if header is not None else None
    return None
