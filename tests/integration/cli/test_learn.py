"""`bringup learn` and `check --golden` end to end on the demo fleet's recorded facts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory, cli) -> Path:
    out = tmp_path_factory.mktemp("demo") / "run"
    assert cli("check", "--demo", "--out", out, "--json").code == 1
    return out


def test_learn_from_one_node_then_replay_against_it(demo_run: Path, tmp_path: Path, cli) -> None:
    golden = tmp_path / "golden.yaml"
    learned = cli("learn", demo_run, "--node", "b300-node01", "--out", golden)
    assert learned.code == 0, learned.stderr
    assert learned.stdout.startswith(f"{golden}: ")
    text = golden.read_text()
    assert text.startswith("# Golden manifest: learned from node b300-node01 of ")
    doc = yaml.safe_load(text)
    assert doc["node"]["driver_version"] == "580.95.05" and len(doc["gpus"]) == 8
    # A hand edit: the fleet is to move to PCIe Gen5 on GPU 0 (a made-up change).
    golden.write_text(text.replace("pcie_gen: 6", "pcie_gen: 5", 1))
    replay = cli(
        "check", "--replay", demo_run, "--golden", golden, "--out", tmp_path / "r", "--json"
    )
    assert replay.code == 1
    found = [(f["node"], f["status"], f["message"]) for f in replay.json()["findings"]]
    gen = [f for f in found if f[2].startswith("gpu0.pcie_gen")]
    assert len(gen) == 6 and all(f[1] == "FAIL" for f in gen)
    assert gen[0][2] == f"gpu0.pcie_gen is 6, golden: 5 ({golden})"
    assert ("b300-node02", "FAIL", f"gpu7 is absent, golden: present ({golden})") in found


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--node", "nope"], "--node nope: not in "),
    ],
)
def test_learn_bad_input_is_one_line(demo_run: Path, tmp_path: Path, cli, args, message) -> None:
    result = cli("learn", demo_run, *args, "--out", tmp_path / "g.yaml")
    assert result.code == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_malformed_golden_is_exit_2_naming_it(demo_run: Path, tmp_path: Path, cli) -> None:
    golden = tmp_path / "golden.yaml"
    golden.write_text("node: {kernel: [1, 2]}\n")
    result = cli("check", "--replay", demo_run, "--golden", golden, "--out", tmp_path / "r")
    assert result.code == 2
    assert result.stderr.strip() == (
        f"error: --golden {golden}: kernel: expected a string or number, got list"
    )
