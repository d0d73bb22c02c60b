"""`nvidia-smi -q` (text) into the gpu probe's facts.

The text is a tree by indentation; each "GPU <bus id>" section becomes one `Gpu`. An
excerpt that starts inside a GPU section (no header) is read as one GPU. A pure function
of the text: on output it cannot read it raises `ParseError` with one line naming what was
wrong, and never any other exception.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bringup.node.gpu_facts import Gpu, GpuFacts
from bringup.node.parsers.smi_values import (
    MHZ,
    MIB,
    fabric_state,
    fabric_status,
    first_reported,
    flag,
    measure,
    ordered_reasons,
    pci_device_id,
    remapped_rows,
    reported,
    scaled,
    summed,
    whole,
)
from bringup.node.result import ParseError

# The clocks event reasons as `nvidia-smi -q` labels them (older drivers: "Clocks Throttle
# Reasons", same labels), mapped to the names of gpu_facts.CLOCK_EVENT_REASONS.
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
# A human's mark after a value in a paste ("Pending : Yes   <===", "<-- here"): not the
# tool's, so it is dropped before the value is read.
_ANNOTATION = re.compile(r"\s+(?:<[=-]{2,}|<<+|={2,}>|-{2,}>|←).*$")
# What the driver prints when the GPU answered a query with an error, not "not supported".
_UNREADABLE = "unknown error"
_NOT_AVAILABLE = "n/a"
# The fields a profile can expect a GPU to report (GpuSpec.reports): an "N/A" in one of
# them is kept (Gpu.not_available) for the check that reads it. The dozens of other N/A
# fields of a healthy GPU (Module Power Readings, Retired Pages, vGPU, ...) are not.
_EXPECTED_FIELDS = (
    "ECC Mode Current",
    "Remapped Rows",
    "GPU Power Readings Current Power Limit",
    "Power Readings Current Power Limit",
)
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

# Lines only `nvidia-smi -q` prints: its banner, top-level keys, or GPU sections of excerpts.
_Q_MARKERS = re.compile(
    r"^(?:=+NVSMI LOG=+"
    r"|(?:Attached GPUs|Driver Version|[ \t]+Product Name)[ \t]+:.*"
    r"|[ \t]+(?:ECC Errors|Remapped Rows|Clocks Event Reasons|Clocks Throttle Reasons)[ \t]*)$",
    re.MULTILINE,
)


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
        node = _Node(None if value is None else _ANNOTATION.sub("", value).strip())
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
    attached = whole(root.get("Attached GPUs"), "", "Attached GPUs")
    gpus = [_gpu_from_text(i, bus_id, node) for i, (bus_id, node) in enumerate(sections)]
    # -q prints no index: a section's place is nvidia-smi's index only when every attached
    # GPU is shown. A selection (`-i 52:00.0` of 8) is named by bus id instead.
    if attached is not None and attached > len(gpus):
        for gpu in gpus:
            gpu.by_bus_id = gpu.pci_bus_id is not None
    return GpuFacts(
        source="nvidia-smi -q",
        driver_version=reported(root.get("Driver Version")),
        cuda_driver_version=reported(root.get("CUDA Version")),
        attached_gpus=attached,
        gpus=gpus,
    )


def _fields_saying(node: _Node, word: str, path: tuple[str, ...] = ()) -> list[str]:
    """The fields under a GPU section whose value is `word` ("unknown error", "n/a"),
    named by their path ("ECC Mode Current")."""
    found = []
    for key, child in node.children.items():
        where = (*path, key)
        if child.value is not None and child.value.strip("[]").lower() == word:
            found.append(" ".join(where))
        found += _fields_saying(child, word, where)
    return found


def detect(text: str) -> bool:
    """True when the text has a line only `nvidia-smi -q` prints."""
    return _Q_MARKERS.search(text) is not None


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
        name=reported(gpu.get("Product Name")) or "",
        uuid=reported(gpu.get("GPU UUID")),
        serial=reported(gpu.get("Serial Number")),
        pci_bus_id=reported(gpu.get("PCI", "Bus Id")) or bus_id,
        pci_device_id=pci_device_id(gpu.get("PCI", "Device Id")),
        vbios_version=reported(gpu.get("VBIOS Version")),
        memory_total_bytes=scaled(gpu.get("FB Memory Usage", "Total"), "MiB", MIB, "FB total"),
        persistence_mode=flag(gpu.get("Persistence Mode"), "Persistence Mode"),
        mig_mode=flag(gpu.get("MIG Mode", "Current"), "MIG Mode"),
        ecc_mode=flag(gpu.get("ECC Mode", "Current"), "ECC Mode"),
        ecc_uncorrected_volatile=_text_ecc(volatile, "Uncorrectable"),
        ecc_uncorrected_aggregate=_text_ecc(aggregate, "Uncorrectable"),
        ecc_corrected_volatile=_text_ecc(volatile, "Correctable"),
        remapped_rows=remapped_rows(
            gpu.get("Remapped Rows", "Correctable Error"),
            gpu.get("Remapped Rows", "Uncorrectable Error"),
            gpu.get("Remapped Rows", "Pending"),
            gpu.get("Remapped Rows", "Remapping Failure Occurred"),
        ),
        # "Device ..." is the GPU's own side of the link (newer drivers); "Max" alone may be
        # capped by the host, which is not what Gpu.pcie_gen_max means.
        pcie_gen_current=whole(
            first_reported(
                gpu.get(*link, "PCIe Generation", "Device Current"),
                gpu.get(*link, "PCIe Generation", "Current"),
            ),
            "",
            "PCIe generation",
        ),
        pcie_gen_max=whole(
            first_reported(
                gpu.get(*link, "PCIe Generation", "Device Max"),
                gpu.get(*link, "PCIe Generation", "Max"),
            ),
            "",
            "PCIe max generation",
        ),
        # "Max" alone is the link's maximum: the lower of the GPU's and the host's.
        pcie_link_gen_max=whole(
            gpu.get(*link, "PCIe Generation", "Max"), "", "PCIe link max generation"
        ),
        pcie_width_current=whole(gpu.get(*link, "Link Width", "Current"), "x", "link width"),
        pcie_width_max=whole(gpu.get(*link, "Link Width", "Max"), "x", "max link width"),
        # Newer drivers print an average and an instantaneous draw; the average is what
        # `--query-gpu=power.draw` reports, so all formats agree.
        power_draw_w=measure(
            first_reported(
                power.get("Power Draw"),
                power.get("Average Power Draw"),
                power.get("Instantaneous Power Draw"),
            ),
            "W",
            "power draw",
        ),
        power_limit_w=measure(
            first_reported(
                power.get("Current Power Limit"),
                power.get("Enforced Power Limit"),
                power.get("Power Limit"),
            ),
            "W",
            "power limit",
        ),
        power_default_limit_w=measure(power.get("Default Power Limit"), "W", "default limit"),
        # Newer drivers (550+) print thresholds only relative to T.Limit: those go to the
        # tlimit fields, and the absolute ones stay None.
        temperature_c=measure(temp.get("GPU Current Temp"), "C", "GPU temperature"),
        memory_temperature_c=measure(temp.get("Memory Current Temp"), "C", "memory temp"),
        slowdown_temperature_c=measure(temp.get("GPU Slowdown Temp"), "C", "slowdown temp"),
        shutdown_temperature_c=measure(temp.get("GPU Shutdown Temp"), "C", "shutdown temp"),
        memory_max_temperature_c=measure(
            temp.get("Memory Max Operating Temp"), "C", "memory max temp"
        ),
        gpu_max_operating_temperature_c=measure(
            temp.get("GPU Max Operating Temp"), "C", "GPU max operating temp"
        ),
        tlimit_margin_c=measure(temp.get("GPU T.Limit Temp"), "C", "T.Limit"),
        slowdown_tlimit_c=measure(temp.get("GPU Slowdown T.Limit Temp"), "C", "slowdown T.Limit"),
        memory_max_tlimit_c=measure(
            temp.get("Memory Max Operating T.Limit Temp"), "C", "memory max T.Limit"
        ),
        sm_clock_hz=scaled(gpu.get("Clocks", "SM"), "MHz", MHZ, "SM clock"),
        sm_clock_max_hz=scaled(gpu.get("Max Clocks", "SM"), "MHz", MHZ, "max SM clock"),
        memory_clock_hz=scaled(gpu.get("Clocks", "Memory"), "MHz", MHZ, "memory clock"),
        memory_clock_max_hz=scaled(gpu.get("Max Clocks", "Memory"), "MHz", MHZ, "max memory clock"),
        clock_event_reasons=_text_reasons(
            gpu.node("Clocks Event Reasons") or gpu.node("Clocks Throttle Reasons")
        ),
        fabric_state=fabric_state(gpu.get("Fabric", "State")),
        fabric_status=fabric_status(gpu.get("Fabric", "Status")),
        fabric_clique_id=whole(gpu.get("Fabric", "CliqueId"), "", "CliqueId"),
        unreadable=_fields_saying(gpu, _UNREADABLE),
        not_available=[
            name
            for name in _fields_saying(gpu, _NOT_AVAILABLE)
            if name.startswith(_EXPECTED_FIELDS)
        ],
    )


def _text_ecc(counts: _Node | None, kind: str) -> int | None:
    """SRAM + DRAM errors of one kind in a Volatile or Aggregate block.

    Newer drivers split "SRAM Uncorrectable" into "... Parity" and "... SEC-DED"; summing
    every key that starts with the name counts both layouts the same.
    """
    if counts is None:
        return None
    prefixes = (f"SRAM {kind}", f"DRAM {kind}")
    return summed(
        [
            whole(node.value, "", f"ECC {key}")
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
    return ordered_reasons(active)


def _collect_active(section: _Node, active: list[str]) -> None:
    # Newer drivers nest "HW Thermal Slowdown" under "HW Slowdown", so walk the whole tree.
    for label, node in section.children.items():
        if flag(node.value, f"clocks event reason {label}"):
            active.append(_TEXT_REASONS.get(label) or _slug(label))
        _collect_active(node, active)


def _slug(label: str) -> str:
    """A label as a name: Some New Reason -> "some_new_reason"."""
    return "_".join(re.findall(r"[a-z0-9]+", label.lower()))
