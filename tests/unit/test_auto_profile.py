"""--profile auto: each node, and each capture `inspect` is given, is judged by the profile
of its own GPU model; no GPU, or a model no profile knows, is one ERROR naming the profiles."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

import pytest

from bringup.checks.auto import NO_PROFILE, WITHOUT_PROFILE, judge_node_by
from bringup.checks.catalog import judge_probe
from bringup.facts import NodeFacts
from bringup.findings import Status
from bringup.fleet.plan import NodePlan
from bringup.fleet.run import outcome_findings
from bringup.profile import AUTO, for_gpu, load
from bringup.recognize import KINDS, inspect_text, read_text
from bringup.sim.demo import demo_nodes
from tests.support import FIXTURES
from tests.support.cli import invoke

AVAILABLE = "available: a100, b200, b300, gb200, gb300, h100, h200"


@pytest.mark.parametrize(
    ("model", "profile"),
    [
        ("NVIDIA B300 SXM6 AC", "b300"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("H100 80GB HBM3", "h100"),
        ("NVIDIA H100 PCIe", "h100"),  # the family, not the exact model
        ("NVIDIA H200", "h200"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA A100-SXM4-40GB", "a100"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA GH200 480GB", None),  # a Grace Hopper is not an H200
        ("NVIDIA L40S", None),
        ("cpu", None),
        ("", None),
        (None, None),
    ],
)
def test_for_gpu_is_the_profile_of_the_family(model: str | None, profile: str | None) -> None:
    found = for_gpu(model)
    assert (found.name if found else None) == profile


# Every recorded capture of an H100, H200 or A100 that names its GPU model.
CAPTURES = {
    "smi/ugpuexp-h100-q-idle.txt": "h100",
    "smi/ugpuexp-h100-q-load.txt": "h100",
    "smi/ugpuexp-h100-query-gpu-load.csv.txt": "h100",
    "smi/mleng-h100-query-gpu-vbios-excerpt.csv.txt": "h100",
    "smi/ugpuexp-h100-nvlink-s.txt": "h100",
    "smi/ugpuexp-h100-mig-nvlink-s.txt": "h100",
    "smi/ugpuexp-h200-q-load.txt": "h200",
    "smi/simllm-vastai-h200x8-nvlink-s.txt": "h200",
    "smi/mleng-a100-sxm4-80gb-q-excerpt-remapped-rows-pending.txt": "a100",
    "smi/telegraf-a100-sxm4-x4-mig-535-q-x.xml": "a100",
    "smi/netdata-a100-sxm4-40gb-mig-510-q-x.xml": "a100",
    "smi/awsdt-efa-cheatsheet-p4de-a100-gpu0-nvlink-s.txt": "a100",
    "smi/simllm-perlmutter-a100x4-nvlink-s.txt": "a100",
    "nccl/nccltests-290-h100x8-single-node-nvls.txt": "h100",
    "nccl/mpirun-g8-h100x16-2node-2proc-allreduce.txt": "h100",
    "nccl/superbench-a100x8-allreduce.txt": "a100",
}


@pytest.mark.parametrize(("capture", "family"), CAPTURES.items())
def test_inspect_picks_the_profile_of_the_capture_s_gpu(capture: str, family: str) -> None:
    result = inspect_text(read_text(FIXTURES / capture), AUTO)
    assert result.profile == family
    said = result.findings[0]
    assert (said.check, said.status, said.value) == ("profile.auto", Status.PASS, family)
    said_wrong = [f for f in result.findings if "wrong GPU model" in f"{f.message} {f.action}"]
    assert said_wrong == []
    (model,) = {f.status for f in result.findings if f.check == "gpu.model"} or {Status.PASS}
    # The 40 GB A100 is not the 80 GB one the a100 profile describes: a FAIL that says so.
    assert model is (Status.FAIL if "40gb" in capture else Status.PASS)


def test_a_gpu_no_profile_knows_is_one_error_naming_it_and_the_profiles() -> None:
    result = inspect_text(read_text(FIXTURES / "smi" / "ugpuexp-l40s-q-idle.txt"), AUTO)
    said, *free = result.findings
    assert (said.check, said.status, said.value) == ("profile.auto", Status.ERROR, "NVIDIA L40S")
    # One ERROR stands for everything that needs a profile; what needs none is judged.
    assert [(f.check, f.status) for f in free] == [
        ("gpu.ecc", Status.PASS),
        ("gpu.remapped_rows", Status.PASS),
        ("gpu.nvlink", Status.SKIP),
        ("gpu.fabric", Status.SKIP),
    ]
    # Named with its PCI device id ("Device Id : 0x26B910DE"), which no profile has either.
    assert said.message == (
        "GPU model 'NVIDIA L40S', PCI device id 0x26b9 (not in bringup's table of data-center "
        f"GPUs) matches no profile ({AVAILABLE})"
    )
    assert result.profile is None


def test_a_capture_naming_no_gpu_is_one_error() -> None:
    path = FIXTURES / "topo" / "sglang-30401-h100x8-8nic-spaces.txt"
    (said,) = inspect_text(read_text(path), AUTO).findings
    assert said.status is Status.ERROR
    assert said.message.startswith("no GPU model in the facts (nvidia-smi topo -m names no")
    assert AVAILABLE in said.message and "--profile" in (said.action or "")


def test_a_kernel_log_needs_no_profile() -> None:
    result = inspect_text(read_text(FIXTURES / "xid" / "mleng-a100-xid63-row-remapper.txt"), AUTO)
    assert [(f.check, f.status) for f in result.findings] == [
        ("xid.events", Status.FAIL),
        ("xid.sxid", Status.PASS),
    ]


WITHOUT_PROFILE_CAPTURES = {
    "xid": ["xid/mleng-a100-xid63-row-remapper.txt"],
    "dcgm": ["dcgm/mleng-diag-r2-gpu-memory-fail-thermal-warning-excerpt.txt"],
    # One capture of each kind the fabric probe's checks judge.
    "fabric": [
        "fabric/ibstat-mlx4-cx3-qdr-port2-down.txt",
        "fabric/ibv_devinfo-v-mlx4-port2-polling.txt",
        "fabric/perfquery-x-rhel75-zero.txt",
        "fabric/ib_write_bw-mlx4-qdr-sweep-mbs.txt",
        "fabric/kernel-mlx5-link-down-dmesg-tail.txt",
    ],
}


@pytest.mark.parametrize("probe", sorted(WITHOUT_PROFILE))
def test_the_probes_judged_without_a_profile_read_none(probe: str) -> None:
    """NO_PROFILE raises on any use: a check that reads the profile would crash here."""
    assert {k.probe for k in KINDS} >= {probe}
    for capture in WITHOUT_PROFILE_CAPTURES[probe]:
        text = read_text(FIXTURES / capture)
        (kind,) = [k for k in KINDS if k.probe == probe and k.detect(text)]
        findings = judge_probe(probe, kind.parse(text), None, NO_PROFILE)
        assert findings, capture
        assert not [f for f in findings if f.message.startswith("check crashed")], capture


def _with_gpu(node: NodeFacts, name: str | None, error: str | None = None) -> NodeFacts:
    mine = copy.deepcopy(node)
    record = mine.probes["gpu"]
    if error is not None:
        mine.probes["gpu"] = replace(record, ok=False, error=error, facts={})
    else:
        for gpu in record.facts["gpus"]:
            gpu["name"] = name
    return mine


def test_each_node_of_a_mixed_fleet_gets_its_own_profile() -> None:
    b300, other = demo_nodes()[0], demo_nodes()[0]
    h100 = _with_gpu(replace(other, node="h100-node"), "NVIDIA H100 80GB HBM3")
    l40s = _with_gpu(replace(other, node="l40s-node"), "NVIDIA L40S")
    gpuless = _with_gpu(replace(other, node="cpu-node"), None, "no NVIDIA driver")
    said = {n.node: judge_node_by(n, AUTO)[0] for n in (b300, h100, l40s, gpuless)}
    assert {n: (f.status, f.value) for n, f in said.items()} == {
        "b300-node01": (Status.PASS, "b300"),
        "h100-node": (Status.PASS, "h100"),
        "l40s-node": (Status.ERROR, "NVIDIA L40S"),
        "cpu-node": (Status.ERROR, None),
    }
    assert said["cpu-node"].message == (
        f"no GPU model in the facts (gpu probe: no NVIDIA driver): no profile to judge by "
        f"({AVAILABLE})"
    )
    # The H100 node is judged by h100's figures, where b300's would fail its model.
    h100_model = [f for f in judge_node_by(h100, AUTO) if f.check == "gpu.model"]
    assert {f.status for f in h100_model} == {Status.PASS}
    by_b300 = [f for f in judge_node_by(h100, load("b300")) if f.check == "gpu.model"]
    assert {f.status for f in by_b300} == {Status.FAIL}


def test_a_named_profile_is_used_as_given() -> None:
    node = demo_nodes()[0]
    findings = judge_node_by(node, load("h100"))
    assert not [f for f in findings if f.check == "profile.auto"]
    assert any(f.check == "gpu.model" and f.status is Status.FAIL for f in findings)


def test_the_fleet_lays_the_host_s_overrides_on_the_chosen_profile() -> None:
    """node02 misses a GPU; bringup_profile_overrides saying 7 GPUs makes gpu.count pass."""
    node = demo_nodes()[1]
    plan = NodePlan(node=node.node, runner=None, request={"probes": []}, remote=False, auto=True)  # type: ignore[arg-type]
    counted = [f for f in outcome_findings(plan, node, "complete", None) if f.check == "gpu.count"]
    assert {f.status for f in counted} == {Status.FAIL}
    plan.overrides = {"gpu": {"count": 7}}
    counted = [f for f in outcome_findings(plan, node, "complete", None) if f.check == "gpu.count"]
    assert {f.status for f in counted} == {Status.PASS}


def test_check_demo_records_the_profile_its_nodes_were_judged_by(tmp_path: Path) -> None:
    result = invoke("check", "--demo", "--out", tmp_path / "run", "--json")
    assert result.exit_code == 1
    import json

    said = [f for f in json.loads(result.stdout)["findings"] if f["check"] == "profile.auto"]
    assert [(f["status"], f["value"]) for f in said] == [("PASS", "b300")] * 6
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["profile"] == "b300"


def test_inspect_says_which_profile_and_prints_facts_only_when_asked() -> None:
    path = FIXTURES / "smi" / "ugpuexp-h100-q-idle.txt"
    plain = invoke("inspect", path)
    assert "findings — profile h100" in plain.stdout
    assert '"gpus"' not in plain.stdout
    # One capture is not a node: a fault found, never an acceptance verdict.
    assert plain.stdout.splitlines()[-1].startswith("FAULT FOUND in nvidia-smi -q (")
    assert '"gpus"' in invoke("inspect", path, "--facts").stdout


def test_a_watch_is_judged_by_the_gpus_its_telemetry_names() -> None:
    """diagnose --watch records only telemetry: the GPUs NVML named (here the recorded H200
    `nvidia-smi -q`) choose the profile, never "no GPU model in the facts"."""
    from dataclasses import asdict

    from bringup.facts import ProbeRecord
    from bringup.node.parsers.dmon import parse_q_series

    timeline = parse_q_series((FIXTURES / "smi" / "ugpuexp-h200-q-load.txt").read_text())
    assert timeline.gpu_names == {"0": "NVIDIA H200"}
    record = ProbeRecord(probe="telemetry", ok=True, facts=asdict(timeline))
    node = NodeFacts(
        node="watched", bringup_version="0", collected_at="T", probes={"telemetry": record}
    )
    said = judge_node_by(node, AUTO)[0]
    assert (said.check, said.status, said.value) == ("profile.auto", Status.PASS, "h200")
    assert said.message == "judged by profile h200: the GPU is 'NVIDIA H200'"


def test_auto_reads_each_shipped_profile_once_per_process(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`--profile auto` looks every node's GPU up among the shipped profiles: read once
    (issue 31: twice per node, through pure-Python YAML, was a sixth of a health check),
    and again only when a file changes."""
    from bringup import profile

    shipped = tmp_path / "profiles"
    shipped.mkdir()
    for name in ("b300", "h100"):
        (shipped / f"{name}.yaml").write_text((profile.profiles_dir() / f"{name}.yaml").read_text())
    monkeypatch.setattr(profile, "profiles_dir", lambda: shipped)
    monkeypatch.setattr(profile, "_SHIPPED", {})
    read: list[str] = []
    real_load = profile.load
    monkeypatch.setattr(profile, "load", lambda name: read.append(name) or real_load(name))
    for _ in range(3):
        assert for_gpu("NVIDIA B300 SXM6 AC").name == "b300"
        assert for_gpu("NVIDIA H100 80GB HBM3").name == "h100"
    assert read == ["b300", "h100"]
    edited = (shipped / "h100.yaml").read_text().replace("name: h100", "name: h100\n# edited")
    (shipped / "h100.yaml").write_text(edited)
    assert for_gpu("NVIDIA H100 80GB HBM3").name == "h100"
    assert read == ["b300", "h100", "h100"]
