"""Every command's --json is one document of the published schema
(docs/schema/bringup-output.schema.json, docs/json.md): each command is run here as a
user runs it, in a child process, and its stdout validated with jsonschema.

The burn-in's own run is validated where the tiny recipe trains (tests/integration/burnin);
here it is its refusal, which is the same envelope.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import FIXTURES
from tests.support.cli import valid_envelope

SMI = FIXTURES / "smi" / "mleng-a100-sxm4-80gb-q-excerpt-remapped-rows-pending.txt"
HOST_ONLY = "name: host-only\ndescription: the host probe\nbudget_s: 60\nprobes:\n  - name: host\n"


# Commands whose verdict is not theirs: the exporter serves the verdict of a run it
# reads (as a metric); exporting it went fine whatever the verdict.
SERVES_A_VERDICT = {"exporter"}


def valid(result: Any, command: str, code: int) -> dict[str, Any]:
    """The document, validated, after checking the command and exit code it states: the
    process's, and for a command that judges the one its verdict gives (0 only for
    ACCEPTED, 1 for NOT ACCEPTED of any cause, 2 refused)."""
    assert result.code == code, result.stderr[-2000:]
    doc = valid_envelope(result.json())
    assert (doc["command"], doc["exit_code"]) == (command, code)
    if doc["verdict"] is not None and command not in SERVES_A_VERDICT:
        assert code == (0 if doc["verdict"] == "ACCEPTED" else 1), (command, doc["verdict"])
        assert doc["provenance"]["live"] == (doc["provenance"]["reasons"] == [])
    return doc


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, cli: Callable[..., Any]) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("json") / "demo"
    doc = valid(cli("check", "--demo", "--out", out, "--json"), "check", 1)
    return {"doc": doc, "out": out}


def test_check_demo_names_its_nodes_and_probes(demo: dict[str, Any]) -> None:
    doc = demo["doc"]
    assert doc["verdict"] == "NOT ACCEPTED" and doc["run_dir"] == str(demo["out"])
    assert doc["provenance"] == {"mode": "demo", "live": False, "reasons": ["demo data"]}
    assert [n["state"] for n in doc["nodes"]] == ["recorded"] * len(doc["nodes"])
    assert {n["node"] for n in doc["nodes"]} == {f["node"] for f in doc["findings"]}
    assert all(n["probes"]["gpu"]["ok"] for n in doc["nodes"])


def test_check_replay(demo: dict[str, Any], cli: Callable[..., Any], tmp_path: Path) -> None:
    doc = valid(
        cli("check", "--replay", demo["out"], "--out", tmp_path / "r", "--json"), "check", 1
    )
    assert [n["node"] for n in doc["nodes"]] == [n["node"] for n in demo["doc"]["nodes"]]
    assert len(doc["findings"]) == len(demo["doc"]["findings"])


def test_snapshot_local_has_the_shape_of_a_fleet_snapshot(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    suite = tmp_path / "host-only.yaml"
    suite.write_text(HOST_ONLY)
    doc = valid(cli("snapshot", "--suite", suite, "--out", tmp_path / "s", "--json"), "snapshot", 0)
    (node,) = doc["nodes"]
    assert node["state"] == "complete" and node["probes"] == {"host": {"ok": True, "error": None}}
    assert doc["verdict"] is None and doc["findings"] == []


def test_inspect_a_file_and_a_directory_give_one_shape(
    demo: dict[str, Any], cli: Callable[..., Any]
) -> None:
    one = valid(cli("inspect", SMI, "-p", "a100", "--json"), "inspect", 1)["data"]
    many = valid(cli("inspect", demo["out"], "--json"), "inspect", 1)["data"]
    assert set(one) == set(many) == {"source", "kind", "read", "profile", "facts", "verdict"}
    # A capture is not a node, recorded facts not a run: no acceptance verdict at all.
    assert one["verdict"].startswith("FAULT FOUND in nvidia-smi -q (")
    assert many["verdict"].startswith("FAULT FOUND in the facts of 6 nodes in ")
    assert [set(item) for item in one["facts"]] == [{"node", "probe", "facts"}]
    assert {item["probe"] for item in many["facts"]} >= {"gpu", "topology", "host"}


def test_profiles_list_and_show(cli: Callable[..., Any]) -> None:
    listed = valid(cli("profiles", "list", "--json"), "profiles list", 0)
    assert "h100" in {p["name"] for p in listed["data"]["profiles"]}
    shown = valid(cli("profiles", "show", "h100", "--json"), "profiles show", 0)
    assert shown["data"]["profile"]["gpu"]["count"] == 8


def test_report_says_what_it_wrote_not_the_whole_model(
    demo: dict[str, Any], cli: Callable[..., Any], tmp_path: Path
) -> None:
    result = cli("report", demo["out"], "--out", tmp_path, "--json")
    doc = valid(result, "report", 1)
    assert doc["verdict"] == "NOT ACCEPTED"
    assert doc["data"]["written"] == [str(tmp_path / "report.html"), str(tmp_path / "report.md")]
    assert "nodes" not in doc["data"]["summary"]  # the per-node measurements: report.json's
    assert len(result.stdout) < len((tmp_path / "report.html").read_text())


def test_exporter_prints_what_it_would_serve(demo: dict[str, Any], cli: Callable[..., Any]) -> None:
    doc = valid(cli("exporter", "--run", demo["out"], "--json"), "exporter", 0)
    assert doc["verdict"] == "NOT ACCEPTED"  # served as a metric; exporting it went fine
    names = {m["name"] for m in doc["data"]["metrics"]}
    assert {"bringup_run", "bringup_findings"} <= names


def test_learn(demo: dict[str, Any], cli: Callable[..., Any], tmp_path: Path) -> None:
    doc = valid(cli("learn", demo["out"], "--out", tmp_path / "golden.yaml", "--json"), "learn", 0)
    assert doc["data"]["fields"] > 0


def test_plan(cli: Callable[..., Any]) -> None:
    doc = valid(cli("plan", "--model", "tiny", "--method", "lora", "--gpu", "h100", "--json"),
                "plan", 0)  # fmt: skip
    assert doc["verdict"] is None and doc["data"]["model"]["name"] == "tiny"


def test_sim_nvml_state(cli: Callable[..., Any]) -> None:
    doc = valid(cli("sim", "nvml", "state", "--from", "b300", "--json"), "sim nvml state", 0)
    assert len(doc["data"]["state"]["gpus"]) == 8


def test_diagnose(cli: Callable[..., Any], tmp_path: Path) -> None:
    doc = valid(
        cli("diagnose", "--local", "--seconds", "1", "--out", tmp_path / "d", "--json"),
        "diagnose",
        1,  # no GPU here: what needs one is an ERROR
    )
    assert [n["state"] for n in doc["nodes"]] == ["complete"]


def test_nccl_local_gloo(cli: Callable[..., Any], tmp_path: Path) -> None:
    args = (
        "--backend",
        "gloo",
        "--ranks",
        "2",
        "--min-bytes",
        "64K",
        "--max-bytes",
        "256K",
        "--iters",
        "2",
    )
    doc = valid(
        cli("nccl", "--local", *args, "-p", "h100", "--out", tmp_path / "n", "--json"),
        "nccl",
        1,  # gloo on the CPU is no NCCL measurement: the H100's bandwidth is not measured
    )
    (facts,) = doc["data"]["facts"].values()
    assert facts["collective"] == "all_reduce"


def test_provision_check_mode_on_an_unreachable_host(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    hosts = tmp_path / "hosts.ini"
    hosts.write_text("[gpu]\ngone ansible_host=127.0.0.1 ansible_port=1\n")
    doc = valid(
        cli("provision", "--nodes", hosts, "--check", "--out", tmp_path / "p", "--json"),
        "provision",
        1,
    )
    assert [(n["node"], n["state"]) for n in doc["nodes"]] == [("gone", "unreachable")]
    assert doc["data"]["check_mode"] is True


def test_verify(demo: dict[str, Any], cli: Callable[..., Any]) -> None:
    doc = valid(cli("verify", demo["out"], "--json"), "verify", 0)
    assert doc["verdict"] is None and doc["data"]["intact"] is True


def test_handover_from_a_run(demo: dict[str, Any], cli: Callable[..., Any], tmp_path: Path) -> None:
    doc = valid(
        cli("handover", "--from", demo["out"], "--out", tmp_path / "b", "--json"), "handover", 1
    )
    assert doc["verdict"] == "NOT ACCEPTED" and doc["run_dir"] == str(tmp_path / "b")
    assert [p["kind"] for p in doc["data"]["parts"]] == ["check"]


def test_slurm_render(cli: Callable[..., Any]) -> None:
    doc = valid(cli("slurm", "render", "--suite", "quick", "--json"), "slurm render", 0)
    assert doc["data"]["script"].startswith("#!") and "#SBATCH" in doc["data"]["script"]


def test_slurm_healthcheck_on_this_gpu_less_machine(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    doc = valid(
        cli("slurm", "healthcheck", "--node", "n1", "--out", tmp_path, "--json"),
        "slurm healthcheck",
        1,  # no GPU here: unfit
    )
    assert doc["data"]["healthcheck"]["node"] == "n1" and doc["data"]["healthcheck"]["fit"] is False
    assert doc["verdict"] is None  # fitness for a job, not an acceptance


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (("check", "--nosuch"), "check"),
        (("burnin", "--local", "--recipe", "nosuch"), "burnin"),
        (("profiles", "show", "nosuch"), "profiles show"),
        (("exporter",), "exporter"),
        (("sim", "nvml", "build", "--out", "x", "--header", "/no/nvml.h"), "sim nvml build"),
    ],
)
def test_a_refusal_is_the_same_envelope(
    args: tuple[str, ...], command: str, cli: Callable[..., Any]
) -> None:
    doc = valid(cli(*args, "--json"), command, 2)
    assert doc["verdict"] is None and doc["error"]


# Each command and the test above that runs it with --json. A new command fails here until
# it has its line (and its test): every command's --json is one envelope.
COVERED = {
    "check": test_check_demo_names_its_nodes_and_probes,
    "snapshot": test_snapshot_local_has_the_shape_of_a_fleet_snapshot,
    "inspect": test_inspect_a_file_and_a_directory_give_one_shape,
    "profiles list": test_profiles_list_and_show,
    "profiles show": test_profiles_list_and_show,
    "report": test_report_says_what_it_wrote_not_the_whole_model,
    "exporter": test_exporter_prints_what_it_would_serve,
    "learn": test_learn,
    "plan": test_plan,
    "sim nvml state": test_sim_nvml_state,
    "sim nvml build": test_a_refusal_is_the_same_envelope,
    "diagnose": test_diagnose,
    "nccl": test_nccl_local_gloo,
    "burnin": test_a_refusal_is_the_same_envelope,  # and tests/integration/burnin
    "provision": test_provision_check_mode_on_an_unreachable_host,
    "verify": test_verify,
    "handover": test_handover_from_a_run,
    "slurm render": test_slurm_render,
    "slurm healthcheck": test_slurm_healthcheck_on_this_gpu_less_machine,
}


def _commands(group: Any, prefix: str = "") -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        if hasattr(command, "commands"):
            found.update(_commands(command, f"{path} "))
        else:
            found[path] = command
    return found


def test_every_command_takes_json_and_is_run_here() -> None:
    from typer.main import get_command

    from bringup.cli import app

    commands = _commands(get_command(app))
    assert set(commands) == set(COVERED)
    for name, command in commands.items():
        assert "--json" in {opt for p in command.params for opt in p.opts}, name
