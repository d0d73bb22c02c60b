"""The dcgm probe against a stand-in `dcgmi` first on PATH.

There is no DCGM here, so `dcgmi` is a script: `dcgmi diag --help` says whether it offers
--json, and `dcgmi diag -r N ...` prints a recorded real output (tests/fixtures/dcgm) and
notes its arguments. What is tested is the probe's side: the command line, JSON or table,
the raw output kept, and each way dcgmi can fail to give verdicts.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from bringup.checks.dcgm import judge_diag
from bringup.findings import Status
from bringup.node.probes import dcgm
from bringup.node.result import ProbeError
from tests.support.profiles import h100_profile

FIXTURES = Path(__file__).parents[2] / "fixtures" / "dcgm"
A100_3X = FIXTURES / "awsdt-efa-cheatsheet-p4de-a100x8-dcgm3.3.3-r2-pass.txt"
HELP_WITH_JSON = "  -j,  --json  Print the output in a json format\n"


def stand_in(folder: Path, help_text: str, body: str) -> Path:
    """A `dcgmi` that prints help_text for `diag --help`, else records its args and runs body."""
    folder.mkdir(exist_ok=True)
    path = folder / "dcgmi"
    args = shlex.quote(str(folder / "dcgmi.args"))
    path.write_text(
        "#!/bin/sh\n"
        f'if [ "$2" = "--help" ]; then printf %s {shlex.quote(help_text)}; exit 0; fi\n'
        f'echo "$@" > {args}\n{body}'
    )
    path.chmod(0o755)
    return folder


@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    def put(help_text: str, body: str) -> Path:
        folder = stand_in(tmp_path / "bin", help_text, body)
        monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
        return folder

    return put


def test_a_dcgmi_without_json_is_read_as_a_table(on_path) -> None:
    folder = on_path("  -r, --run  Run a diagnostic\n", f"cat {shlex.quote(str(A100_3X))}\n")
    output = dcgm.collect(dcgm.Params(level=3))
    assert (folder / "dcgmi.args").read_text().split() == ["diag", "-r", "3"]
    facts = output.facts
    assert (facts.level, facts.command, facts.exit_code) == (3, "dcgmi diag -r 3", 0)
    assert facts.report.format == "table" and len(facts.report.tests) == 11
    assert output.raw["dcgmi-diag.txt"].startswith("# command: dcgmi diag -r 3\n")
    (passed,) = judge_diag(facts, h100_profile())
    assert passed.status == Status.PASS and "11 tests passed on 8 GPUs" in passed.message


def test_json_where_dcgmi_offers_it_and_a_failing_exit_status_is_kept(on_path) -> None:
    doc = (
        '{"DCGM Diagnostic": {"test_categories": [{"category": "Stress", "tests": [{"name": '
        '"targeted_power", "results": [{"entity_group": "GPU", "entity_id": 5, "status": "Fail",'
        ' "warnings": [{"warning": "Power below target on GPU 5"}]}], "test_summary": {"status":'
        ' "Fail"}}]}]}, "metadata": {"version": "4.4.2"}}'
    )
    folder = on_path(HELP_WITH_JSON, f"echo {shlex.quote(doc)}\nexit 226\n")
    output = dcgm.collect(dcgm.Params(level=1, gpus="5"))
    assert (folder / "dcgmi.args").read_text().split() == ["diag", "-r", "1", "-i", "5", "-j"]
    assert output.facts.exit_code == 226 and output.facts.report.format == "json"
    assert "dcgmi-diag.json" in output.raw
    (fail,) = judge_diag(output.facts, h100_profile())
    assert (fail.status, fail.message) == (
        Status.FAIL,
        "Stress test targeted_power failed on GPU 5: Power below target on GPU 5",
    )


def test_no_dcgmi_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ProbeError) as caught:
        dcgm.collect(dcgm.Params())
    assert str(caught.value) == "dcgmi not found (install DCGM: `bringup provision --tags dcgm`)"


def test_no_host_engine_is_dcgmis_own_words_and_what_to_do(on_path) -> None:
    said = "Error: unable to establish a connection to the specified host: localhost"
    on_path(HELP_WITH_JSON, f"echo {shlex.quote(said)}\nexit 255\n")
    with pytest.raises(ProbeError) as caught:
        dcgm.collect(dcgm.Params(level=1))
    assert str(caught.value) == (
        f"dcgmi diag -r 1 -j: {said} (is the DCGM host engine running? "
        "`systemctl start nvidia-dcgm`)"
    )
    assert said in caught.value.raw["dcgmi-diag.json"]


def test_a_hung_dcgmi_is_stopped_at_its_timeout(on_path) -> None:
    on_path(HELP_WITH_JSON, "sleep 30\n")
    with pytest.raises(ProbeError, match=r"dcgmi diag -r 2 -j timed out after 1 s"):
        dcgm.collect(dcgm.Params(level=2, timeout_s=1))
