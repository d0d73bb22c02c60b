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

import dataclasses
import functools
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel, Field

from bringup.facts import NodeFacts, decode_record
from bringup.node.gpu_facts import GpuFacts, gpu_by_pci
from bringup.node.identity import SystemIdentity
from bringup.node.nccl_facts import NcclFacts
from bringup.node.probes.burnin import tokens_per_s_per_gpu
from bringup.node.probes.host import HostFacts
from bringup.node.probes.nvme import NvmeFacts
from bringup.node.probes.xid import XidFacts, event_utc
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
    "burnin.tokens_per_s": MetricInfo(label="burn-in tokens/s per GPU", unit="tokens/s", scale=1.0),
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


def _on_off(value: object) -> str:
    return "on" if value else "off"


# Per-GPU settings that a provider changes (a lowered power limit, ECC turned off, a link
# trained narrower): the attribute of bringup/node/gpu_facts.Gpu and how it is shown. The
# driver version is the node's, compared with the identity.
SETTINGS: dict[str, tuple[str, Callable[[Any], str]]] = {
    "power limit": ("power_limit_w", lambda w: f"{w:.0f} W"),
    "SM clock max": ("sm_clock_max_hz", lambda hz: f"{hz / 1e6:.0f} MHz"),
    "memory clock max": ("memory_clock_max_hz", lambda hz: f"{hz / 1e6:.0f} MHz"),
    "persistence mode": ("persistence_mode", _on_off),
    "ECC mode": ("ecc_mode", _on_off),
    "PCIe width": ("pcie_width_current", lambda w: f"x{w}"),
}

# Counters that only grow on a part that is failing: family -> label -> attribute path.
# Attributes a source does not report (or this version of the facts does not have, such as
# retired pages on GPUs before Ampere) are left out, never read as 0.
COUNTERS: dict[str, dict[str, str]] = {
    "ECC uncorrected": {
        "volatile": "ecc_uncorrected_volatile",
        "aggregate": "ecc_uncorrected_aggregate",
    },
    "ECC corrected": {"volatile": "ecc_corrected_volatile", "aggregate": "ecc_corrected_aggregate"},
    "remapped rows": {
        "correctable": "remapped_rows.correctable",
        "uncorrectable": "remapped_rows.uncorrectable",
    },
    "retired pages": {
        "single-bit": "retired_pages_single_bit",
        "double-bit": "retired_pages_double_bit",
    },
}


class GpuRef(BaseModel):
    """One GPU's names: what a kernel log (PCI), NVML (index, UUID) and an RMA (serial) use."""

    index: int
    pci_bus_id: str | None = None  # as NVML prints it, "00000000:BA:00.0"
    serial: str | None = None
    uuid: str | None = None


class Identity(BaseModel):
    """What the node is: the fields a renter checks against the contract."""

    gpus: list[GpuRef] = Field(default_factory=list)  # the GPU map, by index
    # Serials, BIOS, BMC, Fabric Manager, NICs (host probe); None when not recorded at all.
    system: SystemIdentity | None = None
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
    timestamp: str | None = None  # as printed in the log
    utc: str | None = None  # when it happened, ISO 8601 UTC, where the facts allow
    gpu_index: int | None = None  # the GPU at `pci`, from the gpu facts
    gpu_serial: str | None = None
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
    slowdown_temperature_c: float | None = None  # the lowest any of its GPUs reports
    gpu_tflops: dict[int, float] = Field(default_factory=dict)  # TFLOP/s per GPU (gemm)
    curves: list[Curve] = Field(default_factory=list)
    nvme: list[NvmeRow] = Field(default_factory=list)
    xids: list[XidRow] = Field(default_factory=list)
    # What the provider can change under the renter, per GPU ("GPU 3 power limit" -> "700 W"),
    # and counters that only grow on a failing part ("GPU 3 ECC uncorrected" -> {"volatile": 2}).
    settings: dict[str, str] = Field(default_factory=dict)
    counters: dict[str, dict[str, int]] = Field(default_factory=dict)
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
    xid_facts: XidFacts | None = None
    gpu_facts: GpuFacts | None = None
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
            gpu_facts = facts
            _gpu(facts, m)
        elif isinstance(facts, NvmeFacts):
            _nvme(facts, m)
        elif isinstance(facts, XidFacts):
            xid_facts = facts
        elif isinstance(facts, NcclFacts):
            _nccl(facts, m)
        elif name == "host" and record.ok and record.facts:
            _host(record.facts, m)
            if isinstance(facts, HostFacts):
                m.identity = m.identity.model_copy(update={"system": facts.identity})
        if record.ok and record.facts:
            if name == "burnin":
                _burnin(record.facts, m, peak_flops_per_s)
            elif name == "gemm":
                _gemm(record.facts, m)
            for timeline in _timelines(name, record.facts):
                m.timelines.append(timeline)
    if xid_facts is not None:
        m.xids = _xids(xid_facts, gpu_facts)
    return m


def node_metrics(node: NodeFacts, peak_flops_per_s: float | None = None) -> dict[str, float]:
    """A node's metrics alone (measure(node, peak).metrics): what the stragglers and the
    fleet statistics compare. Only the records they come from are read: a check's end
    judges ten thousand nodes' stragglers without decoding every GPU table and timeline."""
    probes = {k: v for k, v in node.probes.items() if k in metric_probes()}
    return measure(dataclasses.replace(node, probes=probes), peak_flops_per_s).metrics


@functools.cache
def metric_probes() -> frozenset[str]:
    """The probes whose records give a metric in measure(): those whose facts are NVMe or
    NCCL facts (_nvme, _nccl; nccl decoded whatever the catalog lists), burn-in, GEMM."""
    from bringup.node.catalog import PROBES

    kinds = (NvmeFacts, NcclFacts)
    return frozenset(
        {"nccl", "burnin", "gemm", *(name for name, p in PROBES.items() if p.FACTS in kinds)}
    )


# --- known probes -----------------------------------------------------------------------


def _gpu(facts: GpuFacts, m: NodeMeasurements) -> None:
    gpus = sorted(facts.gpus, key=lambda g: g.index)
    versions = [g.nvlink_version for g in gpus if g.nvlink_version is not None]
    m.identity = m.identity.model_copy(
        update={
            "gpus": [
                GpuRef(index=g.index, pci_bus_id=g.pci_bus_id, serial=g.serial, uuid=g.uuid)
                for g in gpus
            ],
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
    slowdown = [g.slowdown_temperature_c for g in gpus if g.slowdown_temperature_c is not None]
    m.slowdown_temperature_c = min(slowdown) if slowdown else None
    for g in gpus:
        for name, (attribute, show) in SETTINGS.items():
            value = getattr(g, attribute, None)
            if value is not None:
                m.settings[f"GPU {g.index} {name}"] = show(value)
        for family, fields in COUNTERS.items():
            read = {label: _count(g, path) for label, path in fields.items()}
            found = {label: value for label, value in read.items() if value is not None}
            if found:
                m.counters[f"GPU {g.index} {family}"] = found


def _count(gpu: object, path: str) -> int | None:
    """A counter by its dotted attribute path ("remapped_rows.uncorrectable"); None if absent."""
    value: object = gpu
    for part in path.split("."):
        value = getattr(value, part, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _xids(facts: XidFacts, gpus: GpuFacts | None) -> list[XidRow]:
    """The kernel log's events, each with its GPU's index and serial and its UTC time."""
    rows = []
    for e in facts.xids:
        gpu = gpu_by_pci(gpus.gpus, e.pci) if gpus is not None and not e.sxid else None
        utc = event_utc(e, facts)
        rows.append(
            XidRow(
                xid=e.xid,
                sxid=e.sxid,
                pci=e.pci,
                timestamp=e.timestamp,
                utc=utc.isoformat() if utc else None,
                gpu_index=gpu.index if gpu else None,
                gpu_serial=gpu.serial if gpu else None,
                message=e.message,
                line=e.line,
            )
        )
    return rows


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
        # docs/reference.md#flops-and-mfu); tokens is per GPU.
        m.metrics["burnin.mfu"] = flops_per_token * tokens / peak_flops_per_s


def _tokens_per_s(facts: dict[str, Any]) -> float | None:
    """Tokens per second per GPU, computed as the baseline computes it (one function: the
    report, baseline.json and the burn-in's own output show the same figure)."""
    steps = facts.get("steps")
    per_gpu = facts.get("tokens_per_step_per_gpu")
    if not isinstance(steps, list) or not isinstance(per_gpu, int):
        return None
    times = [float(s["time_s"]) for s in steps if isinstance(s, dict) and s.get("time_s")]
    return tokens_per_s_per_gpu(times, int(facts.get("warmup_steps") or 0), per_gpu)


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
    key order. A list, not a generator: the report walks every record's facts this way
    (at a thousand nodes, 290,000 dicts): only the containers are visited and their keys
    sorted, a scalar is passed over where it stands."""
    found: list[dict[str, Any]] = []
    containers = (dict, list)

    def walk(item: Any, level: int) -> None:
        if level > 4:
            return
        if isinstance(item, dict):
            found.append(item)
            nested = [key for key, value in item.items() if isinstance(value, containers)]
            if nested:
                nested.sort()
                for key in nested:
                    walk(item[key], level + 1)
        elif isinstance(item, list):
            for value in item:
                if isinstance(value, containers):
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


# Identity fields shown per GPU index, and how a change of each is named.
_PER_GPU = {"serials": "serial", "uuids": "UUID", "vbios": "VBIOS"}
_NAMES = {"gpu_count": "GPU count", "cuda": "CUDA (driver)", "gpu_models": "GPU model"}


def identity_changes(
    node: str, then: NodeMeasurements, now: NodeMeasurements
) -> list[IdentityChange]:
    """Every identity field that both runs know and that differs; unknown on either side: skip.

    Field by field over the Identity model, so a field added to it (a chassis serial, a BIOS
    version) is compared without a change here; per-GPU lists by GPU index.
    """
    a, b = then.identity, now.identity
    changes: list[IdentityChange] = []

    def differ(field: str, old: object, new: object) -> None:
        if old not in (None, []) and new not in (None, []) and old != new:
            shown_old = ", ".join(map(str, old)) if isinstance(old, list) else str(old)
            shown_new = ", ".join(map(str, new)) if isinstance(new, list) else str(new)
            changes.append(
                IdentityChange(node=node, field=field, baseline=shown_old, current=shown_new)
            )

    for name in Identity.model_fields:
        old, new = getattr(a, name), getattr(b, name)
        if name == "gpus":
            # The map's serial and UUID are compared by the per-GPU lists; its PCI address is not.
            for index in range(min(len(old), len(new))):
                differ(f"GPU {index} PCI address", old[index].pci_bus_id, new[index].pci_bus_id)
        elif name == "system":
            if old is not None and new is not None:
                _system_changes(old, new, differ)
        elif name in _PER_GPU:
            for index in range(min(len(old), len(new))):
                differ(f"GPU {index} {_PER_GPU[name]}", old[index], new[index])
        else:
            differ(_NAMES.get(name, name.replace("_", " ")), old, new)
    return changes


def _system_changes(
    old: SystemIdentity, new: SystemIdentity, differ: Callable[[str, object, object], None]
) -> None:
    """Serials, BIOS, BMC and Fabric Manager field by field; each NIC (by name) by its model,
    firmware and PSID. What either run could not read is skipped, never a change."""
    for f in dataclasses.fields(SystemIdentity):
        if f.name not in ("nics", "unavailable"):
            differ(f.name.replace("_", " "), getattr(old, f.name), getattr(new, f.name))
    then_nics = {n.name: n for n in old.nics}
    for nic in new.nics:
        if (was := then_nics.get(nic.name)) is not None:
            for part in ("model", "firmware", "psid"):
                differ(f"NIC {nic.name} {part}", getattr(was, part), getattr(nic, part))


class Change(BaseModel):
    """A setting or counter of one node that differs from the baseline run."""

    node: str
    field: str  # "GPU 3 power limit", "GPU 3 ECC uncorrected"
    baseline: str
    current: str


def setting_changes(node: str, then: NodeMeasurements, now: NodeMeasurements) -> list[Change]:
    """Settings both runs read that differ, in the order of the newer run."""
    return [
        Change(node=node, field=field, baseline=then.settings[field], current=value)
        for field, value in now.settings.items()
        if field in then.settings and then.settings[field] != value
    ]


def counter_increases(node: str, then: NodeMeasurements, now: NodeMeasurements) -> list[Change]:
    """Counter families where any counter grew (a volatile one reset by a reboot is no growth)."""
    found = []
    for family, values in now.counters.items():
        old = then.counters.get(family, {})
        if any(label in old and value > old[label] for label, value in values.items()):
            found.append(
                Change(
                    node=node,
                    field=family,
                    baseline=_counts(old),
                    current=_counts(values),
                )
            )
    return found


def _counts(values: dict[str, int]) -> str:
    return ", ".join(f"{label} {value}" for label, value in values.items())


def new_xids(then: list[XidRow], now: list[XidRow]) -> list[XidRow]:
    """Events of the new kernel log whose line the baseline's log did not hold.

    By the whole line: the same event read again (the log window covers both runs) has
    the same text and timestamp; a new event differs at least in its timestamp.
    """
    seen = {(x.line or f"{x.xid} {x.pci} {x.timestamp} {x.message}") for x in then}
    return [x for x in now if (x.line or f"{x.xid} {x.pci} {x.timestamp} {x.message}") not in seen]
