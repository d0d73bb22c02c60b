"""The shipped profiles: they load, they hold together, and every number names a source.

The expected figures below are those of docs/reference.md#gpu-identity (nvidia-smi names
and MiB totals, DCGM diag-skus.yaml.in) and docs/reference.md#nccl-floors; a profile
drifting from them fails. Every number of a profile must point to a section of
docs/reference.md that exists, or to a URL.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from bringup.profile import Profile, ProfileError, available, load, profiles_dir
from tests.support.reference import reference_anchors

SHIPPED = ["a100", "b200", "b300", "gb200", "gb300", "h100", "h200"]

# nvidia-smi name and total memory in MiB, and the PCI device id
# (docs/reference.md#gpu-identity).
NVIDIA_SMI = {
    "b300": ("NVIDIA B300 SXM6 AC", 275040, "0x3182"),
    "b200": ("NVIDIA B200", 183359, "0x2901"),
    "h200": ("NVIDIA H200", 143771, "0x2335"),
    "h100": ("NVIDIA H100 80GB HBM3", 81559, "0x2330"),
    "a100": ("NVIDIA A100-SXM4-80GB", 81920, "0x20b2"),
    # NVL72 compute trays: tests/fixtures/smi/k8stestinfra-gb{2,3}00x4-580-q-x.xml.
    "gb200": ("NVIDIA GB200", 189471, "0x2941"),
    "gb300": ("NVIDIA GB300", 284208, "0x31c2"),
}
# GPUs per node: an HGX board's 8, an NVL72 compute tray's 4; and the NVLink domain.
GPUS_PER_NODE = {"gb200": 4, "gb300": 4}
DOMAIN = {"gb200": 72, "gb300": 72}

# Lowest published 8-GPU NVLS all-reduce busbw, GB/s (docs/reference.md#nccl-floors; the
# B300 floor comes from B200's figure, the same NVLink 5 fabric).
MEASURED_BUSBW = {"b300": 838, "b200": 838, "h200": 473, "h100": 473, "a100": 235}
# NVL72: 72 ranks in one rack, 835 GB/s the lowest of the large sizes (CoreWeave, GB200;
# GB300 reuses it, the same NVLink 5 fabric).
MEASURED_BUSBW |= {"gb200": 835, "gb300": 835}

# A YAML line whose value (after the key, before any comment) contains a digit.
NUMBER_LINE = re.compile(r"^\s*(?:-\s*)?[\w.-]+:[^#]*\d")
POINTER = re.compile(r"docs/reference\.md#([\w-]+)")
URL = re.compile(r"https?://\S")


def source_comment(lines: list[str], index: int) -> str:
    """The comment of line `index`: its own `# ...` and the comment lines right above it."""
    own = lines[index].split("#", 1)[1] if "#" in lines[index] else ""
    above: list[str] = []
    for line in reversed(lines[:index]):
        if not line.strip().startswith("#"):
            break
        above.insert(0, line)
    return "\n".join([*above, own])


def unsourced_numbers(text: str, sections: set[str] | frozenset[str]) -> list[int]:
    """Line numbers (1-based) of numeric values whose comment names no source.

    A source is a pointer to an existing section of docs/reference.md, or a URL. A pointer
    to a section that does not exist does not count.
    """
    lines = text.splitlines()
    missing = []
    for i, line in enumerate(lines):
        if not NUMBER_LINE.match(line):
            continue
        comment = source_comment(lines, i)
        pointers = POINTER.findall(comment)
        good = any(anchor in sections for anchor in pointers) and all(
            anchor in sections for anchor in pointers
        )
        if not (good or (not pointers and URL.search(comment))):
            missing.append(i + 1)
    return missing


@pytest.fixture(params=SHIPPED)
def name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_available_lists_exactly_the_shipped() -> None:
    assert available() == SHIPPED


def test_every_shipped_profile_loads(name: str) -> None:
    profile = load(name)
    assert isinstance(profile, Profile)
    assert profile.name == name


def test_gpu_identity_matches_nvidia_smi(name: str) -> None:
    model, mib, device_id = NVIDIA_SMI[name]
    gpu = load(name).gpu
    count = GPUS_PER_NODE.get(name, 8)
    assert (gpu.model, gpu.count, gpu.pci_device_id) == (model, count, device_id)
    # The floor sits 1% under what nvidia-smi prints: below it, never far below it.
    printed = mib * 1024 * 1024
    assert 0.985 * printed < gpu.memory_min_bytes < printed
    assert gpu.memory_min_bytes % (1024 * 1024) == 0


def test_sanity_relations(name: str) -> None:
    profile = load(name)
    gpu = profile.gpu
    if gpu.fp8_dense_tflops is not None:
        assert gpu.bf16_dense_tflops < gpu.fp8_dense_tflops
    if gpu.bf16_achievable_tflops is not None:
        assert gpu.bf16_achievable_tflops < gpu.bf16_dense_tflops
    assert profile.nvlink is not None  # all are NVSwitch systems
    assert profile.nvlink.per_pair == profile.nvlink.links_per_gpu
    assert profile.nvlink.domain_gpus == DOMAIN.get(name, 8)
    assert profile.nvlink.fabric_required == (name in DOMAIN)
    assert profile.nvlink.imex_required == (name in DOMAIN)
    # A smaller job's floor is below the whole domain's, and every profile expects its
    # compute NICs' rate, one rail per GPU.
    whole = profile.nccl.allreduce_busbw_min_gb_s
    assert all(f <= whole for f in profile.nccl.allreduce_busbw_min_gb_s_by_ranks.values())
    assert profile.network.compute_rate_gbit_s in (200, 400, 800)
    assert profile.network.compute_ports == gpu.count
    floor = profile.nccl.allreduce_busbw_min_gb_s
    assert 0.9 * MEASURED_BUSBW[name] < floor < MEASURED_BUSBW[name]
    assert (profile.nvme.seq_read_min_gb_s, profile.nvme.seq_write_min_gb_s) == (3.0, 3.0)
    # CUDA 12.8 needs driver 570.26 (docs/reference.md#driver-cuda-and-provisioning).
    assert _version(profile.software.min_driver) >= (570, 26)
    assert _version(profile.software.min_cuda) >= (12, 8)


def test_generations() -> None:
    """NVLink 5 and CUDA 12.9+ for Blackwell Ultra; PCIe Gen4 only on A100."""
    b300 = load("b300")
    assert (b300.gpu.compute_capability, b300.software.min_cuda) == ("10.3", "12.9")
    assert b300.software.min_driver == "580.65.06"
    assert {n: load(n).nvlink.version for n in SHIPPED} == {  # type: ignore[union-attr]
        "a100": 3,
        "b200": 5,
        "b300": 5,
        "gb200": 5,
        "gb300": 5,
        "h100": 4,
        "h200": 4,
    }
    assert {n: load(n).gpu.pcie_gen for n in SHIPPED} == {
        "a100": 4,
        "b200": 5,
        "b300": 6,
        "gb200": 6,
        "gb300": 6,
        "h100": 5,
        "h200": 5,
    }
    # The Grace host caps GB200's link at Gen5; GB300's tray switches it at Gen6.
    assert {n: load(n).gpu.pcie_host_gen for n in SHIPPED if load(n).gpu.pcie_host_gen} == {
        "gb200": 5
    }
    gb300 = load("gb300")
    assert (gb300.gpu.compute_capability, gb300.software.min_driver) == ("10.3", "580.65.06")
    # Compute rails: 800G ConnectX-8 on Blackwell Ultra, 400G ConnectX-7 on B200/GB200/Hopper.
    assert {n: load(n).network.compute_rate_gbit_s for n in SHIPPED} == {
        "a100": 200,
        "b200": 400,
        "b300": 800,
        "gb200": 400,
        "gb300": 800,
        "h100": 400,
        "h200": 400,
    }


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


# --- every number has a source ----------------------------------------------------------------


def test_every_number_in_the_shipped_yaml_names_its_source(name: str) -> None:
    text = (profiles_dir() / f"{name}.yaml").read_text()
    assert unsourced_numbers(text, reference_anchors()) == []


def test_the_source_rule_can_fail() -> None:
    sections = {"pcie", "gpu-identity"}
    text = "\n".join(
        [
            "gpu:",
            "  count: 8",  # 2: no comment
            "  # see docs/reference.md#pcie",
            "  pcie_gen: 5",  # 4: pointer just above
            "  pcie_width: 16  # docs/reference.md#pcie",  # 5: pointer on the line
            "  x: null",  # 6: not a number
            "  power_limit_w: 700  # NVIDIA datasheet",  # 7: names a source, but not one of ours
            "  # docs/reference.md#" + "gpu-identiy",  # split: test_sources reads this file
            "  memory_min_bytes: 1",  # 9: pointer to a section that does not exist
            "  # https://www.nvidia.com/en-us/data-center/h100/",
            "  bf16_dense_tflops: 989",  # 11: a URL
            "  # docs/reference.md#gpu-identity",
            "",
            "  model: NVIDIA H100",  # 14: a blank line ends the comment above
        ]
    )
    assert unsourced_numbers(text, sections) == [2, 7, 9, 14]


# --- errors in a user's copy --------------------------------------------------------------------


def write_copy(tmp_path: Path, edit: dict[str, dict[str, object]]) -> Path:
    """The h100 profile with `edit` merged into its sections, written to a user file."""
    data = yaml.safe_load((profiles_dir() / "h100.yaml").read_text())
    for section, values in edit.items():
        data[section].update(values)
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_plain_copy_loads(tmp_path: Path) -> None:
    path = tmp_path / "copy.yaml"
    shutil.copy(profiles_dir() / "h100.yaml", path)
    assert load(str(path)) == load("h100")


def test_unknown_key_is_named(tmp_path: Path) -> None:
    path = write_copy(tmp_path, {"gpu": {"pcie_gn": 5}})
    with pytest.raises(ProfileError, match=r"gpu\.pcie_gn: unknown key"):
        load(str(path))


def test_wrong_type_is_named(tmp_path: Path) -> None:
    path = write_copy(tmp_path, {"gpu": {"count": "eight"}})
    with pytest.raises(ProfileError, match=r"gpu\.count: ") as info:
        load(str(path))
    assert "\n" not in str(info.value)


def test_malformed_yaml_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("gpu: [unclosed\n  count: 8\n")
    with pytest.raises(ProfileError, match="malformed YAML") as info:
        load(str(path))
    assert "\n" not in str(info.value)


def test_unknown_name_lists_the_available_ones() -> None:
    with pytest.raises(ProfileError, match="unknown profile 'h900'") as info:
        load("h900")
    assert all(name in str(info.value) for name in SHIPPED)
