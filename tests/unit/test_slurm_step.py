"""One Slurm step for a wave of nodes (fleet/slurm_step.py): the srun command line, a
record in pieces under srun's 1 KiB cut and back, each task's marks, srun's launch
failures and lost nodes by node, which nodes run again, the job's task order, and the node
side's own deadline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bringup.fleet.node_code import NEED_CODE_EXIT, build_node_code, remote_command
from bringup.fleet.slurm_step import (
    PIECE_BYTES,
    TaskLines,
    io_failures,
    job_order,
    launch_failures,
    node_request,
    run_command,
    runs_again,
    step_argv,
)
from bringup.fleet.transport import TransportError, decode_line
from bringup.node.protocol import DEADLINE_EXIT, pieces, serve
from tests.support import REPO
from tests.support.timing import scaled


def test_a_step_runs_one_labelled_task_on_each_node_with_the_request_on_every_stdin() -> None:
    assert step_argv("41", ["node01", "node02", "node03"], "true") == [
        "srun",
        "--jobid=41",
        "--nodelist=node01,node02,node03",
        "--nodes=3",
        "--ntasks=3",
        "--ntasks-per-node=1",
        "--distribution=block",
        "--overlap",
        "--quiet",
        "--label",
        "--input=all",
        "--job-name=bringup",
        "sh",
        "-c",
        "true",
    ]


def test_the_node_command_is_the_node_codes_own_start_between_its_marks() -> None:
    code = build_node_code()
    command = run_command(code, "python3")
    assert command == (
        'echo "bringup-node $SLURMD_NODENAME"; '
        f"({remote_command(code, 'python3')}); "
        's=$?; echo; echo "bringup-exit $s"'
    )
    # The store step: BOOT told that the zip follows the request, whatever the cache holds.
    stored = run_command(code, "/opt/py 3/bin/python3", store=True)
    assert stored.split("; ")[1].endswith(f"{code.magic} 1)")
    assert "exec '/opt/py 3/bin/python3' -c " in stored


def test_every_task_is_asked_for_pieces_and_its_deadline_in_whole_seconds() -> None:
    frame = node_request({"probes": [{"name": "host"}]}, 239.2)
    head, body = frame.split(b"\n", 1)
    assert int(head) == len(body)
    assert json.loads(body) == {
        "probes": [{"name": "host"}],
        "pieces": PIECE_BYTES,
        "deadline_s": 240,
    }
    assert json.loads(node_request({"probes": []}, -3.0).split(b"\n", 1)[1])["deadline_s"] == 1


def test_a_record_in_pieces_stays_under_the_cut_and_comes_back_whole() -> None:
    record = {"probe": "host", "ok": True, "raw": {"dmesg.txt": "x" * 5000 + "é"}}
    line = json.dumps(record).encode()
    parts = pieces(line, 1000)
    assert len(parts) == 6
    assert all(len(p) <= 1000 for p in parts)
    assert [p[:1] for p in parts] == [b"+"] * 5 + [b"="]
    task = TaskLines("node01")
    task.code = "cached"
    said = [task.feed(p) for p in parts]
    assert said[:-1] == [None] * 5
    assert said[-1] is not None and decode_line(said[-1]) == record
    # A line that fits is one piece, as it was.
    assert pieces(b'{"probe": "x"}', 1000) == [b'{"probe": "x"}']
    assert pieces(b"{abc}", 4) == [b"+{ab", b"=c}"]
    # A piece that starts with a mark of its own is still a piece.
    parts = pieces(b'{"a":"+++"}', 5)
    assert parts == [b'+{"a"', b'+:"++', b'=+"}']
    task = TaskLines("node01")
    task.code = "cached"
    assert [task.feed(p) for p in parts] == [None, None, b'{"a":"+++"}']


def test_a_record_cut_short_is_dropped_and_the_exit_status_still_read() -> None:
    task = TaskLines("node04")
    task.code = "cached"
    assert task.feed(b'+{"probe": "gpu", "ok": tr') is None
    assert task.feed(b"") is None  # the shell's blank line: the node side died mid-record
    assert task.feed(b"bringup-exit 124") is None
    assert task.exit == 124
    assert task.feed(b'{"probe": "xid"}') == b'{"probe": "xid"}'


def test_serve_writes_pieces_when_the_request_asks(tmp_path: Path) -> None:
    read, write = os.pipe()
    serve({"probes": [{"name": "nope"}], "pieces": 40}, write)
    os.close(write)
    out = os.read(read, 1 << 16).splitlines()
    os.close(read)
    assert len(out) > 1 and all(len(line) <= 40 for line in out)
    task = TaskLines("n")
    task.code = "cached"
    records = [r for r in (task.feed(x) for x in out) if r is not None]
    assert [decode_line(r)["error"] for r in records] == ["unknown probe 'nope'"]


def test_each_task_says_its_node_its_code_and_exit_status_apart_from_its_records() -> None:
    task = TaskLines("node02")
    assert task.feed(b"bringup-node node02") is None
    assert not task.settled
    assert task.feed(b"motd: welcome") is None  # before BOOT's word: skipped, not a record
    assert task.feed(b'{"bringup_code": "needed"}') is None
    assert not task.settled  # it may still be reading the zip
    assert task.feed(b"") is None
    assert task.feed(b"bringup-exit 97") is None
    assert (task.named, task.code, task.exit) == ("node02", "needed", 97)
    assert task.settled
    cached = TaskLines("node03")
    assert cached.feed(b'{"bringup_code": "cached"}') is None
    assert cached.settled
    assert cached.feed(b'{"probe": "host"}') == b'{"probe": "host"}'


def test_a_line_without_its_end_past_the_bound_stops_the_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("bringup.fleet.slurm_step.MAX_LINE_BYTES", 2500)
    task = TaskLines("node07")
    task.feed(b"+" + b"a" * 999)
    task.feed(b"+" + b"a" * 999)
    with pytest.raises(TransportError, match="node07 sent a line of over"):
        task.feed(b"+" + b"a" * 999)


def test_launch_failures_are_read_by_node_from_what_srun_said() -> None:
    # srun 22.05's words when one node's slurmd does not answer (the frozen-node test).
    stderr = (
        "srun: error: slurm_receive_msgs: [[10.231.2.2]:6818] failed: Socket timed out on "
        "send/recv operation\n"
        "srun: error: Task launch for StepId=1.3 failed on node node02: Socket timed out on "
        "send/recv operation\n"
        "srun: error: Application launch failed: Socket timed out on send/recv operation\n"
        "srun: error: node03: task 2: Exited with exit code 2\n"
    )
    assert launch_failures(stderr) == {
        "node02": "Task launch for StepId=1.3 failed on node node02: Socket timed out on "
        "send/recv operation"
    }
    assert launch_failures("srun: error: node03: task 2: Exited with exit code 2\n") == {}


def test_a_node_whose_slurmstepd_srun_lost_is_named_by_its_index_in_the_step() -> None:
    # srun 22.05's words when node02's slurmstepd dies with stdin unread (the integration
    # test that kills it while srun sends the zip): it ends the whole step.
    stderr = (
        "srun: error: _server_read: fd 12 error reading header: Connection reset by peer\n"
        "srun: error: step_launch_notify_io_failure: aborting, io error with slurmstepd on "
        "node 1\n"
        "srun: error: node03: task 2: Killed\n"
        "srun: error: node01: task 0: Killed\n"
        "srun: error: Timed out waiting for job step to complete\n"
    )
    nodes = ["node01", "node02", "node03"]
    assert io_failures(stderr, nodes) == {
        "node02": "_server_read: fd 12 error reading header: Connection reset by peer"
    }
    # The other words srun has for it (a step it had thought missing), without an I/O
    # error said first; an index past the step names no one.
    missing = "srun: error: Aborting, io error and missing step on node 2\n"
    assert io_failures(missing, nodes) == {
        "node03": "Aborting, io error and missing step on node 2"
    }
    assert io_failures(missing.replace("node 2", "node 7"), nodes) == {}
    assert io_failures("srun: error: node03: task 2: Exited with exit code 2\n", nodes) == {}
    assert launch_failures(stderr) == {}


def test_only_silent_nodes_cut_off_by_another_run_again_and_each_once() -> None:
    silent = ["node01", "node02", "node03"]
    # node02 lost: the others run again; then node03 cut off a second time does not.
    assert runs_again(silent, {"node02"}, {}) == ["node01", "node03"]
    assert runs_again(silent, {"node02"}, {"node03": 1}) == ["node01"]
    # A step that ended with no node to blame (srun killed, the node side gone) is no
    # one's to run again: each node's outcome is its own.
    assert runs_again(silent, set(), {}) == []
    assert runs_again([], {"node02"}, {}) == []


def test_tasks_follow_the_jobs_node_order_not_the_order_asked() -> None:
    order = ["gpu-b", "gpu-a", "gpu-c", "gpu-d"]
    assert job_order(["gpu-c", "gpu-a", "gpu-b"], order) == ["gpu-b", "gpu-a", "gpu-c"]
    assert job_order(["zz", "gpu-d"], order) == ["gpu-d", "zz"]


def test_the_node_side_stops_itself_at_its_deadline_and_kills_the_running_tool(
    tmp_path: Path,
) -> None:
    # A node whose nvidia-smi hangs: the topology probe's own timeout (600 s) is far off;
    # the node's deadline (2 s) ends the node side and the tool with it.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = tmp_path / "hung"
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho $$ > {marker}\nexec sleep 600\n")
    smi.chmod(0o755)
    request = {"probes": [{"name": "topology", "timeout_s": 600}]}
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(REPO)}
    started = time.monotonic()
    done = _boot(tmp_path, node_request(request, 2.0), env)
    assert done.returncode == DEADLINE_EXIT, done.stderr
    assert time.monotonic() - started < scaled(30)
    pid = int(marker.read_text())
    for _ in range(50):  # killed with the probe's tree, not left to run its 600 s
        if not Path(f"/proc/{pid}").exists() or "Z" in _state(pid):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the hung tool {pid} outlived the node side")


def _boot(
    tmp_path: Path, frame: bytes, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """The node code's own start (BOOT, as a task of a store step runs it), the zip behind
    the request on its stdin, the node's cache under `tmp_path`."""
    code = build_node_code()
    env = {**(env or os.environ), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    return subprocess.run(
        ["sh", "-c", remote_command(code, sys.executable, store=True)],
        input=frame + code.data,
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=scaled(60),
        check=False,
    )


def test_the_node_code_honours_the_pieces_asked_in_the_request(tmp_path: Path) -> None:
    done = _boot(tmp_path, node_request({"probes": [{"name": "nope"}]}, 60.0))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == b'{"bringup_code": "needed"}'
    assert len(lines) > 1 and all(len(line) <= PIECE_BYTES for line in lines)
    task = TaskLines("n")
    records = [r for r in (task.feed(x) for x in lines) if r is not None]
    assert task.code == "needed"
    assert [decode_line(r)["error"] for r in records] == ["unknown probe 'nope'"]


def test_a_node_without_the_code_in_a_step_without_it_exits_for_it(tmp_path: Path) -> None:
    code = build_node_code()
    done = subprocess.run(
        ["sh", "-c", run_command(code, sys.executable)],
        input=node_request({"probes": []}, 60.0),
        capture_output=True,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
        timeout=scaled(60),
        check=False,
    )
    task = TaskLines("n")
    assert [task.feed(line) for line in done.stdout.splitlines()] == [None] * 4
    assert (task.code, task.exit) == ("needed", NEED_CODE_EXIT)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_waves_are_the_next_announced_nodes_up_to_forks_and_a_node_once_in_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bringup.fleet.inventory import Host
    from bringup.fleet.slurm import Allocation
    from bringup.fleet.slurm_step import StepLauncher, Wave

    monkeypatch.setattr(Wave, "_run", lambda self: None)  # no srun: the grouping alone
    launcher = StepLauncher(
        Allocation("7", ["n1", "n2", "n3", "n4"], owned=False), build_node_code()
    )
    names = ["n1", "n2", "n3", "n3", "n4"]  # n3 twice: two plans of one node
    runners = [launcher.runner(Host(name=n, address=n)) for n in names]
    for runner in runners:
        runner.announce({"probes": [{"name": "host"}]}, 60.0, 2)
    nodes = [r.node for r in runners]
    waves = [launcher.wave_of(n) for n in nodes]  # type: ignore[arg-type]
    assert [sorted(w.nodes) for w in waves] == [
        ["n1", "n2"],
        ["n1", "n2"],
        ["n3"],  # its second plan cannot share the wave: it starts the next one
        ["n3", "n4"],
        ["n3", "n4"],
    ]
    assert waves[0] is waves[1] and waves[3] is waves[4] and waves[2] is not waves[3]
