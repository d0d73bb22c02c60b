"""What would make a plan fit (bringup/planning/search.py) and what offloading costs
(bringup/planning/offload.py): offload's memory and traffic pinned to arithmetic by hand,
the search's order pinned on the jobs the issue names (`bringup plan` as a user calls it).

Llama 2 7B: P = 6,738,415,616 parameters (tests/unit/test_planning_memory.py counts them).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from bringup import profile
from bringup.planning import memory as M
from bringup.planning import models
from bringup.planning.offload import (
    Bandwidth,
    Host,
    assumed_host,
    offload_time,
    pcie_bytes_per_s,
    traffic,
)
from bringup.planning.search import search
from tests.support.cli import invoke
from tests.unit.test_planning_memory import P_7B, setup

H100 = M.device_of(profile.load("h100"))
B300 = M.device_of(profile.load("b300"))


# --- offload: memory, host bytes, traffic ----------------------------------------------------


def test_the_optimizer_offloaded_leaves_the_weights_shard_on_the_gpu() -> None:
    """DeepSpeed's ZeRO-3 estimator with cpu_offload: 2 bytes per parameter / GPUs stay
    on the GPU (the 16-bit weights); gradients and optimizer state go with the optimizer."""
    s = setup("full", zero_stage=3, gpus=8, offload_optimizer="cpu")
    mem = M.memory(s, H100)
    assert mem.weights.parts[0].bytes == 2 * P_7B // 8 == 1_684_603_904
    assert mem.gradients.parts[0].bytes == 0
    assert mem.gradients.parts[1].bytes == 500_000_000 * 2  # DeepSpeed's bucket stays
    assert mem.optimizer.bytes == 0
    # fp32 master 4 + Adam 8 + fp32 gradients 4 = 16 B/param, the node's 8 GPUs' shares.
    assert M.offloaded_bytes(s, 8) == {"cpu": 16 * P_7B}


def test_the_parameters_offloaded_too_leave_only_the_gathered_modules() -> None:
    s = setup("full", zero_stage=3, gpus=8, offload_optimizer="cpu", offload_params="cpu")
    mem = M.memory(s, H100)
    assert mem.weights.parts[0].bytes == 0
    assert mem.weights.parts[1].what.startswith("gathered for compute")
    assert M.offloaded_bytes(s, 8) == {"cpu": 18 * P_7B}  # + the 16-bit weights, 2 B/param
    nvme = s.but(offload_optimizer="nvme", offload_params="nvme")
    assert M.offloaded_bytes(nvme, 8) == {"nvme": 18 * P_7B}


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"offload_params": "cpu", "zero_stage": 2}, "needs ZeRO stage 3"),
        ({"offload_optimizer": "nvme", "zero_stage": 2}, "needs ZeRO stage 3"),
        ({"offload_optimizer": "cpu", "zero_stage": 0}, "needs ZeRO stage 1, 2 or 3"),
        ({"offload_optimizer": "disk"}, "offload to gpu (none), cpu or nvme"),
    ],
)
def test_offloads_deepspeed_does_not_have_are_refused(changes: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        setup("full", **{"zero_stage": 3, **changes})


def test_what_offloading_moves_per_micro_batch() -> None:
    """ZeRO-Offload: 16-bit gradients down and weights up, 2 + 2 B per trainable parameter
    and GPU; parameters offloaded: each GPU's 16-bit share for the forward and the backward
    (and the recompute); NVMe: the optimizer's 12 B/param read and written back."""
    s = setup("full", zero_stage=3, gpus=8, offload_optimizer="cpu")
    assert traffic(s, 8).pcie_bytes == 4 * P_7B / 8
    both = s.but(offload_params="cpu")
    assert traffic(both, 8).pcie_bytes == 4 * P_7B / 8 + 2 * (2 * P_7B / 8)
    recompute = both.but(gradient_checkpointing=True)
    assert traffic(recompute, 8).pcie_bytes == 4 * P_7B / 8 + 3 * (2 * P_7B / 8)
    nvme = traffic(s.but(offload_optimizer="nvme"), 8)
    assert nvme.nvme_read_bytes == nvme.nvme_write_bytes == 12 * P_7B
    assert not traffic(setup("full", zero_stage=3, gpus=8), 8).any


def test_bandwidth_assumed_from_the_profile_and_said() -> None:
    # PCIe Gen5: 32 GT/s per lane, 128b/130b: 63.0 GB/s each way on x16.
    assert pcie_bytes_per_s(5, 16) == pytest.approx(32e9 * 16 * 128 / 130 / 8)
    assert pcie_bytes_per_s(4, 16) == pytest.approx(31.5e9, rel=1e-3)
    assert pcie_bytes_per_s(9, 16) is None
    host = assumed_host(H100)
    assert host.pcie is not None and not host.pcie.measured
    assert host.pcie.source.startswith("assumed: profile h100's PCIe Gen5 x16 at the PCI-SIG")
    assert host.nvme_read == Bandwidth(3e9, host.nvme_read.source, measured=False)  # type: ignore[union-attr]
    s = setup("full", zero_stage=3, gpus=8, offload_optimizer="cpu")
    moved = offload_time(s, 8, host)
    assert moved is not None and moved.assumed
    assert moved.seconds == pytest.approx(4 * P_7B / 8 / pcie_bytes_per_s(5, 16))
    measured = Host(Bandwidth(25e9, "a run", measured=True), None, None)
    timed = offload_time(s, 8, measured)
    assert timed is not None and not timed.assumed
    assert timed.seconds == pytest.approx(4 * P_7B / 8 / 25e9)
    # NVMe without a figure: no time, and said.
    unknown = offload_time(s.but(offload_optimizer="nvme"), 8, measured)
    assert unknown is not None and unknown.seconds is None
    assert "NVMe read: no figure" in unknown.sources


# --- the search -------------------------------------------------------------------------------


def plan_json(*args: str) -> tuple[int, dict[str, Any]]:
    result = invoke("plan", *args, "--json")
    return result.exit_code, json.loads(result.stdout)


def test_8b_full_on_one_h100_suggests_four_gpus_before_32() -> None:
    """The issue's case: main suggested "32 GPUs with ZeRO-3 (4 nodes)" first, while 4 GPUs
    fit (with checkpointing: 51.67 GB). Cheapest first: 4 GPUs; checkpointing and offload
    are among the options, each with its memory and time; no 32-GPU option before them."""
    code, doc = plan_json(
        "--model", "llama-8b-lora", "--method", "full", "--gpu", "h100", "--gpus", "1"
    )
    options = doc["data"]["options"]
    first = options[0]
    assert (first["gpus"], first["method"], first["change"]) == (4, "full", "4 GPUs, micro-batch 1")
    assert first["allocated_bytes"] / 1e9 == pytest.approx(68.37, abs=0.005)
    assert all(o["gpus"] <= 4 for o in options)
    offloaded = [o for o in options if o["offload_optimizer"] != "gpu"]
    assert offloaded and all(o["offload"]["assumed"] for o in offloaded)
    assert any(o["gradient_checkpointing"] for o in options)
    for o in options:
        assert o["fits"] and o["gpu_hours_per"] == "billion tokens" and o["gpu_hours"] > 0
    # Cheapest first among those that keep the method, then those that change it.
    kept = [o["gpu_hours"] for o in options if o["method"] == "full"]
    assert kept == sorted(kept) and options[-1]["method"] == "lora"
    assert code == 1 and doc["data"]["verdict"] == "DOES NOT FIT"


def test_four_gpus_with_checkpointing_fit_as_the_issue_says() -> None:
    s = M.Setup(models.load("llama-8b-lora").shape, "full", M.LoraSpec(), 4096, 2, True, 3, 4)
    assert M.memory(s, H100).allocated / 1e9 == pytest.approx(51.67, abs=0.005)


def test_70b_lora_on_one_h100_suggests_the_fewest_gpus_then_qlora() -> None:
    code, doc = plan_json(
        "--model",
        "llama-70b-lora",
        "--method",
        "lora",
        "--gpu",
        "h100",
        "--gpus",
        "1",
        "--tokens",
        "1B",
    )
    options = doc["data"]["options"]
    first = options[0]
    # The fewest GPUs that fit the job as it is, with its time and GPU-hours for the job.
    assert (first["change"], first["gpus"], first["gpu_hours_per"]) == ("4 GPUs", 4, "job")
    assert first["gpu_hours"] == pytest.approx(first["seconds"] * 4 / 3600)
    (qlora,) = [o for o in options if o["method"] == "qlora"]
    assert (qlora["gpus"], qlora["change"]) == (1, "QLoRA (4-bit base)")
    assert qlora is options[-1]  # it trains on a quantized base: after those that keep LoRA
    assert code == 1


def test_every_option_carries_its_own_figures() -> None:
    m = models.load("llama-70b-lora")
    s = M.Setup(m.shape, "full", m.lora, 4096, 1, True, 3, 1)
    found = search(s, H100, [], assumed_host(H100), 1e9)
    assert found
    for c in found:
        assert c.fit.fits and c.fit.allocated_bytes == M.memory(c.setup, H100).allocated
        assert c.gpu_hours == pytest.approx(c.timing.seconds * c.setup.gpus / 3600)
        # No option costs more GPU-hours on as many GPUs as one before it.
        before = found[: found.index(c)]
        assert not any(
            b.keeps_method >= c.keeps_method
            and b.gpu_hours <= c.gpu_hours
            and b.setup.gpus <= c.setup.gpus
            for b in before
        )


def test_a_node_whose_memory_a_run_read_must_hold_the_offload() -> None:
    m = models.load("llama-70b-lora")
    s = M.Setup(m.shape, "full", m.lora, 4096, 1, True, 3, 1)
    roomy = search(s, H100, [], assumed_host(H100), None)
    assert any(c.offloaded_per_node.get("cpu") for c in roomy)
    small = Host(None, None, None, memory_bytes=256 * 10**9, memory_source="a run")
    tight = search(s, H100, [], small, None)
    assert all(c.offloaded_per_node.get("cpu", 0) * 1.5 <= 256e9 for c in tight)


def test_a_plan_that_fits_has_no_options_and_a_cpu_is_not_searched() -> None:
    lora = setup("lora", zero_stage=3, gpus=8)
    assert search(lora, B300, [], assumed_host(B300), None) == []
    cpu = M.cpu_device(2)
    assert search(setup("full"), cpu, [], assumed_host(cpu), None) == []


# --- the verdict and the cost ------------------------------------------------------------------


def test_json_says_fits_or_does_not_fit_and_exits_by_it() -> None:
    code, doc = plan_json("--model", "llama-70b-lora", "--method", "lora", "--gpu", "b300")
    assert (code, doc["exit_code"], doc["data"]["verdict"]) == (0, 0, "FITS")
    assert doc["verdict"] is None  # a plan is no acceptance verdict
    code, doc = plan_json(
        "--model", "llama-70b-lora", "--method", "full", "--gpu", "h100", "--gpus", "1"
    )
    assert (code, doc["exit_code"], doc["data"]["verdict"]) == (1, 1, "DOES NOT FIT")
    table = invoke("plan", "--model", "llama-70b-lora", "--method", "full", "--gpu", "h100")
    assert table.exit_code == 1 and "verdict: does not fit" in table.output


def test_no_dash_for_a_cost_without_a_price() -> None:
    result = invoke(
        "plan",
        "--model",
        "llama-8b-lora",
        "--method",
        "lora",
        "--gpu",
        "h100",
        "--gpus",
        "1",
        "--micro-batch",
        "1",
    )
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "= –" not in text
    assert "on 1 GPU: 0.8 GPU-hours no price given" in text
    assert "add --price-per-gpu-hour P for the cost of each" in text


# --- bandwidth from a run ----------------------------------------------------------------------


def facts_dir(path: Path, demo: bool) -> Path:
    """The demo fleet's facts (bringup/sim/demo.py) as a run directory holds them: marked
    demo data as `check --demo` marks them, or without a mark, as a live run's read."""
    from dataclasses import replace

    from bringup.facts import node_facts_text
    from bringup.sim.demo import demo_nodes

    (path / "facts").mkdir(parents=True)
    for node in demo_nodes():  # each record carries its demo mark: kept, or taken off
        if not demo:
            probes = {k: replace(r, provenance=[]) for k, r in node.probes.items()}
            node = replace(node, probes=probes)
        (path / "facts" / f"{node.node}.json").write_text(node_facts_text(node))
    return path


@pytest.fixture
def demo_run(tmp_path: Path) -> Path:
    return facts_dir(tmp_path / "demo", demo=True)


def test_a_demo_run_gives_its_figures_but_not_as_measured(demo_run: Path) -> None:
    code, doc = plan_json(
        "--model",
        "llama-70b-lora",
        "--method",
        "full",
        "--gpu",
        "b300",
        "--gpus",
        "1",
        "--from",
        str(demo_run),
    )
    assert code == 1
    moved = [o["offload"] for o in doc["data"]["options"] if o["offload"]]
    assert moved and all(m["assumed"] for m in moved)
    said = " ".join(b for m in moved for b in m["bandwidths"])
    assert f"in {demo_run}, demo data: not measured live" in said


def test_a_live_run_gives_measured_bandwidth(tmp_path: Path) -> None:
    """Facts without a provenance mark read as a live run's: the slowest GPU link and the
    slowest node's best NVMe path, measured; the smallest node's memory."""
    from bringup.commands.plan import links_from_run

    live = facts_dir(tmp_path / "live", demo=False)
    host = links_from_run(live, B300)
    assert host.pcie is not None and host.pcie.measured
    assert host.nvme_read is not None and host.nvme_read.measured
    reads = []
    for file in (live / "facts").glob("*.json"):
        paths = json.loads(file.read_text())["probes"]["nvme"]["facts"]["paths"]
        reads.append(max(p["seq_read_bytes_per_s"] or 0 for p in paths))
    assert host.nvme_read.bytes_per_s == min(reads)
    assert host.memory_bytes is not None and host.memory_source is not None


def test_a_directory_without_facts_is_one_line(tmp_path: Path) -> None:
    result = invoke(
        "plan", "--model", "tiny", "--method", "lora", "--gpu", "b300", "--from", tmp_path
    )
    assert result.exit_code == 2
    assert "no facts/<node>.json found" in result.stderr


def test_hostile_figures_in_a_run_are_not_rates(tmp_path: Path) -> None:
    """A run directory is untrusted: a negative, negative zero or zero read rate, a PCIe
    generation no specification has and a negative memory are no figures; the profile's,
    assumed, stand in."""
    from bringup.commands.plan import links_from_run

    live = facts_dir(tmp_path / "live", demo=False)
    for n, file in enumerate(sorted((live / "facts").glob("*.json"))):
        data = json.loads(file.read_text())
        for path in data["probes"]["nvme"]["facts"]["paths"]:
            path["seq_read_bytes_per_s"] = [-1.0, -0.0, 0.0][n % 3]
        for gpu in data["probes"]["gpu"]["facts"]["gpus"]:
            gpu["pcie_link_gen_max"] = gpu["pcie_gen_max"] = 99
        data["probes"]["host"]["facts"]["memory_total_bytes"] = -5
        file.write_text(json.dumps(data))
    host = links_from_run(live, B300)
    assumed = assumed_host(B300)
    assert (host.nvme_read, host.pcie) == (assumed.nvme_read, assumed.pcie)
    assert host.memory_bytes is None
    assert host.nvme_write is not None and host.nvme_write.measured  # untouched: measured


def test_a_facts_file_holding_nan_is_refused_in_one_line(tmp_path: Path) -> None:
    """NaN is no JSON number: no run writes it (a number that is not finite is written
    null), and a facts file that holds one is refused by name (docs/json.md, "How a run's
    records are read"; pydantic read it as NaN)."""
    live = facts_dir(tmp_path / "live", demo=False)
    file = sorted((live / "facts").glob("*.json"))[0]
    data = json.loads(file.read_text())
    data["probes"]["nvme"]["facts"]["paths"][0]["seq_read_bytes_per_s"] = float("nan")
    file.write_text(json.dumps(data))
    argv = ("plan", "--model", "tiny", "--method", "lora", "--gpu", "b300", "--from", live)
    result = invoke(*argv)
    assert result.exit_code == 2
    assert f"{file.name}: not a facts file (at the top: JSON is malformed: " in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_node_name_from_a_run_is_text_not_markup(tmp_path: Path) -> None:
    live = facts_dir(tmp_path / "live", demo=False)
    for file in (live / "facts").glob("*.json"):
        data = json.loads(file.read_text())
        data["node"] = "[red]n\\x1b[0m[/red]\n2"
        for gpu in data["probes"]["gpu"]["facts"]["gpus"]:
            gpu["pcie_width_current"] = 4  # the slowest link: this node's
        file.write_text(json.dumps(data))
        break
    result = invoke(
        "plan", "--model", "llama-8b-lora", "--method", "full", "--gpu", "b300",
        "--gpus", "8", "--offload-optimizer", "cpu", "--from", live,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    text = "".join(result.output.split("\n"))  # rich wraps long lines; the text stays
    assert "[red]n\\x1b[0m[/red]\\n2 GPU 0 Gen6 x4" in text
    assert "\x1b" not in result.output
