"""Bad input: one clear line on stderr and exit code 2, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import REPO


def _one_line_error(result) -> str:
    assert result.code == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_unknown_profile(cli) -> None:
    line = _one_line_error(cli("check", "--demo", "--profile", "b900"))
    assert "unknown profile 'b900'" in line and "b300" in line


def test_profile_with_an_unknown_key_names_it(tmp_path: Path, cli) -> None:
    text = (REPO / "checks/profiles/h100.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("  pcie_width:", "  pcie_widht:"))
    line = _one_line_error(cli("profiles", "show", bad))
    assert "gpu.pcie_widht: unknown key" in line


def test_malformed_yaml_profile(tmp_path: Path, cli) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("gpu: [unclosed\n")
    line = _one_line_error(cli("check", "--demo", "--profile", bad))
    assert "malformed YAML" in line


def test_unknown_suite(tmp_path: Path, cli) -> None:
    line = _one_line_error(cli("check", "--local", "--suite", "nightly", "--out", tmp_path / "r"))
    assert "unknown suite 'nightly'" in line


def test_suite_with_an_unknown_probe_parameter(tmp_path: Path, cli) -> None:
    bad = tmp_path / "suite.yaml"
    bad.write_text(
        "name: x\ndescription: x\nbudget_s: 10\nprobes:\n  - name: nvme\n    params: {sise: 1}\n"
    )
    line = _one_line_error(cli("check", "--local", "--suite", bad, "--out", tmp_path / "r"))
    assert "unknown parameter 'sise' for probe 'nvme'" in line


def test_check_needs_a_source_of_facts(cli) -> None:
    line = _one_line_error(cli("check"))
    assert "--local" in line


def test_out_directory_must_be_empty(tmp_path: Path, cli) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    line = _one_line_error(cli("check", "--demo", "--out", tmp_path))
    assert "not empty" in line
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_data_dir_must_exist(tmp_path: Path, cli) -> None:
    line = _one_line_error(
        cli("check", "--local", "--data-dir", tmp_path / "nope", "--out", tmp_path / "r")
    )
    assert "not a directory" in line


def test_corrupt_facts_file_in_replay(tmp_path: Path, cli) -> None:
    (tmp_path / "facts").mkdir()
    (tmp_path / "facts" / "n1.json").write_text('{"node": "n1"')
    line = _one_line_error(cli("check", "--replay", tmp_path, "--out", tmp_path / "r"))
    assert "not a facts file" in line


@pytest.mark.parametrize("command", [["profiles", "list"], ["profiles", "show", "b300"]])
def test_profiles_json(command: list[str], cli) -> None:
    result = cli(*command, "--json")
    assert result.code == 0
    doc = result.json()
    if command[1] == "list":
        assert [p["name"] for p in doc] == ["a100", "b200", "b300", "h100", "h200"]
    else:
        assert doc["gpu"]["model"] == "NVIDIA B300 SXM6 AC"
        assert doc["nvlink"]["per_pair"] == 18
