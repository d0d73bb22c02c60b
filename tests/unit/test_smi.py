"""nvidia-smi outputs across formats: which parser claims a text, JSON round trip, robustness.

One module per format (smi_text, smi_xml, smi_csv, nvlink_status) has its own tests; these
hold for all of them, on every real output of tests/fixtures/smi/ (SOURCES.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from bringup.node.gpu_facts import GpuFacts
from bringup.node.parsers import nvlink_status, smi_csv, smi_text, smi_xml
from bringup.node.parsers.nvlink_status import NvlinkStatus
from bringup.node.result import ParseError
from tests.support.smi_fixtures import ALL_SMI, FIXTURES, only_gpu, read

PARSERS: dict[str, Callable[[str], object]] = {
    "smi-q": smi_text.parse_q_text,
    "smi-xml": smi_xml.parse_q_xml,
    "smi-csv": smi_csv.parse_query_csv,
    "nvlink-s": nvlink_status.parse_nvlink_status,
}

DETECTORS: dict[str, Callable[[str], bool]] = {
    "smi-q": smi_text.detect,
    "smi-xml": smi_xml.detect,
    "smi-csv": smi_csv.detect,
    "nvlink-s": nvlink_status.detect,
}

KIND = {
    "ugpuexp-h100-q-idle.txt": "smi-q",
    "ugpuexp-h100-q-load.txt": "smi-q",
    "ugpuexp-h200-q-load.txt": "smi-q",
    "ugpuexp-l40s-q-idle.txt": "smi-q",
    "mleng-a100-sxm4-80gb-q-excerpt-remapped-rows-pending.txt": "smi-q",
    "mleng-ecc-sram-uncorrectable-excerpt.txt": "smi-q",
    "telegraf-a100-sxm4-x4-mig-535-q-x.xml": "smi-xml",
    "netdata-a100-sxm4-40gb-mig-510-q-x.xml": "smi-xml",
    "telegraf-tesla-t4-q-x.xml": "smi-xml",
    "ugpuexp-h100-query-gpu-load.csv.txt": "smi-csv",
    "ugpuexp-l40s-query-gpu-idle.csv.txt": "smi-csv",
    "netdata-tesla-p100-query-gpu.csv.txt": "smi-csv",
    "mleng-h100-query-gpu-vbios-excerpt.csv.txt": "smi-csv",
    "simllm-vastai-b200x8-nvlink-s.txt": "nvlink-s",
    "simllm-vastai-h200x8-nvlink-s.txt": "nvlink-s",
    "simllm-perlmutter-a100x4-nvlink-s.txt": "nvlink-s",
    "awsdt-efa-cheatsheet-p4de-a100-gpu0-nvlink-s.txt": "nvlink-s",
    "ugpuexp-h100-nvlink-s.txt": "nvlink-s",
    "ugpuexp-h100-mig-nvlink-s.txt": "nvlink-s",
    "ugpuexp-l40s-nvlink-s-unsupported.txt": "nvlink-s",
    "k8stestinfra-gb200x4-580-q-x.xml": "smi-xml",
    "k8stestinfra-gb300x4-580-q-x.xml": "smi-xml",
    "k8stestinfra-b200x8-580-q-x.xml": "smi-xml",
    "gpu-uncorrectable-runbook-q-ecc-rowremap-i-52-annotated.txt": "smi-q",
    "xe9780-b300x7-of-8-driver-name-cc.csv.txt": "smi-csv",
    "xe9780-b300x7-of-8-nvlink-status.txt": "nvlink-s",
}


def claimed_by(text: str) -> list[str]:
    """The formats whose detect says the text is theirs."""
    return [kind for kind, detect in DETECTORS.items() if detect(text)]


def test_every_fixture_has_a_kind() -> None:
    assert sorted(KIND) == ALL_SMI


@pytest.mark.parametrize("name", ALL_SMI)
def test_only_its_own_format_claims_a_fixture(name: str) -> None:
    assert claimed_by(read(name)) == [KIND[name]]


OTHER_FIXTURES = sorted(
    p for p in FIXTURES.glob("*/*") if p.is_file() and p.parent.name != "smi" and p.suffix != ".md"
)


@pytest.mark.parametrize("path", OTHER_FIXTURES, ids=[p.name for p in OTHER_FIXTURES])
def test_detect_ignores_other_tools(path: Path) -> None:
    assert claimed_by(path.read_text(errors="replace")) == []


def test_detect_ignores_empty_and_prose() -> None:
    assert claimed_by("") == []
    assert claimed_by("No devices were found\n") == []


@pytest.mark.parametrize("name", ALL_SMI)
def test_facts_round_trip_through_json_and_pydantic(name: str) -> None:
    kind = KIND[name]
    facts = PARSERS[kind](read(name))
    cls = NvlinkStatus if kind == "nvlink-s" else GpuFacts
    data = json.loads(json.dumps(asdict(facts)))  # type: ignore[call-overload]
    assert TypeAdapter(cls).validate_python(data) == facts


def test_q_and_csv_agree_on_the_same_h100() -> None:
    """Two formats of one H100 under load: only compute_cap (CSV only) and readings differ."""
    q = only_gpu(smi_text.parse_q_text(read("ugpuexp-h100-q-load.txt")))
    csv_gpu = only_gpu(smi_csv.parse_query_csv(read("ugpuexp-h100-query-gpu-load.csv.txt")))
    assert (
        # The CSV has the T.Limit margin but no slowdown T.Limit column.
        replace(
            q,
            compute_capability="9.0",
            power_draw_w=631.95,
            memory_temperature_c=54.0,
            slowdown_tlimit_c=None,
            memory_max_tlimit_c=None,  # no CSV column either
        )
        == csv_gpu
    )


def assert_parse_or_parse_error(parser: Callable[[str], object], text: str) -> None:
    try:
        parser(text)
    except ParseError as exc:
        assert "\n" not in str(exc), "a ParseError message must be one line"


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_parsers_only_raise_parse_error_on_arbitrary_text(text: str) -> None:
    for parser in PARSERS.values():
        assert_parse_or_parse_error(parser, text)
    claimed_by(text)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(ALL_SMI), cut=st.floats(0.0, 1.0))
def test_parsers_only_raise_parse_error_on_truncated_fixtures(name: str, cut: float) -> None:
    text = read(name)
    truncated = text[: int(len(text) * cut)]
    for parser in PARSERS.values():  # every parser, also on the other formats
        assert_parse_or_parse_error(parser, truncated)
    claimed_by(truncated)


@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from(ALL_SMI),
    data=st.data(),
)
def test_parsers_only_raise_parse_error_on_spliced_fixtures(name: str, data: st.DataObject) -> None:
    """A fixture with one line replaced by arbitrary text."""
    lines = read(name).splitlines()
    where = data.draw(st.integers(0, len(lines) - 1))
    lines[where] = data.draw(st.text(alphabet=st.characters(codec="utf-8"), max_size=40))
    text = "\n".join(lines)
    for parser in PARSERS.values():
        assert_parse_or_parse_error(parser, text)
