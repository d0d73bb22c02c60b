"""`nvidia-smi --query-gpu=... --format=csv` into the gpu probe's facts: one `Gpu` per row.

The header names the columns (and their units unless `nounits`), so any selection of query
fields in any order can be read; fields the query did not ask for give None. A pure
function of the text: on output it cannot read it raises `ParseError` with one line naming
what was wrong, and never any other exception.
"""

from __future__ import annotations

import csv
import re

from bringup.node.gpu_facts import CLOCK_EVENT_REASONS, Gpu, GpuFacts, decode_clock_event_reasons
from bringup.node.parsers.smi_values import (
    MHZ,
    MIB,
    fabric_state,
    fabric_status,
    first_reported,
    flag,
    measure,
    pci_device_id,
    remapped_rows,
    reported,
    scaled,
    short,
    whole,
)
from bringup.node.result import ParseError

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
        return first_reported(*(self.cell(n)[0] for n in names))

    def says_na(self, name: str) -> bool:
        """True when the column is there and prints N/A ("[N/A]")."""
        value = self._cells.get(name, (None, ""))[0]
        return value is not None and value.strip().strip("[]").lower() == "n/a"

    def cell(self, *names: str) -> tuple[str | None, str]:
        """(value, unit of its column) of the first reported alias; (None, "") if none is."""
        for name in names:
            value, unit = self._cells.get(name, (None, ""))
            if reported(value) is not None:
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
        driver_version=reported(first.text("driver_version")),
        attached_gpus=_csv_int(first, "count"),
        gpus=[_gpu_from_csv(position, row) for position, row in enumerate(rows)],
    )


def detect(text: str) -> bool:
    """True when the first line after any prompt is a --query-gpu header."""
    for line in text.splitlines()[:5]:  # the header is the first line, after any prompt
        if not line.strip() or _is_prompt(line):
            continue
        try:
            return _header_cells(_csv_cells(line)) is not None
        except ParseError:
            return False
    return False


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
        name=reported(row.text("name", "gpu_name")) or "",
        uuid=reported(row.text("uuid", "gpu_uuid")),
        serial=reported(row.text("serial", "gpu_serial")),
        pci_bus_id=reported(row.text("pci.bus_id", "gpu_bus_id")),
        pci_device_id=pci_device_id(row.text("pci.device_id")),
        vbios_version=reported(row.text("vbios_version")),
        compute_capability=reported(row.text("compute_cap")),
        memory_total_bytes=_csv_scaled(row, MIB, "memory.total"),
        persistence_mode=flag(row.text("persistence_mode"), "persistence_mode"),
        mig_mode=flag(row.text("mig.mode.current"), "mig.mode.current"),
        ecc_mode=flag(row.text("ecc.mode.current"), "ecc.mode.current"),
        ecc_uncorrected_volatile=_csv_int(row, "ecc.errors.uncorrected.volatile.total"),
        ecc_uncorrected_aggregate=_csv_int(row, "ecc.errors.uncorrected.aggregate.total"),
        ecc_corrected_volatile=_csv_int(row, "ecc.errors.corrected.volatile.total"),
        remapped_rows=remapped_rows(
            row.text("remapped_rows.correctable"),
            row.text("remapped_rows.uncorrectable"),
            row.text("remapped_rows.pending"),
            row.text("remapped_rows.failure"),
        ),
        # gpucurrent/gpumax are the GPU's side; the plain names are deprecated aliases
        # (current) or capped by the host (max).
        pcie_gen_current=_csv_int(row, "pcie.link.gen.gpucurrent", "pcie.link.gen.current"),
        pcie_gen_max=_csv_int(row, "pcie.link.gen.gpumax", "pcie.link.gen.max"),
        # The plain max is the link's: the GPU's and the host's together (Grace: Gen5).
        pcie_link_gen_max=_csv_int(row, "pcie.link.gen.max"),
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
        fabric_state=fabric_state(row.text("fabric.state")),
        fabric_status=fabric_status(row.text("fabric.status")),
        fabric_clique_id=_csv_int(row, "fabric.cliqueId"),
        not_available=[name for name in _EXPECTED_COLUMNS if row.says_na(name)],
    )


# The columns of the fields a profile can expect a GPU to report (GpuSpec.reports): an N/A
# there is kept (Gpu.not_available, named by its query field) for the check that reads it.
_EXPECTED_COLUMNS = (
    "ecc.mode.current",
    "remapped_rows.correctable",
    "remapped_rows.uncorrectable",
    "remapped_rows.pending",
    "remapped_rows.failure",
    "enforced.power.limit",
    "power.limit",
)


# The value may carry its unit ("631.95 W") or not (`nounits`); the header says which unit.


def _csv_float(row: _Row, *names: str) -> float | None:
    return measure(*row.cell(*names), names[0])


def _csv_int(row: _Row, *names: str) -> int | None:
    return whole(*row.cell(*names), names[0])


def _csv_scaled(row: _Row, scale: int, *names: str) -> int | None:
    value, unit = row.cell(*names)
    return scaled(value, unit, scale, names[0])


def _csv_reasons(row: _Row) -> list[str] | None:
    """The active mask when queried, else the per-reason Active/Not Active columns."""
    for family in ("clocks_event_reasons", "clocks_throttle_reasons"):
        mask = reported(row.text(f"{family}.active"))
        if mask is not None:
            try:
                return decode_clock_event_reasons(int(mask, 16))
            except ValueError:
                raise ParseError(
                    f"{family}.active: expected a hex mask, got {short(mask)}"
                ) from None
        flags = {
            name: flag(row.text(f"{family}.{name}"), f"{family}.{name}")
            for name in CLOCK_EVENT_REASONS.values()
        }
        if any(state is not None for state in flags.values()):
            return [name for name, state in flags.items() if state]
    return None
