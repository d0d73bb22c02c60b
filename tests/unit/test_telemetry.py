"""The telemetry sampler: bounded buffer, the sampling thread, and no-driver behaviour.

The thread is fed by a source that replays a real `nvidia-smi dmon` capture
(tests/fixtures/dmon/), since this machine has no GPU; NVML itself runs only on a node.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest

from bringup.facts import validate_facts
from bringup.node.parsers.dmon import parse_dmon
from bringup.node.probes import telemetry
from bringup.node.probes.telemetry import Sample, SampleBuffer, Sampler, SourceError, Timeline
from bringup.node.result import ProbeError

DMON = Path(__file__).resolve().parents[1] / "fixtures" / "dmon"


def recorded() -> Timeline:
    """An A100 capture (11 ticks of one GPU) from pytorch/pytorch#97459."""
    return parse_dmon((DMON / "pytorch-97459-a100-dmon-appclocks.txt").read_text())


class ReplaySource:
    """Serves a recorded timeline tick by tick, then says the recording ended."""

    def __init__(self, timeline: Timeline, counters: list[dict[str, dict[str, float]]]) -> None:
        self.ticks = [[s] for s in timeline.samples]
        self.counters = counters  # successive answers of throttle_counters_s
        self.served = 0
        self.all_served = threading.Event()
        self.closed = False

    def open(self) -> int:
        return 1

    def read(self, t_s: float) -> list[Sample]:
        if self.served >= len(self.ticks):
            self.all_served.set()
            raise SourceError("recording ended")
        tick = [dataclasses.replace(s, t_s=t_s) for s in self.ticks[self.served]]
        self.served += 1
        return tick

    def throttle_counters_s(self) -> dict[str, dict[str, float]]:
        return self.counters.pop(0) if self.counters else {}

    def limits(self) -> tuple[dict[str, float], dict[str, float]]:
        return {"0": 400.0}, {"0": 95.0}

    def names(self) -> dict[str, str]:
        return {"0": "NVIDIA A100-SXM4-40GB"}  # the capture's GPU, as NVML would name it

    def close(self) -> None:
        self.closed = True


def test_without_a_driver_the_timeline_says_so_and_has_no_samples() -> None:
    with Sampler(0.05) as sampler:
        sampler.wait(0.2)
    timeline = sampler.timeline
    assert timeline is not None
    assert timeline.error is not None and timeline.error.startswith("no NVIDIA driver found (")
    assert timeline.samples == [] and timeline.dropped == 0 and timeline.gpus == 0


def test_the_probe_raises_a_one_line_probe_error_without_a_driver() -> None:
    with pytest.raises(ProbeError, match=r"^no NVIDIA driver found \("):
        telemetry.collect(telemetry.Params(seconds=0.1, interval_s=0.05))


def test_the_thread_samples_the_source_until_it_ends_and_keeps_everything() -> None:
    source = ReplaySource(recorded(), [{"0": {"sw_power_cap": 1.5}}, {"0": {"sw_power_cap": 4.0}}])
    sampler = Sampler(0.001, source=source).start()
    assert source.all_served.wait(30)
    timeline = sampler.stop()
    assert len(timeline.samples) == 11
    assert [s.sm_clock_hz for s in timeline.samples] == [1_410_000_000] * 11
    times = [s.t_s for s in timeline.samples]
    assert times == sorted(times)
    assert timeline.error is not None and timeline.error.endswith("recording ended")
    # Counters: stop minus start.
    assert timeline.throttle_time_s == {"0": {"sw_power_cap": 2.5}}
    assert timeline.power_default_limit_w == {"0": 400.0}
    assert timeline.memory_max_temperature_c == {"0": 95.0}
    assert timeline.gpu_names == {"0": "NVIDIA A100-SXM4-40GB"}  # read once, at start
    assert source.closed
    assert sampler.stop().samples == timeline.samples  # stop again: the same samples


def test_buffer_decimates_to_stay_bounded_and_counts_what_it_dropped() -> None:
    ticks = [[Sample(t_s=float(t), gpu=g) for g in range(2)] for t in range(20)]
    buffer = SampleBuffer(max_samples=10)
    for tick in ticks:
        buffer.add(tick)
    kept = sorted({s.t_s for s in buffer.samples()})
    # 20 ticks of 2 GPUs into 10 samples: every 4th tick kept, the whole span covered.
    assert kept == [0.0, 4.0, 8.0, 12.0, 16.0]
    assert len(buffer.samples()) == 10
    assert buffer.dropped == 30
    assert buffer.stride == 4


def test_buffer_under_its_bound_keeps_every_tick() -> None:
    buffer = SampleBuffer(max_samples=100)
    for t in range(10):
        buffer.add([Sample(t_s=float(t), gpu=0)])
    assert len(buffer.samples()) == 10 and buffer.dropped == 0


def test_a_timeline_survives_json_and_validation_as_facts() -> None:
    timeline = recorded()
    data = dataclasses.asdict(timeline)
    assert validate_facts("telemetry", Timeline, data) == timeline


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval_s must be positive"):
        Sampler(0)


class _FieldValuesNvml:
    """The one NVML call the throttle counters make, answered with real pynvml structs."""

    NVMLError = Exception

    def __init__(self, values: list[object]) -> None:
        self.values = values

    def nvmlDeviceGetFieldValues(self, _handle: object, _ids: list[int]) -> list[object]:
        return self.values


def test_an_unsigned_short_field_value_is_read_through_its_own_union_member() -> None:
    """NVML_VALUE_TYPE_UNSIGNED_SHORT (6) fills usVal, two bytes of the union; the other
    six stay as they were. Read as an unsigned long long they give a wrong number."""
    pynvml = pytest.importorskip("pynvml")
    value = pynvml.c_nvmlFieldValue_t()
    value.fieldId = 251
    value.nvmlReturn = 0
    value.value.ullVal = 0xDEAD_BEEF_0000_0000  # what the buffer held before the driver wrote
    value.value.usVal = 1234
    value.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT
    source = telemetry.NvmlSource()
    source._nvml = _FieldValuesNvml([value])
    assert source._fields(object(), [251]) == {251: 1234.0}
