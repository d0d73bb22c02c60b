"""A run's findings and measurements as Prometheus metrics (for `bringup exporter`).

Names follow dcgm-exporter's style (one prefix, base units in the name, `node` and `gpu`
labels). Every scrape re-reads the run directory (a few small JSON files), so a new run
under `--runs-dir` shows up without a restart. `--textfile PATH.prom` writes the same
exposition once for node_exporter's textfile collector, atomically (bringup/files.py's
one writer: a random temporary name renamed over the target), and exits.

Served on 127.0.0.1 unless `--address` says otherwise: the metrics name the fleet's nodes.
The report of a run comes from the caller (`report_of`, bringup/commands/exporter.py):
it judges the whole run with the checks, which this module does not import.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from bringup.files import is_link
from bringup.findings import Status
from bringup.report.escape import one_line
from bringup.report.model import Report
from bringup.report.rundata import RunDataError, read_manifest

DEFAULT_ADDRESS = "127.0.0.1"
DEFAULT_PORT = 9400  # dcgm-exporter's port: bringup's figures sit beside it on a dashboard


class ExporterError(Exception):
    """No run to export; the message is one line."""


def latest_run(runs_dir: Path) -> Path:
    """The run under `runs_dir` that finished last (see newest_run)."""
    return newest_run(runs_dir)[0]


# A time this far past the controller's clock is no time a run finished: the clock was
# ahead when it was written (and stepped back since), or the manifest was edited.
_FUTURE_SLACK = timedelta(minutes=5)


def newest_run(runs_dir: Path) -> tuple[Path, list[str]]:
    """The run under `runs_dir` that finished last, and a line for each run skipped.

    When a run finished is its manifest's `ended_at` (a running run: the manifest file's
    change time). A time that cannot be true sorts below every other: one later than now,
    or later than the manifest file was last changed (the kernel's time, which no edit of
    the text and no `touch` sets back). So a run written while the clock was ahead is not
    served over the runs after the clock was set right, nor an edited end time believed.
    Only manifests are read, each without following a link or waiting on a FIFO; a run
    whose manifest cannot be read is skipped and said, never in the way of the others.
    """
    if not runs_dir.is_dir():
        raise ExporterError(f"{runs_dir}: not a directory")
    try:
        entries = sorted(runs_dir.iterdir())
    except OSError as exc:
        raise ExporterError(f"{runs_dir}: cannot list ({exc.strerror})") from None
    now = datetime.now(timezone.utc)
    candidates = []
    skipped = []
    for path in entries:
        if is_link(path) or not path.is_dir() or not os.path.lexists(path / "manifest.json"):
            continue
        manifest, why = read_manifest(path)
        if manifest is None:
            skipped.append(f"skipped {path}: {why}")
            continue
        changed = _changed(path / "manifest.json")
        finished = _when(manifest.ended_at) or changed
        believable = finished <= min(now, changed) + _FUTURE_SLACK
        candidates.append((believable, finished, path.name, path))
    if not candidates:
        raise ExporterError(
            f"{runs_dir}: no readable run directory (with a manifest.json) in it"
            + (f" ({len(skipped)} skipped: {skipped[0]})" if skipped else "")
        )
    return max(candidates)[3], skipped


def _changed(path: Path) -> datetime:
    """The file's change time (the kernel sets it at every write; nobody sets it back)."""
    try:
        return datetime.fromtimestamp(os.lstat(path).st_ctime, timezone.utc)
    except OSError:
        return datetime.min.replace(tzinfo=timezone.utc)


def _when(text: str | None) -> datetime | None:
    """An ISO 8601 time as written in a manifest (UTC when it names no zone); None if not."""
    try:
        when = datetime.fromisoformat(text) if text else None
    except ValueError:
        return None
    if when is not None and when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when


def metrics_of(report: Report) -> Iterator[Metric]:
    """The exposition of one report: check statuses, verdict, measurements."""
    run = report.run.path
    info = InfoMetricFamily("bringup_run", "The run these metrics come from.")
    info.add_metric(
        [],
        {
            "run": run,
            "profile": report.run.profile or "",
            "status": report.run.status or "unknown",
            "started_at": report.run.started_at or "",
            # Derived from every record: live, or "demo+replayed", "file", "simulated".
            "mode": report.verdict.mode,
        },
    )
    yield info
    yield _accepted(report.verdict.accepted)
    counts = GaugeMetricFamily(
        "bringup_findings", "Findings of the run by status.", labels=["status"]
    )
    for status in Status:
        counts.add_metric([status.value], float(report.verdict.counts.get(status.value, 0)))
    yield counts
    yield _check_status(report)
    yield from _measurements(report)


def _accepted(accepted: bool) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "bringup_run_accepted",
        "1 when the run is complete, has no FAIL, ERROR or UNREACHABLE finding and every "
        "record was measured live (bringup_run_info's mode is live).",
    )
    family.add_metric([], 1.0 if accepted else 0.0)
    return family


def _check_status(report: Report) -> GaugeMetricFamily:
    """One sample per finding: `finding` numbers a check's findings on a node from 1
    (a check with one finding there has finding="1")."""
    family = GaugeMetricFamily(
        "bringup_check_status",
        "Status of each finding of a check on a node: 0 PASS, 1 SKIP, 2 WARN, 3 FAIL, "
        "4 ERROR, 5 UNREACHABLE (alert on >= 3).",
        labels=["node", "check", "finding"],
    )
    seen: dict[tuple[str, str], int] = {}
    for f in report.findings:
        key = (f.node or "run", f.check)
        seen[key] = seen.get(key, 0) + 1
        family.add_metric([*key, str(seen[key])], float(f.status.rank))
    return family


def _measurements(report: Report) -> Iterator[GaugeMetricFamily]:
    nodes = [n.measurements for n in report.nodes]
    busbw = GaugeMetricFamily(
        "bringup_nccl_busbw_bytes",
        "NCCL all_reduce bus bandwidth in bytes per second, best message >= 1 GiB.",
        labels=["node"],
    )
    busbw_size = GaugeMetricFamily(
        "bringup_nccl_busbw_by_size_bytes",
        "NCCL bus bandwidth in bytes per second at each message size.",
        labels=["node", "collective", "size_bytes"],
    )
    mfu = GaugeMetricFamily(
        "bringup_mfu_ratio", "Burn-in model FLOPs utilization, 0..1.", labels=["node"]
    )
    tokens = GaugeMetricFamily(
        "bringup_burnin_tokens_per_second", "Burn-in training throughput.", labels=["node"]
    )
    read = GaugeMetricFamily(
        "bringup_nvme_read_bytes_per_second",
        "fio sequential read per path.",
        labels=["node", "path"],
    )
    write = GaugeMetricFamily(
        "bringup_nvme_write_bytes_per_second",
        "fio sequential write per path.",
        labels=["node", "path"],
    )
    temperature = GaugeMetricFamily(
        "bringup_gpu_temperature_celsius",
        "GPU temperature when the gpu probe ran.",
        labels=["node", "gpu"],
    )
    gemm = GaugeMetricFamily(
        "bringup_gemm_flops_per_second",
        "Best BF16 matmul FLOP/s per GPU (gemm probe).",
        labels=["node", "gpu"],
    )
    xids = GaugeMetricFamily(
        "bringup_xid_events", "Xid/SXid events in the node's kernel log window.", labels=["node"]
    )
    for m in nodes:
        if "nccl.busbw" in m.metrics:
            busbw.add_metric([m.node], m.metrics["nccl.busbw"])
        for curve in m.curves:
            for p in curve.points:
                busbw_size.add_metric(
                    [m.node, curve.collective, str(p.size_bytes)], p.busbw_bytes_per_s
                )
        if "burnin.mfu" in m.metrics:
            mfu.add_metric([m.node], m.metrics["burnin.mfu"])
        if "burnin.tokens_per_s" in m.metrics:
            tokens.add_metric([m.node], m.metrics["burnin.tokens_per_s"])
        for row in m.nvme:
            if row.seq_read_bytes_per_s is not None:
                read.add_metric([m.node, row.path], row.seq_read_bytes_per_s)
            if row.seq_write_bytes_per_s is not None:
                write.add_metric([m.node, row.path], row.seq_write_bytes_per_s)
        for gpu, value in sorted(m.gpu_temperature_c.items()):
            temperature.add_metric([m.node, str(gpu)], value)
        for gpu, value in sorted(m.gpu_tflops.items()):
            gemm.add_metric([m.node, str(gpu)], value * 1e12)
        if any(p.probe == "xid" and p.ok for p in m.probes):
            xids.add_metric([m.node], float(len(m.xids)))
    yield from (busbw, busbw_size, mfu, tokens, read, write, temperature, gemm, xids)


class RunCollector(Collector):
    """Re-reads the run on every scrape; an unreadable run is `bringup_exporter_up 0` and
    `bringup_run_accepted 0`: a scrape never fails, and never reads as accepted."""

    def __init__(self, source: Callable[[], Path], report_of: Callable[[Path], Report]) -> None:
        self.source = source
        self.report_of = report_of

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "bringup_exporter_up", "1 when the run directory could be read at this scrape."
        )
        try:
            report = self.report_of(self.source())
        except Exception as exc:  # whatever the run holds, the scrape must not be a 500
            reason = exc if isinstance(exc, ExporterError | RunDataError) else repr(exc)
            print(f"bringup exporter: {one_line(reason)}", file=sys.stderr)
            up.add_metric([], 0.0)
            yield up
            yield _accepted(False)
            return
        up.add_metric([], 1.0)
        yield up
        yield from metrics_of(report)


def registry_for(
    source: Callable[[], Path], report_of: Callable[[Path], Report]
) -> CollectorRegistry:
    """A registry whose every scrape exports `report_of(source())`: the run it names now."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RunCollector(source, report_of))
    return registry


def serve(
    registry: CollectorRegistry, address: str = DEFAULT_ADDRESS, port: int = DEFAULT_PORT
) -> tuple[object, threading.Thread]:
    """Serve /metrics in a daemon thread; returns (server, thread). Port 0 picks a free one."""
    server, thread = start_http_server(port, addr=address, registry=registry)
    return server, thread
