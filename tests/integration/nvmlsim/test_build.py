"""Building the simulated NVML: the exported symbols, the headers, the branch tables."""

from __future__ import annotations

import importlib.metadata
import itertools
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bringup.sim.nvml import ENTRY_POINTS, NvmlSimError, build_library, installed_headers
from bringup.sim.nvml.branches import (
    BRANCHES,
    MEMORY_TEMP,
    NVLINK_GET_SPEED,
    PERF_POLICY_POWER,
    PERF_POLICY_SYNC_BOOST,
    TEMPERATURE_SLOWDOWN_TLIMIT,
)

HEADERS = installed_headers()
needs_headers = pytest.mark.skipif(not HEADERS, reason="no nvidia-nvml-dev wheel installed")


def _exported(library: Path) -> set[str]:
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("no nm on PATH")
    result = subprocess.run(
        [nm, "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True
    )
    return {line.split()[-1] for line in result.stdout.splitlines() if line.strip()}


@needs_headers
@pytest.mark.parametrize("header", HEADERS, ids=lambda h: h.parts[-3])
def test_each_header_builds_a_library_exporting_exactly_the_entry_points(
    header: Path, tmp_path: Path
) -> None:
    if shutil.which("cc") is None:
        pytest.skip("no cc on PATH")
    library = build_library(tmp_path, header=header)
    assert library.name == "libnvidia-ml.so.1"
    assert _exported(library) == set(ENTRY_POINTS)


def _defines(header: Path) -> dict[str, int]:
    text = header.read_text(errors="replace")
    return {
        name: int(value)
        for name, value in re.findall(r"^\s*#define\s+(NVML_FI_\w+)\s+(\d+)\b", text, re.M)
    }


def _branch_of(header: Path):
    for distribution in ("nvidia-nvml-dev", "nvidia-nvml-dev-cu12"):
        try:
            dist = importlib.metadata.distribution(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
        if any(Path(str(f.locate())) == header for f in dist.files or []):
            pin = f"{distribution}=={dist.version}"
            return next((b for b in BRANCHES.values() if b.header == pin), None)
    return None


@needs_headers
@pytest.mark.parametrize("header", HEADERS, ids=lambda h: h.parts[-3])
def test_branch_tables_are_the_headers_numbers(header: Path) -> None:
    branch = _branch_of(header)
    if branch is None:
        pytest.skip(f"no branch table was read from the installed {header}")
    ids = _defines(header)
    fi_max = ids.pop("NVML_FI_MAX")
    defined = sorted(set(ids.values()))
    ranges, start = [], defined[0]
    for previous, current in itertools.pairwise(defined):
        if current != previous + 1:
            ranges.append((start, previous))
            start = current
    ranges.append((start, defined[-1]))
    assert tuple(ranges) == branch.field_ids
    assert defined[-1] == fi_max - 1
    assert ids["NVML_FI_DEV_MEMORY_TEMP"] == MEMORY_TEMP
    assert ids["NVML_FI_DEV_NVLINK_GET_SPEED"] == NVLINK_GET_SPEED
    assert ids["NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT"] == TEMPERATURE_SLOWDOWN_TLIMIT
    assert ids["NVML_FI_DEV_PERF_POLICY_POWER"] == PERF_POLICY_POWER
    assert ids["NVML_FI_DEV_PERF_POLICY_SYNC_BOOST"] == PERF_POLICY_SYNC_BOOST
    assert (
        ids["NVML_FI_PWR_SMOOTHING_ACTIVE_PRESET_PROFILE"]
        == branch.power_smoothing_active_preset_profile
    )
    reasons = {
        "sw_thermal_slowdown": "NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN",
        "hw_thermal_slowdown": "NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN",
        "hw_power_brake_slowdown": "NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN",
    }
    for reason, name in reasons.items():
        assert branch.throttle_counters.get(reason) == ids.get(name), reason


def test_a_failed_compile_is_one_line(tmp_path: Path) -> None:
    if shutil.which("cc") is None:
        pytest.skip("no cc on PATH")
    header = tmp_path / "nvml.h"
    header.write_text("#error this is not nvml.h\n")
    with pytest.raises(NvmlSimError, match=r"cc failed on nvml_sim\.c: .*this is not nvml\.h"):
        build_library(tmp_path / "out", header=header)


@needs_headers
def test_a_process_compiles_the_library_once(tmp_path: Path) -> None:
    """Each simulated cluster builds the library for its nodes: the second build in a
    process writes the first one's bytes (the compiler does not run again), whole."""
    real = shutil.which("cc")
    if real is None:
        pytest.skip("no cc on PATH")
    calls = tmp_path / "calls"
    counting = tmp_path / "counting-cc"
    counting.write_text(f'#!/bin/sh\necho run >> "{calls}"\nexec "{real}" "$@"\n')
    counting.chmod(0o755)

    first = build_library(tmp_path / "first", cc=str(counting))
    second = build_library(tmp_path / "second", cc=str(counting))
    assert calls.read_text().splitlines() == ["run"]
    assert second == tmp_path / "second" / "libnvidia-ml.so.1"
    assert second.read_bytes() == first.read_bytes()
    assert second.stat().st_mode & 0o777 == 0o755
    assert _exported(second) == set(ENTRY_POINTS)
    assert sorted(p.name for p in second.parent.iterdir()) == ["libnvidia-ml.so.1"]
