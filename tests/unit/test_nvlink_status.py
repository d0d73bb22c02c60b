"""`nvidia-smi nvlink -s`: links pinned from real outputs (tests/fixtures/smi/SOURCES.md)."""

from __future__ import annotations

import pytest

from bringup.node.gpu_facts import NvLink
from bringup.node.parsers.nvlink_status import nvlink_version_from_speed, parse_nvlink_status
from bringup.node.result import ParseError
from tests.support.smi_fixtures import read


@pytest.mark.parametrize(
    ("name", "gpus", "links", "gb_s", "version", "model"),
    [
        ("simllm-vastai-b200x8-nvlink-s.txt", 8, 18, 53.125, 5, "NVIDIA B200"),
        ("simllm-vastai-h200x8-nvlink-s.txt", 8, 18, 26.562, 4, "NVIDIA H200"),
        ("ugpuexp-h100-nvlink-s.txt", 1, 18, 26.562, 4, "NVIDIA H100 80GB HBM3"),
        ("simllm-perlmutter-a100x4-nvlink-s.txt", 4, 12, 25.0, 3, "NVIDIA A100-SXM4-40GB"),
        (
            "awsdt-efa-cheatsheet-p4de-a100-gpu0-nvlink-s.txt",
            1,
            12,
            25.0,
            3,
            "NVIDIA A100-SXM4-80GB",
        ),
    ],
)
def test_nvlink_status_all_links_up(
    name: str, gpus: int, links: int, gb_s: float, version: int, model: str
) -> None:
    status = parse_nvlink_status(read(name))
    assert status.supported is True
    assert status.reason is None
    assert [g.index for g in status.gpus] == list(range(gpus))
    for gpu in status.gpus:
        assert gpu.name == model
        assert gpu.links == [
            NvLink(link=i, active=True, speed_bytes_per_s=gb_s * 1e9) for i in range(links)
        ]
    assert nvlink_version_from_speed(gb_s) == version


def test_nvlink_status_b200_uuids() -> None:
    status = parse_nvlink_status(read("simllm-vastai-b200x8-nvlink-s.txt"))
    assert status.gpus[0].uuid == "GPU-7a60931d-6980-e5f3-cae1-ab76693070ef"
    assert status.gpus[7].uuid == "GPU-c2f46995-1b60-06cb-f173-b3dfc59a0824"


def test_nvlink_status_inactive_link() -> None:
    """Editing a real output: a link printed as <inactive> is down, with no speed."""
    text = read("simllm-vastai-b200x8-nvlink-s.txt").replace(
        "\t Link 5: 53.125 GB/s", "\t Link 5: <inactive>", 1
    )
    gpu0 = parse_nvlink_status(text).gpus[0]
    assert gpu0.links[5] == NvLink(link=5, active=False, speed_bytes_per_s=None)
    assert sum(link.active for link in gpu0.links) == 17


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        (
            "ugpuexp-h100-mig-nvlink-s.txt",
            "Nvlink queries are not supported for Devices in MIG mode",
        ),
        ("ugpuexp-l40s-nvlink-s-unsupported.txt", "Device does not have or support Nvlink"),
    ],
)
def test_nvlink_status_unsupported(name: str, reason: str) -> None:
    status = parse_nvlink_status(read(name))
    assert status.supported is False
    assert status.reason == reason
    assert [(g.index, g.links) for g in status.gpus] == [(0, [])]


def test_nvlink_version_unknown_speed() -> None:
    assert nvlink_version_from_speed(0.0) is None
    assert nvlink_version_from_speed(40.0) is None


def test_nvlink_status_rejects_other_output() -> None:
    with pytest.raises(ParseError, match="no 'GPU N"):
        parse_nvlink_status(read("ugpuexp-h100-query-gpu-load.csv.txt"))
