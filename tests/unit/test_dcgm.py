"""The dcgm probe's parser (real `dcgmi diag` tables, JSON in DCGM's layout) and its check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from bringup.checks.dcgm import judge_diag
from bringup.findings import Status
from bringup.node.parsers.dcgm_diag import DiagReport, detect, parse_diag
from bringup.node.probes.dcgm import DcgmFacts, Params, diag_argv, facts_from_output
from bringup.node.result import ParseError, ProbeError
from tests.support.profiles import h100_profile

FIXTURES = Path(__file__).parent.parent / "fixtures" / "dcgm"
A100_3X = "awsdt-efa-cheatsheet-p4de-a100x8-dcgm3.3.3-r2-pass.txt"
A10G_4X = "dcgm-124-dcgm4.4.2-r2-single-gpu-pass-newfmt.txt"
ROWREMAP = "mleng-diag-deployment-rowremap-pending-excerpt.txt"
THERMAL = "mleng-diag-r2-gpu-memory-fail-thermal-warning-excerpt.txt"
B200_PCIE = "dcgm-253-dcgm4.4.1-r2-b200x8-pcie-internal-error-fail.txt"

PROFILE = h100_profile()


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def verdicts(report: DiagReport) -> list[tuple[str, str, str, list[tuple[int | None, str]]]]:
    """(category, test, verdict, [(gpu, status)]) of every test, in order."""
    return [
        (t.category, t.name, t.status, [(r.gpu, r.status) for r in t.results]) for t in report.tests
    ]


def judged(output: str) -> list[tuple[Status, str]]:
    return [(f.status, f.message) for f in judge_diag(facts_from_output(output), PROFILE)]


# --- the real outputs, pinned --------------------------------------------------------------


def test_every_fixture_is_recognised() -> None:
    names = sorted(p.name for p in FIXTURES.glob("*.txt"))
    assert names == sorted([A100_3X, A10G_4X, ROWREMAP, THERMAL, B200_PCIE])
    assert all(detect(text(n)) for n in names)


def test_dcgm_3_table_of_eight_a100s_all_pass() -> None:
    report = parse_diag(text(A100_3X))
    assert (report.format, report.dcgm_version, report.driver_version) == (
        "table",
        "3.3.3",
        "535.104.12",
    )
    assert report.device_ids == ["20b2"] * 8
    deployment = [
        "Denylist",
        "NVML Library",
        "CUDA Main Library",
        "Permissions and OS Blocks",
        "Persistence Mode",
        "Environment Variables",
        "Page Retirement/Row Remap",
        "Graphics Processes",
        "Inforom",
    ]
    assert verdicts(report) == [
        *[("Deployment", name, "pass", []) for name in deployment],
        ("Integration", "PCIe", "pass", [(None, "pass")]),
        ("Hardware", "GPU Memory", "pass", [(None, "pass")]),
    ]
    assert all(not t.messages and not t.info for t in report.tests)


def test_dcgm_4_table_one_gpu_per_row() -> None:
    report = parse_diag(text(A10G_4X))
    assert (report.dcgm_version, report.driver_version, report.device_ids) == (
        "4.4.2",
        "580.105.08",
        ["2237"],
    )
    assert verdicts(report) == [
        ("Deployment", "software", "pass", [(0, "pass")]),
        ("Hardware", "memory", "pass", [(0, "pass")]),
        ("Integration", "pcie", "pass", [(0, "pass")]),
    ]


def test_a_deployment_error_cut_over_two_cells_is_one_message() -> None:
    report = parse_diag(text(ROWREMAP))
    assert verdicts(report) == [("Deployment", "Deployment", "fail", [])]
    # "...and row" + " remappings..." at DCGM's 45-character cut: one space, as DCGM wrote it.
    assert report.tests[0].messages == [
        "GPU 3 has uncorrectable memory errors and row remappings are pending"
    ]


def test_a_memory_failure_on_gpu_0_carries_its_thermal_warning() -> None:
    report = parse_diag(text(THERMAL))
    assert verdicts(report) == [
        (
            "",
            "GPU Memory",
            "fail",
            [*((gpu, "pass") for gpu in range(1, 8)), (0, "fail")],
        )
    ]
    gpu0 = report.tests[0].results[-1]
    # Cut mid-word six times ("second|s", "GP|U 0", "componen|ts."), the last cell unclosed.
    assert gpu0.messages == [
        "GPU 0 Thermal violations totaling 13.3 seconds started at 9.7 seconds into the test "
        "for GPU 0 Verify that the cooling on this machine is functional, including external, "
        "thermal material interface, fans, and any other components."
    ]


def test_the_fixtures_judged() -> None:
    (passed,) = judge_diag(facts_from_output(text(A100_3X)), PROFILE)
    assert passed.status == Status.PASS
    assert passed.message.startswith("dcgmi diag -r 2 (DCGM 3.3.3): 11 tests passed on 8 GPUs")
    assert judged(text(A10G_4X)) == [
        (
            Status.PASS,
            "dcgmi diag -r 2 (DCGM 4.4.2): 3 tests passed on 1 GPU: software, memory, pcie",
        )
    ]
    assert judged(text(ROWREMAP)) == [
        (
            Status.FAIL,
            "Deployment failed: GPU 3 has uncorrectable memory errors and row remappings "
            "are pending",
        )
    ]
    (memory,) = judge_diag(facts_from_output(text(THERMAL)), PROFILE)
    assert memory.status == Status.FAIL
    assert memory.message.startswith("GPU Memory failed on GPU 0: GPU 0 Thermal violations")
    assert memory.value == "GPU Memory"


def test_outputs_of_other_tools_are_not_taken_for_dcgm() -> None:
    others = Path(__file__).parent.parent / "fixtures"
    for name in ("smi/ugpuexp-h100-q-idle.txt", "topo/simllm-vastai-h200x8-8nic.txt"):
        assert not detect((others / name).read_text())
    with pytest.raises(ParseError):
        parse_diag("Error: unable to establish a connection to the specified host: localhost\n")


# --- layouts no public output shows yet: built row by row as dcgmi/Diag.cpp prints them ----

# DCGM 4.x (the 4.4.2 fixture's layout): a test row with its verdict, a row per GPU, and a
# "Warning: GPU<n>" message cut every 45 characters.
TP_MESSAGE = (
    "Detected a targeted power of 612 W on GPU 3; the target was 700 W. "
    "Check the power supply and cooling."
)


def row(name: str, info: str) -> str:
    return f"| {name:<25} | {info:<46} |"


def table_4x(power_rows: list[str]) -> str:
    return "\n".join(
        [
            "Successfully ran diagnostic for group.",
            "+---------------------------+------------------------------------------------+",
            row("Diagnostic", "Result"),
            "+===========================+================================================+",
            "|-----  Metadata  ----------+------------------------------------------------|",
            row("DCGM Version", "4.4.2"),
            row("GPU Device IDs Detected", ", ".join(["2330"] * 4)),
            "|-----  Deployment  --------+------------------------------------------------|",
            row("software", "Pass"),
            *(row("", f"GPU{i}: Pass") for i in range(4)),
            "+-----  Stress  ------------+------------------------------------------------+",
            *power_rows,
            "+---------------------------+------------------------------------------------+",
        ]
    )


def wrapped(label: str, message: str) -> list[str]:
    chunks = [message[i : i + 45] for i in range(0, len(message), 45)]
    return [row(label if n == 0 else "", chunk) for n, chunk in enumerate(chunks)]


def test_a_failed_targeted_power_on_one_gpu_is_one_fail_naming_gpu_and_test() -> None:
    output = table_4x(
        [
            row("targeted_power", "Fail"),
            *(row("", f"GPU{i}: Pass") for i in range(3)),
            row("", "GPU3: Fail"),
            *wrapped("Warning: GPU3", TP_MESSAGE),
        ]
    )
    report = parse_diag(output)
    power = report.tests[-1]
    assert (power.category, power.status) == ("Stress", "fail")
    assert [(r.gpu, r.status) for r in power.results] == [
        (0, "pass"),
        (1, "pass"),
        (2, "pass"),
        (3, "fail"),
    ]
    assert power.results[3].messages == [TP_MESSAGE]
    (fail,) = judge_diag(facts_from_output(output), PROFILE)
    assert fail.status == Status.FAIL
    assert fail.message == f"Stress test targeted_power failed on GPU 3: {TP_MESSAGE}"
    assert "power cables" in (fail.action or "") and "-i 3" in (fail.action or "")


def test_the_same_failure_in_the_dcgm_3_layout() -> None:
    lines = [
        "+-----  Stress  ------------+------------------------------------------------+",
        row("Targeted Power", "Pass - GPUs: 0, 1, 2, 4, 5, 6, 7"),
        row("", "Fail - GPU: 3"),
        *wrapped("Warning", TP_MESSAGE),
    ]
    report = parse_diag("\n".join(lines))
    assert [(r.gpu, r.status) for r in report.tests[0].results] == [
        *((g, "pass") for g in (0, 1, 2, 4, 5, 6, 7)),
        (3, "fail"),
    ]
    (fail,) = judge_diag(facts_from_output("\n".join(lines)), PROFILE)
    assert (fail.status, fail.message) == (
        Status.FAIL,
        f"Stress test Targeted Power failed on GPU 3: {TP_MESSAGE}",
    )


def test_a_warned_test_reads_a_gpus_fail_row_as_a_warning() -> None:
    # Diag.cpp prints a GPU's warning as "Fail" under a test whose verdict is "Warn".
    output = table_4x(
        [row("pcie", "Warn"), row("", "GPU0: Fail"), *wrapped("Warning: GPU0", "PCIe replays")]
        + [row("", f"GPU{i}: Pass") for i in range(1, 4)]
    )
    pcie = parse_diag(output).tests[-1]
    assert (pcie.status, pcie.results[0].gpu, pcie.results[0].status) == ("warn", 0, "warn")
    assert [(f.status, f.message) for f in judge_diag(facts_from_output(output), PROFILE)] == [
        (Status.WARN, "Stress test pcie warned on GPU 0: PCIe replays")
    ]


def test_skipped_is_skip_and_not_run_is_error() -> None:
    output = table_4x(
        [
            row("memtest", "Skip"),
            *(row("", f"GPU{i}: Skip") for i in range(4)),
            row("pulse_test", "Not Run"),
            *(row("", f"GPU{i}: Not Run") for i in range(4)),
        ]
    )
    statuses = [f.status for f in judge_diag(facts_from_output(output), PROFILE)]
    assert statuses == [Status.SKIP] * 4 + [Status.ERROR] * 4


def test_a_skip_all_of_dcgm_3_is_one_skip_with_its_reason() -> None:
    lines = [
        row("Targeted Stress", "Skip - All"),
        *wrapped("Warning", "GPU 0: Unable to find hardware diagnostic, skipping this test."),
    ]
    findings = judge_diag(facts_from_output("\n".join(lines)), PROFILE)
    assert [(f.status, f.message) for f in findings] == [
        (
            Status.SKIP,
            "Targeted Stress skipped: GPU 0: Unable to find hardware diagnostic, "
            "skipping this test.",
        )
    ]  # no PASS: nothing passed


# JSON: documents in the layout DCGM's source writes (dcgmi/Diag.cpp, NvvsJsonStrings.h,
# testing/python3/dcgm_diag_schema.json); no complete real `-j` output is public.


def json_4x() -> str:
    def gpu(index: int, status: str, warning: str | None = None) -> dict[str, object]:
        result: dict[str, object] = {
            "entity_group": "GPU",
            "entity_group_id": 1,
            "entity_id": index,
            "status": status,
        }
        if warning:
            result["warnings"] = [
                {"error_category": 1, "error_id": 2, "error_severity": 3, "warning": warning}
            ]
        return result

    return json.dumps(
        {
            "DCGM Diagnostic": {
                "test_categories": [
                    {
                        "category": "Deployment",
                        "tests": [
                            {
                                "name": "software",
                                "results": [gpu(0, "Pass"), gpu(1, "Pass")],
                                "test_summary": {"status": "Pass"},
                            }
                        ],
                    },
                    {
                        "category": "Stress",
                        "tests": [
                            {
                                "name": "targeted_power",
                                "results": [gpu(0, "Pass"), gpu(1, "Fail", TP_MESSAGE)],
                                "test_summary": {
                                    "status": "Fail",
                                    "warnings": [{"warning": TP_MESSAGE, "error_id": 2}],
                                },
                            }
                        ],
                    },
                ]
            },
            "entity_groups": [
                {
                    "entity_group": "GPU",
                    "entity_group_id": 1,
                    "entities": [
                        {"entity_id": 0, "device_id": "2330"},
                        {"entity_id": 1, "device_id": "2330"},
                    ],
                }
            ],
            "metadata": {"version": "4.4.2", "Driver Version Detected": "580.105.08"},
        },
        indent=3,
    )


def test_json_of_dcgm_4() -> None:
    output = "# command: dcgmi diag -r 3 -j\n" + json_4x()
    assert detect(output)
    report = parse_diag(output)
    assert (report.format, report.dcgm_version, report.driver_version, report.device_ids) == (
        "json",
        "4.4.2",
        "580.105.08",
        ["2330", "2330"],
    )
    assert verdicts(report) == [
        ("Deployment", "software", "pass", [(0, "pass"), (1, "pass")]),
        ("Stress", "targeted_power", "fail", [(0, "pass"), (1, "fail")]),
    ]
    # The summary repeats GPU 1's message: said once.
    assert report.tests[1].messages == []
    (fail,) = judge_diag(facts_from_output(output), PROFILE)
    assert fail.message == f"Stress test targeted_power failed on GPU 1: {TP_MESSAGE}"


def test_json_of_dcgm_3() -> None:
    doc = {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Deployment",
                    "tests": [
                        {"name": "Denylist", "results": [{"status": "Pass"}]},
                        None,  # DCGM 3 leaves a null where a test did not run
                        {
                            "name": "Persistence Mode",
                            "results": [
                                {
                                    "gpu_id": 2,
                                    "status": "Fail",
                                    "warnings": [
                                        {"warnings": "Persistence mode for GPU 2 is disabled."}
                                    ],
                                }
                            ],
                        },
                    ],
                },
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": "GPU Memory",
                            "results": [
                                {"gpu_id": "0", "status": "Pass"},
                                {"gpu_id": "1", "status": "Skip", "info": "ECC is off"},
                            ],
                        }
                    ],
                },
            ]
        },
        "version": "3.3.3",
        "Driver Version Detected": "535.104.12",
        "GPU Device IDs": ["20b2", "20b2", "20b2"],
    }
    report = parse_diag(json.dumps(doc))
    assert (report.dcgm_version, report.device_ids) == ("3.3.3", ["20b2"] * 3)
    assert verdicts(report) == [
        ("Deployment", "Denylist", "pass", [(None, "pass")]),
        ("Deployment", "Persistence Mode", "fail", [(2, "fail")]),
        ("Hardware", "GPU Memory", "skip", [(0, "pass"), (1, "skip")]),
    ]
    assert report.tests[2].info == ["ECC is off"]
    findings = judge_diag(facts_from_output(json.dumps(doc)), PROFILE)
    assert [(f.status, f.message) for f in findings] == [
        (
            Status.FAIL,
            "Deployment test Persistence Mode failed on GPU 2: "
            "Persistence mode for GPU 2 is disabled.",
        ),
        (Status.SKIP, "Hardware test GPU Memory skipped on GPU 1"),
    ]


def test_a_json_runtime_error_is_no_verdict() -> None:
    doc = {
        "DCGM Diagnostic": {
            "runtime_error": "Error: Unable to complete diagnostic.",
            "version": "4.4.2",
        }
    }
    with pytest.raises(ParseError, match="did not run: Error: Unable to complete diagnostic"):
        parse_diag(json.dumps(doc))


def test_facts_round_trip_through_json() -> None:
    facts = facts_from_output(text(THERMAL))
    adapter = TypeAdapter(DcgmFacts)
    assert adapter.validate_python(adapter.dump_python(facts)) == facts


# --- the probe's command line ---------------------------------------------------------------


def test_argv() -> None:
    assert diag_argv("/usr/bin/dcgmi", Params(level=3), True) == [
        "/usr/bin/dcgmi",
        *("diag", "-r", "3", "-j"),
    ]
    params = Params(level=1, gpus="0,1", parameters=["pcie.gpu_nvlinks_expected_up=18"])
    assert diag_argv("dcgmi", params, False) == [
        "dcgmi",
        *("diag", "-r", "1", "-i", "0,1", "-p", "pcie.gpu_nvlinks_expected_up=18"),
    ]
    with pytest.raises(ProbeError, match="level must be 1, 2, 3 or 4"):
        diag_argv("dcgmi", Params(level=5), True)


# --- issue 25: DCGM's verdict on the test row, device ids read whole ------------------------


def test_b200_table_device_ids_read_whole_not_cut_at_the_cell() -> None:
    # "2901, 2901, ..., 2901" fills all 46 characters of its field; a message chunk is 45.
    report = parse_diag(text(B200_PCIE))
    assert (report.dcgm_version, report.driver_version) == ("4.4.1", "570.172.08")
    assert report.device_ids == ["2901"] * 8


def test_b200_table_pcie_row_fail_while_every_gpu_row_passes() -> None:
    report = parse_diag(text(B200_PCIE))
    gpus = [(i, "pass") for i in range(8)]
    assert verdicts(report) == [
        ("Deployment", "software", "pass", gpus),
        ("Hardware", "memory", "pass", gpus),
        ("Integration", "pcie", "fail", gpus),
    ]
    assert report.tests[2].messages == [
        "There was an internal error during the test: 'Output of child process (11167) "
        "couldn't be parsed: '* Line 1, Column 1   Syntax error: value, object or array "
        "expected. '' Check DCGM and system logs for errors. Reset GPU. Restart DCGM. "
        "Rerun diagnostics."
    ]


def test_b200_pcie_internal_error_is_an_error_not_accepted() -> None:
    # On main this was one PASS, "3 tests passed on 8 GPUs: software, memory, pcie".
    findings = judge_diag(facts_from_output(text(B200_PCIE)), PROFILE)
    assert [(f.status, f.value) for f in findings] == [(Status.ERROR, "pcie")]
    (only,) = findings
    assert only.message.startswith(
        "Integration test pcie: DCGM could not run the test (internal error): There was an "
        "internal error during the test: 'Output of child process (11167) couldn't be parsed"
    )
    assert "--exclusive" in only.action and "check DCGM" in only.action
    assert "dcgmi diag -r pcie" in only.action


def test_a_test_row_fail_without_internal_error_fails_though_gpus_pass() -> None:
    # The same real table with DCGM's warning taken out (derived here, not a fixture): the
    # test row's own Fail stands as a FAIL.
    lines = text(B200_PCIE).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Warning"))
    derived = "\n".join(lines[:start] + lines[start + 6 :]) + "\n"
    findings = judge_diag(facts_from_output(derived), PROFILE)
    assert [(f.status, f.message) for f in findings] == [
        (
            Status.FAIL,
            "Integration test pcie failed (DCGM's verdict on the test; 8/8 GPU rows passed)",
        )
    ]


def test_device_ids_wrapped_onto_continuation_rows() -> None:
    # DCGM wraps a device-id list longer than its cell onto rows without a name; a cut
    # inside an id ("290" / "1, ...") joins without a space. The rows are the real B200
    # table's, its id row split in two (derived here: no real >8-GPU table was found).
    head = "| GPU Device IDs Detected   | 2901, 2901, 2901, 2901, 2901, 2901, 2901, 290  |"
    more = "|                           | 1, 2901                                        |"
    lines = text(B200_PCIE).splitlines()
    row = next(i for i, line in enumerate(lines) if "Device IDs" in line)
    report = parse_diag("\n".join([*lines[:row], head, more, *lines[row + 1 :]]))
    assert report.device_ids == ["2901"] * 9


def test_json_4x_test_summary_fail_with_every_gpu_passing_is_not_a_pass() -> None:
    # The JSON layout of DCGM's source (dcgm_diag_schema.json), built here as the real
    # B200 table says it: pcie's summary Fails with DCGM's internal error, each GPU Passes.
    internal = (
        "There was an internal error during the test: 'Output of child process (11167) "
        "couldn't be parsed'"
    )
    doc = json.loads(json_4x())
    doc["DCGM Diagnostic"]["test_categories"][1]["tests"] = [
        {
            "name": "pcie",
            "results": [
                {"entity_group": "GPU", "entity_id": i, "status": "Pass"} for i in range(2)
            ],
            "test_summary": {"status": "Fail", "warnings": [{"warning": internal}]},
        }
    ]
    findings = judge_diag(facts_from_output(json.dumps(doc)), PROFILE)
    assert [(f.status, f.value) for f in findings] == [(Status.ERROR, "pcie")]
    assert findings[0].message.endswith(internal)


# --- what to do: from the failing test and DCGM's own message -------------------------------
# The causes DCGM names come from its error codes' message templates (DCGM_FR_*_MSG in
# dcgmlib/dcgm_errors.h) and the actions from their suggestions (DCGM_FR_*_NEXT);
# docs/reference.md#dcgm-diagnostics. Built rows print each template with its values filled.

THERMAL_ACTION = (
    "thermal violations during the test: verify the cooling of this GPU and node (airflow "
    "and fans, the thermal interface material, the external cooling), as DCGM advises; "
    "`nvidia-smi -q -d TEMPERATURE,PERFORMANCE` shows the margins and the active throttle "
    "reasons"
)
MEMORY_TEST_ACTION = (
    "memory errors: check ECC and remapped rows (`nvidia-smi -q -d ECC,ROW_REMAPPER`), reset "
    "the GPU (`nvidia-smi -r`) and rerun; RMA the GPU if it fails again"
)


def test_a_memory_test_failed_on_thermal_violations_is_about_cooling_first() -> None:
    """The real excerpt: GPU Memory fails on GPU 0 and DCGM's only words are thermal
    violations (DCGM_FR_THERMAL_VIOLATIONS_TS with its suggestion appended). Cooling first,
    then the rerun of that test; ECC and RMA only should it fail again without them."""
    (memory,) = judge_diag(facts_from_output(text(THERMAL)), PROFILE)
    assert memory.action == (
        f"{THERMAL_ACTION}; then rerun `dcgmi diag -r memory -i 0`; if GPU Memory fails "
        f"again with no thermal violation: {MEMORY_TEST_ACTION}"
    )


def test_a_pending_row_remap_is_a_memory_action_on_the_gpu_dcgm_names() -> None:
    (remap,) = judge_diag(facts_from_output(text(ROWREMAP)), PROFILE)
    assert remap.action == (
        "memory errors: read ECC and remapped rows (`nvidia-smi -q -d ECC,ROW_REMAPPER`); "
        "drain the GPU and reset it (`nvidia-smi -r -i 3`) or reboot the node so pending "
        "remaps apply, then run DCGM's field diagnostic; RMA the GPU if errors recur; then "
        "rerun `dcgmi diag -r 1 -i 3`"
    )


def test_dcgms_internal_error_is_the_harness_not_the_gpu() -> None:
    (pcie,) = judge_diag(facts_from_output(text(B200_PCIE)), PROFILE)
    assert pcie.status == Status.ERROR
    assert pcie.action is not None and pcie.action.startswith(
        "DCGM itself failed, not a GPU: rerun with the node to itself (`sbatch --exclusive`"
    )


def failed_on_gpu_2(test: str, message: str) -> str:
    return table_4x(
        [
            row(test, "Fail"),
            *(row("", f"GPU{i}: Pass") for i in (0, 1, 3)),
            row("", "GPU2: Fail"),
            *wrapped("Warning: GPU2", message),
        ]
    )


def action_of(test: str, message: str) -> str:
    (found,) = judge_diag(facts_from_output(failed_on_gpu_2(test, message)), PROFILE)
    assert found.status == Status.FAIL
    return found.action or ""


POWER_ACTION = (
    "the GPU did not reach or hold its target power: check that the enforced power limit is "
    "the default (`nvidia-smi -q -d POWER`; raise it with `nvidia-smi -i 2 -pl <default W>`), "
    "that clocks and utilisation were high under the test, and the node's power delivery"
)
NVLINK_ACTION = (
    "NVLink trouble: make sure Fabric Manager runs (`systemctl status nvidia-fabricmanager`) "
    "and read its log, `dmesg` and the link counters (`nvidia-smi nvlink -s`, `nvidia-smi "
    "nvlink -e`); errors that persist need DCGM's field diagnostic, then a reseat or RMA of "
    "the baseboard"
)
PCIE_ACTION = (
    "PCIe trouble: read the link (`nvidia-smi -q -d PCIE`: generation, width, replays) "
    "against the slot's; reseat the GPU and check its riser and the BIOS PCIe setting; run the "
    "system's PCIe diagnostics for the hops off the GPU board; RMA if it persists"
)


@pytest.mark.parametrize(
    ("test", "message", "action"),
    [
        # DCGM_FR_TARGET_POWER: the power test's own subject, no second action.
        (
            "targeted_power",
            "Max power of 612.0 did not reach desired power minimum targeted_power of 665.0 "
            "for GPU 2",
            f"{POWER_ACTION}; then rerun `dcgmi diag -r targeted_power -i 2`",
        ),
        # DCGM_FR_CLOCK_THROTTLE_THERMAL under a stress test: cooling, then the stress rerun.
        (
            "targeted_stress",
            "Detected clock throttling due to thermal violation in GPU 2.",
            f"{THERMAL_ACTION}; then rerun `dcgmi diag -r targeted_stress -i 2`; if "
            "targeted_stress fails again with no thermal violation: the GPU did not sustain "
            "its target FLOPS: look for throttling (`bringup diagnose`); rerun `dcgmi diag -r "
            "targeted_stress -i 2`; RMA the GPU if it fails again",
        ),
        # DCGM_FR_DBE_VIOLATION under the memory test.
        (
            "memory",
            "Detected 2 volatile double-bit ECC error(s) in GPU 2.",
            "memory errors: read ECC and remapped rows (`nvidia-smi -q -d ECC,ROW_REMAPPER`); "
            "drain the GPU and reset it (`nvidia-smi -r -i 2`) or reboot the node so pending "
            "remaps apply, then run DCGM's field diagnostic; RMA the GPU if errors recur; then "
            "rerun `dcgmi diag -r memory -i 2`",
        ),
        # DCGM_FR_PCI_REPLAY_RATE under the pcie test.
        (
            "pcie",
            "Detected more than 8 PCIe replays per minute for GPU 2 : 31",
            f"{PCIE_ACTION}; then rerun `dcgmi diag -r pcie -i 2`",
        ),
        # DCGM_FR_GPU_EXPECTED_NVLINKS_UP under the pcie test: NVLink, not PCIe.
        (
            "pcie",
            "Only 16 NvLinks are up out of the expected 18",
            f"{NVLINK_ACTION}; then rerun `dcgmi diag -r pcie -i 2`; if pcie fails again "
            "with no NVLink error: PCIe or NVLink trouble: check the link (`nvidia-smi -q -d "
            "PCIE`: generation, width, replays; `nvidia-smi nvlink -s`), reseat the GPU; RMA "
            "if it persists",
        ),
        # DCGM_FR_CLOCK_THROTTLE_POWER under the memory bandwidth test.
        (
            "memory_bandwidth",
            "Detected clock throttling due to power violation in GPU 2.",
            f"{POWER_ACTION}; then rerun `dcgmi diag -r memory_bandwidth -i 2`; if "
            "memory_bandwidth fails again with no power message: HBM bandwidth below DCGM's "
            "floor: look for throttling (`bringup diagnose`) and memory errors; RMA the GPU if "
            "it fails again",
        ),
    ],
)
def test_each_cause_dcgm_names_gets_its_own_action(test: str, message: str, action: str) -> None:
    assert action_of(test, message) == action


def test_a_message_naming_two_causes_gets_both_and_a_message_naming_none_the_tests() -> None:
    both = action_of(
        "sm_stress",
        "Thermal violations totaling 4.1 seconds started at 2.0 seconds into the test for "
        "GPU 2; Detected clock throttling due to power violation in GPU 2.",
    )
    assert both.startswith(f"{THERMAL_ACTION}; {POWER_ACTION}; then rerun `dcgmi diag -r ")
    assert "with no thermal violation or power message: " in both
    unnamed = action_of("targeted_power", "The test did not finish in time.")
    assert unnamed.startswith("the GPU did not hold its target power: check its power cables")
