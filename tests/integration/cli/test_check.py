"""`bringup check --local` / `--replay` and `snapshot` end to end on this (GPU-less) machine."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support import REPO

HOST = socket.gethostname()


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory, cli):
    out = tmp_path_factory.mktemp("quick") / "run"
    # --profile given: with auto, a node without a GPU is one ERROR and nothing else.
    result = cli(
        "check", "--local", "--suite", "quick", "--profile", "b300", "--out", out, "--json"
    )
    return result, out


def test_quick_check_reports_gpu_checks_as_error_without_a_driver(quick_run) -> None:
    result, _ = quick_run
    assert result.code == 1, result.stderr
    doc = result.json()
    gpu = [f for f in doc["findings"] if f["check"].startswith("gpu.")]
    assert gpu, "the gpu checks must appear even without a GPU"
    assert {f["status"] for f in gpu} == {"ERROR"}
    assert all(f["message"].startswith("no NVIDIA driver found") for f in gpu)
    topo = [f for f in doc["findings"] if f["check"].startswith("topology.")]
    assert topo and {f["status"] for f in topo} == {"ERROR"}


def test_quick_check_runs_host_checks_for_real(quick_run) -> None:
    result, _ = quick_run
    host = [f for f in result.json()["findings"] if f["check"].startswith("host.")]
    assert host
    assert all(f["status"] != "ERROR" for f in host), host
    assert all(f["node"] == HOST for f in host)


def test_quick_check_writes_the_run_directory(quick_run) -> None:
    result, out = quick_run
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert manifest["exit_code"] == 1
    assert manifest["nodes"] == [HOST]
    assert manifest["suite"] == "quick" and manifest["profile"] == "b300"
    facts = json.loads((out / "facts" / f"{HOST}.json").read_text())
    assert list(facts["probes"]) == ["gpu", "topology", "host", "xid", "dcgm"]
    assert facts["probes"]["host"]["ok"] is True
    assert facts["probes"]["gpu"]["ok"] is False
    lines = (out / "findings.jsonl").read_text().splitlines()
    assert len(lines) == len(result.json()["findings"])
    assert any((out / "raw" / HOST / "host").iterdir())
    # How it was made, and a hash of every file it measured.
    made = manifest["provenance"]
    assert made["mode"] == "live" and made["controller"] == HOST
    assert made["argv"] == [
        *("check", "--local", "--suite", "quick", "--profile", "b300"),
        *("--out", str(out), "--json"),
    ]
    assert manifest["probes"] == ["gpu", "topology", "host", "xid", "dcgm"]
    hashed = manifest["files_sha256"]
    assert {"findings.jsonl", f"facts/{HOST}.json"} <= set(hashed)
    assert any(name.startswith(f"raw/{HOST}/host/") for name in hashed)


def test_json_output_is_one_document(quick_run) -> None:
    result, out = quick_run
    doc = json.loads(result.stdout)  # raises if anything else was printed on stdout
    assert doc["run_dir"] == str(out)
    assert doc["exit_code"] == 1
    # What each probe took on this node, in the suite's order.
    assert [(n["node"], n["state"]) for n in doc["nodes"]] == [(HOST, "complete")]
    durations = doc["data"]["durations"]
    assert list(durations[HOST]) == ["gpu", "topology", "host", "xid", "dcgm"]
    assert all(seconds >= 0 for seconds in durations[HOST].values())


def test_snapshot_then_replay_gives_the_same_findings(tmp_path: Path, quick_run, cli) -> None:
    snap = tmp_path / "snap"
    recorded = cli("snapshot", "--suite", "quick", "--out", snap, "--json")
    # Exit 1: the gpu probe could not run on this GPU-less machine.
    assert recorded.code == 1, recorded.stderr
    (node,) = recorded.json()["nodes"]
    assert node["probes"]["host"] == {"ok": True, "error": None}
    assert node["probes"]["gpu"]["ok"] is False
    assert not (snap / "findings.jsonl").exists()  # a snapshot records, it does not judge
    snapped = json.loads((snap / "manifest.json").read_text())
    assert snapped["suite"] == "quick"  # what the replay is judged complete against
    assert snapped["probes"] == ["gpu", "topology", "host", "xid", "dcgm"]
    replayed = cli(
        "check", "--replay", snap, "--profile", "b300", "--out", tmp_path / "replay", "--json"
    )
    assert replayed.code == 1
    manifest = json.loads((tmp_path / "replay" / "manifest.json").read_text())
    assert manifest["suite"] == "quick" and manifest["probes"] == snapped["probes"]
    assert manifest["provenance"]["replay_of"] == str(snap)
    digest = hashlib.sha256((snap / "manifest.json").read_bytes()).hexdigest()
    assert manifest["provenance"]["replay_manifest_sha256"] == digest
    # What the node measured, as it measured it: its times and its raw tool outputs.
    node = f"facts/{HOST}.json"
    # ... each probe's record now marked as replayed from the snapshot (its chain, issue 24).
    snapped_facts = json.loads((snap / node).read_text())
    replayed_facts = json.loads((tmp_path / "replay" / node).read_text())
    for name, record in replayed_facts["probes"].items():
        (step,) = record.pop("provenance")
        assert (step["kind"], step["of"], step["sha256"]) == ("replayed", str(snap), digest)
        assert snapped_facts["probes"][name].pop("provenance") == []
    assert replayed_facts == snapped_facts
    raw = sorted(p.relative_to(snap) for p in (snap / "raw").rglob("*") if p.is_file())
    assert raw and raw == sorted(
        p.relative_to(tmp_path / "replay")
        for p in (tmp_path / "replay" / "raw").rglob("*")
        if p.is_file()
    )
    live = quick_run[0].json()["findings"]
    again = replayed.json()["findings"]
    # The same checks reach the same verdicts (free space and the like may move a little).
    assert [(f["check"], f["status"]) for f in again] == [(f["check"], f["status"]) for f in live]


def test_acceptance_runs_fio_for_real(tmp_path: Path, cli) -> None:
    suite = yaml.safe_load((REPO / "checks/suites/acceptance.yaml").read_text())
    nvme = next(step for step in suite["probes"] if step["name"] == "nvme")
    nvme["params"] = {
        "size_bytes": 8 << 20,
        "runtime_s": 1,
        "ramp_s": 0,
        "checkpoint_bytes": 16 << 20,
    }
    small = tmp_path / "small.yaml"
    small.write_text(yaml.safe_dump(suite))
    data = tmp_path / "data"
    data.mkdir()
    result = cli(
        "check",
        "--local",
        "--profile",  # no GPU here for --profile auto to go by
        "b300",
        "--suite",
        small,
        "--data-dir",
        data,
        "--out",
        tmp_path / "run",
        "--json",
    )
    assert result.code == 1  # no GPU here
    nvme_findings = [f for f in result.json()["findings"] if f["check"].startswith("nvme.")]
    assert nvme_findings
    if on_a_device(data):
        assert all(f["status"] != "ERROR" for f in nvme_findings), nvme_findings
    else:  # a container's overlay /tmp: fio measured it, and the verdict says it is no device
        assert {f["status"] for f in nvme_findings} == {"ERROR"}, nvme_findings
        assert all("measured memory, not a device" in f["message"] for f in nvme_findings)
    assert all(f["value"] is not None for f in nvme_findings), nvme_findings  # fio measured
    raw = list((tmp_path / "run" / "raw" / HOST / "nvme").iterdir())
    assert any(p.suffix == ".json" for p in raw)
    assert not any(p.name.startswith(".bringup-fio") for p in data.iterdir())
    # Said before it is written: where fio writes and how much.
    assert (
        f"nvme: fio files of 0.0 GB (one per GPU for the concurrent read) and a 0.0 GB "
        f"checkpoint in {data.resolve()} on {HOST}, removed afterwards"
    ) in " ".join(result.stderr.split())


def on_a_device(path: Path) -> bool:
    """Whether fio's figures on `path` are a device's, as the nvme probe judges it."""
    from bringup.node.probes import nvme

    return nvme.on_block_device(str(path), nvme.mount_of(str(path), nvme.read_mounts())) is True


def nvme_suite(tmp_path: Path) -> Path:
    """The acceptance suite's nvme step alone, with files of a few MiB."""
    suite = yaml.safe_load((REPO / "checks/suites/acceptance.yaml").read_text())
    suite["probes"] = [s for s in suite["probes"] if s["name"] == "nvme"]
    suite["probes"][0]["params"] = {
        "size_bytes": 8 << 20,
        "runtime_s": 1,
        "ramp_s": 0,
        "checkpoint_bytes": 16 << 20,
    }
    small = tmp_path / "nvme.yaml"
    small.write_text(yaml.safe_dump(suite))
    return small


def test_data_dir_in_memory_is_an_nvme_error_never_a_pass(tmp_path: Path, cli) -> None:
    """--data-dir /dev/shm: fio measures RAM; every nvme.* check is an ERROR saying so."""
    if not Path("/dev/shm").is_dir():
        pytest.skip("no /dev/shm here")
    argv = ["check", "--local", "-p", "b300", "--suite", nvme_suite(tmp_path)]
    result = cli(*argv, "--data-dir", "/dev/shm", "--out", tmp_path / "run", "--json")
    assert result.code == 1, result.stderr
    doc = result.json()
    assert doc["verdict"] == "NOT ACCEPTED"
    nvme_findings = [f for f in doc["findings"] if f["check"].startswith("nvme.")]
    assert [f["check"] for f in nvme_findings] == [
        "nvme.seq_read",
        "nvme.seq_write",
        "nvme.checkpoint",
        "nvme.concurrent_read",
        "nvme.rand_read",
    ]
    for f in nvme_findings:
        assert f["status"] == "ERROR", f
        assert f["message"].startswith("/dev/shm: "), f
        assert f["message"].endswith(
            ": measured memory, not a device: give --data-dir on the NVMe array"
        ), f
        # Why: tmpfs refuses O_DIRECT (kernels before 6.6), or is tmpfs all the same.
        why = ("O_DIRECT refused on /dev/shm (tmpfs)", "/dev/shm is tmpfs")
        assert any(w in f["message"] for w in why), f
        assert f["value"] is not None  # what fio measured is kept, and judged no device's
    assert "in /dev/shm on" in " ".join(result.stderr.split())


def test_acceptance_without_a_gpu_errors_dcgm_gemm_and_p2p_with_the_reason(
    tmp_path: Path, cli
) -> None:
    """The acceptance suite's own dcgm, gemm and p2p steps, as shipped, on this GPU-less
    machine: each is an ERROR that says why, never a PASS."""
    suite = yaml.safe_load((REPO / "checks/suites/acceptance.yaml").read_text())
    suite["probes"] = [s for s in suite["probes"] if s["name"] in ("dcgm", "gemm", "p2p")]
    assert [s["name"] for s in suite["probes"]] == ["dcgm", "gemm", "p2p"]
    small = tmp_path / "gpu-steps.yaml"
    small.write_text(yaml.safe_dump(suite))
    env = {**os.environ, "PATH": "/usr/bin:/bin"}  # no dcgmi, as on a node without DCGM
    argv = ["check", "--local", "-p", "b300", "--suite", small, "--out", tmp_path / "run"]
    result = cli(*argv, "--json", env=env)
    assert result.code == 1
    found = {(f["check"], f["status"], f["message"]) for f in result.json()["findings"]}
    assert found == {
        ("dcgm.diag", "ERROR", "dcgmi not found (install DCGM: `bringup provision --tags dcgm`)"),
        ("gemm.tflops", "ERROR", "device cuda asked for, but torch sees no CUDA GPU"),
        ("gemm.hbm", "ERROR", "device cuda asked for, but torch sees no CUDA GPU"),
        ("gemm.diagnosis", "ERROR", "device cuda asked for, but torch sees no CUDA GPU"),
        ("p2p.bandwidth", "ERROR", "torch sees no CUDA GPU: peer-to-peer copies need GPUs"),
    }


def test_storage_layout_from_the_options(tmp_path: Path, cli) -> None:
    """--dataset-dir and --checkpoint-dir reach the storage probe: a shared file system and
    a checkpoint in memory (/dev/shm) each get their finding."""
    suite = yaml.safe_load((REPO / "checks/suites/acceptance.yaml").read_text())
    suite["probes"] = [s for s in suite["probes"] if s["name"] == "storage"]
    only = tmp_path / "storage.yaml"
    only.write_text(yaml.safe_dump(suite))
    (tmp_path / "data").mkdir()
    (tmp_path / "ckpt").mkdir()

    def run(checkpoint: Path, name: str) -> dict[str, tuple[str, str]]:
        argv = ["check", "--local", "-p", "b300", "--suite", only]
        argv += ["--dataset-dir", tmp_path / "data"]
        argv += ["--checkpoint-dir", checkpoint, "--out", tmp_path / name, "--json"]
        result = cli(*argv)
        assert result.code == 1, result.stderr
        return {f["check"]: (f["status"], f["message"]) for f in result.json()["findings"]}

    shared = run(tmp_path / "ckpt", "shared")
    assert shared["storage.separate_devices"][0] == "FAIL"
    assert "are on the same file system" in shared["storage.separate_devices"][1]
    assert shared["storage.checkpoint_writable"][0] == "PASS"
    in_memory = run(Path("/dev/shm"), "shm")
    assert in_memory["storage.checkpoint_durable"] == (
        "FAIL",
        "checkpoint path /dev/shm is on tmpfs (memory): checkpoints are lost at the next reboot "
        "and take the node's RAM",
    )
    assert in_memory["storage.separate_devices"][0] == "PASS"


def test_a_hung_probe_is_killed_at_its_deadline_and_the_rest_still_run(tmp_path: Path, cli) -> None:
    # An nvidia-smi that never answers, first on PATH: the topology probe hangs in it.
    tools = tmp_path / "bin"
    tools.mkdir()
    marker = f"hung-{tmp_path.name}"
    smi = tools / "nvidia-smi"
    smi.write_text(f"#!/bin/bash\nexec -a {marker} sleep 300\n")
    smi.chmod(0o755)
    suite = yaml.safe_load((REPO / "checks/suites/quick.yaml").read_text())
    for step in suite["probes"]:
        if step["name"] in ("gpu", "topology"):  # both call nvidia-smi
            step["timeout_s"] = 2
    tiny = tmp_path / "tiny.yaml"
    tiny.write_text(yaml.safe_dump(suite))
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"}
    argv = ["check", "--local", "-p", "b300", "--suite", tiny, "--out", tmp_path / "run"]
    result = cli(*argv, "--json", env=env)
    findings = result.json()["findings"]
    hung = [f for f in findings if f["check"].startswith(("gpu.", "topology."))]
    assert hung and all("timed out after 2 s" in f["message"] for f in hung)
    assert any(f["check"].startswith("host.") and f["status"] != "ERROR" for f in findings)
    # The tool the probe started went with it, though it ran in a session of its own.
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    assert left == ""


def test_replay_of_a_directory_without_facts_is_bad_input(tmp_path: Path, cli) -> None:
    result = cli("check", "--replay", tmp_path)
    assert result.code == 2
    assert "no facts/<node>.json found" in result.stderr
    assert "Traceback" not in result.stderr


def test_auto_profile_on_a_gpu_less_node_is_one_error_naming_the_profiles(
    tmp_path: Path, cli
) -> None:
    result = cli("check", "--local", "--suite", "quick", "--out", tmp_path / "run", "--json")
    assert result.code == 1, result.stderr
    findings = result.json()["findings"]
    (said,) = [f for f in findings if f["check"] == "profile.auto"]
    assert said["status"] == "ERROR"
    assert said["message"].startswith("no GPU model in the facts (gpu probe: no NVIDIA driver")
    assert "available: a100, b200, b300, gb200, gb300, h100, h200" in said["message"]
    # Nothing judged by a guessed profile; what needs none (xid, dcgm) still is. Every other
    # check is shown, never passed: the ERRORs of a probe that could not run carry its
    # reason, those of one that measured say it was not judged (the report counts the same).
    others = [f for f in findings if f["check"].split(".")[0] not in ("profile", "xid", "dcgm")]
    assert {f["check"].split(".")[0] for f in others} == {"gpu", "topology", "host"}
    assert {f["status"] for f in others} == {"ERROR"}
    host = [f for f in others if f["check"].startswith("host.")]
    assert all(
        f["message"].endswith("measured, not judged: no profile fits this node's GPU") for f in host
    )


def test_snapshot_says_why_a_probe_failed_and_exits_1(tmp_path: Path, cli) -> None:
    result = cli("snapshot", "--suite", "quick", "--out", tmp_path / "snap")
    assert result.code == 1
    lines = result.stdout.splitlines()
    gpu = next(line for line in lines if line.startswith("gpu "))
    assert gpu.split(None, 1)[1].startswith("error: no NVIDIA driver found")
    assert next(line for line in lines if line.startswith("host ")).endswith("recorded")
