"""The figures of a node that reports show and checks judge across a fleet and a baseline.

`measure` reads one node's probe records into NodeMeasurements; the helpers at the end
compare such figures (across nodes, against an earlier run) without judging them: the
verdicts are bringup/checks' (stragglers.py, regression.py), the tables the report's.

Known probes (gpu, nvme, xid, nccl) are read through their dataclasses. Probes whose
schema is still being written in other issues (burnin, gemm) are read from their JSON by
the names the interfaces agreed on (`mfu`, `tokens_per_s`, a telemetry `Timeline` with
`samples`, per-GPU `*flops*` figures); what is not recognised is listed generically.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, Field

from bringup.facts import NodeFacts, decode_record
from bringup.node.gpu_facts import GpuFacts
from bringup.node.nccl_facts import NcclFacts
from bringup.node.probes.nvme import NvmeFacts
from bringup.node.probes.xid import XidFacts
from bringup.profile import DEFAULT_TOLERANCES, MetricTolerance, Profile

LARGE_MESSAGE_BYTES = 1 << 30  # busbw is judged on messages >= 1 GiB, as checks/nccl.py does


class MetricInfo(BaseModel):
    """How a metric is shown: the unit and the factor from its SI value."""

    label: str
    unit: str
    scale: float  # displayed = value / scale


# The metrics a report compares (names agreed in the interfaces; tolerances in the profile).
METRICS: dict[str, MetricInfo] = {
    "nccl.busbw": MetricInfo(label="NCCL all_reduce busbw (>= 1 GiB)", unit="GB/s", scale=1e9),
    "burnin.mfu": MetricInfo(label="burn-in MFU", unit="%", scale=0.01),
    "burnin.tokens_per_s": MetricInfo(label="burn-in tokens/s", unit="tokens/s", scale=1.0),
    "gemm.tflops": MetricInfo(label="GEMM TFLOP/s (slowest GPU)", unit="TFLOP/s", scale=1e12),
    "nvme.seq_read": MetricInfo(label="NVMe sequential read (worst path)", unit="GB/s", scale=1e9),
    "nvme.seq_write": MetricInfo(
        label="NVMe sequential write (worst path)", unit="GB/s", scale=1e9
    ),
}


def tolerances(profile: Profile | None) -> dict[str, MetricTolerance]:
    """Per metric, how far a node may trail its fleet or its baseline: the profile's or defaults."""
    return profile.tolerances if profile is not None else dict(DEFAULT_TOLERANCES)


def shown(metric: str, value: float | None) -> str:
    """A metric's value as the report prints it: '476.53 GB/s'."""
    if value is None:
        return "–"
    info = METRICS[metric]
    return f"{value / info.scale:.2f} {info.unit}"


class Identity(BaseModel):
    """What the node is: the fields a renter checks against the contract."""

    gpu_models: list[str] = Field(default_factory=list)  # distinct names
    gpu_count: int | None = None
    serials: list[str | None] = Field(default_factory=list)  # by GPU index
    uuids: list[str | None] = Field(default_factory=list)
    vbios: list[str | None] = Field(default_factory=list)  # by GPU index
    driver: str | None = None
    cuda: str | None = None
    nvlink_version: int | None = None
    hostname: str | None = None
    kernel: str | None = None
    os_release: str | None = None
    cpu_model: str | None = None


class CurvePoint(BaseModel):
    size_bytes: int
    busbw_bytes_per_s: float


class Curve(BaseModel):
    """One collective's busbw over message sizes (best of in-place and out-of-place)."""

    collective: str
    nranks: int | None = None
    points: list[CurvePoint] = Field(default_factory=list)


class NvmeRow(BaseModel):
    path: str
    filesystem: str | None = None
    same_mount_as: str | None = None
    error: str | None = None
    seq_read_bytes_per_s: float | None = None
    seq_write_bytes_per_s: float | None = None
    rand_read_iops: float | None = None
    rand_read_p99_s: float | None = None
    concurrent_read_bytes_per_s: float | None = None
    concurrent_readers: int | None = None
    checkpoint_bytes_per_s: float | None = None
    checkpoint_seconds: float | None = None


class XidRow(BaseModel):
    xid: int
    sxid: bool = False
    pci: str | None = None
    timestamp: str | None = None
    message: str = ""
    line: str = ""


class TimelineSample(BaseModel):
    t_s: float
    gpu: int
    temperature_c: float | None = None
    power_w: float | None = None
    sm_clock_hz: float | None = None


class Timeline(BaseModel):
    """A telemetry timeline found in a probe's facts (burn-in, telemetry)."""

    probe: str
    interval_s: float | None = None
    error: str | None = None
    samples: list[TimelineSample] = Field(default_factory=list)
    throttle_time_s: dict[str, dict[str, float]] = Field(default_factory=dict)


class ProbeSummary(BaseModel):
    """Any probe record, shown generically: outcome and its top-level scalar facts."""

    probe: str
    ok: bool
    error: str | None = None
    duration_s: float = 0.0
    decoded: bool = False  # read through its dataclass (False: shown as recorded)
    note: str | None = None
    scalars: dict[str, str] = Field(default_factory=dict)


class NodeMeasurements(BaseModel):
    """Everything the report takes from one node's facts."""

    node: str
    identity: Identity = Field(default_factory=Identity)
    metrics: dict[str, float] = Field(default_factory=dict)  # METRICS name -> SI value
    gpu_temperature_c: dict[int, float] = Field(default_factory=dict)
    gpu_tflops: dict[int, float] = Field(default_factory=dict)  # TFLOP/s per GPU (gemm)
    curves: list[Curve] = Field(default_factory=list)
    nvme: list[NvmeRow] = Field(default_factory=list)
    xids: list[XidRow] = Field(default_factory=list)
    burnin: dict[str, str] = Field(default_factory=dict)  # scalar facts of the burn-in
    timelines: list[Timeline] = Field(default_factory=list, exclude=True)  # bulky: not in JSON
    probes: list[ProbeSummary] = Field(default_factory=list)


def measure_fleet(facts: dict[str, NodeFacts], profile: Profile | None) -> list[NodeMeasurements]:
    """Every node's figures, in node-name order (the profile gives the peak for the MFU)."""
    peak = profile.gpu.bf16_dense_tflops * 1e12 if profile is not None else None
    return [measure(facts[name], peak) for name in sorted(facts)]


def measure(node: NodeFacts, peak_flops_per_s: float | None = None) -> NodeMeasurements:
    """The report's figures of one node, from its recorded probe records.

    `peak_flops_per_s` is one GPU's dense BF16 peak (the profile's), for the burn-in MFU.
    """
    m = NodeMeasurements(node=node.node)
    for name in sorted(node.probes):
        record = node.probes[name]
        facts, why = decode_record(record)
        summary = ProbeSummary(
            probe=name,
            ok=record.ok,
            error=record.error,
            duration_s=record.duration_s,
            decoded=facts is not None,
            note=why if record.ok else None,
            scalars=_scalars(record.facts or {}),
        )
        m.probes.append(summary)
        if isinstance(facts, GpuFacts):
            _gpu(facts, m)
        elif isinstance(facts, NvmeFacts):
            _nvme(facts, m)
        elif isinstance(facts, XidFacts):
            m.xids = [
                XidRow(
                    xid=e.xid,
                    sxid=e.sxid,
                    pci=e.pci,
                    timestamp=e.timestamp,
                    message=e.message,
                    line=e.line,
                )
                for e in facts.xids
            ]
        elif isinstance(facts, NcclFacts):
            _nccl(facts, m)
        elif name == "host" and record.ok and record.facts:
            _host(record.facts, m)
        if record.ok and record.facts:
            if name == "burnin":
                _burnin(record.facts, m, peak_flops_per_s)
            elif name == "gemm":
                _gemm(record.facts, m)
            for timeline in _timelines(name, record.facts):
                m.timelines.append(timeline)
    return m


# --- known probes -----------------------------------------------------------------------


def _gpu(facts: GpuFacts, m: NodeMeasurements) -> None:
    gpus = sorted(facts.gpus, key=lambda g: g.index)
    versions = [g.nvlink_version for g in gpus if g.nvlink_version is not None]
    m.identity = m.identity.model_copy(
        update={
            "gpu_models": sorted({g.name for g in gpus}),
            "gpu_count": len(gpus),
            "serials": [g.serial for g in gpus],
            "uuids": [g.uuid for g in gpus],
            "vbios": [g.vbios_version for g in gpus],
            "driver": facts.driver_version,
            "cuda": facts.cuda_driver_version,
            "nvlink_version": max(versions) if versions else None,
        }
    )
    m.gpu_temperature_c = {g.index: g.temperature_c for g in gpus if g.temperature_c is not None}


def _host(facts: dict[str, Any], m: NodeMeasurements) -> None:
    fields = ("hostname", "kernel", "os_release", "cpu_model")
    update = {k: facts.get(k) for k in fields if isinstance(facts.get(k), str)}
    m.identity = m.identity.model_copy(update=update)


def _nvme(facts: NvmeFacts, m: NodeMeasurements) -> None:
    for p in facts.paths:
        m.nvme.append(
            NvmeRow(
                path=p.path,
                filesystem=p.filesystem,
                same_mount_as=p.same_mount_as,
                error=p.error,
                seq_read_bytes_per_s=p.seq_read_bytes_per_s,
                seq_write_bytes_per_s=p.seq_write_bytes_per_s,
                rand_read_iops=p.rand_read_iops,
                rand_read_p99_s=p.rand_read_p99_s,
                concurrent_read_bytes_per_s=p.concurrent_read_bytes_per_s,
                concurrent_readers=p.concurrent_readers,
                checkpoint_bytes_per_s=p.checkpoint_bytes_per_s,
                checkpoint_seconds=p.checkpoint_seconds,
            )
        )
    # The worst path is what the node delivers: a job reads from all of them.
    for metric, values in (
        ("nvme.seq_read", [p.seq_read_bytes_per_s for p in facts.paths]),
        ("nvme.seq_write", [p.seq_write_bytes_per_s for p in facts.paths]),
    ):
        measured = [v for v in values if v is not None]
        if measured:
            m.metrics[metric] = min(measured)


def _nccl(facts: NcclFacts, m: NodeMeasurements) -> None:
    for run in [facts, *facts.others]:
        if not run.rows:
            continue
        best: dict[int, float] = {}
        for row in run.rows:
            busbw = max(row.oop_busbw_bytes_per_s, row.ip_busbw_bytes_per_s)
            best[row.size_bytes] = max(busbw, best.get(row.size_bytes, 0.0))
        points = [CurvePoint(size_bytes=s, busbw_bytes_per_s=b) for s, b in sorted(best.items())]
        name = run.collective or "unnamed collective"
        m.curves.append(Curve(collective=name, nranks=run.nranks, points=points))
        if run.collective in ("all_reduce", None) and "nccl.busbw" not in m.metrics:
            large = [p.busbw_bytes_per_s for p in points if p.size_bytes >= LARGE_MESSAGE_BYTES]
            if large:
                m.metrics["nccl.busbw"] = max(large)


# --- probes whose schema lives in other issues: read by the agreed names -----------------


def _burnin(facts: dict[str, Any], m: NodeMeasurements, peak_flops_per_s: float | None) -> None:
    """MFU and tokens/s: as recorded when the facts carry them, else from the step times."""
    m.burnin = _scalars(facts)
    tokens = _find_number(facts, ("tokens_per_s", "tokens_per_second", "throughput_tokens_per_s"))
    if tokens is None:
        tokens = _tokens_per_s(facts)
    if tokens is not None:
        m.metrics["burnin.tokens_per_s"] = tokens
    mfu = _find_number(facts, ("mfu", "mfu_ratio", "mfu_mean", "mfu_median"))
    if mfu is not None:
        m.metrics["burnin.mfu"] = mfu / 100 if mfu > 1 else mfu  # > 1 can only be a percentage
        return
    flops_per_token = facts.get("model_flops_per_token")
    world = facts.get("world_size")
    on_gpus = facts.get("device_kind") == "cuda"
    if tokens and on_gpus and peak_flops_per_s and isinstance(flops_per_token, int) and world:
        # MFU = model FLOP/s per GPU over its dense peak (PaLM's definition,
        # docs/reference.md#flops-and-mfu).
        m.metrics["burnin.mfu"] = flops_per_token * tokens / world / peak_flops_per_s


def _tokens_per_s(facts: dict[str, Any]) -> float | None:
    """Tokens per second of the whole job: tokens per step over the median timed step."""
    steps = facts.get("steps")
    per_gpu = facts.get("tokens_per_step_per_gpu")
    world = facts.get("world_size")
    if not isinstance(steps, list) or not isinstance(per_gpu, int) or not isinstance(world, int):
        return None
    warmup = facts.get("warmup_steps") or 0
    times = sorted(
        float(s["time_s"])
        for s in steps
        if isinstance(s, dict) and s.get("step", 0) >= warmup and s.get("time_s")
    )
    if not times:
        return None
    return per_gpu * world / statistics.median(times)


def _gemm(facts: dict[str, Any], m: NodeMeasurements) -> None:
    """Per-GPU TFLOP/s from the first list of per-GPU records that carries a FLOP/s figure."""
    for items in _lists_of_dicts(facts):
        per_gpu: dict[int, float] = {}
        for item in items:
            index = item.get("gpu", item.get("index"))
            flops = _flops(item)
            if isinstance(index, int) and flops is not None:
                per_gpu[index] = max(flops, per_gpu.get(index, 0.0))
        if per_gpu:
            m.gpu_tflops = {i: v / 1e12 for i, v in sorted(per_gpu.items())}
            m.metrics["gemm.tflops"] = min(per_gpu.values())
            return


def _flops(item: dict[str, Any]) -> float | None:
    """FLOP/s of one record: fields in FLOP/s (SI, docs/reference.md#units) or TFLOP/s by name."""
    for key, value in sorted(item.items()):
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        if key.endswith("tflops") or key.endswith("tflop_per_s"):
            return float(value) * 1e12
        if key.endswith(("flop_per_s", "flops_per_s", "flop_s", "flops")):
            return float(value)
    return None


def _timelines(probe: str, facts: dict[str, Any]) -> Iterator[Timeline]:
    """Every telemetry Timeline (interfaces: interval_s + samples) in a probe's facts."""
    for candidate in _dicts(facts):
        samples = candidate.get("samples")
        if not isinstance(samples, list) or "interval_s" not in candidate:
            continue
        rows = [
            TimelineSample.model_validate(s)
            for s in samples
            if isinstance(s, dict) and "t_s" in s and "gpu" in s
        ]
        throttle = candidate.get("throttle_time_s")
        yield Timeline(
            probe=probe,
            interval_s=candidate.get("interval_s"),
            error=candidate.get("error"),
            samples=rows,
            throttle_time_s=throttle if isinstance(throttle, dict) else {},
        )


def _dicts(obj: Any, depth: int = 0) -> list[dict[str, Any]]:
    """obj and every dict nested in it (a few levels: facts are shallow), depth first in
    key order. A list, not a generator: the report walks every record's facts this way."""
    found: list[dict[str, Any]] = []

    def walk(item: Any, level: int) -> None:
        if level > 4:
            return
        if isinstance(item, dict):
            found.append(item)
            for key in sorted(item):
                value = item[key]
                if isinstance(value, dict | list):
                    walk(value, level + 1)
        elif isinstance(item, list):
            for value in item:
                if isinstance(value, dict | list):
                    walk(value, level + 1)

    walk(obj, depth)
    return found


def _lists_of_dicts(facts: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
    for d in _dicts(facts):
        for key in sorted(d):
            value = d[key]
            if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                yield value


def _find_number(facts: dict[str, Any], names: tuple[str, ...]) -> float | None:
    """The first of `names` holding a number, at the top level or one level down."""
    for d in [facts, *[v for _, v in sorted(facts.items()) if isinstance(v, dict)]]:
        for name in names:
            value = d.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
    return None


def _scalars(facts: dict[str, Any], limit: int = 40) -> dict[str, str]:
    """Top-level scalar facts (and short lists of scalars) as text, sorted by name."""
    out: dict[str, str] = {}
    for key in sorted(facts):
        value = facts[key]
        if isinstance(value, bool) or value is None:
            text = str(value).lower() if value is not None else "–"
        elif isinstance(value, float):
            text = f"{value:.6g}"
        elif isinstance(value, int | str):
            text = str(value)
        elif isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
            if not value:
                continue
            text = ", ".join(str(v) for v in value[:8]) + (" …" if len(value) > 8 else "")
        else:
            continue
        out[key] = text if len(text) <= 200 else text[:199] + "…"
        if len(out) >= limit:
            break
    return out


# --- comparing figures (across the fleet, against a baseline), judging none --------------


def metric_values(nodes: list[NodeMeasurements]) -> dict[str, dict[str, float]]:
    """Metric -> node -> value, in METRICS then node-name order, for the metrics measured."""
    values = {
        metric: dict(sorted((m.node, m.metrics[metric]) for m in nodes if metric in m.metrics))
        for metric in METRICS
    }
    return {metric: by_node for metric, by_node in values.items() if by_node}


def change_pct(old: float, new: float) -> float:
    """Signed change from `old` to `new`, in percent of `old` (0 when `old` is 0)."""
    return (new - old) / abs(old) * 100 if old else 0.0


def worse_pct(value: float, reference: float, better: str) -> float:
    """How much worse `value` is than `reference`, in percent (negative: better)."""
    if reference == 0:
        return 0.0
    change = change_pct(reference, value)
    return -change if better == "higher" else change


class IdentityChange(BaseModel):
    node: str
    field: str  # "GPU 3 serial", "driver", ...
    baseline: str
    current: str


def identity_changes(
    node: str, then: NodeMeasurements, now: NodeMeasurements
) -> list[IdentityChange]:
    """Serial and VBIOS per GPU index, driver, CUDA and GPU count; unknown on either side: skip."""
    a, b = then.identity, now.identity
    changes: list[IdentityChange] = []

    def differ(field: str, old: object, new: object) -> None:
        if old is not None and new is not None and old != new:
            changes.append(
                IdentityChange(node=node, field=field, baseline=str(old), current=str(new))
            )

    differ("GPU count", a.gpu_count, b.gpu_count)
    differ("driver", a.driver, b.driver)
    differ("CUDA (driver)", a.cuda, b.cuda)
    for index in range(min(len(a.serials), len(b.serials))):
        differ(f"GPU {index} serial", a.serials[index], b.serials[index])
    for index in range(min(len(a.vbios), len(b.vbios))):
        differ(f"GPU {index} VBIOS", a.vbios[index], b.vbios[index])
    return changes


def new_xids(then: list[XidRow], now: list[XidRow]) -> list[XidRow]:
    """Events of the new kernel log whose line the baseline's log did not hold.

    By the whole line: the same event read again (the log window covers both runs) has
    the same text and timestamp; a new event differs at least in its timestamp.
    """
    seen = {(x.line or f"{x.xid} {x.pci} {x.timestamp} {x.message}") for x in then}
    return [x for x in now if (x.line or f"{x.xid} {x.pci} {x.timestamp} {x.message}") not in seen]
