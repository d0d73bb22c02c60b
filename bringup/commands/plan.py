"""`bringup plan`: the memory, time and cost of a fine-tune, from a measured baseline.

    bringup plan --model llama-70b-lora --method lora --gpu b300 --gpus 8 --tokens 2B
    bringup plan --model ./Qwen2.5-7B/config.json --method full --gpu h200 --zero 3 \\
        --samples 50000 --avg-tokens 900 --epochs 3 --baseline runs/<burnin> \\
        --price-per-gpu-hour 3.2
    bringup plan --model tiny --method lora --baseline runs/<cpu burnin>   (CPU: the check)

The command loads what was named (model, profile, baselines, the acceptance suite's budget)
and prints the plan that bringup/planning computes: a table for people, or `--json`. It
reads files only; nothing is downloaded and nothing runs on a GPU. docs/plan.md.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bringup.commands.common import JsonOpt, fail, load_profile, one_line, out, print_envelope

if TYPE_CHECKING:
    from bringup.planning.memory import Device, Option
    from bringup.planning.models import PlannedModel
    from bringup.planning.offload import Bandwidth, Host
    from bringup.planning.plan import Acceptance, Plan
    from bringup.planning.search import Candidate
    from bringup.planning.throughput import Measured

ACCEPTANCE_SUITE = "acceptance"
REFERENCE_RECIPE = "llama-8b-lora"  # the burn-in a node's acceptance runs (docs/burnin.md)
_SUFFIXES = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def plan(
    model: Annotated[
        str,
        typer.Option("--model", "-m", help="Recipe name (llama-8b-lora, ...) or config.json path."),
    ],
    method: Annotated[str, typer.Option("--method", help="full, lora or qlora.")],
    seq_len: Annotated[
        int | None, typer.Option("--seq-len", help="Sequence length (default: the recipe's).")
    ] = None,
    tokens: Annotated[
        str | None, typer.Option("--tokens", help="Tokens to train on: 2000000000, 2e9 or 2B.")
    ] = None,
    samples: Annotated[
        str | None, typer.Option("--samples", help="Samples in the data set (with --avg-tokens).")
    ] = None,
    avg_tokens: Annotated[
        str | None, typer.Option("--avg-tokens", help="Average tokens per sample.")
    ] = None,
    epochs: Annotated[
        str | None, typer.Option("--epochs", help="Passes over the samples (default 1).")
    ] = None,
    gpu: Annotated[
        str | None,
        typer.Option(
            "--gpu", help="Profile of the GPU (b300, h200, ...; default: the baseline's)."
        ),
    ] = None,
    gpus: Annotated[
        int | None, typer.Option("--gpus", help="GPUs the job uses (default: one node).")
    ] = None,
    zero: Annotated[int, typer.Option("--zero", help="ZeRO stage 0, 1, 2 or 3.")] = 3,
    micro_batch: Annotated[
        int | None,
        typer.Option("--micro-batch", help="Sequences per GPU per forward (default: recipe's)."),
    ] = None,
    checkpointing: Annotated[
        bool | None,
        typer.Option(
            "--gradient-checkpointing/--no-gradient-checkpointing",
            help="Recompute activations in the backward (default: the recipe's, else off).",
        ),
    ] = None,
    baselines: Annotated[
        list[Path] | None,
        typer.Option("--baseline", help="A burn-in run directory or baseline.json (repeatable)."),
    ] = None,
    price: Annotated[
        float | None,
        typer.Option("--price-per-gpu-hour", help="Rental price of one GPU for an hour."),
    ] = None,
    offload_optimizer: Annotated[
        str,
        typer.Option("--offload-optimizer", help="Keep the optimizer state on: gpu, cpu or nvme."),
    ] = "gpu",
    offload_params: Annotated[
        str,
        typer.Option("--offload-params", help="Keep the weights (ZeRO-3) on: gpu, cpu or nvme."),
    ] = "gpu",
    from_run: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="A check run directory: offload's PCIe and NVMe bandwidth from its facts.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Memory per GPU, time and cost of a fine-tune, from a measured burn-in baseline."""
    from bringup.planning import models
    from bringup.planning.plan import PlanError, Request, make, to_json

    if method not in ("full", "lora", "qlora"):
        fail(f"--method {method!r}: choose full, lora or qlora")
    for name, value in (("--seq-len", seq_len), ("--gpus", gpus), ("--micro-batch", micro_batch)):
        if value is not None and value < (2 if name == "--seq-len" else 1):
            fail(f"{name} {value}: must be {'2 or more' if name == '--seq-len' else 'positive'}")
    if zero not in (0, 1, 2, 3):
        fail(f"--zero {zero}: ZeRO stage must be 0, 1, 2 or 3")
    if price is not None and price < 0:
        fail(f"--price-per-gpu-hour {price:g}: must not be negative")
    for name, place in (
        ("--offload-optimizer", offload_optimizer),
        ("--offload-params", offload_params),
    ):
        if place not in ("gpu", "cpu", "nvme"):
            fail(f"{name} {place!r}: choose gpu, cpu or nvme")
    total = job_tokens(tokens, samples, avg_tokens, epochs)
    try:
        chosen = models.load(model)
    except models.ModelError as exc:
        fail(str(exc))
    measured = [load_measured(path) for path in baselines or []]
    device = target_device(gpu, measured)
    links = links_from_run(from_run, device) if from_run is not None else None
    request = Request(
        model=chosen,
        method=method,  # type: ignore[arg-type]  # checked above
        seq_len=seq_len,
        micro_batch=micro_batch,
        gradient_checkpointing=checkpointing,
        zero_stage=zero,
        gpus=gpus,
        tokens=total,
        price_per_gpu_hour=price,
        offload_optimizer=offload_optimizer,  # type: ignore[arg-type]  # checked above
        offload_params=offload_params,  # type: ignore[arg-type]  # checked above
        links=links,
    )
    acceptance = acceptance_run(chosen, device, measured)
    try:
        result = make(request, device, measured, acceptance)
    except PlanError as exc:
        fail(str(exc))
    # The plan's verdict is its exit code: a job that does not fit is no success.
    code = 1 if result.fit.fits is False else 0
    if as_json:
        print_envelope([], exit_code=code, judged=False, data=to_json(result))
    else:
        show(result)
    if code:
        raise typer.Exit(code)


# --- what the user named -----------------------------------------------------------------


def count(option: str, text: str) -> float:
    """A positive count: 2000000000, 2e9, 2B, 500M, 1.5k."""
    match = re.fullmatch(r"\s*([-+]?[0-9.]+(?:e[-+]?[0-9]+)?)\s*([kmbgt]?)\s*", text, re.I)
    if match is None:
        fail(f"{option} {text!r}: not a number (2000000000, 2e9 or 2B)")
    try:
        value = float(match.group(1)) * _SUFFIXES[match.group(2).lower()]
    except ValueError:
        fail(f"{option} {text!r}: not a number (2000000000, 2e9 or 2B)")
    if not value > 0:
        fail(f"{option} {text}: must be positive")
    return value


def job_tokens(
    tokens: str | None, samples: str | None, avg_tokens: str | None, epochs: str | None
) -> float | None:
    """The tokens the job trains on: --tokens, or --samples x --avg-tokens x --epochs."""
    by_samples = samples is not None or avg_tokens is not None or epochs is not None
    if tokens is not None and by_samples:
        fail("give --tokens or --samples/--avg-tokens/--epochs, not both")
    if tokens is not None:
        return count("--tokens", tokens)
    if not by_samples:
        return None
    if samples is None or avg_tokens is None:
        fail("--samples and --avg-tokens go together (and --epochs, default 1)")
    passes = count("--epochs", epochs) if epochs is not None else 1.0
    return count("--samples", samples) * count("--avg-tokens", avg_tokens) * passes


def load_measured(path: Path) -> Measured:
    """A baseline (file or run directory), its recipe when it loads, the run's duration."""
    from bringup import baseline as baselines
    from bringup import recipe as recipes
    from bringup.planning.throughput import Measured
    from bringup.rundir import RunDirError, load_manifest

    file = path / "baseline.json" if path.is_dir() else path
    try:
        version = json.loads(file.read_text()).get("schema_version")
    except (OSError, ValueError, AttributeError):
        version = baselines.SCHEMA_VERSION  # let load() say what is wrong with it
    if version != baselines.SCHEMA_VERSION:
        fail(
            f"{file}: baseline schema_version {version}; "
            f"this bringup reads version {baselines.SCHEMA_VERSION}"
        )
    try:
        base = baselines.load_complete(file)
    except baselines.BaselineError as exc:
        fail(str(exc))
    try:
        recipe = recipes.load(base.recipe)
    except recipes.RecipeError:
        recipe = None  # the plan says so: nothing to reproduce, the shape unknown
    try:  # a baseline.json on its own (no run directory around it) has no duration
        manifest = load_manifest(file.parent)
    except RunDirError:
        manifest = None
    duration = None
    if manifest is not None and manifest.ended_at:
        started = datetime.fromisoformat(manifest.started_at)
        duration = (datetime.fromisoformat(manifest.ended_at) - started).total_seconds()
    return Measured(str(path), base, recipe, duration)


def links_from_run(path: Path, device: Device) -> Host:
    """Offload's bandwidths from a check run's facts: the slowest GPU host link its gpu
    probe read (at the PCI-SIG rate of the link's generation and width) and the slowest
    node's best NVMe path as fio measured it; the profile's, assumed, for what it lacks.
    Facts that were not measured live (demo, replayed, files) say so and count as assumed."""
    from bringup.facts import decode_record, origin
    from bringup.node.gpu_facts import GpuFacts
    from bringup.node.probes.host import HostFacts
    from bringup.node.probes.nvme import NvmeFacts
    from bringup.planning.offload import Bandwidth, Host, assumed_host, pcie_bytes_per_s
    from bringup.rundir import RunDirError, load_facts, load_manifest

    try:
        nodes = load_facts(path)
    except RunDirError as exc:
        fail(str(exc))
    try:  # a demo or replay run says so in its manifest whatever its records hold
        made = load_manifest(path).provenance
    except RunDirError:
        made = None
    where = origin(nodes, made)
    live = where.live
    said = "" if live else f", {', '.join(where.reasons)}: not measured live"
    pcie: list[tuple[float, str]] = []
    reads: list[tuple[float, str]] = []
    writes: list[tuple[float, str]] = []
    memory: list[tuple[int, str]] = []
    for node in nodes:
        for record in node.probes.values():
            facts, _ = decode_record(record)
            if isinstance(facts, GpuFacts):
                for g in facts.gpus:
                    gen = g.pcie_link_gen_max or g.pcie_gen_max
                    width = g.pcie_width_current or g.pcie_width_max
                    rate = pcie_bytes_per_s(gen, width) if gen and width else None
                    if rate is not None:
                        at = f"{one_line(node.node)} GPU {g.index} Gen{gen} x{width}"
                        pcie.append((rate, at))
            elif isinstance(facts, HostFacts) and _positive(facts.memory_total_bytes):
                memory.append((int(facts.memory_total_bytes), one_line(node.node)))
            elif isinstance(facts, NvmeFacts):
                # A recorded file is untrusted: only a positive, finite figure is a rate.
                best_read = max(
                    (
                        (p.seq_read_bytes_per_s, p.path)
                        for p in facts.paths
                        if _positive(p.seq_read_bytes_per_s)
                    ),
                    default=None,
                )
                best_write = max(
                    (
                        (p.seq_write_bytes_per_s, p.path)
                        for p in facts.paths
                        if _positive(p.seq_write_bytes_per_s)
                    ),
                    default=None,
                )
                if best_read is not None:
                    reads.append((best_read[0], one_line(f"{node.node}:{best_read[1]}")))
                if best_write is not None:
                    writes.append((best_write[0], one_line(f"{node.node}:{best_write[1]}")))
    assumed = assumed_host(device)

    def slowest(
        found: list[tuple[float, str]], what: str, fallback: Bandwidth | None
    ) -> Bandwidth | None:
        if not found:
            return fallback
        rate, at = min(found)
        return Bandwidth(rate, f"{what} {at} in {path}{said}", measured=live)

    smallest = min(memory, default=None)
    return Host(
        slowest(pcie, "the PCI-SIG rate of the link the run read:", assumed.pcie),
        slowest(reads, "fio sequential read,", assumed.nvme_read),
        slowest(writes, "fio sequential write,", assumed.nvme_write),
        memory_bytes=smallest[0] if smallest else None,
        memory_source=f"MemTotal of {smallest[1]} in {path}{said}" if smallest else None,
    )


def _positive(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def target_device(gpu: str | None, measured: list[Measured]) -> Device:
    """The profile named, else the first baseline's (its profile, or its CPU)."""
    from bringup.planning.memory import cpu_device, device_of

    if gpu is not None:
        return device_of(load_profile(gpu))
    if not measured:
        fail("say which GPU: --gpu NAME (b300, h200, ...) or --baseline RUN_DIR of a burn-in")
    first = measured[0]
    if first.baseline.profile:
        return device_of(load_profile(first.baseline.profile))
    if first.device_kind == "cpu":
        return cpu_device(first.world_size)
    fail(f"{first.origin}: the baseline names no profile; give --gpu NAME")


def acceptance_run(
    model: PlannedModel, device: Device, measured: list[Measured]
) -> Acceptance | None:
    """The acceptance suite's budget plus a burn-in: one measured on this GPU, else a
    recipe's training minutes."""
    from bringup import recipe as recipes
    from bringup import suite
    from bringup.planning.plan import Acceptance

    if device.kind == "cpu":
        return None  # acceptance is of GPU nodes
    try:
        budget = suite.load(ACCEPTANCE_SUITE).budget_s
    except suite.SuiteError as exc:
        fail(str(exc))
    timed = next((m for m in measured if m.duration_s is not None and m.on(device)), None)
    if timed is not None and timed.duration_s is not None:
        source = f"the burn-in of {timed.origin} took {_duration(timed.duration_s)}"
        return Acceptance(ACCEPTANCE_SUITE, budget, timed.duration_s, source)
    recipe = model.recipe
    if recipe is None or recipe.train.minutes is None:
        recipe = recipes.load(REFERENCE_RECIPE)
    minutes = recipe.train.minutes or 0.0
    source = f"recipe {recipe.name}: {minutes:g} min of training (model build not counted)"
    return Acceptance(ACCEPTANCE_SUITE, budget, minutes * 60, source)


# --- the plan on a terminal --------------------------------------------------------------


def _size(n: float | None, unit: str) -> str:
    if n is None:
        return "–"
    return f"{n / (1e9 if unit == 'GB' else 1e6):,.2f}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.3g} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds / 86400:.3g} days"


def _verdict(fits: bool | None) -> str:
    return {True: "[green]fits[/]", False: "[bold red]does not fit[/]", None: "not judged"}[fits]


def _gpus(n: int) -> str:
    return f"{n} GPU{'' if n == 1 else 's'}"


def _money(amount: float | None) -> str:
    return "–" if amount is None else f"{amount:,.2f}"


def show(plan: Plan) -> None:
    """The plan for people: what runs where, memory, GPU counts, options, time, cost, checks."""
    from bringup.node.burnin import flops
    from bringup.planning.models import count_text

    s, d = plan.setup, plan.device
    gpu = "GPU" if d.kind == "gpu" else "rank"
    what = {"full": "full fine-tune", "lora": f"LoRA r={s.lora.r}", "qlora": f"QLoRA r={s.lora.r}"}
    where = f"{s.gpus} × {d.name}" + (f" ({d.model})" if d.model != d.name else "")
    where += f", ZeRO-{s.zero_stage}" + (f", {plan.nodes} nodes" if plan.nodes > 1 else "")
    out.print(f"[bold]plan[/] — {plan.model.name}: {what[s.method]} on {where}", highlight=False)
    params = f"{count_text(flops.parameter_counts(s.shape).total)} parameters"
    if s.method != "full":
        params += f", adapters {count_text(flops.adapter_parameters(s.shape, s.lora))}"
    out.print(f"model: {params} — {plan.model.origin}", highlight=False)
    checkpointing = "on" if s.gradient_checkpointing else "off"
    offload = ""
    if s.offloaded:
        places = {"gpu": "GPU", "cpu": "CPU", "nvme": "NVMe"}
        offload = (
            f", optimizer on {places[s.offload_optimizer]}, "
            f"parameters on {places[s.offload_params]}"
        )
    out.print(
        f"job: sequence {s.seq_len} × micro-batch {s.micro_batch} per {gpu}, "
        f"gradient checkpointing {checkpointing}, {s.precision}{offload}",
        highlight=False,
    )
    unit = "GB" if max(plan.memory.peak, plan.fit.capacity_bytes or 0) >= 1e9 else "MB"
    _show_memory(plan, unit, gpu)
    out.print(_options_table(f"By {gpu} count (ZeRO-{s.zero_stage})", plan.by_gpus, unit, gpu))
    if plan.options:
        out.print(_search_table(plan, unit))
    _show_time(plan, gpu)
    _show_cost(plan, gpu)
    _show_checks(plan)
    if plan.notes:
        out.print("[bold]Notes[/]")
        for note in plan.notes:
            out.print(f"  - {note}", highlight=False)


def _show_memory(plan: Plan, unit: str, gpu: str) -> None:
    from rich import box
    from rich.table import Table

    mem, f = plan.memory, plan.fit
    table = Table(title=f"Memory per {gpu}", box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("consumer")
    table.add_column(unit, justify="right")
    for consumer in mem.consumers:
        table.add_row(f"[bold]{consumer.name}[/]", f"[bold]{_size(consumer.bytes, unit)}[/]")
        for p in consumer.parts:
            table.add_row(f"  [dim]{p.what}[/]", f"[dim]{_size(p.bytes, unit)}[/]")
    table.add_row("[bold]allocated[/] (the four above)", f"[bold]{_size(mem.allocated, unit)}[/]")
    if mem.runtime_bytes:
        table.add_row("the process itself (its resident set)", _size(mem.runtime_bytes, unit))
        table.add_row("[bold]peak[/]", f"[bold]{_size(mem.peak, unit)}[/]")
    if f.capacity_bytes is not None:
        table.add_row("reserve: CUDA context, NCCL, fragmentation", _size(f.reserve_bytes, unit))
        capacity = f"capacity: {plan.device.name} memory per GPU (profile floor)"
        table.add_row(capacity, _size(f.capacity_bytes, unit))
    out.print(table)
    verdict = f"verdict: {_verdict(f.fits)}"
    if f.headroom_bytes is not None and f.capacity_bytes:
        share = f.headroom_bytes / f.capacity_bytes
        verdict += f", headroom {_size(f.headroom_bytes, unit)} {unit} ({share:.0%})"
    out.print(verdict, highlight=False)


def _options_table(title: str, options: tuple[Option, ...], unit: str, gpu: str) -> object:
    from rich import box
    from rich.table import Table

    by_count = title.startswith("By ")
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column(f"{gpu}s" if by_count else "change")
    table.add_column(f"{unit} per {gpu}", justify="right")
    table.add_column(f"headroom {unit}", justify="right")
    table.add_column("verdict")
    for o in options:
        f = o.fit
        first = str(o.setup.gpus) if by_count else o.change
        size, headroom = _size(f.allocated_bytes, unit), _size(f.headroom_bytes, unit)
        table.add_row(first, size, headroom, _verdict(f.fits))
    return table


def _search_table(plan: Plan, unit: str) -> object:
    """The search's options, cheapest first: what each changes, its memory, time, GPU-hours,
    and what offloading it asks of the host."""
    from rich import box
    from rich.table import Table

    per_job = plan.timing.tokens is not None
    title = "What would make it fit, cheapest first"
    if not per_job:
        title += " (time and GPU-hours per billion tokens)"
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("change")
    table.add_column(f"{unit} per GPU", justify="right")
    table.add_column("time", justify="right")
    table.add_column("GPU-hours", justify="right")
    table.add_column("also")
    for c in plan.options:
        t = c.timing
        seconds = t.seconds if per_job else t.seconds_per_billion_tokens
        if c.gpu_hours is None:
            seconds = None  # no time known (offload with no bandwidth figure)
        hours = f"{c.gpu_hours:,.1f}" if c.gpu_hours is not None else "–"
        table.add_row(
            c.change, _size(c.fit.allocated_bytes, unit), _duration(seconds), hours, _costs(c)
        )
    return table


def _costs(c: Candidate) -> str:
    """What an option asks beyond GPUs: host memory or NVMe, transfer time, NCCL."""
    said = []
    for place, amount in c.offloaded_per_node.items():
        where = "host" if place == "cpu" else "NVMe"
        said.append(f"{where} {amount / 1e9:,.0f} GB/node")
    if c.offload is not None and c.offload.seconds is not None:
        label = " (assumed)" if c.offload.assumed else ""
        said.append(f"+{c.offload.seconds:.2g} s/micro-batch{label}")
    elif c.offload is not None:
        said.append("transfer time unknown: no bandwidth figure")
    if c.nccl_bound:
        said.append("NCCL-bound")
    if not c.keeps_method:
        said.append("trains otherwise")
    return "; ".join(said) or "–"


def _show_time(plan: Plan, gpu: str) -> None:
    from rich.markup import escape

    from bringup.planning.models import count_text

    s, t, e = plan.setup, plan.timing, plan.efficiency
    out.print("[bold]Time[/]")
    rate = "no FLOP rate"
    if e.hardware_flops_per_s:
        model_rate = e.hardware_flops_per_s * t.model_flops_per_token / t.hardware_flops_per_token
        rate = f"{model_rate / 1e12:.4g} TFLOP/s model per {gpu}"
    if plan.mfu is not None:
        rate += f", MFU {plan.mfu:.1%}"
    out.print(f"  rate: {rate} — {e.label}", highlight=False)
    out.print(
        f"  FLOPs per token: {t.model_flops_per_token:.4g} model, "
        f"{t.hardware_flops_per_token:.4g} executed",
        highlight=False,
    )
    if t.tokens_per_s_per_gpu:
        out.print(
            f"  {t.tokens_per_s_per_gpu:,.0f} tokens/s per {gpu}, "
            f"{t.tokens_per_s_per_gpu * s.gpus:,.0f} in all; "
            f"{_duration(t.seconds_per_billion_tokens)} per billion tokens",
            highlight=False,
        )
    if t.tokens is not None:
        out.print(
            f"  {count_text(t.tokens)} tokens: [bold]{_duration(t.seconds)}[/] "
            f"({plan.cost.gpu_hours or 0:,.1f} {gpu}-hours)",
            highlight=False,
        )
    moved = plan.offload
    if moved is not None:
        t = moved.traffic
        amounts = [
            f"{amount / 1e9:.3g} GB {what}"
            for amount, what in (
                (t.pcie_bytes, "over PCIe"),
                (t.nvme_read_bytes, "read from NVMe"),
                (t.nvme_write_bytes, "written to NVMe"),
            )
            if amount
        ]
        took = f"{moved.seconds:.3g} s" if moved.seconds is not None else "no time (no bandwidth)"
        # The sources name nodes and paths of a run: text, not markup.
        out.print(
            f"  offload: {', '.join(amounts)} per micro-batch: {took} — "
            + escape("; ".join(moved.sources)),
            highlight=False,
        )
    comm = plan.communication
    if comm is not None:
        bandwidth = f"{comm.busbw_gb_s:g} GB/s" if comm.busbw_gb_s else "no figure"
        line = f"  NCCL: {bandwidth} — {comm.source}"
        if comm.seconds is not None and comm.compute_seconds is not None:
            line += (
                f"; ZeRO moves {comm.bus_bytes / 1e9:.3g} GB per micro-batch: "
                f"{comm.seconds:.3g} s against {comm.compute_seconds:.3g} s of compute"
            )
        out.print(line, highlight=False)


def _show_cost(plan: Plan, gpu: str) -> None:
    c, a = plan.cost, plan.acceptance
    out.print("[bold]Cost[/]")

    def priced(amount: float | None) -> str:
        # Without a price there is no amount to show: say how to get one, not "= –".
        if c.price_per_gpu_hour is None:
            return ""
        return f" × {c.price_per_gpu_hour:g} per {gpu}-hour = {_money(amount)}"

    if c.gpu_hours is not None:
        out.print(f"  the job: {c.gpu_hours:,.1f} {gpu}-hours{priced(c.amount)}", highlight=False)
    elif c.gpu_hours_per_billion_tokens is not None:
        out.print(
            f"  {c.gpu_hours_per_billion_tokens:,.1f} {gpu}-hours per billion tokens "
            "(give --tokens for the job)",
            highlight=False,
        )
    if a is not None and c.acceptance_gpu_hours is not None:
        out.print(
            f"  the acceptance run: suite {a.suite} {_duration(a.suite_budget_s)} (its budget) + "
            f"burn-in {_duration(a.burnin_s)} ({a.burnin_source}) on {_gpus(plan.setup.gpus)}: "
            f"{c.acceptance_gpu_hours:,.1f} GPU-hours{priced(c.acceptance_amount)}",
            highlight=False,
        )
    if c.price_per_gpu_hour is None:
        out.print(
            "  no price given: add --price-per-gpu-hour P for the cost of each", highlight=False
        )


def _show_checks(plan: Plan) -> None:
    for check in plan.checks:
        title = f"[bold]Check against reality[/] — {check.recipe} ({check.baseline})"
        out.print(title, highlight=False)
        if check.problem:
            out.print(f"  not checked: {check.problem}", highlight=False)
        for r in check.ratios:
            mark = "[bold red]FLAGGED[/]" if r.flagged else "ok"
            if r.unit == "bytes":
                planned, measured = f"{r.predicted / 1e6:,.1f} MB", f"{r.measured / 1e6:,.1f} MB"
            else:
                planned, measured = f"{r.predicted:.4g} {r.unit}", f"{r.measured:.4g} {r.unit}"
            out.print(
                f"  {r.figure}: planned {planned}, measured {measured}: ratio {r.ratio:.3f} "
                f"(±{r.tolerance:.0%}) {mark}",
                highlight=False,
            )
