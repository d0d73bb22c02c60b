"""Issue 25: an "N/A" where the profile expects the GPU to report the field is a finding
naming the field (the GPU or driver could not say), not a "not reported" SKIP; where the
field does not exist on that GPU it stays SKIP.

On real captures (tests/fixtures/smi/SOURCES.md): an H100 `nvidia-smi -q` and
`--query-gpu` CSV, an A100 `-q -x` with MIG on (whose `<remapped_rows>` is N/A). The N/A
cases on the H100 are that capture with one field printed N/A the way nvidia-smi prints
a field it has no value for (`Remapped Rows : N/A`, `[N/A]`): derived here, not recorded.
"""

from __future__ import annotations

from msgspec import structs

from bringup.findings import Finding, Status
from bringup.profile import load
from bringup.recognize import inspect_text, read_text
from tests.support import FIXTURES

H100_Q = read_text(FIXTURES / "smi" / "ugpuexp-h100-q-idle.txt")
REMAPS = """\
    Remapped Rows
        Correctable Error                              : 0
        Uncorrectable Error                            : 0
        Pending                                        : No
        Remapping Failure Occurred                     : No
        Bank Remap Availability Histogram
            Max                                        : 2560 bank(s)
            High                                       : 0 bank(s)
            Partial                                    : 0 bank(s)
            Low                                        : 0 bank(s)
            None                                       : 0 bank(s)
"""
ECC_MODE = """\
    ECC Mode
        Current                                        : Enabled
"""
POWER_LIMIT = """\
        Instantaneous Power Draw                       : 69.62 W
        Current Power Limit                            : 700.00 W
"""


def with_na(old: str, new: str) -> str:
    assert H100_Q.count(old) == 1
    return H100_Q.replace(old, new)


def of(text: str, check: str, profile: object = "auto") -> list[tuple[Status, str]]:
    seen = inspect_text(text, profile)  # type: ignore[arg-type]
    return [(f.status, f.message) for f in seen.findings if f.check == check]


def finding_of(text: str, check: str) -> Finding:
    (found,) = [f for f in inspect_text(text, "auto").findings if f.check == check]
    return found


def test_the_real_h100_capture_s_na_fields_are_ones_an_h100_does_not_have() -> None:
    # Module Power Readings, Retired Pages (replaced by row remapping), MIG, GPU Target
    # Temperature: all N/A on this healthy H100, none is flagged.
    assert inspect_text(H100_Q, "auto").profile == "h100"
    assert of(H100_Q, "gpu.remapped_rows") == [
        (Status.PASS, "1/1 GPUs: no pending or failed row remap")
    ]
    assert of(H100_Q, "gpu.power") == [(Status.PASS, "1/1 GPUs: power limit >= 700 W, not lowered")]
    assert [s for s, _ in of(H100_Q, "gpu.ecc")] == [Status.PASS]


def test_remapped_rows_na_on_an_hbm_gpu_fails_naming_the_field() -> None:
    # On main: SKIP "remapped rows not reported (GPU older than A100, or MIG active)".
    text = with_na(REMAPS, "    Remapped Rows                                  : N/A\n")
    found = finding_of(text, "gpu.remapped_rows")
    assert (found.status, found.value) == (Status.FAIL, "N/A")
    assert found.message == (
        "GPU 0: Remapped Rows is N/A: the GPU or driver could not report it, and this GPU has it"
    )
    assert "nvidia-smi -q -i 0" in (found.action or "")


def test_ecc_mode_na_beside_readable_counters_is_no_pass() -> None:
    # On main: PASS "ECC enabled, no uncorrected errors": the counters said nothing of the mode.
    text = with_na(ECC_MODE, ECC_MODE.replace("Enabled", "N/A"))
    assert of(text, "gpu.ecc") == [
        (
            Status.FAIL,
            "GPU 0: ECC Mode Current is N/A: the GPU or driver could not report it, "
            "and this GPU has it",
        )
    ]


def test_an_unreadable_power_limit_warns() -> None:
    # On main: SKIP "power limit not reported".
    text = with_na(POWER_LIMIT, POWER_LIMIT.replace("700.00 W", "N/A"))
    assert of(text, "gpu.power") == [
        (
            Status.WARN,
            "GPU 0: GPU Power Readings Current Power Limit is N/A: the GPU or driver could not "
            "report it, and this GPU has it",
        )
    ]


def test_a_field_the_profile_does_not_expect_stays_skip() -> None:
    # A user's profile for a GPU without row remapping (a consumer board) leaves it out.
    text = with_na(REMAPS, "    Remapped Rows                                  : N/A\n")
    h100 = load("h100")
    own = structs.replace(h100, gpu=structs.replace(h100.gpu, reports=["ecc", "power_limit"]))
    assert of(text, "gpu.remapped_rows", own) == [
        (Status.SKIP, "remapped rows not reported (GPU older than A100, or MIG active)")
    ]


def test_remapped_rows_na_under_mig_stays_skip() -> None:
    # nvidia-smi reports row remapping per GPU only with MIG off (the real A100 MIG -q -x
    # captures print <remapped_rows>N/A</remapped_rows>).
    text = with_na(REMAPS, "    Remapped Rows                                  : N/A\n")
    mig_off = "    MIG Mode\n        Current                                        : Disabled"
    assert text.count(mig_off) == 1
    text = text.replace(mig_off, mig_off.replace("Disabled", "Enabled"))
    assert [s for s, _ in of(text, "gpu.remapped_rows")] == [Status.SKIP]


def test_na_without_a_profile_is_not_judged_as_expected() -> None:
    # A GPU no profile fits: the profile-free gpu.remapped_rows has nothing that says the
    # GPU has row remapping, so N/A stays the SKIP.
    text = with_na(REMAPS, "    Remapped Rows                                  : N/A\n")
    text = text.replace("NVIDIA H100 80GB HBM3", "NVIDIA Unknown Board").replace(
        "0x233010DE", "0xFFFF10DE"
    )
    seen = inspect_text(text, "auto")
    assert [(f.check, f.status) for f in seen.findings if f.check == "gpu.remapped_rows"] == [
        ("gpu.remapped_rows", Status.SKIP)
    ]


# --- -q -x: the same rules, on a real A100 with MIG on ---------------------------------------

A100_MIG_XML = read_text(FIXTURES / "smi" / "telegraf-a100-sxm4-x4-mig-535-q-x.xml")


def test_q_x_names_the_na_fields_as_q_text_does() -> None:
    (gpu,) = inspect_text(A100_MIG_XML, "auto").facts.gpus
    assert (gpu.mig_mode, gpu.remapped_rows, gpu.not_available) == (True, None, ["Remapped Rows"])


def test_real_a100_with_mig_on_keeps_its_remapped_rows_skip() -> None:
    assert of(A100_MIG_XML, "gpu.remapped_rows") == [
        (Status.SKIP, "remapped rows not reported (GPU older than A100, or MIG active)")
    ]


def test_the_same_a100_with_mig_off_fails_its_na_remapped_rows() -> None:
    # On main: SKIP. With MIG off nothing explains the N/A on an A100.
    mig_on = "<current_mig>Enabled</current_mig>"
    assert A100_MIG_XML.count(mig_on) == 1
    text = A100_MIG_XML.replace(mig_on, "<current_mig>Disabled</current_mig>")
    assert of(text, "gpu.remapped_rows") == [
        (
            Status.FAIL,
            "GPU 0: Remapped Rows is N/A: the GPU or driver could not report it, "
            "and this GPU has it",
        )
    ]


# --- --query-gpu CSV: the field named by its query name -------------------------------------

H100_CSV = read_text(FIXTURES / "smi" / "ugpuexp-h100-query-gpu-load.csv.txt")


def csv_with_na(column: str) -> str:
    """The real H100 CSV with one column's cell printed "[N/A]", as nvidia-smi prints it."""
    header, row, *rest = H100_CSV.splitlines()
    names = [cell.strip().split(" [")[0] for cell in header.split(",")]
    cells = row.split(",")
    cells[names.index(column)] = " [N/A]"
    return "\n".join([header, ",".join(cells), *rest]) + "\n"


def test_the_real_h100_csv_is_judged_as_before() -> None:
    assert inspect_text(H100_CSV, "auto").facts.gpus[0].not_available == []
    assert [s for s, _ in of(H100_CSV, "gpu.ecc")] == [Status.PASS]


def test_csv_ecc_mode_na_fails_naming_the_query_field() -> None:
    # On main: PASS "ECC enabled, no uncorrected errors" (the counters alone).
    assert of(csv_with_na("ecc.mode.current"), "gpu.ecc") == [
        (
            Status.FAIL,
            "GPU 0: ecc.mode.current is N/A: the GPU or driver could not report it, "
            "and this GPU has it",
        )
    ]


def test_csv_remapped_rows_na_fails() -> None:
    # On main: SKIP "remapped rows not reported".
    assert of(csv_with_na("remapped_rows.pending"), "gpu.remapped_rows") == [
        (
            Status.FAIL,
            "GPU 0: remapped_rows.pending is N/A: the GPU or driver could not report it, "
            "and this GPU has it",
        )
    ]
