"""`bringup slurm healthcheck`'s decisions: the drain reason, drain or resume, the exit code,
the budget, where runs go; and what Slurm's own output means (pinned from a real Slurm,
tests/fixtures/slurm/SOURCES.md)."""

from __future__ import annotations

import os
import stat
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from bringup.findings import Finding, Status
from bringup.fleet import healthcheck as hc
from bringup.fleet import slurmctl
from bringup.fleet.slurmctl import NodeState, SlurmError
from tests.support import FIXTURES
from tests.support.cli import invoke
from tests.support.timing import scaled

SLURM = FIXTURES / "slurm"


def _f(check: str, status: Status, message: str) -> Finding:
    return Finding(node="node03", check=check, status=status, message=message)


# --- Slurm's output ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "state", "reason", "drained"),
    [
        ("sinfo-idle.txt", "idle", None, False),
        (
            "sinfo-drained-bringup.txt",
            "drained",
            "bringup: gpu.remapped_rows GPU 3 row remap pending (+1 more)",
            True,
        ),
        ("sinfo-draining-operator.txt", "draining", "operator: fan swap", True),
        ("sinfo-idle-not-responding.txt", "idle", None, False),
        ("sinfo-down-operator.txt", "drained", "operator down", True),
    ],
)
def test_sinfo_state_and_reason(
    fixture: str, state: str, reason: str | None, drained: bool
) -> None:
    found = slurmctl.parse_state((SLURM / fixture).read_text(), "node02")
    assert found == NodeState(state=state, reason=reason)
    assert found.drained is drained


def test_a_node_slurm_does_not_know_is_an_error_naming_it() -> None:
    with pytest.raises(SlurmError, match="sinfo does not know node 'nosuch'"):
        slurmctl.parse_state("", "nosuch")


def test_mixed_with_drain_flag_is_drained() -> None:
    assert NodeState("mixed+drain", "x").drained
    assert not NodeState("mixed", None).drained


def test_the_reason_travels_as_one_argument() -> None:
    reason = 'bringup: gpu.ecc GPU 1 has "quotes" and spaces'
    argv = slurmctl.drain_argv("node 3", reason)
    assert argv == ["scontrol", "update", "nodename=node 3", "state=drain", f"reason={reason}"]
    assert slurmctl.resume_argv("node03") == [
        "scontrol",
        "update",
        "nodename=node03",
        "state=resume",
    ]


def _script(tmp_path: Path, body: str, name: str = "fake-slurm") -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_slurm_client_that_hangs_is_stopped_at_its_timeout(tmp_path: Path) -> None:
    hang = _script(tmp_path, "sleep 30 &\nwait\n")  # a child holding the pipe too
    started = time.monotonic()
    with pytest.raises(SlurmError, match=r"no answer within 0\.5 s"):
        slurmctl.call([hang, "update"], 0.5)
    assert time.monotonic() - started < scaled(3)  # the hung client sleeps 30 s


def test_a_failing_slurm_client_says_what_it_said(tmp_path: Path) -> None:
    failing = _script(tmp_path, "echo 'said on stderr' >&2\n", "quiet-slurm")
    failing_rc = _script(tmp_path, "echo 'slurm_update error: x' >&2\nexit 1\n")
    assert slurmctl.call([failing], 5) == ""  # exit 0: what it printed on stderr is ignored
    with pytest.raises(SlurmError, match=r"fake-slurm update: slurm_update error: x$"):
        slurmctl.call([failing_rc, "update"], 5)
    with pytest.raises(SlurmError, match="no-such-scontrol"):
        slurmctl.call([str(tmp_path / "no-such-scontrol")], 5)


# --- the drain reason ----------------------------------------------------------------------


def test_the_reason_names_the_check_the_part_and_the_message() -> None:
    findings = [
        _f("gpu.count", Status.PASS, "8 GPUs, as expected"),
        _f("gpu.remapped_rows", Status.FAIL, "GPU 3: row remap pending"),
    ]
    assert hc.reason_text(findings) == "bringup: gpu.remapped_rows GPU 3 row remap pending"


def test_a_fail_is_named_before_an_error_and_the_rest_are_counted() -> None:
    findings = [
        _f("gpu.count", Status.ERROR, "probe gpu timed out"),
        _f("xid.events", Status.FAIL, "GPU 0000:ba:00: Xid 79 (GPU has fallen off the bus) x1"),
        _f("gpu.ecc", Status.ERROR, "probe gpu timed out"),
        _f("gpu.thermal", Status.WARN, "warm"),
    ]
    assert hc.reason_text(findings) == (
        "bringup: xid.events GPU 0000:ba:00 Xid 79 (GPU has fallen off the bus) x1 (+2 more)"
    )


def test_only_errors_name_the_first_error() -> None:
    findings = [_f("node.run", Status.ERROR, "did not finish within the 10 s budget")]
    assert hc.reason_text(findings) == "bringup: node.run did not finish within the 10 s budget"


def test_a_fit_node_has_no_reason() -> None:
    assert (
        hc.reason_text([_f("gpu.thermal", Status.WARN, "warm"), _f("a.b", Status.SKIP, "")]) is None
    )
    assert hc.reason_text([]) is None


def test_the_reason_is_one_short_line_without_double_quotes() -> None:
    message = 'GPU 1: "bad"\nline two\x1b[31m ' + "x" * 300
    reason = hc.reason_text([_f("gpu.ecc", Status.FAIL, message)])
    assert reason is not None
    assert len(reason) == hc.MAX_REASON
    assert reason.startswith("bringup: gpu.ecc GPU 1 'bad' line two [31m xxx")
    assert reason.endswith("...")
    assert reason.isprintable() and '"' not in reason
    many = [_f("gpu.ecc", Status.FAIL, "y" * 300)] * 12
    long_reason = hc.reason_text(many)
    assert long_reason is not None and len(long_reason) == hc.MAX_REASON
    assert long_reason.endswith("... (+11 more)")


# --- drain, resume, keep -------------------------------------------------------------------

OURS = "bringup: gpu.remapped_rows GPU 3 row remap pending"
IDLE = NodeState("idle", None)
DRAINED_BY_US = NodeState("drained", OURS)
DRAINED_BY_OPERATOR = NodeState("drained", "operator: fan swap")


@pytest.mark.parametrize(
    ("reason", "state", "action"),
    [
        (OURS, IDLE, hc.Action.DRAIN),  # unfit, in service: drain
        (None, IDLE, hc.Action.NONE),  # fit, in service: nothing
        (None, DRAINED_BY_US, hc.Action.RESUME),  # fit again: resume what we drained
        (OURS, DRAINED_BY_US, hc.Action.NONE),  # still the same fault: nothing
        ("bringup: gpu.ecc GPU 1 x", DRAINED_BY_US, hc.Action.DRAIN),  # another: say so
        (None, DRAINED_BY_OPERATOR, hc.Action.KEEP),  # never resume someone else's drain
        (OURS, DRAINED_BY_OPERATOR, hc.Action.KEEP),  # nor overwrite their reason
        (None, NodeState("draining", OURS), hc.Action.RESUME),
        (None, NodeState("idle", OURS), hc.Action.NONE),  # resumed by hand, reason kept
        (None, NodeState("down", "Not responding"), hc.Action.NONE),
    ],
)
def test_decide(reason: str | None, state: NodeState, action: hc.Action) -> None:
    assert hc.decide(reason, state) is action


def test_exit_codes_fail_and_error_are_both_unfit() -> None:
    assert hc.exit_code([_f("a.b", Status.PASS, ""), _f("c.d", Status.WARN, "")]) == 0
    assert hc.exit_code([_f("a.b", Status.FAIL, "")]) == 1
    assert hc.exit_code([_f("a.b", Status.ERROR, "")]) == 1
    assert hc.exit_code([_f("node.reachable", Status.UNREACHABLE, "")]) == 1
    assert (hc.EXIT_FIT, hc.EXIT_UNFIT, hc.EXIT_USAGE) == (0, 1, 2)


# --- the budget ----------------------------------------------------------------------------


def _request(*timeouts: float) -> dict[str, object]:
    return {
        "probes": [
            {"name": f"p{i}", "params": {"timeout_s": 60}, "timeout_s": t}
            for i, t in enumerate(timeouts)
        ]
    }


def test_probes_that_fit_keep_their_timeouts() -> None:
    request = _request(2, 3)
    assert hc.fit_to_budget(request, 10) is request


def test_probes_that_do_not_fit_share_the_budget_in_proportion() -> None:
    fitted = hc.fit_to_budget(_request(6, 3), 7.5)  # 6 s after the node side's 1.5 s start
    assert [s["timeout_s"] for s in fitted["probes"]] == [4.0, 2.0]
    # The tool's own timeout is the suite's: a tool that hangs fails its probe.
    assert [s["params"]["timeout_s"] for s in fitted["probes"]] == [60, 60]


def test_the_probes_share_leaves_room_for_slurm_with_drain() -> None:
    assert hc.probe_seconds(10, drain=True) == 7.5
    assert hc.probe_seconds(20, drain=True) == 17.0  # at most 3 s for Slurm
    assert hc.probe_seconds(10, drain=False) == 9.0
    assert hc.probe_seconds(0.05, drain=True) == 0.1


def test_a_probe_stopped_at_its_share_is_said_as_the_budget() -> None:
    said = hc.budget_error("probe gpu timed out after 4.5 s", 10)
    assert said == "did not finish within the 10 s budget (probe gpu stopped after 4.5 s)"
    assert hc.budget_error("nvidia-smi failed: x", 10) == "nvidia-smi failed: x"
    assert hc.budget_error(None, 10) is None


# --- names and places ----------------------------------------------------------------------


def test_the_slurm_node_name_comes_first_then_node_then_the_short_hostname() -> None:
    assert hc.slurm_node_name("given", {"SLURMD_NODENAME": "node07"}) == "node07"
    assert hc.slurm_node_name("given", {}) == "given"
    short = hc.slurm_node_name(None, {})
    assert short and "." not in short


def test_the_default_runs_directory_is_never_under_tmp(tmp_path: Path) -> None:
    assert hc.default_runs_dir({"BRINGUP_HEALTHCHECK_DIR": "/srv/hc"}) == Path("/srv/hc")
    expected = (
        Path("/var/lib/bringup/healthcheck")
        if os.geteuid() == 0
        else Path(str(tmp_path)) / "bringup" / "healthcheck"
    )
    assert hc.default_runs_dir({"XDG_STATE_HOME": str(tmp_path)}) == expected


def test_runs_started_in_the_same_second_get_their_own_directories(tmp_path: Path) -> None:
    now = datetime(2026, 11, 30, 17, 9, 5, tzinfo=timezone.utc)
    first = hc.new_run_path(tmp_path / "runs", now)
    second = hc.new_run_path(tmp_path / "runs", now)
    assert first.name == "20261130T170905Z-healthcheck"
    assert second.name == "20261130T170905Z-healthcheck-2"
    assert first.is_dir() and second.is_dir()


def test_pruning_keeps_the_newest_runs_and_touches_nothing_else(tmp_path: Path) -> None:
    for hour in range(5):
        hc.new_run_path(tmp_path, datetime(2026, 11, 30, hour, tzinfo=timezone.utc))
    (tmp_path / "notes").mkdir()
    (tmp_path / "20261130T000000Z-check").mkdir()
    removed = hc.prune_runs(tmp_path, keep=2)
    assert [p.name for p in removed] == [
        "20261130T000000Z-healthcheck",
        "20261130T010000Z-healthcheck",
        "20261130T020000Z-healthcheck",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "20261130T000000Z-check",
        "20261130T030000Z-healthcheck",
        "20261130T040000Z-healthcheck",
        "notes",
    ]


def test_pruning_goes_by_age_and_never_removes_the_run_just_written(tmp_path: Path) -> None:
    """Pruned by name, runs named from a clock that was ahead outlived the run just written,
    which was removed while its path was printed (issue 23, found 10)."""
    ahead = [
        hc.new_run_path(tmp_path, datetime(2099, 1, 1, hour, tzinfo=timezone.utc))
        for hour in range(3)
    ]
    for age, path in enumerate(reversed(ahead), start=1):  # written days ago
        os.utime(path, (time.time() - age * 86400,) * 2)
    current = hc.new_run_path(tmp_path, datetime(2026, 11, 30, tzinfo=timezone.utc))
    removed = hc.prune_runs(tmp_path, keep=2, current=current)
    assert current.is_dir()
    assert sorted(removed) == sorted(ahead[:2])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([current.name, ahead[2].name])


# --- the command line ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--budget-s", "0"],
        ["--budget-s", "nan"],
        ["--keep", "0"],
        ["--suite", "no-such-suite"],
        ["--profile", "no-such-profile"],
        ["--nosuch"],
    ],
)
def test_bad_options_exit_2(args: list[str], tmp_path: Path) -> None:
    result = invoke("slurm", "healthcheck", "--out", tmp_path, *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ")


def test_the_reason_names_the_probe_not_the_missing_model_it_caused() -> None:
    """--profile auto on a node whose gpu probe hung: profile.auto has no model to go by,
    but the drain reason is the probe's own ERROR, the cause."""
    from bringup.findings import Finding, Status
    from bringup.fleet.healthcheck import reason_text

    hung = "did not finish within the 6 s budget (probe gpu stopped after 5 s)"
    findings = [
        Finding(
            node="n",
            check="profile.auto",
            status=Status.ERROR,
            message=f"no GPU model in the facts (gpu probe: {hung})",
        ),
        Finding(node="n", check="gpu.count", status=Status.ERROR, message=hung),
        Finding(node="n", check="xid.events", status=Status.PASS, message="no XID"),
    ]
    assert reason_text(findings) == f"bringup: gpu.count {hung} (+1 more)"
    alone = reason_text(findings[:1]) or ""  # no other cause said: the model's ERROR is it
    assert alone.startswith("bringup: profile.auto no GPU model in the facts (gpu probe: ")
