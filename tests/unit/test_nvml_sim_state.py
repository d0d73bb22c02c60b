"""The simulated NVML's pure parts: branch tables, time values, state builders, faults.

The library itself (compiled, loaded by pynvml) is tested in tests/integration/nvmlsim/.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bringup.sim.nvml import (
    NvmlSimError,
    apply_fault,
    build_library,
    check_state,
    parse_fault,
    state_from_capture,
    state_from_profile,
    write_state,
)
from bringup.sim.nvml.branches import BRANCHES, branch_for_major
from bringup.sim.nvml.captures import reasons_mask
from bringup.sim.nvml.state import ENTRY_POINTS, switch_at, value_at

SMI = Path(__file__).parent.parent / "fixtures" / "smi"
H200 = SMI / "ugpuexp-h200-q-load.txt"
A100_XML = SMI / "telegraf-a100-sxm4-x4-mig-535-q-x.xml"
MIB = 1048576


# --- branch tables --------------------------------------------------------------------------


def test_throttle_counters_moved_between_r575_and_r580() -> None:
    assert BRANCHES["r575"].throttle_counters == {
        "sw_power_cap": 74,
        "sync_boost": 76,
        "sw_thermal_slowdown": 251,
        "hw_thermal_slowdown": 252,
        "hw_power_brake_slowdown": 253,
    }
    assert BRANCHES["r580"].throttle_counters == {
        "sw_power_cap": 74,
        "sync_boost": 76,
        "sw_thermal_slowdown": 269,
        "hw_thermal_slowdown": 270,
        "hw_power_brake_slowdown": 271,
    }
    assert BRANCHES["r570"].throttle_counters == {"sw_power_cap": 74, "sync_boost": 76}


def test_power_smoothing_preset_and_defined_ids_per_branch() -> None:
    assert BRANCHES["r570"].power_smoothing_active_preset_profile == 264
    assert BRANCHES["r575"].power_smoothing_active_preset_profile == 269
    assert BRANCHES["r580"].power_smoothing_active_preset_profile == 264
    # r570: NVML_FI_MAX 269, with 231-234 undefined.
    assert BRANCHES["r570"].has_field(230) and not BRANCHES["r570"].has_field(231)
    assert BRANCHES["r570"].has_field(268) and not BRANCHES["r570"].has_field(269)
    assert BRANCHES["r580"].has_field(273) and not BRANCHES["r580"].has_field(274)


@pytest.mark.parametrize(
    ("major", "branch"),
    [(535, "r570"), (570, "r570"), (574, "r570"), (575, "r575"), (580, "r580"), (590, "r580")],
)
def test_branch_for_driver_major(major: int, branch: str) -> None:
    assert branch_for_major(major).name == branch


# --- time values ----------------------------------------------------------------------------


def test_steps_are_piecewise_constant_with_the_first_value_before_the_first_point() -> None:
    steps = {"steps": [[1.0, 10], [3.0, 30]]}
    assert [value_at(steps, t) for t in (0.0, 1.0, 2.9, 3.0, 99.0)] == [10, 10, 10, 30, 30]


def test_ramp_interpolates_and_is_flat_outside() -> None:
    ramp = {"ramp": [[1.0, 40], [3.0, 80]]}
    assert [value_at(ramp, t) for t in (0.0, 1.0, 2.0, 2.5, 3.0, 10.0)] == [40, 40, 60, 70, 80, 80]


def test_accumulate_integrates_a_piecewise_constant_rate() -> None:
    acc = {"accumulate": [[0.5, 1e9], [2.0, 0], [3.0, 2e9]]}
    assert value_at(acc, 0.25) == 0
    assert value_at(acc, 1.5) == pytest.approx(1e9)
    assert value_at(acc, 2.5) == pytest.approx(1.5e9)
    assert value_at(acc, 4.0) == pytest.approx(1.5e9 + 2e9)


def test_switch_at_on_a_constant_and_on_steps() -> None:
    assert switch_at(100, 0, lambda v: v / 2) == 50
    assert switch_at(100, 2.0, lambda v: v / 2) == {"steps": [[0, 100], [2.0, 50]]}
    steps = {"steps": [[1.0, 1], [3.0, 3]]}
    assert switch_at(steps, 2.0, lambda v: v + 10) == {
        "steps": [[0, 1], [1.0, 1], [2.0, 11], [3.0, 13]]
    }
    with pytest.raises(NvmlSimError, match="steps only"):
        switch_at({"ramp": [[0, 1], [1, 2]]}, 0.5, lambda v: v)


# --- building states --------------------------------------------------------------------------


def test_state_from_the_h200_capture() -> None:
    state = state_from_capture(H200)
    assert state["driver_version"] == "590.48.01"
    assert state["cuda_driver_version"] == 13010
    assert state["branch"] == "r580"
    assert state["field_ids"] == [[1, 273]]
    (gpu,) = state["gpus"]
    assert gpu["name"] == "NVIDIA H200"
    assert gpu["pci"] == {"bus_id": "00000000:83:00.0", "device_id": 0x233510DE}
    assert gpu["memory"] == {"total": 143771 * MIB}
    assert gpu["power"] == {
        "usage_mw": 627320,
        "enforced_limit_mw": 700000,
        "default_limit_mw": 700000,
    }
    assert gpu["temperature"] == {"gpu": 52.0, "margin": 35.0}
    assert gpu["clocks"] == {"sm": 1980, "mem": 3201}
    assert gpu["ecc_mode"] == {"current": 1}
    assert gpu["clocks_event_reasons"] == 0
    assert gpu["fabric"] == {"state": "completed", "status": "SUCCESS", "clique_id": 0}
    assert gpu["fields"] == {
        "82": {"type": "unsigned_int", "value": 41.0},
        "194": {"type": "signed_int", "value": -2.0},
        "195": {"type": "signed_int", "value": 0.0},  # "Memory Max Operating T.Limit Temp"
    }
    # What the -q text parser does not give is absent (NOT_SUPPORTED), not invented.
    assert "compute_capability" not in gpu and "nvlinks" not in gpu
    check_state(state)


def test_state_from_an_xml_capture_of_an_older_driver_uses_the_oldest_table() -> None:
    state = state_from_capture(A100_XML)
    assert (state["driver_version"], state["branch"]) == ("535.54.03", "r570")
    assert state["cuda_driver_version"] == 12020
    (gpu,) = state["gpus"]  # the capture says 4 GPUs but holds one (trimmed upstream)
    assert gpu["name"] == "NVIDIA A100-SXM4-80GB"
    assert gpu["mig_mode"] == {"current": 1}


def test_driver_override_picks_the_branch_and_its_cuda_version() -> None:
    state = state_from_capture(H200, driver="575.57.08")
    assert state["driver_version"] == "575.57.08"
    assert (state["branch"], state["cuda_driver_version"]) == ("r575", 12090)
    with pytest.raises(NvmlSimError, match=r"not like 580\.95\.05"):
        state_from_capture(H200, driver="latest")


def test_b300_profile_has_eight_healthy_nvlink5_gpus() -> None:
    state = state_from_profile("b300")
    assert len(state["gpus"]) == 8
    gpu = state["gpus"][3]
    assert gpu["compute_capability"] == [10, 3]
    assert gpu["nvlinks"] == [{"active": 1, "version": 7}] * 18  # NVML_NVLINK_VERSION_5_0
    assert gpu["fields"]["164:17"] == {"type": "unsigned_int", "value": 53125}
    assert gpu["clocks_event_reasons"] == 0x1  # gpu_idle
    with pytest.raises(NvmlSimError, match="no profile 'h900'; known: b300"):
        state_from_profile("h900")


def test_capture_errors_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("this is not nvidia-smi output\n")
    with pytest.raises(NvmlSimError) as caught:
        state_from_capture(bad)
    assert "\n" not in str(caught.value)
    with pytest.raises(NvmlSimError, match="cannot read"):
        state_from_capture(tmp_path / "absent.txt")


def test_reasons_mask_keeps_unknown_bits() -> None:
    assert reasons_mask(["gpu_idle", "hw_thermal_slowdown", "unknown_0x200", "new"]) == 0x241


# --- checking and writing -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s.pop("gpus"), "state: missing 'gpus'"),
        (lambda s: s["gpus"][0].update(colour=1), "unknown key 'colour'"),
        (lambda s: s["gpus"][0]["power"].update(usage_mw={"wave": []}), "power.usage_mw: not a"),
        (lambda s: s["gpus"][0]["power"].update(usage_mw={"ramp": [[2, 1], [1, 2]]}), "in incr"),
        (lambda s: s["gpus"][0]["fabric"].update(status="BROKEN"), "'BROKEN' is not one of"),
        (lambda s: s.update(errors={"nvmlDeviceGetBAR1MemoryInfo": "UNKNOWN"}), "is not one"),
        (lambda s: s["gpus"][0].update(errors={"nvmlSystemGetDriverVersion": "UNKNOWN"}), "per"),
        (lambda s: s["gpus"][0]["fields"].update({"82x": 1}), "field key '82x'"),
    ],
)
def test_check_state_names_the_first_problem(change, message: str) -> None:
    state = state_from_capture(H200)
    change(state)
    with pytest.raises(NvmlSimError, match=message):
        check_state(state)


def test_write_state_round_trips(tmp_path: Path) -> None:
    state = apply_fault(state_from_profile("b300"), "hw-thermal:2=1.5")
    path = write_state(state, tmp_path / "state.json")
    assert json.loads(path.read_text()) == state


# --- faults -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("lost", ("lost", None, None)),
        ("lost:3=2.5", ("lost", 3, "2.5")),
        ("nvlink-down:0=0,3,5", ("nvlink-down", 0, "0,3,5")),
        (
            "not-supported=nvmlDeviceGetPowerUsage",
            ("not-supported", None, "nvmlDeviceGetPowerUsage"),
        ),
    ],
)
def test_parse_fault(spec: str, parsed: tuple) -> None:
    assert parse_fault(spec) == parsed


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("melted", "unknown kind 'melted'"),
        ("lost:x", "GPU must be an index"),
        ("hw-thermal", "needs a value"),
        ("missing=1", "takes no value"),
        ("lost:8", "no GPU 8"),
        ("hw-thermal=soon", "expected seconds"),
        ("fabric=melted", "expected in_progress or failure"),
        ("nvlink-down:1=18", "no NVLink 18"),
        ("not-supported=nvmlDeviceGetBAR1MemoryInfo", "not an entry point"),
        ("unknown:1=nvmlSystemGetDriverVersion", "not per GPU"),
        ("ecc-uncorrected=-1", "expected a count"),
        ("power-limit=0", "above 0"),
    ],
)
def test_bad_faults_are_one_line_errors(spec: str, message: str) -> None:
    with pytest.raises(NvmlSimError, match=message) as caught:
        apply_fault(state_from_profile("b300"), spec)
    assert "\n" not in str(caught.value)


def test_faults_do_not_change_their_input() -> None:
    state = state_from_profile("b300")
    before = json.dumps(state)
    apply_fault(state, "lost")
    assert json.dumps(state) == before


def test_lost_and_missing_on_one_gpu() -> None:
    state = apply_fault(apply_fault(state_from_profile("b300"), "lost:2=3"), "missing:5")
    assert state["gpus"][2]["lost"] == {"steps": [[0, 0], [3.0, 1]]}
    assert state["gpus"][5]["missing"] is True
    assert [("lost" in g, "missing" in g) for g in state["gpus"]].count((False, False)) == 6


def test_injected_errors_go_to_the_gpu_or_the_whole_driver() -> None:
    state = apply_fault(state_from_profile("b300"), "not-supported:1=nvmlDeviceGetPowerUsage")
    state = apply_fault(state, "unknown=nvmlInit")  # pynvml's name for nvmlInitWithFlags
    assert state["gpus"][1]["errors"] == {"nvmlDeviceGetPowerUsage": "NOT_SUPPORTED"}
    assert "errors" not in state["gpus"][0]
    assert state["errors"] == {"nvmlInitWithFlags": "UNKNOWN"}
    every = apply_fault(state_from_profile("b300"), "unknown=nvmlDeviceGetPciInfo")
    assert all(g["errors"] == {"nvmlDeviceGetPciInfo_v3": "UNKNOWN"} for g in every["gpus"])


def test_fabric_nvlink_remap_ecc_and_power_faults() -> None:
    base = state_from_profile("b300")
    gpu = apply_fault(base, "fabric:0=in_progress")["gpus"][0]
    assert gpu["fabric"] == {"state": "in_progress", "status": "SUCCESS"}
    gpu = apply_fault(base, "fabric:0=failure")["gpus"][0]
    assert gpu["fabric"] == {"state": "completed", "status": "UNKNOWN"}
    links = apply_fault(base, "nvlink-down:0=0,3,5")["gpus"][0]["nvlinks"]
    assert [n for n, link in enumerate(links) if not link["active"]] == [0, 3, 5]
    links = apply_fault(base, "nvlink-down:0=all")["gpus"][0]["nvlinks"]
    assert not any(link["active"] for link in links)
    rows = apply_fault(apply_fault(base, "remap-pending:4"), "remap-failure:4")["gpus"][4]
    assert rows["remapped_rows"] == {
        "correctable": 0,
        "uncorrectable": 0,
        "pending": 1,
        "failure": 1,
    }
    ecc = apply_fault(base, "ecc-uncorrected:6=3")["gpus"][6]["ecc_errors"]["uncorrected"]
    assert ecc == {"volatile": 3, "aggregate": 3}
    power = apply_fault(base, "power-limit:7=400")["gpus"][7]["power"]
    assert power == {"usage_mw": 190000, "enforced_limit_mw": 400000, "default_limit_mw": 1100000}
    capped = apply_fault(base, "power-limit:7=150")["gpus"][7]["power"]
    assert capped["usage_mw"] == 150000


@pytest.mark.parametrize(
    ("driver", "kind", "field", "bits"),
    [
        ("580.95.05", "hw-thermal", "270", 0x48),
        ("575.57.08", "hw-thermal", "252", 0x48),
        ("580.95.05", "power-brake", "271", 0x88),
        ("575.57.08", "sw-thermal", "251", 0x20),
        ("580.95.05", "hw-slowdown", None, 0x8),
        ("570.172.08", "hw-thermal", None, 0x48),  # r570 has no such counter
    ],
)
def test_slowdowns_switch_a_bit_on_drop_the_clock_and_count(
    driver: str, kind: str, field: str | None, bits: int
) -> None:
    state = apply_fault(state_from_profile("b300", driver=driver), f"{kind}:5=0.5")
    gpu = state["gpus"][5]
    assert gpu["clocks_event_reasons"] == {"steps": [[0, 0x1], [0.5, 0x1 | bits]]}
    factor = 0.75 if kind == "sw-thermal" else 0.5
    assert gpu["clocks"]["sm"] == {"steps": [[0, 345], [0.5, round(345 * factor)]]}
    counters = {k for k in gpu["fields"] if not k.startswith(("82", "164"))}
    if field is None:
        assert counters == set()
    else:
        assert counters == {field}
        assert gpu["fields"][field] == {
            "type": "unsigned_long_long",
            "value": {"accumulate": [[0.5, 1e9]]},
        }
    assert state["gpus"][4]["clocks_event_reasons"] == 0x1  # the other GPUs are untouched


def test_two_slowdowns_of_one_counter_add_their_rates() -> None:
    state = apply_fault(state_from_profile("b300"), "hw-thermal:0=1")
    state = apply_fault(state, "hw-thermal:0=2")
    counter = state["gpus"][0]["fields"]["270"]["value"]
    assert counter == {"accumulate": [[1.0, 1e9], [2.0, 2e9]]}
    assert value_at(counter, 3.0) == pytest.approx(3e9)


def test_entry_points_are_unique() -> None:
    assert (
        len(set(ENTRY_POINTS)) == len(ENTRY_POINTS) == 45
    )  # 44 NVML functions and the simulator's mark


# --- building (what fails before any compiler runs) -----------------------------------------------


def test_build_needs_a_compiler_and_a_header(tmp_path: Path) -> None:
    with pytest.raises(NvmlSimError, match="no C compiler 'no-such-cc' on PATH"):
        build_library(tmp_path, cc="no-such-cc")
    with pytest.raises(NvmlSimError, match=r"no nvml\.h at"):
        build_library(tmp_path, header=tmp_path / "nvml.h", cc="sh")


def test_a_profile_state_is_built_once_and_each_caller_gets_its_own_copy(monkeypatch) -> None:
    """A simulated cluster asks for the b300 state twice per node: the demo fleet behind it
    is built once per process, and a caller that changes its copy changes no other."""
    from bringup.sim.nvml import captures

    captures._profile_state.cache_clear()
    built = []
    real = captures.PROFILES["b300"]
    monkeypatch.setitem(captures.PROFILES, "b300", lambda: built.append(1) or real())
    first = captures.state_from_profile("b300")
    first["gpus"][0]["serial"] = "CHANGED"
    first["gpus"].pop()
    second = captures.state_from_profile("b300")
    assert built == [1]
    assert second == captures.state_from_facts(real())
    assert len(second["gpus"]) == 8 and second["gpus"][0]["serial"] != "CHANGED"
    captures._profile_state.cache_clear()
