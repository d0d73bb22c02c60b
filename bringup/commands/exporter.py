"""`bringup exporter`: serve a run's findings and measurements as Prometheus metrics.

    bringup exporter --runs-dir runs                     the newest run, on 127.0.0.1:9400
    bringup exporter --run runs/<run> --textfile x.prom  once, for node_exporter's textfile
    bringup exporter --run runs/<run> --json             what it would serve, as JSON

The metrics themselves are built by bringup/report/prometheus.py, from the report that
`report_of` builds at each scrape (the same judgement as `bringup report`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bringup.commands.common import JsonOpt, QuietOpt, fail, print_envelope

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from bringup.report.model import Report

DEFAULT_ADDRESS = "127.0.0.1"
DEFAULT_PORT = 9400


def report_of(run_dir: Path) -> Report:
    """The report of a run, with the run's own profile when it still loads."""
    from bringup import profile as profile_mod
    from bringup.commands.report import build_report, dropped
    from bringup.report.rundata import load

    run = load(run_dir, skip=dropped)  # what build_report judges again: never spooled
    prof = None
    if run.manifest and run.manifest.profile:
        try:
            prof = profile_mod.load(run.manifest.profile)
        except profile_mod.ProfileError:
            prof = None  # default tolerances; the report says so, the metrics need not
    return build_report(run, prof)


def exporter(
    run: Annotated[Path | None, typer.Option("--run", help="Export this run directory.")] = None,
    runs_dir: Annotated[
        Path | None,
        typer.Option("--runs-dir", help="Export the newest run under this directory."),
    ] = None,
    address: Annotated[
        str, typer.Option("--address", help="Address to listen on (localhost by default).")
    ] = DEFAULT_ADDRESS,
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = DEFAULT_PORT,
    textfile: Annotated[
        Path | None,
        typer.Option(
            "--textfile",
            help="Write the metrics once to this file, whose name ends in .prom "
            "(node_exporter's textfile collector reads only those), and exit.",
        ),
    ] = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,  # its one line (written, or serving) is all it prints
) -> None:
    """Serve the latest run's findings and measurements as Prometheus metrics."""
    import sys
    import threading

    from prometheus_client import generate_latest

    from bringup.files import write_atomic
    from bringup.report.escape import one_line
    from bringup.report.prometheus import (
        ExporterError,
        latest_run,
        newest_run,
        registry_for,
        serve,
    )
    from bringup.report.rundata import RunDataError, load

    if (run is None) == (runs_dir is None):
        fail("say which run: --run RUN_DIR or --runs-dir DIR (its newest run)")
    if not 0 <= port <= 65535:
        fail(f"--port {port}: not a port number")

    def source() -> Path:
        return run if run is not None else latest_run(runs_dir)  # type: ignore[arg-type]

    skipped: list[str] = []
    try:
        if run is not None:
            first = run
        else:
            first, skipped = newest_run(runs_dir)  # type: ignore[arg-type]
        load(first)
    except (ExporterError, RunDataError) as exc:
        fail(str(exc))
    if textfile is not None and not textfile.name.endswith(".prom"):
        fail(f"--textfile {textfile}: node_exporter reads only files ending in .prom")
    if not as_json:  # with --json the document's `skipped` says it
        for line in skipped:  # a run that cannot be read is said, and never served
            print(f"bringup exporter: {one_line(line)}", file=sys.stderr)
    registry = registry_for(source, report_of)
    if textfile is not None:
        try:
            # Not prometheus_client's write_to_textfile: its temporary name is predictable
            # and opened following a symlink; the one writer's is neither.
            write_atomic(textfile, generate_latest(registry), mode=0o644)
        except OSError as exc:
            fail(f"cannot write {textfile}: {exc.strerror}")
        if not as_json:
            print(f"wrote {textfile} from {first}")
            return
    if as_json:
        # What a scrape would get now, without listening: the same report, the same metrics.
        from bringup.report.prometheus import metrics_of

        built = report_of(first)
        families = [family_json(m) for m in metrics_of(built)]
        print_envelope(
            built.findings,
            exit_code=0,  # exporting went fine; the verdict is one of the metrics
            accepted=built.verdict.accepted,
            provenance=built.verdict.origin_json(),
            run_dir=str(first),
            data={
                "metrics": families,
                "skipped": skipped,
                "written": str(textfile) if textfile is not None else None,
            },
        )
        return
    try:
        server, _ = serve(registry, address, port)
    except OSError as exc:
        fail(f"cannot listen on {address}:{port}: {exc.strerror}")
    bound = server.server_address[1]  # type: ignore[attr-defined]
    # One line a script (or a test) can wait for; flushed because stdout may be a pipe.
    print(f"serving http://{address}:{bound}/metrics from {first}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()  # type: ignore[attr-defined]


def family_json(family: Metric) -> dict[str, Any]:
    """One metric family as --json shows it: its name, type, help and samples. A value
    that is not a number JSON can carry (NaN, infinity) is null."""
    return {
        "name": family.name,
        "type": family.type,
        "help": family.documentation,
        "samples": [
            {
                "name": s.name,
                "labels": dict(s.labels),
                "value": s.value if math.isfinite(s.value) else None,
            }
            for s in family.samples
        ],
    }
