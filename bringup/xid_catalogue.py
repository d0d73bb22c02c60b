"""NVIDIA's public Xid catalogue as data: every Xid code with NVIDIA's mnemonic, description,
the GPUs it applies to and its two "resolution buckets" (the immediate action that brings
the system back, and the investigatory action when it recurs).

The rows live in `checks/xid-catalogue.csv`, transcribed from NVIDIA's "Analyzing Xid
Errors with the Xid Catalog" (CATALOGUE_URL; docs/reference.md#xid-catalogue says which
revision). What bringup makes of a bucket (FAIL or WARN, the words of the action) is
judgement and lives in bringup/checks/xid.py.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache

from bringup.data import data_dir

CATALOGUE_URL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
CATALOGUE_FILE = "xid-catalogue.csv"
# The GPUs of the catalogue's "Applies to" columns, in its order.
PRODUCTS = ("A100", "H100", "B100", "GB200")


@dataclass(frozen=True)
class CatalogueEntry:
    """One row of the catalogue's "Xids" sheet."""

    code: int
    mnemonic: str  # "NVLINK_PRIV_ERR"
    description: str  # "NVLink Privilege Error"; "Unused" for codes retired before Ampere
    applies_to: tuple[str, ...]  # of PRODUCTS
    immediate: str  # resolution bucket, immediate action: "RESET_GPU"; "" when none is given
    investigatory: str  # resolution bucket, investigatory action; "" when none is given
    note: str  # the catalogue's own guidance where it gives words instead of a bucket

    @property
    def name(self) -> str:
        """What a finding calls the Xid: the description, or the mnemonic of an unused code."""
        return self.mnemonic if self.description == "Unused" else self.description


@cache
def catalogue() -> dict[int, CatalogueEntry]:
    """Every Xid of the catalogue by code."""
    path = data_dir("checks") / CATALOGUE_FILE
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    entries = [_entry(row) for row in rows]
    return {entry.code: entry for entry in entries}


def _entry(row: dict[str, str]) -> CatalogueEntry:
    applies = tuple(p for p in PRODUCTS if row[p.lower()] == "YES")
    return CatalogueEntry(
        code=int(row["code"]),
        mnemonic=row["mnemonic"],
        description=row["description"],
        applies_to=applies,
        immediate=row["immediate"],
        investigatory=row["investigatory"],
        note=row["note"],
    )
