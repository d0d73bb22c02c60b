"""NVIDIA's public Xid catalogue as data (checks/xid-catalogue.csv): every code it lists has
a name, a severity and an action in bringup, and which ones need a GPU reset or a drain."""

from __future__ import annotations

import csv

import pytest

from bringup.checks import xid
from bringup.checks.xid import RECOVERIES, SEVERITY_STATUS, describe
from bringup.data import data_dir
from bringup.findings import Status
from bringup.xid_catalogue import CATALOGUE_FILE, CatalogueEntry, catalogue

ROWS = list(csv.DictReader((data_dir("checks") / CATALOGUE_FILE).open(encoding="utf-8")))


def test_the_catalogue_lists_every_code_from_1_to_172_once() -> None:
    assert [int(row["code"]) for row in ROWS] == list(range(1, 173))
    assert sorted(catalogue()) == list(range(1, 173))


@pytest.mark.parametrize("row", ROWS, ids=[row["code"] for row in ROWS])
def test_every_xid_of_the_catalogue_has_a_name_severity_and_action(row: dict[str, str]) -> None:
    info = describe(int(row["code"]))
    assert info.name and not info.name.startswith("unknown")
    assert info.mnemonic == row["mnemonic"]
    assert info.severity in SEVERITY_STATUS
    assert info.recovery in RECOVERIES
    assert len(info.action) > 10


def test_every_bucket_the_catalogue_uses_is_read() -> None:
    # A bucket bringup does not know would fall through to "look it up": none may.
    immediate = {row["immediate"] for row in ROWS} - {""}
    investigatory = {row["investigatory"] for row in ROWS} - {""}
    assert immediate <= set(xid._BUCKETS)
    assert investigatory <= set(xid._INVESTIGATE) | set(xid._BUCKETS)
    without = {int(row["code"]) for row in ROWS if not row["immediate"]}
    assert without == set(xid._NO_BUCKET) | set(xid._NOTE_SEVERITY)


def test_the_catalogue_rows_as_transcribed() -> None:
    assert catalogue()[137] == CatalogueEntry(
        code=137,
        mnemonic="NVLINK_PRIV_ERR",
        description="NVLink Privilege Error",
        applies_to=("A100", "H100", "B100", "GB200"),
        immediate="IGNORE",
        investigatory="XID_137_FLOW",
        note="",
    )
    assert catalogue()[149] == CatalogueEntry(
        149,
        "NVLINK_NETIR_ERROR",
        "NVLINK: NETIR Error",
        ("B100", "GB200"),
        "WORKFLOW_NVLINK5_ERR",
        "WORKFLOW_NVLINK5_ERR",
        "",
    )
    assert catalogue()[121].applies_to == ("GB200",)
    assert catalogue()[1].name == "ROBUST_CHANNEL_FIFO_ERROR_FIFO_METHOD"  # "Unused"


def test_xid_137_is_known_not_unknown() -> None:
    # On main: "unknown XID 137".
    info = describe(137)
    assert (info.name, info.mnemonic, info.severity) == (
        "NVLink Privilege Error",
        "NVLINK_PRIV_ERR",
        "info",
    )
    assert SEVERITY_STATUS[info.severity] == Status.WARN
    assert not info.needs_reset
    assert "cuda-gdb or compute-sanitizer" in info.action


@pytest.mark.parametrize(
    ("code", "recovery", "reset", "drain"),
    [
        (48, "drain and reset", True, True),  # WORKFLOW_XID_48
        (79, "reboot", True, True),  # RESTART_BM
        (95, "reset", True, False),  # RESET_GPU
        (143, "reset", True, False),
        (94, "reset", True, False),  # bringup, as NVIDIA's note: reset when convenient
        (13, "restart the application", False, False),
        (151, "restart the VM", False, False),
        (63, "reset", True, False),  # bringup: a pending remap takes a reset
        (145, "as the message says", False, False),  # the Fatal/Nonfatal word decides
        (137, "none", False, False),
    ],
)
def test_which_xids_need_a_reset_or_a_drain(
    code: int, recovery: str, reset: bool, drain: bool
) -> None:
    info = describe(code)
    assert (info.recovery, info.needs_reset, info.needs_drain) == (recovery, reset, drain)


def test_a_code_beyond_the_catalogue_still_says_where_to_look() -> None:
    info = describe(999)
    assert info.name == "unknown XID 999"
    assert "analyzing-xid-catalog" in info.action
