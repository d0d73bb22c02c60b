"""The topology probe's collect(): the real subprocess path, with a stand-in nvidia-smi
(a shell script printing a recorded real output) where there is no GPU."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from bringup.node.probes import topology
from bringup.node.probes.topology import parse_topo
from bringup.node.result import ProbeError
from bringup.node.tool import which

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "topo"
H200 = "simllm-vastai-h200x8-8nic.txt"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def parse(name: str) -> topology.TopologyFacts:
    return parse_topo(text(name))


def fake_nvidia_smi(folder: Path, script: str) -> None:
    path = folder / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_collect_without_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    if which("nvidia-smi"):
        pytest.skip("nvidia-smi is installed in a system folder here")
    with pytest.raises(ProbeError, match=r"no NVIDIA driver found \(nvidia-smi not on PATH\)"):
        topology.collect(topology.Params())


def test_collect_parses_what_nvidia_smi_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_nvidia_smi(tmp_path, f'[ "$1 $2" = "topo -m" ] || exit 3\ncat "{FIXTURES / H200}"\n')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    out = topology.collect(topology.Params())
    assert out.raw == {"nvidia-smi-topo-m.txt": text(H200)}
    assert out.facts == parse(H200)


def test_collect_reports_the_first_line_of_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    fake_nvidia_smi(
        tmp_path, f'echo "{message}"\necho "Make sure that the driver is loaded."\nexit 9\n'
    )
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(ProbeError) as err:
        topology.collect(topology.Params())
    assert str(err.value) == f"nvidia-smi topo -m failed: {message}"
    assert err.value.raw["nvidia-smi-topo-m.txt"].startswith(message)


def test_collect_turns_unparsable_output_into_a_probe_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_nvidia_smi(tmp_path, "echo 'No devices were found'\n")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(ProbeError, match="nvidia-smi topo -m: not `nvidia-smi topo -m` output"):
        topology.collect(topology.Params())


@pytest.mark.gpu
@pytest.mark.skipif(which("nvidia-smi") is None, reason="no nvidia-smi on this machine")
def test_collect_on_a_real_gpu_node() -> None:
    out = topology.collect(topology.Params())
    assert out.facts.gpu_count >= 1
    assert out.facts.complete
    assert "GPU0" in out.raw["nvidia-smi-topo-m.txt"]
