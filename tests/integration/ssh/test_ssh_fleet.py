"""`bringup check --nodes` end to end against a real sshd on 127.0.0.1 (tests/support/sshd.py).

Several inventory hosts point at the one local sshd; each test plants one outcome (a
replayed fault, an unreachable node, a node side that dies, hangs or is interrupted) and
pins the exact per-node result while the other nodes' findings stay complete.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from bringup.facts import node_facts_text
from bringup.fleet import ssh
from bringup.fleet.inventory import Host
from bringup.fleet.known_hosts import UNKNOWN_HOST_KEY
from bringup.fleet.node_code import build_node_code
from bringup.sim.demo import demo_nodes
from tests.support.cli import nodes_of, run_cli, start_cli
from tests.support.sshd import LocalSshd, free_port, sshd_unavailable
from tests.support.timing import scaled, wait_until

pytestmark = pytest.mark.skipif(sshd_unavailable() is not None, reason=str(sshd_unavailable()))

SUITE = """\
name: tiny
description: replayable GPU probe plus a live kernel-log probe
budget_s: 60
probes:
  - name: gpu
    timeout_s: 20
  - name: xid
    params: {window_s: 60}
    timeout_s: 20
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny suite and two recordings from the demo fleet (healthy, row remap pending)."""
    root = tmp_path_factory.mktemp("files")
    demo = demo_nodes()
    out = {"suite": root / "tiny.yaml"}
    out["suite"].write_text(SUITE)
    for key, index in (("healthy", 0), ("missing_gpu", 1), ("row_remap", 3)):
        node = demo[index]
        node.probes = {k: v for k, v in node.probes.items() if k == "gpu"}
        out[key] = root / f"{key}.json"
        out[key].write_text(node_facts_text(node))
    return out


def inventory(path: Path, sshd: LocalSshd, hosts: dict[str, str], **extra: str) -> Path:
    """hosts.ini: name -> extra host variables; all reach the local sshd as root."""
    lines = ["[fleet]"]
    for name, variables in hosts.items():
        lines.append(f"{name} ansible_host=127.0.0.1 ansible_port={sshd.port} {variables}")
    lines += [
        "[fleet:vars]",
        "ansible_user=root",
        f"ansible_ssh_private_key_file={sshd.key}",
        f"ansible_ssh_common_args='-o UserKnownHostsFile={sshd.known_hosts}'",
        "ansible_python_interpreter=/usr/bin/python3",
        *[f"{k}={v}" for k, v in extra.items()],
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def cli(*args: object, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    home = Path(str(args[-1])).parent  # no ~/.ssh of ours
    return run_cli(*map(str, args), timeout=timeout, env={**os.environ, "HOME": str(home)})


def by_node(doc: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for f in doc["findings"]:
        out.setdefault(f["node"], []).append((f["check"], f["status"]))
    return out


def script(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def probe_run(path: Path, misbehaves: str) -> Path:
    """A node's python3 that runs `misbehaves` (sh) instead when it starts the probe code
    (`python3 -c BOOT ...`, fleet/node_code.py), and is the real python3 for all else."""
    return script(
        path,
        f'#!/bin/sh\ncase "$1" in\n  -c) {misbehaves} ;;\n'
        '  *) exec /usr/bin/python3 "$@" ;;\nesac\n',
    )


# The node's first line (whether its cached zip is the controller's), passed on as it came.
ANSWER = 'read -r answer; echo "$answer"; '


def cold_cache(sshd: LocalSshd) -> None:
    """No probe code cached on the node: the next run stores it first."""
    shutil.rmtree(sshd.cache / "bringup", ignore_errors=True)


def test_fleet_matrix_with_a_planted_fault_and_an_unreachable_node(
    sshd: LocalSshd, files: dict[str, Path], tmp_path: Path
) -> None:
    closed = free_port()
    hosts = inventory(
        tmp_path / "hosts.ini",
        sshd,
        {
            "good": f"bringup_replay={files['healthy']}",
            "remap": f"bringup_replay={files['row_remap']}",
            "gone": f"ansible_port={closed}",
        },
    )
    out = tmp_path / "run"
    result = cli("check", "--nodes", hosts, "--suite", files["suite"], "--json", "--out", out)
    assert result.returncode == 1, result.stderr
    doc = json.loads(result.stdout)
    assert nodes_of(doc)["good"]["state"] == "complete"
    assert nodes_of(doc)["remap"]["state"] == "complete"
    assert nodes_of(doc)["gone"] == {
        "node": "gone",
        "state": "unreachable",
        "reason": f"connection refused by 127.0.0.1:{closed} (is sshd running?)",
        "seconds": nodes_of(doc)["gone"]["seconds"],
        "probes": None,
    }
    findings = by_node(doc)
    assert findings["gone"] == [("node.reachable", "UNREACHABLE")]
    bad = {(c, s) for c, s in findings["remap"] if s not in ("PASS", "SKIP")}
    assert bad == {("gpu.remapped_rows", "FAIL")}
    assert {s for c, s in findings["good"]} <= {"PASS", "SKIP"}
    assert ("node.reachable", "PASS") in findings["good"]
    assert ("xid.events", "PASS") in findings["good"]  # the live probe ran over SSH
    # The run directory: every node, replayed records marked, live ones not.
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["nodes"] == ["good", "remap", "gone"]
    assert manifest["status"] == "complete" and manifest["inventory"] == str(hosts)
    facts = json.loads((out / "facts" / "remap.json").read_text())
    assert facts["probes"]["gpu"]["params"] == {"replayed": True}
    assert facts["probes"]["xid"]["params"] == {"window_s": 60}
    assert json.loads((out / "facts" / "gone.json").read_text())["probes"] == {}
    lines = (out / "findings.jsonl").read_text().splitlines()
    assert len(lines) == len(doc["findings"])


def test_the_table_output_names_the_unreachable_node_and_why(
    sshd: LocalSshd, files: dict[str, Path], tmp_path: Path
) -> None:
    closed = free_port()
    hosts = inventory(
        tmp_path / "hosts.ini",
        sshd,
        {"good": f"bringup_replay={files['healthy']}", "gone": f"ansible_port={closed}"},
    )
    result = cli("check", "--nodes", hosts, "--suite", files["suite"], "--out", tmp_path / "r")
    assert result.returncode == 1
    assert "node × check" in result.stdout
    assert f"connection refused by 127.0.0.1:{closed}" in result.stdout.replace("\n", " ")
    assert "2 nodes in" in result.stderr and "1 complete, 1 unreachable" in result.stderr


def test_limit_and_per_host_profile_overrides(
    sshd: LocalSshd, files: dict[str, Path], tmp_path: Path
) -> None:
    override = """bringup_profile_overrides='{"gpu": {"count": 7}}'"""
    hosts = inventory(
        tmp_path / "hosts.ini",
        sshd,
        {
            "known7": f"bringup_replay={files['missing_gpu']} {override}",
            "plain7": f"bringup_replay={files['missing_gpu']}",
            "other": f"bringup_replay={files['healthy']}",
        },
    )
    out = tmp_path / "run"
    result = cli(
        "check", "--nodes", hosts, "--limit", "*7", "--suite", files["suite"], "--json", "--out",
        out,
    )  # fmt: skip
    doc = json.loads(result.stdout)
    assert sorted(nodes_of(doc)) == ["known7", "plain7"]
    findings = by_node(doc)
    assert ("gpu.count", "PASS") in findings["known7"]  # this node is known to have 7
    assert ("gpu.count", "FAIL") in findings["plain7"]
    # The override is part of the verdict: recorded per node against the profile the node
    # was judged by (auto: its GPU's), and said in the report's profile block.
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["overrides"] == {"known7": [{"field": "gpu.count", "profile": 8, "value": 7}]}
    report = cli("report", out, "--format", "md", "--out", tmp_path / "rep")
    assert (
        "known7 judged with overrides: gpu.count 8 -&gt; 7"  # Markdown-escaped
        in (tmp_path / "rep" / "report.md").read_text()
    )
    # Facts answered from bringup_replay files (the demo's): never a live run.
    assert doc["provenance"]["reasons"] == ["demo data", "facts from files on known7, plain7"]
    assert report.returncode == 1 and report.stdout.startswith(
        "NOT ACCEPTED (demo data, facts from files on known7, plain7): "
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[fleet]\nn1 ansible_host\n", "line 2: Expected key=value host variable assignment"),
        (
            '[fleet]\nn1 bringup_profile_overrides=\'{"gpu": {"count": 0}}\'\n',
            "host n1: bringup_profile_overrides: gpu.count",
        ),
        ("[fleet]\nn1 bringup_replay=/nonexistent.json\n", "host n1: bringup_replay: "),
    ],
)
def test_bad_inventories_exit_2_with_one_line(tmp_path: Path, text: str, message: str) -> None:
    hosts = tmp_path / "hosts.ini"
    hosts.write_text(text)
    result = cli("check", "--nodes", hosts, "--suite", "quick", "--out", tmp_path / "r")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_a_node_that_dies_mid_run_keeps_what_it_recorded(
    sshd: LocalSshd, files: dict[str, Path], tmp_path: Path
) -> None:
    """The node side prints its first record, then the node's processes are killed."""
    cold_cache(sshd)
    dies = probe_run(
        tmp_path / "python3",
        f'/usr/bin/python3 "$@" | {{ {ANSWER}read -r line; echo "$line"; kill -9 $$; }}',
    )
    hosts = inventory(
        tmp_path / "hosts.ini",
        sshd,
        {"ok": "", "dies": f"ansible_python_interpreter={dies}"},
    )
    out = tmp_path / "run"
    result = cli("check", "--nodes", hosts, "--suite", files["suite"], "--json", "--out", out)
    doc = json.loads(result.stdout)
    assert nodes_of(doc)["ok"]["state"] == "complete"
    assert nodes_of(doc)["dies"]["state"] == "error"
    assert nodes_of(doc)["dies"]["reason"].startswith("node side was killed")
    died = [f for f in doc["findings"] if f["node"] == "dies"]
    run_error = [f for f in died if f["check"] == "node.run"]
    assert run_error[0]["status"] == "ERROR"
    assert run_error[0]["message"].endswith("; 1 probe(s) recorded are kept")
    xid = [f for f in died if f["check"].startswith("xid.")]
    assert xid and all(f["message"].startswith("not measured: node side was killed") for f in xid)
    facts = json.loads((out / "facts" / "dies.json").read_text())
    assert list(facts["probes"]) == ["gpu"]  # the record that arrived is kept
    ok = by_node(doc)["ok"]
    assert ("xid.events", "PASS") in ok and ("node.run", "ERROR") not in ok


def test_a_silent_node_is_given_up_at_its_probe_deadline(
    sshd: LocalSshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node side that never answers: the probe's timeout (+ grace) ends the wait."""
    monkeypatch.setattr(ssh, "PROBE_GRACE_S", 0.5)
    cold_cache(sshd)
    silent = probe_run(tmp_path / "python3", f"cat >/dev/null; sleep {scaled(120):.0f}")
    host = sshd.host(python=str(silent))
    request = {"probes": [{"name": "xid", "params": {}, "timeout_s": 1.0}]}
    connector = ssh.Connector(ssh.SshSettings(ssh_config=None))
    started = time.monotonic()
    with pytest.raises(ssh.TransportError) as info:
        list(ssh.run_ssh(host, request, 600, connector=connector, code=build_node_code()))
    assert str(info.value) == ("probe xid gave no answer within 1.5 s (node hung or network down)")
    assert time.monotonic() - started < scaled(30)  # not the 600 s node deadline


def test_resume_reruns_only_what_did_not_finish(
    sshd: LocalSshd, files: dict[str, Path], tmp_path: Path
) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    unknown_key = f"ansible_ssh_common_args='-o UserKnownHostsFile={empty}'"
    first = inventory(
        tmp_path / "first.ini",
        sshd,
        {"a": f"bringup_replay={files['healthy']}", "b": unknown_key},
    )
    out = tmp_path / "run"
    result = cli("check", "--nodes", first, "--suite", files["suite"], "--json", "--out", out)
    doc = json.loads(result.stdout)
    assert nodes_of(doc)["b"]["reason"] == UNKNOWN_HOST_KEY
    a_before = (out / "facts" / "a.json").read_text()
    fixed = inventory(tmp_path / "fixed.ini", sshd, {"a": "", "b": ""})
    again = cli("check", "--resume", out, "--nodes", fixed, "--json", "--out", out)
    assert again.returncode in (0, 1), again.stderr
    doc = json.loads(again.stdout)
    assert doc["run_dir"] == str(out)
    assert (out / "facts" / "a.json").read_text() == a_before  # a was not run again
    assert nodes_of(doc)["b"]["state"] == "complete"
    assert ("node.reachable", "UNREACHABLE") not in by_node(doc)["b"]
    assert list(json.loads((out / "facts" / "b.json").read_text())["probes"]) == ["gpu", "xid"]
    lines = [json.loads(x) for x in (out / "findings.jsonl").read_text().splitlines()]
    assert len(lines) == len(doc["findings"])  # judged afresh, not appended twice
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    # How it was made: a live run, then resumed; the files hashed once it finished again.
    made = manifest["provenance"]
    assert made["mode"] == "resume" and made["argv"][:2] == ["check", "--nodes"]
    (resumed,) = made["resumed"]
    assert resumed["argv"][:3] == ["check", "--resume", str(out)]
    assert "facts/a.json" in manifest["files_sha256"]


def test_ctrl_c_stops_cleanly_and_keeps_every_record(
    sshd: LocalSshd, files: dict[str, Path], tmp_path: Path
) -> None:
    cold_cache(sshd)
    stalls = probe_run(
        tmp_path / "python3",
        f'/usr/bin/python3 "$@" | {{ {ANSWER}read -r line; echo "$line"; '
        f"sleep {scaled(120):.0f}; }}",
    )
    hosts = inventory(
        tmp_path / "hosts.ini", sshd, {"slow": f"ansible_python_interpreter={stalls}"}
    )
    out = tmp_path / "run"
    proc = start_cli("check", "--nodes", hosts, "--suite", files["suite"], "--json", "--out", out)
    facts = out / "facts" / "slow.json"
    journal = out / "facts" / "journal.000001.jsonl"  # the running nodes' records as they come
    try:
        first = wait_until(lambda: journal.exists() and '"gpu"' in journal.read_text(), 60)
        assert first, "the node's first record never arrived"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=scaled(30))  # the node stalls for 120 s
    finally:
        proc.kill()
    assert proc.returncode == 1, stderr
    doc = json.loads(stdout)
    assert nodes_of(doc)["slow"]["state"] == "interrupted"
    run_error = [f for f in doc["findings"] if f["check"] == "node.run"]
    assert run_error[0]["message"] == "run interrupted; 1 probe(s) recorded are kept"
    assert json.loads((out / "manifest.json").read_text())["status"] == "interrupted"
    assert list(json.loads(facts.read_text())["probes"]) == ["gpu"]
    assert not journal.exists()  # folded into the node's facts file, removed at the end


# After Ctrl-C the CLI waits at most 0.2 s for the transport's stop check and 2 s for the
# node to hang up (ssh.HANG_UP_S); measured under a load average of 13 on 2 cores: 0.14 to
# 0.18 s of CPU and two fsyncs (the manifest) from the signal to its exit handlers, 1.2 to
# 3 s to its exit (12 s once). The 30 s bound (scaled: BRINGUP_TEST_TIME_SCALE on a busier
# machine) is that deadline plus slack.
def test_ctrl_c_while_the_probe_code_is_stored_stops_at_once(
    sshd: LocalSshd, files: dict[str, Path], tmp_path: Path
) -> None:
    """A node slow to store the probe code (it asks for the zip, then hangs): Ctrl-C ends
    the run without waiting for the node's deadline."""
    cold_cache(sshd)
    storing = tmp_path / "storing"
    hangs = probe_run(
        tmp_path / "python3",
        f'echo \'{{"bringup_code": "needed"}}\'; echo $$ > {storing}; exec sleep {scaled(300):.0f}',
    )
    hosts = inventory(tmp_path / "hosts.ini", sshd, {"slow": f"ansible_python_interpreter={hangs}"})
    out = tmp_path / "run"
    proc = start_cli("check", "--nodes", hosts, "--suite", files["suite"], "--json", "--out", out)
    try:
        assert wait_until(lambda: storing.exists() and storing.read_text().strip(), 60)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=scaled(30))
    finally:
        proc.kill()
        if storing.exists():  # the node's hanging check, which the closed session leaves
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(storing.read_text()), signal.SIGKILL)
    assert proc.returncode == 1, stderr
    doc = json.loads(stdout)
    assert nodes_of(doc)["slow"]["state"] == "interrupted"
    run_error = [f for f in doc["findings"] if f["check"] == "node.run"]
    assert run_error[0]["message"] == "run interrupted"
    assert json.loads((out / "manifest.json").read_text())["status"] == "interrupted"
    assert not sshd.cached_zip(build_node_code()).exists()  # an unchecked upload is not kept


def test_proxyjump_goes_through_one_shared_bastion_connection(sshd: LocalSshd) -> None:
    """Three nodes behind a bastion (the same sshd, which forwards to itself)."""
    connector = ssh.Connector(ssh.SshSettings(ssh_config=None))
    code = build_node_code()
    request = {"probes": [{"name": "xid", "params": {"window_s": 60}, "timeout_s": 30}]}
    jump = f"root@127.0.0.1:{sshd.port}"
    opened: list[object] = []
    real = connector._handshake

    def counting(endpoint: ssh.Endpoint, sock: Any) -> Any:
        opened.append(type(sock).__name__)
        return real(endpoint, sock)

    connector._handshake = counting  # type: ignore[method-assign]
    # The bastion is reached through ~/.ssh/config's settings for it (key, known_hosts).
    config = f"Host 127.0.0.1\n  IdentityFile {sshd.key}\n  UserKnownHostsFile {sshd.known_hosts}\n"
    connector.config.parse(iter(config.splitlines(keepends=True)))
    for name in ("j1", "j2", "j3"):
        host: Host = sshd.host(name, proxy_jump=jump)
        records = list(ssh.run_ssh(host, request, 60, connector=connector, code=code))
        assert [r["probe"] for r in records] == ["xid"]
    connector.close()
    # One TCP socket (the bastion), three channels through it.
    assert opened == ["socket", "Channel", "Channel", "Channel"]
