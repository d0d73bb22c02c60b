"""The `topology` probe: how the GPUs and NICs of a node are wired, from `nvidia-smi topo -m`.

The matrix names the path between every two devices: `NV#` (a bonded set of # NVLinks),
`PIX`/`PXB` (one or more PCIe bridges), `PHB` (a PCIe host bridge), `NODE` (host bridges
within a NUMA node), `SYS` (across sockets; `SOC` in very old drivers) and `X` (self).

The output comes in many shapes (tab-separated or space-aligned, with or without NICs,
legends, the `GPU NUMA ID` column, ANSI escapes or a shell prompt above it), so the parser
leans on two things that hold in all of them: a cell never contains whitespace except the
self cell ` X ` (which splits to `X`) and the header's affinity titles, and the affinity
columns always come last.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bringup.node.result import ParseError, ProbeError, ProbeOutput
from bringup.node.tool import run, which

RAW_FILE = "nvidia-smi-topo-m.txt"

# Every path word the driver prints (the Legend of `nvidia-smi topo -m`, old and new).
_LINK = re.compile(r"X|NV\d{1,3}|NVB|SYS|SOC|NODE|PHB|PXB|PIX")
_NEAR = ("PIX", "PXB")  # at most PCIe bridges between: GPUDirect RDMA stays off the CPU
# ANSI escapes (`nvidia-smi` underlines the header on a terminal), and their remnants in a
# paste that lost the ESC byte: "[4mGPU0 ... GPU NUMA ID[0m" (sglang's check_env).
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\[[0-9;]*m(?=\S|$)")
# The GPU models an environment dump prints above the matrix (sglang's check_env: "GPU
# 0,1,2,3,4,5,6,7: NVIDIA B300 SXM6 AC"; vLLM's collect_env: "GPU 0: NVIDIA B200").
_MODEL_LINE = re.compile(r"\s*GPU \d+(?:\s*,\s*\d+)*\s*:\s*(?P<name>\S.*?)\s*(?:\(UUID:.*)?")
# Device column names; very old drivers glue them together ("GPU0GPU1...GPU7mlx5_0").
_DEVICE_NAME = re.compile(r"GPU\d+|NIC\d+|.+?(?=GPU\d|NIC\d|$)")
_GPU_NAME = re.compile(r"GPU(\d{1,4})")
# "CPU Affinity", "NUMA Affinity", "GPU NUMA ID": the affinity column titles, always last.
_AFFINITY_TITLE = re.compile(r"(?:\S+ )?(?:Affinity|NUMA ID)")
_DEFAULT_AFFINITY = ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]  # current drivers' order
_NIC_LEGEND = re.compile(r"\s*(NIC\d+)\s*:\s*(\S+)\s*")


@dataclass
class TopoPair:
    """The path between two GPUs, a < b, as printed (`NV18`, `SYS`, ...)."""

    a: int
    b: int
    link: str
    nvlinks: int  # the # of NV#, 0 when the path is not NVLink


@dataclass
class TopoGpu:
    """One GPU's affinity columns; None where the output has no such column or says N/A."""

    index: int
    cpu_affinity: str | None = None  # e.g. "0-47,96-143"
    numa_affinity: str | None = None  # e.g. "0"
    gpu_numa_id: str | None = None


@dataclass
class TopoNic:
    """One NIC and its path to every GPU."""

    name: str  # the NIC Legend's name (mlx5_0), else the column name
    column: str  # the column as printed: "NIC0" or, in old drivers, "mlx5_0"
    nearest_gpus: list[int] = field(default_factory=list)  # GPUs at PIX/PXB
    links: dict[str, str] = field(default_factory=dict)  # "GPU0" -> "PIX"
    # The RDMA device of a Linux bond ("mlx5_bond_0": two ports as one, usually the
    # front-end or storage network), not one GPU's rail.
    bonded: bool = False


@dataclass
class TopologyFacts:
    """What `nvidia-smi topo -m` showed."""

    gpu_count: int
    min_nvlinks: int  # smallest NV# over all GPU pairs; 0 if any pair is not NVLink
    nics: list[str]  # NIC names in column order
    gpus: list[TopoGpu] = field(default_factory=list)
    pairs: list[TopoPair] = field(default_factory=list)  # every GPU pair read, a < b
    nic_details: list[TopoNic] = field(default_factory=list)
    complete: bool = True  # False when rows (or the header) of the matrix were missing
    notes: list[str] = field(default_factory=list)
    # GPU models printed above the matrix by an environment dump, in order, each once;
    # `nvidia-smi topo -m` itself names none.
    gpu_models: list[str] = field(default_factory=list)


# --- parsing ------------------------------------------------------------------------------


@dataclass
class _Row:
    """One matrix row: its label, its path cells and the values after them."""

    label: str
    cells: list[str]
    values: list[str]


@dataclass
class _Matrix:
    """The matrix as read: column names, affinity titles and rows."""

    columns: list[str]  # device names in column order
    affinity: list[str]  # affinity column titles, in order
    rows: list[_Row]
    has_header: bool
    notes: list[str]

    def cell(self, row_name: str, column_name: str) -> str | None:
        """The path cell at (row, column), None when that row or column was not read."""
        for row in self.rows:
            if row.label == row_name and column_name in self.columns:
                return row.cells[self.columns.index(column_name)]
        return None

    def link(self, a: str, b: str) -> str | None:
        """The path between two devices: row a's cell, else row b's (the matrix is symmetric)."""
        return self.cell(a, b) or self.cell(b, a)


def parse_topo(text: str) -> TopologyFacts:
    """Facts from the text of `nvidia-smi topo -m`; ParseError when it is not that."""
    lines = [_ANSI.sub("", line) for line in text.splitlines()]
    # Output that stops mid-line (a cut capture) may end in a half-read cell.
    cut_at_end = not text.endswith(("\n", "\r"))
    header_at = _find_header(lines)
    if header_at is None:
        matrix = _headerless(lines, cut_at_end)
    else:
        matrix = _with_header(lines[header_at], lines[header_at + 1 :], cut_at_end)
    facts = _facts(matrix, _nic_legend(lines))
    above = lines[:header_at] if header_at is not None else lines
    facts.gpu_models = _models(above)
    return facts


def _models(lines: list[str]) -> list[str]:
    """The GPU models named above the matrix, each once, in order."""
    models: list[str] = []
    for line in lines:
        match = _MODEL_LINE.fullmatch(line)
        if match and match.group("name") not in models:
            models.append(match.group("name"))
    return models


def _find_header(lines: list[str]) -> int | None:
    """Index of the column header: the line that starts with GPU0 and is not a matrix row."""
    for i, line in enumerate(lines):
        tokens = line.split()
        if tokens and tokens[0].startswith("GPU0") and not _is_row(tokens):
            return i
    return None


def _is_row(tokens: list[str]) -> bool:
    """A matrix row is a device label followed by a path cell (the first one is never empty)."""
    return len(tokens) >= 2 and _LINK.fullmatch(tokens[1]) is not None


def _with_header(header: str, lines: list[str], cut_at_end: bool) -> _Matrix:
    columns, affinity = _split_header(header)
    notes: list[str] = []
    rows = _rows(lines, cut_at_end, notes)
    if not rows:
        raise ParseError("topo -m: a header but no matrix rows under it (output cut short?)")
    for row in rows:
        _fit_row(row, columns, affinity)
    return _Matrix(columns, affinity, rows, has_header=True, notes=notes)


def _split_header(line: str) -> tuple[list[str], list[str]]:
    """Device column names and affinity column titles from the header line.

    The titles hold spaces, and tabs expanded in a paste may leave a single space before
    them ("mlx5_10 CPU Affinity"), so they are found by name rather than by the gaps.
    """
    first_title = _AFFINITY_TITLE.search(line)
    devices_part = line[: first_title.start()] if first_title else line
    affinity = _AFFINITY_TITLE.findall(line[first_title.start() :]) if first_title else []
    columns = [name for token in devices_part.split() for name in _DEVICE_NAME.findall(token)]
    if not any(_GPU_NAME.fullmatch(c) for c in columns):
        raise ParseError("topo -m header names no GPU column")
    if len(set(columns)) != len(columns):
        raise ParseError("topo -m header names a device column twice")
    return columns, affinity


def _rows(lines: list[str], cut_at_end: bool, notes: list[str]) -> list[_Row]:
    """Matrix rows: a device label, its path cells, then any affinity values."""
    rows: list[_Row] = []
    for i, line in enumerate(lines):
        tokens = line.split()
        if not _is_row(tokens):
            continue
        if cut_at_end and i == len(lines) - 1:
            notes.append(f"the output ends inside row {tokens[0]}: that row was ignored")
            continue
        if any(r.label == tokens[0] for r in rows):
            raise ParseError(f"topo -m: row {tokens[0]} appears twice")
        cells = _leading_links(tokens[1:])
        rows.append(_Row(tokens[0], cells, tokens[1 + len(cells) :]))
    return rows


def _leading_links(tokens: list[str]) -> list[str]:
    cells: list[str] = []
    for token in tokens:
        if not _LINK.fullmatch(token):
            break
        cells.append(token)
    return cells


def _fit_row(row: _Row, columns: list[str], affinity: list[str]) -> None:
    """Check that a row lines up with the header; ParseError when it does not."""
    if row.label not in columns:
        raise ParseError(f"topo -m: row {row.label} has no column in the header")
    if len(row.cells) != len(columns):
        raise ParseError(
            f"topo -m: row {row.label} has {len(row.cells)} path cells, "
            f"the header names {len(columns)} devices"
        )
    if row.cells[columns.index(row.label)] != "X":
        raise ParseError(f"topo -m: row {row.label} is misaligned (its self cell is not X)")
    # GPU rows carry the affinity values; NIC rows stop after the matrix.
    if len(row.values) > len(affinity):
        raise ParseError(
            f"topo -m: row {row.label} has {len(row.values)} values after the matrix, "
            f"the header names {len(affinity)} affinity columns"
        )


def _headerless(lines: list[str], cut_at_end: bool) -> _Matrix:
    """Columns inferred from the rows when the header is missing (a cut paste).

    GPU columns come first and in index order, so GPU<i>'s self cell sits in column i;
    what the columns without a row are (more GPUs or NICs) cannot be known.
    """
    notes: list[str] = []
    gpu_rows = [r for r in _rows(lines, cut_at_end, notes) if _GPU_NAME.fullmatch(r.label)]
    if not gpu_rows:
        raise ParseError("not `nvidia-smi topo -m` output: no GPU header or GPU rows found")
    widths = {len(r.cells) for r in gpu_rows}
    if len(widths) != 1:
        raise ParseError("topo -m: GPU rows of different widths and no header to align them")
    width = widths.pop()
    columns = [f"column{i}" for i in range(width)]
    for row in gpu_rows:
        index = _gpu_index(row.label)
        if index >= width or row.cells[index] != "X":
            raise ParseError(f"topo -m: row {row.label} has its self cell out of place")
        if len(row.values) > len(_DEFAULT_AFFINITY):
            raise ParseError(f"topo -m: row {row.label} has too many values after the matrix")
        columns[index] = row.label
    notes.append(
        f"no header line: {len(gpu_rows)} GPU rows of a {width}-column matrix were read; "
        "the columns without a row are unknown (more GPUs or NICs)"
    )
    # NIC rows are dropped: without a header their columns cannot be named.
    return _Matrix(columns, list(_DEFAULT_AFFINITY), gpu_rows, has_header=False, notes=notes)


def _gpu_index(name: str) -> int:
    match = _GPU_NAME.fullmatch(name)
    if match is None:
        raise ParseError(f"topo -m: {name!r} is not a GPU name")
    return int(match.group(1))


def _nic_legend(lines: list[str]) -> dict[str, str]:
    """NIC column -> device name from the `NIC Legend:` section ("NIC0: mlx5_0")."""
    legend: dict[str, str] = {}
    in_legend = False
    for line in lines:
        if line.strip().startswith("NIC Legend"):
            in_legend = True
        elif in_legend and (match := _NIC_LEGEND.fullmatch(line)):
            legend[match.group(1)] = match.group(2)
    return legend


def _facts(matrix: _Matrix, legend: dict[str, str]) -> TopologyFacts:
    notes = matrix.notes
    if matrix.has_header:
        gpu_names = [c for c in matrix.columns if _GPU_NAME.fullmatch(c)]
    else:
        gpu_names = [r.label for r in matrix.rows]
    gpu_names.sort(key=_gpu_index)
    rows = {r.label: r for r in matrix.rows}
    gpus = [_gpu(name, rows.get(name), matrix.affinity) for name in gpu_names]

    pairs: list[TopoPair] = []
    for i, a in enumerate(gpu_names):
        for b in gpu_names[i + 1 :]:
            link = matrix.link(a, b)
            if link is not None:
                pairs.append(TopoPair(_gpu_index(a), _gpu_index(b), link, _nvlinks(link)))

    nic_columns = [c for c in matrix.columns if matrix.has_header and c not in gpu_names]
    nic_details = [_nic(c, legend.get(c, c), gpu_names, matrix) for c in nic_columns]
    if any(c.startswith("NIC") for c in nic_columns) and not legend:
        notes.append("no NIC Legend: NICs are named by their column (NIC0, ...)")

    missing = [c for c in matrix.columns if matrix.has_header and c not in rows]
    if missing:
        notes.append(f"rows missing from the matrix: {', '.join(missing)}")
    if len(gpu_names) == 1:
        notes.append("single GPU: no GPU pairs, min_nvlinks is 0")
    return TopologyFacts(
        gpu_count=len(gpu_names),
        min_nvlinks=min((p.nvlinks for p in pairs), default=0),
        nics=[n.name for n in nic_details],
        gpus=gpus,
        pairs=pairs,
        nic_details=nic_details,
        complete=matrix.has_header and not missing,
        notes=notes,
    )


def _gpu(name: str, row: _Row | None, affinity: list[str]) -> TopoGpu:
    """A GPU with its affinity values, mapped onto the affinity columns from the left.

    Empty cells vanish when splitting on whitespace, which is what we want: tab-separated
    output has an empty cell before `GPU NUMA ID` that the header does not have.
    """
    values: dict[str, str | None] = {}
    if row is not None:
        for title, value in zip(affinity, row.values, strict=False):
            values[title] = None if value == "N/A" else value
    return TopoGpu(
        index=_gpu_index(name),
        cpu_affinity=values.get("CPU Affinity"),
        numa_affinity=values.get("NUMA Affinity"),
        gpu_numa_id=values.get("GPU NUMA ID"),
    )


def _nic(column: str, name: str, gpu_names: list[str], matrix: _Matrix) -> TopoNic:
    links: dict[str, str] = {}
    for gpu in gpu_names:
        link = matrix.link(gpu, column)
        if link is not None:
            links[gpu] = link
    nearest = [_gpu_index(g) for g, link in links.items() if link in _NEAR]
    bonded = "_bond" in name or name.startswith("bond")
    return TopoNic(name=name, column=column, nearest_gpus=nearest, links=links, bonded=bonded)


def _nvlinks(link: str) -> int:
    """The # of an NV# cell; 0 for every PCIe path."""
    return int(link[2:]) if re.fullmatch(r"NV\d{1,3}", link) else 0


# --- collection ---------------------------------------------------------------------------


@dataclass
class Params:
    timeout_s: float = 30.0


FACTS = TopologyFacts


def collect(params: Params) -> ProbeOutput:
    """Run `nvidia-smi topo -m` and parse it; the raw text is kept beside the facts."""
    smi = which("nvidia-smi")
    if smi is None:
        raise ProbeError("no NVIDIA driver found (nvidia-smi not on PATH)")
    result = run([smi, "topo", "-m"], params.timeout_s)
    raw = {RAW_FILE: result.stdout}
    if result.timed_out:
        raise ProbeError(f"nvidia-smi topo -m did not finish in {params.timeout_s:g} s", raw)
    if result.returncode != 0:
        first = (result.stdout or result.stderr).strip().splitlines()[:1]
        reason = first[0] if first else f"exit code {result.returncode}"
        raise ProbeError(f"nvidia-smi topo -m failed: {reason}", raw)
    try:
        return ProbeOutput(parse_topo(result.stdout), raw)
    except ParseError as exc:
        raise ProbeError(f"nvidia-smi topo -m: {exc}", raw) from None
