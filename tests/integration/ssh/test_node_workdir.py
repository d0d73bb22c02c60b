"""The burn-in's work directory on a node, over a real sshd and the shipped zip: made fresh
and private under the node user's cache, and never in a base another user planted."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from bringup.fleet.node_code import build_node_code
from bringup.fleet.transport import is_progress
from tests.support.sshd import LocalSshd, needs_sshd, run

NOBODY = 65534
CODE = build_node_code()


def _burnin(**params: Any) -> dict[str, Any]:
    """A burn-in request that gets as far as its work directory (no torch needed for that:
    the trainer then fails to start, which the probe reports in its facts)."""
    values = {"recipe": {"name": "tiny"}, "deepspeed_config": {"train_batch_size": 1}, **params}
    return {"probes": [{"name": "burnin", "params": values, "timeout_s": 60}]}


def _answers(sshd: LocalSshd, request: dict[str, Any]) -> list[dict[str, Any]]:
    """The probe records, without the progress lines the burn-in reports as it goes."""
    return [r for r in run(sshd.host(), request, code=CODE) if not is_progress(r)]


def _error(sshd: LocalSshd, **params: Any) -> str:
    [record] = _answers(sshd, _burnin(**params))
    assert record["ok"] is False, record
    return str(record["error"])


@needs_sshd
def test_the_default_work_dir_is_new_and_private_in_the_users_cache(sshd: LocalSshd) -> None:
    for _ in range(2):
        [record] = _answers(sshd, _burnin(work_prefix="run1-n1-"))
        assert record["ok"] is True, record
    base = sshd.cache / "bringup" / "burnin"
    made = sorted(base.iterdir())
    assert len(made) == 2 and all(p.name.startswith("run1-n1-") for p in made)  # one per run
    for path in made:
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
        assert json.loads((path / "plan.json").read_text())["work_dir"] == str(path)


@needs_sshd
def test_a_planted_base_owned_by_another_user_is_not_used(sshd: LocalSshd, tmp_path: Path) -> None:
    planted = tmp_path / "bringup-burnin"  # what a local user creates first in /tmp
    planted.mkdir(mode=0o777)
    planted.chmod(0o777)
    os.chown(planted, NOBODY, NOBODY)
    assert _error(sshd, work_base=str(planted)) == (
        f"{planted} is owned by uid {NOBODY}, not by this user (uid 0) or root: "
        "refused as a work directory"
    )
    assert list(planted.iterdir()) == []  # no plan.json, no log, no checkpoint


@needs_sshd
def test_a_planted_symlink_is_not_followed(sshd: LocalSshd, tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (tmp_path / "bringup-burnin").symlink_to(theirs)
    error = _error(sshd, work_base=str(tmp_path / "bringup-burnin"))
    assert error == f"{tmp_path / 'bringup-burnin'} is a symlink: refused as a work directory"
    assert list(theirs.iterdir()) == []


@needs_sshd
def test_an_exact_work_dir_that_exists_is_not_reused(sshd: LocalSshd, tmp_path: Path) -> None:
    existing = tmp_path / "work"
    existing.mkdir()
    assert _error(sshd, work_dir=str(existing)) == (
        f"{existing} exists already: a work directory must be new"
    )
    assert list(existing.iterdir()) == []
