"""Checks: pure functions from a probe's facts and a profile to findings. No I/O here.

Each module of this package is one subject and exports `CHECKS: list[Check]`;
`catalog.py` lists the modules. A check returns findings without the node name
(the caller fills it in), and when everything is fine it still returns one PASS
finding that says what was verified, so the table shows that it ran.

One fault, one FAIL: where two probes see the same fault (a missing GPU is both in NVML
and in the topology matrix), one check owns it and reads the other probe's facts as its
`context`, to carry that evidence in its message; the other check says who judged it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bringup.findings import Expected, Finding, Status
from bringup.profile import Profile


@dataclass(frozen=True)
class Check:
    name: str  # "<subject>.<what>", e.g. "gpu.remapped_rows"
    probe: str  # the probe whose facts it reads
    # judge(facts, profile), or judge(facts, profile, context_facts) with a context
    judge: Callable[..., list[Finding]]
    description: str
    # Another probe whose facts the judge also reads (None when the node did not record it).
    context: str | None = None
    # Judged for any GPU, even one no profile fits: the check reads nothing of the profile,
    # or only behind has_profile() (its PASS then says what was not judged). Xids, DCGM,
    # ECC and row remaps, fabric and NVLink link states, nccl-tests' own #wrong.
    profile_free: bool = False
    # Whether the check has anything to judge under a profile (None: under every one). A
    # check of what only some systems have (gpu.imex: NVL72 trays) is left out where it does
    # not apply, also when its probe could not run: no "not measured" line on an HGX board.
    applies: Callable[[Profile], bool] | None = None


def has_profile(profile: object) -> bool:
    """Whether a check was given a profile (not auto.NO_PROFILE: a GPU none fits)."""
    return isinstance(profile, Profile)


def finding(
    check: str,
    status: Status,
    message: str,
    *,
    value: float | int | str | None = None,
    expected: Expected | str | None = None,  # a text is typed by Expected.parse
    unit: str | None = None,
    action: str | None = None,
) -> Finding:
    """A finding whose node the caller fills in."""
    return Finding(
        check=check,
        status=status,
        message=message,
        value=value,
        expected=expected,
        unit=unit,
        action=action,
    )
