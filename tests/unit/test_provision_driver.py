"""The provision driver's judgement: ansible-runner events -> per-node results -> findings,
and its option checks (tests/integration/provision runs `bringup provision` itself)."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from bringup.commands.common import create_run
from bringup.data import data_dir
from bringup.findings import Status
from bringup.fleet.provision import (
    LOST_WHY,
    SCRUBBER,
    Progress,
    ProvisionError,
    Request,
    ansible_error,
    findings,
    parse_extra_vars,
    parse_tags,
    provision,
    result_message,
)
from tests.support import FIXTURES

ANSIBLE = FIXTURES / "ansible"  # ansible-playbook's own error output, SOURCES.md there


def _event(kind: str, host: str | None = None, **data: object) -> dict[str, object]:
    """An ansible-runner event of the shape its job_events/*.json files hold."""
    event_data = dict(data)
    if host:
        event_data["host"] = host
    return {"event": kind, "event_data": event_data}


def _play(progress: Progress) -> None:
    """Two nodes: node01 changes one task; node02 fails at the same task (apt, no network)."""
    task = {"task": "Install the node tools", "role": "node_tools"}
    apt_failure = {
        "msg": "'/usr/bin/apt-get -y install nvme-cli' failed: E: Failed to fetch",
        "stderr": "W: Some index files failed\nE: Failed to fetch http://deb.debian.org/x.deb\n",
        "rc": 100,
    }
    for event in [
        _event("playbook_on_task_start", **task),
        _event("runner_on_start", "node01", **task),
        _event("runner_on_start", "node02", **task),
        _event("runner_on_ok", "node01", res={"changed": True}, **task),
        _event("runner_on_failed", "node02", res=apt_failure, ignore_errors=False, **task),
        _event(
            "runner_on_failed",
            "node01",
            res={"msg": "No package matching 'nvidia-open'"},
            ignore_errors=True,
            task="Install the driver packages",
            role="nvidia_driver",
        ),
        _event(
            "playbook_on_stats",
            ok={"node01": 12, "node02": 3},
            changed={"node01": 1},
            failures={"node02": 1},
            skipped={"node01": 48},
            ignored={"node01": 1},
            processed={"node01": 1, "node02": 1},
        ),
    ]:
        progress.feed(event)


def test_a_failed_node_is_named_with_its_task_and_reason() -> None:
    progress = Progress(["node01", "node02"])
    _play(progress)
    result = {f.node: f for f in findings(progress, check_mode=False, rc=2)}
    assert result["node02"].status is Status.FAIL
    assert result["node02"].message == (
        "failed at [node_tools : Install the node tools]: '/usr/bin/apt-get -y install "
        "nvme-cli' failed: E: Failed to fetch — E: Failed to fetch http://deb.debian.org/x.deb"
    )
    # An error Ansible was told to ignore is kept in the task list, not counted as failure.
    statuses = [t.status for t in progress.nodes["node01"].tasks]
    assert statuses == ["changed", "ignored"]


def test_an_ignored_failure_is_a_warning_and_in_check_mode_a_failure() -> None:
    """node01 finished, but past an error it ignored: that is never a plain PASS."""
    progress = Progress(["node01", "node02"])
    _play(progress)
    real = findings(progress, check_mode=False, rc=2)[0]
    assert (real.status, real.value, real.unit) == (Status.WARN, 1, "ignored")
    assert real.message == (
        "1 failure(s) ignored: [nvidia_driver : Install the driver packages] "
        "No package matching 'nvidia-open'"
    )
    check = findings(progress, check_mode=True, rc=2)[0]
    assert check.status is Status.FAIL
    assert check.message == (
        "check mode: 1 failure(s) ignored: [nvidia_driver : Install the driver packages] "
        "No package matching 'nvidia-open'"
    )


def test_check_mode_says_would_change() -> None:
    progress = Progress(["node01"])
    task = {"task": "Install the node tools", "role": "node_tools"}
    progress.feed(_event("runner_on_ok", "node01", res={"changed": True}, **task))
    progress.feed(
        _event(
            "playbook_on_stats", ok={"node01": 12}, changed={"node01": 1}, skipped={"node01": 48}
        )
    )
    f = findings(progress, check_mode=True, rc=0)[0]
    assert f.status is Status.PASS
    assert f.message == "check mode: 12 ok, 1 changed, 48 skipped (1 task(s) would change)"
    f = findings(progress, check_mode=False, rc=0)[0]
    assert f.message == "12 ok, 1 changed, 48 skipped (1 task(s) changed)"


def test_unreachable_and_unfinished_nodes() -> None:
    progress = Progress(["node01", "node02", "node03"])
    progress.feed(
        _event(
            "runner_on_unreachable",
            "node01",
            task="Gathering Facts",
            res={"msg": "Failed to connect to the host via ssh: Connection refused"},
        )
    )
    progress.feed(_event("playbook_on_stats", dark={"node01": 1}, ok={"node02": 5}))
    result = {f.node: f for f in findings(progress, check_mode=False, rc=4)}
    assert result["node01"].status is Status.UNREACHABLE
    assert result["node01"].message == (
        "unreachable at [Gathering Facts]: Failed to connect to the host via ssh: "
        "Connection refused"
    )
    assert result["node02"].status is Status.PASS
    # No recap for node03: it never ran, which is never a pass.
    assert result["node03"].status is Status.ERROR
    assert result["node03"].message == (
        "provisioning did not finish: ansible-playbook exited 4 before its recap"
    )


def test_no_log_results_say_so_instead_of_their_content() -> None:
    censored = {
        "censored": "the output has been hidden due to the fact that 'no_log: true' was "
        "specified for this result",
        "changed": False,
    }
    assert result_message(censored) == "output hidden (no_log: true)"
    assert result_message({"rc": 3}) == "exit status 3"
    assert len(result_message({"msg": "x" * 1000})) == 300


def test_tags_and_extra_vars_are_checked() -> None:
    assert parse_tags("cuda, dcgm", "--tags") == ["cuda", "dcgm"]
    with pytest.raises(ProvisionError, match=r"--tags cudaa: unknown tag \(known: node_tools"):
        parse_tags("cudaa", "--tags")
    assert parse_extra_vars(["nvidia_driver_branch=570"]) == {"nvidia_driver_branch": "570"}
    with pytest.raises(ProvisionError, match="expected NAME=VALUE"):
        parse_extra_vars(["nvidia_driver_branch"])
    with pytest.raises(ProvisionError, match="secrets on the command line end up in logs"):
        parse_extra_vars(["containers_ngc_api_key=abc"])


def test_extra_vars_are_yaml_typed_but_numbers_stay_as_typed() -> None:
    """`false` is a boolean (a bare `when:` would take the string "false" as true), lists
    and mappings are structures; versions and branches stay text (12.10 is not 12.1)."""
    typed = parse_extra_vars(
        [
            "nvidia_driver_reboot=false",
            "containers_nvidia_default_runtime=no",
            "cuda_install=True",
            "cuda_version=12.10",
            "nvidia_driver_branch=580",
            "nvidia_driver_version=580.95.05",
            "dcgm_version=1:4.4.1-1",
            "nvidia_driver_headers_packages=[]",
            "node_tools_packages=[fio, numactl]",
            "containers_ngc_image=nvcr.io/nvidia/pytorch:25.09-py3",
            "nvidia_repo_base_url=",
            "containers_toolkit_version=null",
            "release=2026-01-02",
        ]
    )
    assert typed == {
        "nvidia_driver_reboot": False,
        "containers_nvidia_default_runtime": False,
        "cuda_install": True,
        "cuda_version": "12.10",
        "nvidia_driver_branch": "580",
        "nvidia_driver_version": "580.95.05",
        "dcgm_version": "1:4.4.1-1",
        "nvidia_driver_headers_packages": [],
        "node_tools_packages": ["fio", "numactl"],
        "containers_ngc_image": "nvcr.io/nvidia/pytorch:25.09-py3",
        "nvidia_repo_base_url": "",
        "containers_toolkit_version": None,
        "release": "2026-01-02",
    }
    with pytest.raises(ProvisionError, match=r"-e 'x=\[1': .*quote the value"):
        parse_extra_vars(["x=[1"])


def test_the_message_is_apts_verdict_not_the_ssh_noise_after_it() -> None:
    """The script module's stderr ends with OpenSSH's "Shared connection ... closed.":
    the message takes apt's E: line, which names the package."""
    res = {
        "msg": "non-zero return code",
        "rc": 100,
        "stderr": "Reading package lists...\nE: Unable to locate package nvidia-fabricmanager-580\n"
        "Shared connection to 10.231.2.1 closed.\r\n",
    }
    assert result_message(res) == (
        "non-zero return code — E: Unable to locate package nvidia-fabricmanager-580"
    )
    on_a_terminal = {
        "msg": "non-zero return code",
        "rc": 100,
        "stdout": "Reading package lists...\r\nE: Unable to locate package libnvsdm-580\r\n",
        "stderr": "Shared connection to 10.231.2.1 closed.\r\n",
    }
    on_a_terminal["stdout"] = "E: Unable to locate package a\r\n" + on_a_terminal["stdout"]
    assert result_message(on_a_terminal) == (
        "non-zero return code — E: Unable to locate package a; "
        "E: Unable to locate package libnvsdm-580"
    )


# --- ansible-playbook's own errors: a file it cannot parse ------------------------------

ROLE_FILE = "/tmp/suite-rec/playbooks/roles/node_tools/tasks/main.yml"
INCLUDED = "/tmp/suite-rec/broken.yml"
SAID_216 = "Syntax Error while loading YAML. mapping values are not allowed in this context"
SAID_219 = (
    "YAML parsing failed: Colons in unquoted values must be followed by a non-space character."
)


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("role-parse-error-216.txt", f"{ROLE_FILE}:4:15: {SAID_216}"),
        ("role-parse-error-219.txt", f"{ROLE_FILE}:4:15: {SAID_219}"),
        ("include-parse-error-216.txt", f"{INCLUDED}:4:15: {SAID_216}"),
        ("include-parse-error-219.txt", f"{INCLUDED}:4:15: {SAID_219}"),
    ],
)
def test_ansible_error_is_where_then_what_as_each_version_says_it(
    fixture: str, expected: str
) -> None:
    """Before 2.19 the YAML paragraph follows one on JSON; the excerpt after is left out."""
    assert ansible_error((ANSIBLE / fixture).read_text().splitlines()) == expected


def test_ansible_error_without_a_place_is_its_first_paragraph() -> None:
    lines = ["ERROR! the playbook: site.yml could not be found", "", "more"]
    assert ansible_error(lines) == "the playbook: site.yml could not be found"
    assert ansible_error(["[WARNING]: a warning", "PLAY [x] ***"]) is None


def test_a_role_ansible_cannot_parse_before_the_play_is_refused() -> None:
    """Before the play, ansible-runner passes the error on as verbose events, one a line
    (blank lines as empty ones); no node ran, and none is left "running"."""
    progress = Progress(["node01", "node02"])
    progress.feed(_event("verbose") | {"stdout": "[WARNING]: noise before the error"})
    for line in (ANSIBLE / "role-parse-error-216.txt").read_text().splitlines():
        progress.feed(_event("verbose") | {"stdout": line})
    progress.end(rc=4, interrupted=False)
    assert progress.refused == f"{ROLE_FILE}:4:15: {SAID_216}"
    assert {n.status for n in progress.nodes.values()} == {"error"}
    result = findings(progress, check_mode=False, rc=4)
    assert {f.status for f in result} == {Status.ERROR}
    assert result[0].message == f"provisioning did not finish: {ROLE_FILE}:4:15: {SAID_216}"


def test_a_file_ansible_cannot_parse_mid_play_keeps_what_ran() -> None:
    """Mid-play the error is one `error` event; the task before it stays recorded."""
    progress = Progress(["node01"])
    task = {"task": "Say hello first", "role": None}
    progress.feed(_event("runner_on_ok", "node01", res={"changed": False}, **task))
    text = (ANSIBLE / "include-parse-error-219.txt").read_text()
    progress.feed(_event("error", task="Read the driver's state") | {"stdout": text})
    progress.end(rc=4, interrupted=False)
    assert progress.refused == f"{INCLUDED}:4:15: {SAID_219}"
    node = progress.nodes["node01"]
    assert (node.status, node.message) == ("error", progress.refused)
    assert [(t.task, t.status) for t in node.tasks] == [("Say hello first", "ok")]


def test_a_play_that_stopped_otherwise_is_an_error_not_a_refusal() -> None:
    """A crash (250), Ctrl-C, or a recap (4 is also "unreachable hosts") is no bad input."""
    crash = Progress(["node01"])
    crash.end(rc=250, interrupted=False)
    assert crash.refused is None and crash.nodes["node01"].status == "error"
    assert crash.nodes["node01"].message == "ansible-playbook exited 250 before its recap"
    stopped = Progress(["node01"])
    stopped.end(rc=None, interrupted=True)
    assert stopped.refused is None and stopped.nodes["node01"].status == "interrupted"
    recap = Progress(["node01", "node02"])
    recap.feed(_event("playbook_on_stats", dark={"node01": 1}, ok={"node02": 5}))
    recap.end(rc=4, interrupted=False)
    assert recap.refused is None
    assert [n.status for n in recap.nodes.values()] == ["unreachable", "ok"]


# The FIFO that keeps the environment off disk (_EnvScrubber) is read by a thread: it must
# end cleanly when ansible-runner never wrote it (an error in that thread fails the test).
@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_output_ansible_runner_lost_is_each_unfinished_nodes_error_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ansible-runner raises pexpect's TIMEOUT when the play's last output takes over its
    hard-coded 5 s after ansible-playbook exits (ansible/ansible-runner#1343; seen under
    load, `bringup provision` then printed a traceback). What the events said is kept;
    a node they never finished is an ERROR saying why, never provisioned."""
    import ansible_runner
    import pexpect

    def runner_losing_the_end(**kwargs: Any) -> None:
        task = {"task": "Install the node tools", "role": "node_tools"}
        for event in (
            _event("playbook_on_task_start", **task),
            _event("runner_on_ok", "node01", res={"changed": False}, **task),
            _event("runner_on_failed", "node02", res={"msg": "E: apt"}, **task),
        ):
            kwargs["event_handler"](event)
        raise pexpect.TIMEOUT("Timeout exceeded.")

    monkeypatch.setattr(ansible_runner, "run", runner_losing_the_end)
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("node01\nnode02\n")
    request = Request(
        inventory=inventory,
        nodes=["node01", "node02"],
        playbook=data_dir("playbooks") / "site.yml",
    )
    run = create_run(tmp_path / "runs", "provision", None, None, probes=["provision"])
    progress, result = provision(request, run, Console(file=io.StringIO()))
    node01, node02 = progress.nodes["node01"], progress.nodes["node02"]
    assert (node01.status, node01.message) == ("error", LOST_WHY)
    assert (node02.status, node02.failed_task) == ("failed", "node_tools : Install the node tools")
    assert {f.node: f.status for f in result} == {"node01": Status.ERROR, "node02": Status.FAIL}
    assert progress.refused is None
    # The thread that reads the FIFO ansible-runner never wrote has ended, not left
    # blocked on a FIFO no one will open (close() once tried a single time, then gave up).
    assert [t for t in threading.enumerate() if t.name == SCRUBBER] == []
