"""Bad input: one clear line on stderr and exit code 2, never a traceback."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    data = result.json()["data"]
    if command[1] == "list":
        assert [p["name"] for p in data["profiles"]] == [
            "a100",
            "b200",
            "b300",
            "gb200",
            "gb300",
            "h100",
            "h200",
        ]
    else:
        assert data["profile"]["gpu"]["model"] == "NVIDIA B300 SXM6 AC"
        assert data["profile"]["nvlink"]["per_pair"] == 18


# --- hostile files at the CLI edge: one line naming the file, exit 2, never a traceback ------
#
# Each of these ended in a Python traceback (or read without end) before bringup/files.py.

BINARY = bytes(range(256)) * 8  # not UTF-8 from its 129th byte on


def _binary(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(BINARY)
    return path


def _facts_json(node: str) -> str:
    return json.dumps({"node": node, "bringup_version": "0", "collected_at": "t", "probes": {}})


def _run_dir(path: Path, *, facts: bytes | None = None, manifest: bytes | None = None) -> Path:
    """A run directory a fleet run left: its manifest names an inventory, so --resume reads
    everything in it before it opens any node."""
    (path / "facts").mkdir(parents=True)
    text = {"command": "check", "started_at": "t", "nodes": ["n1"], "inventory": "/nope.ini"}
    (path / "manifest.json").write_bytes(manifest or json.dumps(text).encode())
    (path / "facts" / "n1.json").write_bytes(facts or _facts_json("n1").encode())
    (path / "findings.jsonl").write_text("")
    return path


def _out_is_a_file(tmp: Path) -> Path:
    (tmp / "file").write_text("mine\n")
    return tmp / "file"


# (case id, args built from a scratch directory, what the one line must say)
HOSTILE: list[tuple[str, Callable[[Path], list[Any]], str]] = [
    # A binary file where YAML is expected (UnicodeDecodeError in the YAML loader).
    (
        "check --profile binary",
        lambda t: ["check", "--demo", "-p", _binary(t / "p.yaml")],
        "not UTF-8",
    ),
    ("profiles show binary", lambda t: ["profiles", "show", _binary(t / "p.yaml")], "not UTF-8"),
    (
        "inspect --profile binary",
        lambda t: ["inspect", _binary(t / "x.txt"), "-p", _binary(t / "p.yaml")],
        "not UTF-8",
    ),
    (
        "diagnose --profile binary",
        lambda t: ["diagnose", "--local", "-p", _binary(t / "p.yaml")],
        "not UTF-8",
    ),
    (
        "nccl --profile binary",
        lambda t: ["nccl", "--local", "-p", _binary(t / "p.yaml")],
        "not UTF-8",
    ),
    (
        "burnin --profile binary",
        lambda t: ["burnin", "--local", "-p", _binary(t / "p.yaml")],
        "not UTF-8",
    ),
    (
        "check --suite binary",
        lambda t: ["check", "--local", "-s", _binary(t / "s.yaml")],
        "not UTF-8",
    ),
    ("snapshot --suite binary", lambda t: ["snapshot", "-s", _binary(t / "s.yaml")], "not UTF-8"),
    (
        "burnin --recipe binary",
        lambda t: ["burnin", "--local", "-r", _binary(t / "r.yaml")],
        "not UTF-8",
    ),
    (
        "burnin --baseline binary",
        lambda t: ["burnin", "--local", "--baseline", _binary(t / "b.json")],
        "not UTF-8",
    ),
    # Binary facts or manifest in a run directory.
    (
        "check --replay binary facts",
        lambda t: ["check", "--replay", _binary(t / "r/facts/n1.json").parents[1]],
        "not UTF-8",
    ),
    (
        "check --replay binary facts file",
        lambda t: ["check", "--replay", _binary(t / "n1.json")],
        "not UTF-8",
    ),
    (
        "inspect DIR binary facts",
        lambda t: ["inspect", _binary(t / "r/facts/n1.json").parents[1]],
        "not UTF-8",
    ),
    (
        "check --resume binary facts",
        lambda t: ["check", "--resume", _run_dir(t / "r", facts=BINARY)],
        "not UTF-8",
    ),
    (
        "check --resume binary manifest",
        lambda t: ["check", "--resume", _run_dir(t / "r", manifest=BINARY)],
        "not UTF-8",
    ),
    # A run directory whose findings.jsonl is a directory.
    (
        "check --resume findings.jsonl dir",
        lambda t: ["check", "--resume", _findings_dir(_run_dir(t / "r"))],
        "findings.jsonl: not a regular file",
    ),
    # --out naming a regular file (NotADirectoryError), in every command that writes a run.
    (
        "check --out file",
        lambda t: ["check", "--demo", "--out", _out_is_a_file(t)],
        "not a directory",
    ),
    ("snapshot --out file", lambda t: ["snapshot", "--out", _out_is_a_file(t)], "not a directory"),
    (
        "diagnose --out file",
        lambda t: ["diagnose", "--local", "--out", _out_is_a_file(t)],
        "not a directory",
    ),
    (
        "nccl --out file",
        lambda t: ["nccl", "--local", "--out", _out_is_a_file(t)],
        "not a directory",
    ),
    (
        "burnin --out file",
        lambda t: ["burnin", "--local", "--out", _out_is_a_file(t)],
        "not a directory",
    ),
    # Not a regular file, or too big: refused before a byte is read.
    ("inspect /dev/urandom", lambda t: ["inspect", "/dev/urandom", "--kind", "smi-q"], "a device"),
    ("inspect FIFO", lambda t: ["inspect", _fifo(t / "fifo")], "a FIFO"),
    ("check --profile FIFO", lambda t: ["check", "--demo", "-p", _fifo(t / "p.yaml")], "a FIFO"),
    (
        "check --profile directory",
        lambda t: ["check", "--demo", "-p", _dir(t / "p.yaml")],
        "a directory",
    ),
    (
        "check --profile over the cap",
        lambda t: ["check", "--demo", "-p", _sparse(t / "p.yaml")],
        "over the 64 MiB cap",
    ),
    ("inspect over the cap", lambda t: ["inspect", _sparse(t / "x.txt")], "over the 64 MiB cap"),
]


def _findings_dir(run: Path) -> Path:
    (run / "findings.jsonl").unlink()
    (run / "findings.jsonl").mkdir()
    return run


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _dir(path: Path) -> Path:
    path.mkdir()
    return path


def _sparse(path: Path) -> Path:
    with path.open("wb") as out:
        out.truncate(65 * 1024 * 1024)  # no disk used: the size alone is refused
    return path


@pytest.mark.parametrize(("case", "args", "said"), HOSTILE, ids=[c[0] for c in HOSTILE])
def test_hostile_input_is_one_line_and_exit_2(
    tmp_path: Path, cli, case: str, args: Callable[[Path], list[Any]], said: str
) -> None:
    given = [str(a) for a in args(tmp_path)]
    result = cli(*given, cwd=tmp_path, timeout=120)  # a default run directory would go here
    line = _one_line_error(result)
    assert said in line
    assert "Traceback" not in result.stdout
    named = [a for a in given if a.startswith(str(tmp_path)) or a == "/dev/urandom"]
    assert any(Path(n).name in line for n in named), line  # the line names the file
    assert not (tmp_path / "runs").exists()  # refused before a run directory was made


def test_a_fifo_inventory_is_refused_not_waited_on(tmp_path: Path, cli) -> None:
    os.mkfifo(tmp_path / "hosts.ini")
    line = _one_line_error(
        cli("check", "--nodes", tmp_path / "hosts.ini", cwd=tmp_path, timeout=60)
    )
    assert "hosts.ini: not a regular file or directory" in line


@pytest.mark.parametrize("limit", [",", "~[", "n1,typo"])
@pytest.mark.parametrize("command", ["check", "provision"])
def test_a_limit_that_matches_no_valid_pattern_selects_nothing(
    tmp_path: Path, cli, command: str, limit: str
) -> None:
    (tmp_path / "hosts.ini").write_text(
        "[gpu]\nn1 ansible_host=10.0.0.1\nn2 ansible_host=10.0.0.2\n"
    )
    result = cli(
        command, "--nodes", tmp_path / "hosts.ini", "--limit", limit, "--json", cwd=tmp_path
    )
    line = _one_line_error(result)
    assert line.startswith(f"error: --limit {limit!r}")
    doc = json.loads(result.stdout)
    assert (doc["error"], doc["exit_code"]) == (line.removeprefix("error: "), 2)
    assert not (tmp_path / "runs").exists()


def test_a_refused_resume_leaves_the_run_as_it_was(tmp_path: Path, cli) -> None:
    run = _findings_dir(_run_dir(tmp_path / "r"))
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, "status": "interrupted"}))
    line = _one_line_error(cli("check", "--resume", run, "--json", cwd=tmp_path))
    assert "findings.jsonl: not a regular file" in line
    assert json.loads((run / "manifest.json").read_text())["status"] == "interrupted"


def test_a_yaml_alias_bomb_is_refused(tmp_path: Path, cli) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    (tmp_path / "bomb.yaml").write_text("\n".join(lines) + "\n")
    line = _one_line_error(cli("profiles", "show", tmp_path / "bomb.yaml", timeout=60))
    assert "expands to more than 1000000 values" in line
