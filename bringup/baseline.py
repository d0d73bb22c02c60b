"""Baselines: what a later run is compared with.

The burn-in baseline: what a node delivered on a recipe, as a versioned JSON file.
`bringup burnin` writes baseline.json into its run directory; a later run takes it as
`--baseline FILE` and is judged against it (bringup/checks/burnin.py `compare`), and
reports read its `metrics` (names agreed in the interfaces: burnin.mfu, burnin.tokens_per_s).

The handover bundle (`bringup handover`): one directory holding the run directories of the
handover (acceptance check, NCCL, diagnose, burn-in), each a part with its kind, and one
manifest.json listing them. `--baseline` takes a bundle wherever it takes a run directory.

Everything here is a pure function of the burn-in facts and the peaks; only `load`,
`write` and the bundle's `load_bundle`/`write_bundle`/`part_record`/`bundle_changes` touch
the disk.

A bundle is evidence as a whole: its manifest.json records each part's status, exit code
and the SHA-256 of the part's manifest.json (which holds the hash of every evidence file
of the part), and the SHA-256 of every rendered report. `bundle_changes` says where the
bundle no longer matches it; a signature over manifest.json (`bringup verify --sign`)
then covers every byte of the bundle.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bringup import __version__
from bringup.files import InputError, read_bytes, read_in, read_text, write_atomic
from bringup.node.probes.burnin import BurninFacts, measured, tokens_per_s_per_gpu
from bringup.node.timeline import Timeline
from bringup.provenance import sha256_file

SCHEMA_VERSION = 1
KIND = "bringup.node.burnin.baseline"
LOAD_UTILIZATION_PCT = 50.0  # telemetry samples above this GPU utilization count as "load"


class Strict(BaseModel):
    """A schema that rejects unknown keys, so a typo is an error and not a silent default."""

    model_config = ConfigDict(extra="forbid")


# How pydantic names an unknown key: in a model, and in a dataclass.
_UNKNOWN_KEY = ("extra_forbidden", "unexpected_keyword_argument")


def describe(exc: ValidationError) -> str:
    """One line naming the offending key: 'nodes.0.gpux: unknown key'.

    An unknown key is named first: a renamed key also shows up as a missing one, and the
    key that is there is the one to look at.
    """
    err = sorted(exc.errors(), key=lambda e: e["type"] not in _UNKNOWN_KEY)[0]
    where = ".".join(str(p) for p in err["loc"]) or "(top level)"
    kind = "unknown key" if err["type"] in _UNKNOWN_KEY else err["msg"]
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return " ".join(f"{where}: {kind}{more}".split())


class GpuTelemetry(Strict):
    """One GPU's telemetry while it was loaded (utilization above LOAD_UTILIZATION_PCT)."""

    gpu: int
    samples: int  # under load
    sm_clock_median_hz: float | None = None
    temperature_max_c: float | None = None
    memory_temperature_max_c: float | None = None
    power_median_w: float | None = None
    power_max_w: float | None = None
    reasons_share: dict[str, float] = Field(
        default_factory=dict
    )  # clocks event reason -> share of loaded samples
    throttle_time_s: dict[str, float] = Field(
        default_factory=dict
    )  # NVML counters over the whole run


class NodeBaseline(Strict):
    node: str
    recipe: str
    device_kind: str
    device_name: str | None
    world_size: int
    steps_measured: int  # after the warm-up steps
    step_time_median_s: float | None
    step_time_p99_s: float | None
    step_time_rank_spread: float | None  # slowest rank median / fastest rank median - 1
    tokens_per_s_per_gpu: float | None
    model_flops_per_token: int | None
    hardware_flops_per_token: int | None
    model_flops_per_s_per_gpu: float | None
    hardware_flops_per_s_per_gpu: float | None
    peak_flops_per_s: float | None  # what MFU divides by
    peak_source: str | None
    mfu: float | None  # 0..1
    hfu: float | None
    ceiling_flops_per_s: float | None  # measured matmul ceiling (gemm probe or profile)
    ceiling_source: str | None
    mfu_vs_ceiling: float | None
    loss_curve: list[float | None]
    loss_first: float | None
    loss_last: float | None
    peak_memory_bytes: list[int | None]  # per rank
    memory_kind: str | None
    checkpoint_save_s: float | None
    checkpoint_restore_s: float | None
    checkpoint_bit_identical: bool | None
    telemetry: list[GpuTelemetry] = Field(default_factory=list)
    telemetry_error: str | None = None


class Baseline(Strict):
    schema_version: Literal[1] = SCHEMA_VERSION
    kind: Literal["bringup.node.burnin.baseline"] = KIND
    bringup_version: str = __version__
    created_at: str
    recipe: str
    profile: str | None
    nodes: list[NodeBaseline]
    step_time_node_spread: float | None  # slowest node median / fastest node median - 1
    metrics: dict[str, float]  # burnin.tokens_per_s (per GPU), burnin.mfu: fleet medians


class BaselineError(InputError):
    """A baseline file cannot be read or does not fit the schema; one line."""


# --- statistics (pure) -------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list: a value that was measured."""
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, -(-len(ordered) * q // 100) - 1))
    return ordered[int(index)]


def spread(medians: list[float]) -> float | None:
    """How much the slowest trails the fastest: max / min - 1 (None below two values)."""
    if len(medians) < 2 or min(medians) <= 0:
        return None
    return max(medians) / min(medians) - 1


def gpu_telemetry(timeline: Timeline) -> list[GpuTelemetry]:
    """Per-GPU summary of the samples taken under load."""
    summaries = []
    for gpu in range(timeline.gpus):
        mine = [s for s in timeline.samples if s.gpu == gpu]
        # A sample without utilization (nvidia-smi -q captures) counts as loaded: the
        # sampler runs only while the burn-in does.
        loaded = [
            s
            for s in mine
            if s.utilization_pct is None or s.utilization_pct >= LOAD_UTILIZATION_PCT
        ]
        reasons: dict[str, int] = {}
        for s in loaded:
            for r in s.clock_event_reasons:
                reasons[r] = reasons.get(r, 0) + 1

        def median(xs: list[float | int | None]) -> float | None:
            got = [float(x) for x in xs if x is not None]
            return statistics.median(got) if got else None

        def top(xs: list[float | None]) -> float | None:
            got = [x for x in xs if x is not None]
            return max(got) if got else None

        summaries.append(
            GpuTelemetry(
                gpu=gpu,
                samples=len(loaded),
                sm_clock_median_hz=median([s.sm_clock_hz for s in loaded]),
                temperature_max_c=top([s.temperature_c for s in mine]),
                memory_temperature_max_c=top([s.memory_temperature_c for s in mine]),
                power_median_w=median([s.power_w for s in loaded]),
                power_max_w=top([s.power_w for s in mine]),
                reasons_share={r: round(n / len(loaded), 4) for r, n in sorted(reasons.items())},
                throttle_time_s=timeline.throttle_time_s.get(str(gpu), {}),
            )
        )
    return summaries


def summarize(
    node: str,
    facts: BurninFacts,
    peak: tuple[float, str] | None,
    ceiling: tuple[float, str] | None,
) -> NodeBaseline:
    """One node's baseline from its burn-in facts; peak and ceiling are (FLOP/s, source)."""
    times = measured([s.time_s for s in facts.steps], facts.warmup_steps)
    median = statistics.median(times) if times else None
    rank_medians = [
        statistics.median(measured(r.step_times_s, facts.warmup_steps))
        for r in facts.ranks
        if r.step_times_s
    ]
    tps = tokens_per_s_per_gpu(
        [s.time_s for s in facts.steps], facts.warmup_steps, facts.tokens_per_step_per_gpu
    )
    model = tps * facts.model_flops_per_token if tps and facts.model_flops_per_token else None
    hardware = (
        tps * facts.hardware_flops_per_token if tps and facts.hardware_flops_per_token else None
    )

    def share(x: float | None, of: tuple[float, str] | None) -> float | None:
        return x / of[0] if x is not None and of and of[0] > 0 else None

    losses = [s.loss for s in facts.steps]
    last_save = facts.checkpoints[-1].save_s if facts.checkpoints else None
    restore = facts.restore
    timeline = facts.telemetry
    return NodeBaseline(
        node=node,
        recipe=facts.recipe,
        device_kind=facts.device_kind,
        device_name=facts.device_name,
        world_size=facts.world_size,
        steps_measured=len(times),
        step_time_median_s=median,
        step_time_p99_s=percentile(times, 99) if times else None,
        step_time_rank_spread=spread(rank_medians),
        tokens_per_s_per_gpu=tps,
        model_flops_per_token=facts.model_flops_per_token,
        hardware_flops_per_token=facts.hardware_flops_per_token,
        model_flops_per_s_per_gpu=model,
        hardware_flops_per_s_per_gpu=hardware,
        peak_flops_per_s=peak[0] if peak else None,
        peak_source=peak[1] if peak else None,
        mfu=share(model, peak),
        hfu=share(hardware, peak),
        ceiling_flops_per_s=ceiling[0] if ceiling else None,
        ceiling_source=ceiling[1] if ceiling else None,
        mfu_vs_ceiling=share(model, ceiling),
        loss_curve=losses,
        loss_first=next((x for x in losses if x is not None), None),
        loss_last=next((x for x in reversed(losses) if x is not None), None),
        peak_memory_bytes=[r.peak_memory_bytes for r in facts.ranks],
        memory_kind=next((r.memory_kind for r in facts.ranks if r.memory_kind), None),
        checkpoint_save_s=last_save,
        checkpoint_restore_s=restore.restore_s if restore else None,
        checkpoint_bit_identical=restore.bit_identical if restore else None,
        telemetry=gpu_telemetry(timeline) if timeline else [],
        telemetry_error=timeline.error if timeline else "no telemetry recorded",
    )


def build(nodes: list[NodeBaseline], recipe: str, profile: str | None, created_at: str) -> Baseline:
    """The fleet's baseline: every node, the spread between nodes, the headline metrics."""
    medians = [n.step_time_median_s for n in nodes if n.step_time_median_s]
    metrics: dict[str, float] = {}
    tps = [n.tokens_per_s_per_gpu for n in nodes if n.tokens_per_s_per_gpu is not None]
    mfu = [n.mfu for n in nodes if n.mfu is not None]
    if tps:
        metrics["burnin.tokens_per_s"] = statistics.median(tps)
    if mfu:
        metrics["burnin.mfu"] = statistics.median(mfu)
    return Baseline(
        created_at=created_at,
        recipe=recipe,
        profile=profile,
        nodes=nodes,
        step_time_node_spread=spread(medians),
        metrics=metrics,
    )


# --- files -------------------------------------------------------------------------------


def write(path: Path, baseline: Baseline) -> None:
    write_atomic(path, baseline.model_dump_json(indent=2) + "\n")


def load(path: Path) -> Baseline:
    """A baseline file, the baseline.json of a run directory, or of a bundle's burn-in."""
    if is_bundle(path):
        try:
            parts = [p for p in load_bundle(path).parts if p.kind == "burnin"]
        except BundleError as exc:
            raise BaselineError(str(exc)) from None
        if not parts:
            raise BaselineError(f"{path}: the handover bundle holds no burn-in run")
        path = path / parts[-1].path
    try:
        if path.is_dir():  # a burn-in run: its baseline.json, no symlink followed
            text = read_in(path, "baseline.json", "baseline")
            path = path / "baseline.json"
        else:
            text = read_text(path, "baseline")
    except InputError as exc:
        raise BaselineError(str(exc)) from None
    try:
        return Baseline.model_validate_json(text)
    except ValidationError as exc:
        raise BaselineError(f"{path}: not a burn-in baseline ({describe(exc)})") from None


# The figures every use of a baseline reads (plan's time model, the comparison of a later
# run): a baseline without one of them on a node says nothing and is refused.
REQUIRED_FIGURES = {
    "step_time_median_s": "step time",
    "model_flops_per_s_per_gpu": "model FLOP/s",
}


def missing_figures(baseline: Baseline) -> list[str]:
    """What each node of the baseline lacks: "n01: no steps measured", "n02: step time"."""
    lines = []
    if not baseline.nodes:
        return ["no node"]
    for node in baseline.nodes:
        lacking = [name for key, name in REQUIRED_FIGURES.items() if getattr(node, key) is None]
        if node.steps_measured <= 0:
            lacking.insert(0, "no steps measured")
        if lacking:
            lines.append(f"{node.node}: {', '.join(lacking)}")
    return lines


def load_complete(path: Path) -> Baseline:
    """A baseline (as `load`) that holds every figure a comparison or a plan reads;
    BaselineError, one line naming what is missing, otherwise."""
    baseline = load(path)
    missing = missing_figures(baseline)
    if missing:
        raise BaselineError(
            f"{path}: the baseline lacks figures ({'; '.join(missing)}): it is not of a "
            "completed burn-in; run `bringup burnin` again for a baseline"
        )
    return baseline


# --- the handover bundle -----------------------------------------------------------------

BUNDLE_KIND = "bringup.handover.bundle"
# The order parts are run and gathered in; later parts' records of a probe win over earlier
# ones when a report merges them (the NCCL run's nccl over the acceptance suite's).
PART_KINDS = ("check", "snapshot", "nccl", "diagnose", "burnin")


class BundlePart(Strict):
    kind: str  # the command that made the run directory (PART_KINDS)
    path: str  # relative to the bundle
    exit_code: int | None = None  # the run's, as its manifest records it
    # The part as it was gathered, so that an edit to it shows (`bringup verify`, report):
    # its manifest's status and the SHA-256 of its manifest.json, which holds the hashes of
    # every evidence file of the part. None: a bundle from before bringup recorded them.
    status: str | None = None
    manifest_sha256: str | None = None


class CoverageRow(Strict):
    """One line of a handover's coverage table (bringup/checks/coverage.py): a measurement
    a handover is expected to hold, where the bundle holds it, or the command that adds it."""

    item: str  # "acceptance suite", "NCCL multi-node/pairwise", "burn-in MFU baseline", ...
    measured: bool
    detail: str  # what was measured ("level 3", "suite acceptance"), or why it is not there
    part: str | None = None  # the bundle part that holds it
    at: str | None = None  # when, by the nodes' clocks (the earliest record)
    command: str | None = None  # not measured: what would add it
    required: bool = False  # without it the bundle is never ACCEPTED

    @property
    def shown(self) -> str:
        """ "measured: level 3", "not run", "not run: the quick suite, not the acceptance
        suite"; "(needed for ACCEPTED)" where the verdict needs it."""
        word = "measured" if self.measured else "not run"
        text = word if self.detail == word else f"{word}: {self.detail}"
        return text + (" (needed for ACCEPTED)" if self.required and not self.measured else "")


class Bundle(Strict):
    """manifest.json of a bundle. It carries the keys of a run's manifest too (command,
    profile, started_at, nodes, status), so a tool that reads only those reads a bundle."""

    kind: Literal["bringup.handover.bundle"] = BUNDLE_KIND
    version: str = __version__
    command: Literal["handover"] = "handover"
    mode: str  # "run" (the suite, NCCL, diagnose, burn-in just now), "from", "demo"
    profile: str | None = None
    suite: str | None = None
    started_at: str
    ended_at: str | None = None
    status: str = "complete"
    exit_code: int | None = None
    nodes: list[str] = Field(default_factory=list)
    parts: list[BundlePart]
    # Each rendered report of the bundle (report.html, report.md, report.json) -> its
    # SHA-256: what the renter reads is evidence too. None: not rendered yet, or a bundle
    # from before bringup recorded them.
    reports_sha256: dict[str, str] | None = None


class BundleError(InputError):
    """A bundle's manifest cannot be read or does not fit the schema; one line."""


def is_bundle(path: Path) -> bool:
    """Whether `path` is a bundle directory (its manifest.json says so)."""
    if not (path / "manifest.json").is_file():
        return False
    try:
        data = json.loads(read_in(path, "manifest.json", "manifest"))
    except (InputError, ValueError, RecursionError):
        # Not JSON, or nested past Python's stack: a run's broken manifest, said by whoever
        # reads the run.
        return False
    # By the key itself, not the text: a node's name can be any string.
    return isinstance(data, dict) and data.get("kind") == BUNDLE_KIND


def load_bundle(path: Path) -> Bundle:
    """A bundle's manifest; each part's path must stay inside the bundle."""
    try:
        bundle = Bundle.model_validate_json(read_in(path, "manifest.json", "bundle manifest"))
    except InputError as exc:
        raise BundleError(str(exc)) from None
    except ValidationError as exc:
        raise BundleError(f"{path}: not a handover bundle ({describe(exc)})") from None
    for part in bundle.parts:
        inside = (path / part.path).resolve()
        if path.resolve() not in inside.parents:
            raise BundleError(f"{path}: part {part.path!r} is outside the bundle")
    return bundle


def write_bundle(path: Path, bundle: Bundle) -> None:
    write_atomic(path / "manifest.json", bundle.model_dump_json(indent=2) + "\n")


# --- what a bundle's manifest covers -------------------------------------------------------

# The files a bundle holds besides its parts and its rendered reports.
BUNDLE_FILES = ("manifest.json", "manifest.json.sig")


@dataclass(frozen=True)
class BundleChange:
    """One way a bundle differs from what its manifest.json records."""

    kind: Literal["modified", "missing", "added", "unrecorded"]
    path: str  # relative to the bundle: "check/manifest.json", "report.html", "nccl/"
    detail: str = ""

    def line(self) -> str:
        return f"{self.kind}: {self.path}" + (f" ({self.detail})" if self.detail else "")


def part_record(bundle_path: Path, kind: str, path: str) -> BundlePart:
    """A part as it lies in the bundle now: its manifest's status and exit code, and the
    SHA-256 of the very bytes they were read from (BundleError: the manifest cannot be read).

    A manifest that is not JSON still gets its hash: the part is then judged as the broken
    run it is (report.manifest), not refused here.
    """
    file = bundle_path / path / "manifest.json"
    try:
        data = read_bytes(file, "manifest")
    except InputError as exc:
        raise BundleError(str(exc)) from None
    try:
        manifest = json.loads(data)
    except (ValueError, RecursionError):
        manifest = None
    fields = manifest if isinstance(manifest, dict) else {}
    status, code = fields.get("status"), fields.get("exit_code")
    return BundlePart(
        kind=kind,
        path=path,
        # bool is an int to Python; a manifest's exit code never is one.
        exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
        status=status if isinstance(status, str) else None,
        manifest_sha256=hashlib.sha256(data).hexdigest(),
    )


def bundle_changes(path: Path, bundle: Bundle, everything: bool = True) -> list[BundleChange]:
    """Where the bundle differs from its manifest.json: each part (there, its manifest.json's
    SHA-256, status and exit code as recorded), each rendered report, and anything in the
    bundle the manifest does not list.

    `everything` False: the parts only, and directories the manifest does not list (what a
    report of the bundle judges: it renders the reports again, and may write others).
    """
    changes = [c for part in bundle.parts for c in _part_changes(path, part)]
    if not bundle.parts:
        changes.append(BundleChange("missing", "parts", "the manifest.json lists no part"))
    if everything:
        changes += _report_changes(path, bundle.reports_sha256)
        if not changes:
            changes += _rendered_from(path, bundle)
    listed = {*(p.path.split("/")[0] for p in bundle.parts), *BUNDLE_FILES}
    listed.update(bundle.reports_sha256 or {})
    try:
        entries = sorted(path.iterdir())
    except OSError:
        entries = []  # the manifest was just read from it; said by whoever reads the parts
    for entry in entries:
        folder = entry.is_dir() and not entry.is_symlink()
        if entry.name not in listed and (everything or folder):
            where = entry.name + ("/" if folder else "")
            changes.append(BundleChange("added", where, "not listed in the bundle's manifest.json"))
    return changes


def _part_changes(path: Path, part: BundlePart) -> list[BundleChange]:
    where = f"{part.path}/manifest.json"
    try:
        now = part_record(path, part.kind, part.path)
    except BundleError as exc:
        return [BundleChange("missing", where, f"part {part.path}: {exc}")]
    if part.manifest_sha256 is None:
        why = "the bundle's manifest.json records no SHA-256 of it (made by an older bringup)"
        return [BundleChange("unrecorded", where, why)]
    changes = []
    if now.manifest_sha256 != part.manifest_sha256:
        recorded = f"the bundle's manifest.json records sha256 {part.manifest_sha256}"
        changes.append(BundleChange("modified", where, recorded))
    for name, label in (("status", "status"), ("exit_code", "exit code")):
        then, there = getattr(part, name), getattr(now, name)
        if then != there:
            detail = f"part {part.path}: {label} {then} there, {there} in {where}"
            changes.append(BundleChange("modified", "manifest.json", detail))
    return changes


def _report_changes(path: Path, recorded: dict[str, str] | None) -> list[BundleChange]:
    if recorded is None:
        why = "the bundle's manifest.json records no SHA-256 of its rendered reports"
        return [BundleChange("unrecorded", "report.*", why)]
    changes = []
    for name, digest in sorted(recorded.items()):
        file = path / name
        if "/" in name or name in ("", ".", "..") or name in BUNDLE_FILES:
            changes.append(BundleChange("modified", "manifest.json", f"{name!r} is no report"))
        elif file.is_symlink() or not file.is_file():
            changes.append(BundleChange("missing", name, "a rendered report"))
        elif sha256_file(file) != digest:
            changes.append(BundleChange("modified", name, f"recorded sha256 {digest}"))
    return changes


_REPORT_BYTES = 1 << 30


def _rendered_from(path: Path, bundle: Bundle) -> list[BundleChange]:
    """Whether the manifest's parts and verdict are those its report.json was rendered
    from: a part taken out of the manifest together with its directory, or the exit code
    set to 0, leaves every other hash as it was, but not what the report says.

    report.json is the report's JSON (bringup/report/render.py `summary_json`): the parts'
    manifest hashes under run.parts_sha256, the verdict under verdict.accepted.
    """
    if "report.json" not in (bundle.reports_sha256 or {}):
        return []
    try:
        # Its hash matched already: the report handover wrote, ~40 kB a node, past the
        # 64 MiB cap of a file a user names at a few thousand nodes.
        summary = json.loads(read_text(path / "report.json", "report", limit=_REPORT_BYTES))
        shown = dict(summary["run"]["parts_sha256"])
        accepted = summary["verdict"]["accepted"]
    except (InputError, ValueError, RecursionError, KeyError, TypeError):
        return [BundleChange("modified", "report.json", "not the report bringup rendered")]
    recorded = {p.path: p.manifest_sha256 for p in bundle.parts}
    changes = [
        BundleChange(
            "modified",
            "manifest.json",
            f"report.json was rendered from part {part} (sha256 {sha}), which it does not list",
        )
        for part, sha in sorted(shown.items())
        if recorded.get(part) != sha
    ]
    if bundle.exit_code is not None and (bundle.exit_code == 0) != (accepted is True):
        verdict = "ACCEPTED" if accepted is True else "NOT ACCEPTED"
        detail = f"exit code {bundle.exit_code}, but report.json's verdict is {verdict}"
        changes.append(BundleChange("modified", "manifest.json", detail))
    return changes
