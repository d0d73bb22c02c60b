"""`bringup provision` bad input: one line on stderr, exit 2, nothing run (the real CLI in a
child process)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.provision import needs_ansible, run_provision

pytestmark = pytest.mark.provision


@needs_ansible
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tags", "drivers"], "--tags drivers: unknown tag"),
        (["--limit", "nodeX"], "--limit 'nodeX': no host of"),
        (["-e", "containers_ngc_api_key=abc"], "secrets on the command line end up in logs"),
        (
            ["--forks", "0"],
            "Invalid value for '--forks' / '-f': Input should be greater than or equal to 1",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    hosts = tmp_path / "hosts.ini"
    hosts.write_text("[gpu]\nnode01 ansible_host=10.0.0.1\n")
    result = run_provision("--nodes", str(hosts), *args, "--out", str(tmp_path / "run"))
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()


@needs_ansible
def test_malformed_inventory_is_one_line_and_exit_2(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.ini"
    hosts.write_text("[gpu\nnode01\n")
    result = run_provision("--nodes", str(hosts), "--out", str(tmp_path / "run"))
    assert result.returncode == 2
    assert str(hosts) in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
