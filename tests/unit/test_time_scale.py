"""tests/support/timing.py: the one factor that scales every deadline a test waits on."""

from __future__ import annotations

import time

import pytest

from tests.support.timing import TIME_SCALE, scaled, time_scale, wait_until


@pytest.mark.parametrize(("text", "factor"), [(None, 1.0), ("", 1.0), ("1", 1.0), ("2.5", 2.5)])
def test_the_factor_is_read_from_the_variable(text: str | None, factor: float) -> None:
    assert time_scale(text) == factor


@pytest.mark.parametrize("text", ["0.5", "0", "-3", "fast", "nan"])
def test_a_factor_that_would_tighten_a_bound_is_refused(text: str) -> None:
    with pytest.raises(ValueError) as info:
        time_scale(text)
    assert str(info.value) == f"BRINGUP_TEST_TIME_SCALE={text!r}: give a number >= 1"


def test_scaled_multiplies_by_this_runs_factor() -> None:
    assert scaled(30) == 30 * TIME_SCALE


def test_wait_until_returns_as_soon_as_it_is_done_and_false_when_it_never_is() -> None:
    calls: list[float] = []

    def third_time() -> bool:
        calls.append(time.monotonic())
        return len(calls) == 3

    assert wait_until(third_time, 60, step=0.01) is True
    assert len(calls) == 3
    assert wait_until(lambda: False, 0.05, step=0.01) is False
