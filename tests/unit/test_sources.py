"""The rules the repository's text follows, shown to fail (tests/support/reference.py holds
them; tests/integration/repo/test_sources.py applies them to every tracked file).

This file holds examples that break the rules on purpose, so that scan leaves it out.
"""

from __future__ import annotations

from tests.support.reference import (
    anchors,
    broken_pointers,
    outside_mentions,
    reference_anchors,
    slug,
)


def test_the_reference_has_the_sections_the_profiles_rely_on() -> None:
    assert {
        "gpu-identity",
        "gpu-peaks",
        "achievable-matmul-ceilings",
        "power-limits",
        "pcie",
        "nvlink",
        "thermal-limits-and-tlimit",
        "nvml",
        "driver-cuda-and-provisioning",
        "nccl-bus-bandwidth",
        "nccl-floors",
        "nvme-and-fio",
        "flops-and-mfu",
        "host-settings",
        "bringup-policy",
        "profile-margins",
        "report-tolerances",
    } <= reference_anchors()


# --- the rules can fail ----------------------------------------------------------------------


def test_slugs_are_githubs() -> None:
    assert slug("Thermal limits and T.Limit") == "thermal-limits-and-tlimit"
    assert slug("Driver, CUDA and provisioning") == "driver-cuda-and-provisioning"
    assert slug("NVMe and fio") == "nvme-and-fio"
    text = "# Title\n## Notes\n```\n## not a heading\n```\n### Notes\n"
    assert anchors(text) == {"title", "notes", "notes-1"}


def test_a_pointer_to_a_missing_section_is_found() -> None:
    text = "x  # docs/reference.md#gpu-peaks\ny  # docs/reference.md#gpu-peak (typo)\n"
    assert broken_pointers(text, {"gpu-peaks"}) == [(2, "gpu-peak")]


def test_mentions_outside_the_repository_are_found() -> None:
    text = "\n".join(
        [
            "# see REFERENCE.md",  # 1
            '"""As DESIGN.md says."""',  # 2
            "copied from /work/shared/fixtures/nccl/",  # 3
            "(../shared/REFERENCE)",  # 4
            "checkpoints in <run>/work/checkpoints/step<N>",  # 5: the run directory's layout
            "not a burn-in checkpoint (…/work/checkpoints/step<N>)",  # 6: same
            "see docs/reference.md#units",  # 7
            "path=`/work/main`",  # 8
        ]
    )
    assert outside_mentions(text) == [1, 2, 3, 4, 8]
