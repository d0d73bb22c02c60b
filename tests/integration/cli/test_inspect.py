"""`bringup inspect` on every recorded real output: the right kind, facts and exit code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import FIXTURES


def _kind_of(path: Path) -> str:
    name = path.name
    if path.parent.name == "smi":
        if name.endswith(".xml"):
            return "smi-xml"
        if ".csv" in name:
            return "smi-csv"
        return "nvlink" if "nvlink-s" in name or "nvlink-status" in name else "smi-q"
    kinds = {
        "topo": "topo",
        "fio": "fio",
        "xid": "kernel-log",
        "nccl": "nccl",
        "dmon": "dmon",
        "dcgm": "dcgm",
        "imex": "imex",
    }
    return kinds[path.parent.name]


def facts_of(doc: dict) -> Any:
    """The facts of the one tool output inspected (the envelope's data, docs/json.md)."""
    (only,) = doc["data"]["facts"]
    return only["facts"]


CASES = sorted(
    p
    for kind in ("topo", "smi", "fio", "xid", "nccl", "dmon", "dcgm", "imex")
    for p in (FIXTURES / kind).iterdir()
    if p.name != "SOURCES.md"
)


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_is_recognised_and_parsed(path: Path, cli) -> None:
    result = cli("inspect", path, "--json")
    assert result.code in (0, 1), result.stderr
    doc = result.json()
    assert doc["data"]["kind"] == _kind_of(path)
    assert facts_of(doc) is not None, doc["findings"]
    for f in doc["findings"]:
        assert f["status"] in {"PASS", "WARN", "FAIL", "SKIP", "ERROR"}
        assert f["check"] and f["message"]


def test_a_dcgm_diag_table_names_the_failed_gpu_and_test(cli) -> None:
    path = FIXTURES / "dcgm" / "mleng-diag-r2-gpu-memory-fail-thermal-warning-excerpt.txt"
    result = cli("inspect", path, "--profile", "a100", "--json")
    assert result.code == 1
    doc = result.json()
    assert [r["status"] for r in facts_of(doc)["report"]["tests"][0]["results"]] == [
        *["pass"] * 7,
        "fail",
    ]
    (fail,) = doc["findings"]
    assert (fail["check"], fail["status"]) == ("dcgm.diag", "FAIL")
    assert fail["message"].startswith("GPU Memory failed on GPU 0: GPU 0 Thermal violations")


def test_topo_facts_carry_the_documented_keys(cli) -> None:
    doc = cli("inspect", FIXTURES / "topo" / "simllm-vastai-h200x8-8nic.txt", "--json").json()
    facts = facts_of(doc)
    assert facts["gpu_count"] == 8
    assert facts["min_nvlinks"] == 18
    assert facts["nics"] == [f"mlx5_{i}" for i in range(8)]


def test_degraded_topology_names_the_gpu(cli) -> None:
    path = FIXTURES / "topo" / "vllm-16336-b200x8-degraded-gpu2-no-nvlink-TRUNCATED.txt"
    result = cli("inspect", path, "--profile", "b200", "--json")
    assert result.code == 1
    doc = result.json()
    assert facts_of(doc)["min_nvlinks"] == 0
    failing = [f["message"] for f in doc["findings"] if f["status"] == "FAIL"]
    assert any(m.startswith("GPU2 has no NVLink") for m in failing), failing


def test_fio_facts_have_one_entry_per_job_in_bytes(cli) -> None:
    path = FIXTURES / "fio" / "pkb-fio2.1.4-seqwrite-seqread-randwrite-randread-oldfmt.json"
    jobs = facts_of(cli("inspect", path, "--json").json())["jobs"]
    assert len(jobs) == 5
    seq_write = jobs[0]
    assert seq_write["write_bw_bytes"] == 68118 * 1024
    assert seq_write["write_iops"] == 133
    assert {"read_bw_bytes", "write_bw_bytes", "read_iops", "write_iops"} <= set(seq_write)


def test_kernel_log_lists_xids(cli) -> None:
    path = FIXTURES / "xid" / "mleng-a100-xid63-row-remapper.txt"
    result = cli("inspect", path, "--json")
    events = facts_of(result.json())["xids"]
    assert [(e["xid"], e["pci"]) for e in events] == [(63, "0000:10:1c")]
    assert "Row Remapper" in events[0]["message"]


def test_inspect_as_text_prints_a_table(cli) -> None:
    result = cli("inspect", FIXTURES / "smi" / "ugpuexp-h100-q-idle.txt", "--profile", "h100")
    assert result.code in (0, 1)
    assert "smi-q" in result.stdout
    assert "gpu.ecc" in result.stdout


def test_inspect_says_what_it_read_on_its_first_line(cli) -> None:
    topo = FIXTURES / "topo" / "sglang-26039-b300x8-check-env-tabs-esc-less-ansi-9nic-bond.txt"
    result = cli("inspect", topo)
    assert result.code == 0, result.stdout
    first = " ".join(result.stdout.split("findings")[0].split())
    assert first.endswith(": topo — 8 GPUs (NVIDIA B300 SXM6 AC), 9 NICs (1 bonded)")
    dcgm = FIXTURES / "dcgm" / "dcgm-253-dcgm4.4.1-r2-b200x8-pcie-internal-error-fail.txt"
    result = cli("inspect", dcgm)
    assert result.code == 1
    first = " ".join(result.stdout.split("findings")[0].split())
    assert first.endswith(": dcgm — DCGM 4.4.1, 8 GPUs (2901), tests: software, memory, pcie")
    doc = cli("inspect", dcgm, "--json").json()
    assert doc["data"]["read"] == "DCGM 4.4.1, 8 GPUs (2901), tests: software, memory, pcie"


def test_inspect_a_snapshot_directory_and_a_facts_file(tmp_path: Path, cli) -> None:
    snap = tmp_path / "snap"
    assert cli("snapshot", "--suite", "quick", "--out", snap).code in (0, 1)  # 1: no GPU
    from_dir = cli("inspect", snap, "--json")
    facts_file = next((snap / "facts").glob("*.json"))
    from_file = cli("inspect", facts_file, "--json")
    assert from_dir.json()["data"]["kind"] == from_file.json()["data"]["kind"] == "facts"
    assert from_dir.json()["findings"] == from_file.json()["findings"]


def test_garbage_is_a_clear_error(tmp_path: Path, cli) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 4)
    result = cli("inspect", junk)
    assert result.code == 2
    assert "not a known tool output" in result.stderr
    assert "Traceback" not in result.stderr


def test_forced_kind_on_the_wrong_text_gives_error_findings(cli) -> None:
    path = FIXTURES / "fio" / "superbench-nvme-randrw-4jobs-group.json"
    result = cli("inspect", path, "--kind", "topo", "--json")
    assert result.code == 1
    doc = result.json()
    assert facts_of(doc) is None
    assert doc["findings"] and {f["status"] for f in doc["findings"]} == {"ERROR"}


def test_missing_file_is_bad_input(tmp_path: Path, cli) -> None:
    result = cli("inspect", tmp_path / "nope.txt")
    assert result.code == 2
    assert "cannot read" in result.stderr


def test_json_documents_are_valid_json_only(cli) -> None:
    result = cli("inspect", FIXTURES / "nccl" / "superbench-a100x8-allreduce.txt", "--json")
    json.loads(result.stdout)


def test_an_imex_report_with_a_tray_down_exits_1(cli, tmp_path: Path) -> None:
    report = FIXTURES / "imex" / "aws-pcluster-p6e-gb200-18node-570-ctl-N-up.txt"
    healthy = cli("inspect", report, "--json")
    assert healthy.code == 0, healthy.stderr
    assert [(f["check"], f["status"]) for f in healthy.json()["findings"]] == [("gpu.imex", "PASS")]
    text = report.read_text()
    line = next(line for line in text.splitlines() if " 172.31.50.44 " in line)
    down = text.replace(
        line, line.replace("READY                - Version: 570.172", "UNAVAILABLE")
    )
    (tmp_path / "down.txt").write_text(down.replace("Domain State: UP", "Domain State: DEGRADED"))
    result = cli("inspect", tmp_path / "down.txt", "--profile", "gb200", "--json")
    assert result.code == 1, result.stderr
    (fail,) = result.json()["findings"]
    assert (fail["check"], fail["status"], fail["message"]) == (
        "gpu.imex",
        "FAIL",
        "IMEX domain DEGRADED, 17/18 nodes READY: node #5 (172.31.50.44) UNAVAILABLE",
    )
