"""`nvidia-smi -q -x` (XML) into the gpu probe's facts: one `Gpu` per <gpu> element.

Also what the gpu probe reads on a node without pynvml. A pure function of the text: on
output it cannot read it raises `ParseError` with one line naming what was wrong, and
never any other exception. Elements a driver version lacks give None.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from bringup.node.gpu_facts import Gpu, GpuFacts
from bringup.node.parsers.smi_values import (
    MHZ,
    MIB,
    fabric_state,
    fabric_status,
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

# XML names that differ from gpu_facts.CLOCK_EVENT_REASONS ("clocks" plural in the DTD).
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
        attached_gpus=whole(_xml(root, "attached_gpus"), "", "attached_gpus"),
        gpus=[_gpu_from_xml(index, gpu) for index, gpu in enumerate(gpus)],
    )


def detect(text: str) -> bool:
    """True when the text is (part of) `nvidia-smi -q -x` output."""
    return "<nvidia_smi_log" in text


def _xml(element: ET.Element | None, *paths: str) -> str | None:
    """The reported text of the first of paths present under element, else None."""
    if element is None:
        return None
    for path in paths:
        found = element.find(path)
        if found is not None and (text := reported(found.text)) is not None:
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
        pci_bus_id=_xml(gpu, "pci/pci_bus_id") or reported(gpu.get("id")),
        pci_device_id=pci_device_id(_xml(gpu, "pci/pci_device_id")),
        vbios_version=_xml(gpu, "vbios_version"),
        memory_total_bytes=scaled(_xml(gpu, "fb_memory_usage/total"), "MiB", MIB, "FB total"),
        persistence_mode=flag(_xml(gpu, "persistence_mode"), "persistence_mode"),
        mig_mode=flag(_xml(gpu, "mig_mode/current_mig"), "current_mig"),
        ecc_mode=flag(_xml(gpu, "ecc_mode/current_ecc"), "current_ecc"),
        ecc_uncorrected_volatile=_xml_ecc(ecc, "volatile", "uncorrectable"),
        ecc_uncorrected_aggregate=_xml_ecc(ecc, "aggregate", "uncorrectable"),
        ecc_corrected_volatile=_xml_ecc(ecc, "volatile", "correctable"),
        remapped_rows=remapped_rows(
            _xml(rows, "remapped_row_corr"),
            _xml(rows, "remapped_row_unc"),
            _xml(rows, "remapped_row_pending"),
            _xml(rows, "remapped_row_failure"),
        ),
        pcie_gen_current=whole(
            _xml(gen, "device_current_link_gen", "current_link_gen"), "", "current_link_gen"
        ),
        pcie_gen_max=whole(_xml(gen, "max_device_link_gen", "max_link_gen"), "", "max_link_gen"),
        # max_link_gen is the link's: on a GB200 tray 5 (Grace's root port) under a
        # max_device_link_gen of 6.
        pcie_link_gen_max=whole(_xml(gen, "max_link_gen"), "", "max_link_gen"),
        pcie_width_current=whole(_xml(width, "current_link_width"), "x", "current_link_width"),
        pcie_width_max=whole(_xml(width, "max_link_width"), "x", "max_link_width"),
        power_draw_w=measure(
            _xml(power, "power_draw", "average_power_draw", "instant_power_draw"), "W", "power"
        ),
        power_limit_w=measure(
            _xml(power, "current_power_limit", "enforced_power_limit", "power_limit"),
            "W",
            "power limit",
        ),
        power_default_limit_w=measure(_xml(power, "default_power_limit"), "W", "default limit"),
        temperature_c=measure(_xml(temp, "gpu_temp"), "C", "gpu_temp"),
        memory_temperature_c=measure(_xml(temp, "memory_temp"), "C", "memory_temp"),
        slowdown_temperature_c=measure(_xml(temp, "gpu_temp_slow_threshold"), "C", "slowdown"),
        shutdown_temperature_c=measure(_xml(temp, "gpu_temp_max_threshold"), "C", "shutdown"),
        memory_max_temperature_c=measure(
            _xml(temp, "gpu_temp_max_mem_threshold"), "C", "memory max temp"
        ),
        gpu_max_operating_temperature_c=measure(
            _xml(temp, "gpu_temp_max_gpu_threshold"), "C", "GPU max operating temp"
        ),
        # Drivers 550+ print the thresholds relative to T.Limit (as -q's "GPU T.Limit Temp"
        # and "GPU Slowdown T.Limit Temp"); without these, gpu.thermal could not be judged.
        tlimit_margin_c=measure(_xml(temp, "gpu_temp_tlimit"), "C", "gpu_temp_tlimit"),
        slowdown_tlimit_c=measure(
            _xml(temp, "gpu_temp_slow_tlimit_threshold"), "C", "slowdown T.Limit"
        ),
        memory_max_tlimit_c=measure(
            _xml(temp, "gpu_temp_max_mem_tlimit_threshold"), "C", "memory max T.Limit"
        ),
        sm_clock_hz=scaled(_xml(gpu, "clocks/sm_clock"), "MHz", MHZ, "sm_clock"),
        sm_clock_max_hz=scaled(_xml(gpu, "max_clocks/sm_clock"), "MHz", MHZ, "max sm_clock"),
        memory_clock_hz=scaled(_xml(gpu, "clocks/mem_clock"), "MHz", MHZ, "mem_clock"),
        memory_clock_max_hz=scaled(_xml(gpu, "max_clocks/mem_clock"), "MHz", MHZ, "max mem_clock"),
        clock_event_reasons=_xml_reasons(gpu),
        fabric_state=fabric_state(_xml(gpu, "fabric/state")),
        fabric_status=fabric_status(_xml(gpu, "fabric/status")),
        fabric_clique_id=whole(_xml(gpu, "fabric/cliqueId"), "", "cliqueId"),
        not_available=_xml_not_available(gpu, power),
    )


_ROW_FIELDS = ("remapped_row_corr", "remapped_row_unc", "remapped_row_pending")


def _says_na(element: ET.Element | None, path: str) -> bool:
    """True when the element at path prints "N/A" (absent is not N/A: an older driver)."""
    found = element.find(path) if element is not None else None
    return found is not None and (found.text or "").strip().strip("[]").lower() == "n/a"


def _xml_not_available(gpu: ET.Element, power: ET.Element | None) -> list[str]:
    """The fields a profile can expect (GpuSpec.reports) that print N/A, named as `-q`
    text names them so that a finding reads the same from either output."""
    found = []
    if _says_na(gpu, "ecc_mode/current_ecc"):
        found.append("ECC Mode Current")
    rows = gpu.find("remapped_rows")
    if _says_na(gpu, "remapped_rows") or any(_says_na(rows, tag) for tag in _ROW_FIELDS):
        found.append("Remapped Rows")
    if power is not None and _says_na(power, "current_power_limit"):
        section = "GPU Power Readings" if power.tag == "gpu_power_readings" else "Power Readings"
        found.append(f"{section} Current Power Limit")
    return found


def _xml_ecc(ecc: ET.Element | None, scope: str, kind: str) -> int | None:
    """SRAM + DRAM errors of one kind; sram_uncorrectable_parity/_secded (newer) included."""
    counts = None if ecc is None else ecc.find(scope)
    if counts is None:
        return None
    prefixes = (f"sram_{kind}", f"dram_{kind}")
    return summed(
        [
            whole(child.text, "", f"ECC {child.tag}")
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
            if flag(child.text, child.tag):
                name = child.tag.removeprefix(prefix)
                active.append(_XML_REASON_ALIASES.get(name, name))
        return ordered_reasons(active)
    return None
