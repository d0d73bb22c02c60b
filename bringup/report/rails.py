"""The per-rail table of a run: each node's ib_write_bw per rail against line rate.

Read from the run's `ibperf.json` (written by the per-rail job, bringup/commands/
ibperf_job.py), which a report treats as any run file: untrusted, size-limited, validated,
its text escaped where it is shown. The verdict is the findings' (fabric.rail_bw); this
table only shows the figures behind them. Each node's row holds the figures that judged
it: the retest's for a node that was measured again with a known-good partner, the first
round's otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ValidationError

from bringup.files import InputError, read_text

RESULTS_FILE = "ibperf.json"
MAX_BYTES = 16 << 20


class RailCell(BaseModel):
    node: str
    partner: str
    rail: int
    device: str
    ib_port: int
    gpu: int | None = None
    rate_gbit_s: float | None = None
    mode: str
    gbit_s: float | None = None
    error: str | None = None
    stage: str


class RailRow(BaseModel):
    node: str
    partner: str
    cells: list[float | None]  # Gb/s per rail, None: not measured
    shares: list[float | None]  # of line rate


class RailTable(BaseModel):
    """Nodes x rails, ib_write_bw alone (each rail by itself), Gb/s."""

    columns: list[str]  # "0 mlx5_0"
    line_rate_gbit_s: float | None
    rows: list[RailRow]
    problem: str | None = None  # why the file could not be shown


def load(run_path: Path) -> RailTable | None:
    """The table of a run with an ibperf.json; None for any other run."""
    file = run_path / RESULTS_FILE
    if not file.exists():
        return None
    try:
        data = json.loads(read_text(file, "the per-rail results", MAX_BYTES))
        cells = [RailCell.model_validate(c) for c in data["rails"]]
        suspects = {str(n) for n in data.get("retested", [])}
    except (InputError, ValueError, KeyError, TypeError, ValidationError) as exc:
        why = " ".join(str(exc).split())[:200]
        return RailTable(columns=[], line_rate_gbit_s=None, rows=[], problem=why)
    return table(cells, suspects)


def table(cells: list[RailCell], retested: set[str]) -> RailTable:
    """Each node's single-rail figures from the stage that judged it."""
    chosen = [
        c
        for c in cells
        if c.mode == "single"
        and c.rail >= 0
        and c.stage == ("retest" if c.node in retested else "pairs")
    ]
    rails = sorted({(c.rail, c.device) for c in chosen})
    columns = [f"{rail} {device}" for rail, device in rails]
    index = {rail: i for i, (rail, _) in enumerate(rails)}
    rates = [c.rate_gbit_s for c in chosen if c.rate_gbit_s]
    line = max(rates) if rates else None
    rows: dict[str, RailRow] = {}
    for c in chosen:
        row = rows.setdefault(
            c.node,
            RailRow(
                node=c.node,
                partner=c.partner,
                cells=[None] * len(rails),
                shares=[None] * len(rails),
            ),
        )
        row.cells[index[c.rail]] = c.gbit_s
        rate = c.rate_gbit_s or line
        row.shares[index[c.rail]] = c.gbit_s / rate if c.gbit_s is not None and rate else None
    return RailTable(columns=columns, line_rate_gbit_s=line, rows=[rows[n] for n in sorted(rows)])
