"""The `burnin` probe: run the reference fine-tune on this node and report what it measured.

It launches bringup/node/burnin/trainer.py under `python -m torch.distributed.run` (one rank per
GPU, or the ranks asked for), samples NVML telemetry on every GPU meanwhile (telemetry.py),
and reads back the files each rank wrote as it went. Facts only: step times per rank, the
loss curve, peak memory, checkpoint save and restore results, FLOPs per token. Judging is
bringup/checks/burnin.py; the baseline is bringup/baseline.py.

Node side: standard library here; torch, deepspeed, transformers and peft are needed by
the trainer only, in the interpreter `Params.python` names. When the trainer dies or runs
past the deadline, the steps it had already recorded are kept and `error` says why.

While the trainer runs, each step rank 0 records is reported as it ends (step, loss,
tokens/s, step time, ETA: bringup/node/progress.py), and a heartbeat every HEARTBEAT_S
while no step comes, so a hung step shows on the console; the record keeps when the last
step ended and how long the trainer then went without one (`last_step_s`, `quiet_s`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bringup.node import progress
from bringup.node.probes.telemetry import Sampler, Timeline
from bringup.node.rendezvous import free_port, interface_towards
from bringup.node.result import ProbeError, ProbeOutput
from bringup.node.simulated import sampled_gpus
from bringup.node.tool import package_root, run, which
from bringup.node.workdir import new_dir, work_dir

LOG_TAIL_BYTES = 200_000  # of the trainer's log kept in raw/: its end says why it died
HEARTBEAT_S = 15.0  # while no step ends, say so this often
POLL_S = 0.5  # how often the steps rank 0 wrote are read while the trainer runs


@dataclass
class Params:
    recipe: dict[str, Any] = field(default_factory=dict)  # to_json of a validated recipe
    # The DeepSpeed config resolved by the controller (bringup/recipe.py deepspeed_config),
    # so a node needs no copy of burnin/deepspeed/.
    deepspeed_config: dict[str, Any] = field(default_factory=dict)
    nproc: int = 0  # ranks on this node; 0 = one per GPU (1 where there is none)
    nnodes: int = 1  # > 1: one job across nodes (`--joint`); this node is node_rank
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = 0  # 0 = a free port on this node (single-node runs)
    rendezvous_timeout_s: float = 300.0  # --joint: how long ranks wait for the other nodes
    env: dict[str, str] = field(default_factory=dict)  # NCCL_*/GLOO_* for the ranks
    deadline_s: float = 3600.0  # the trainer is stopped at this point; measured steps kept
    # Checkpoints and rank outputs go to a new private directory (bringup/node/workdir.py):
    # exactly work_dir when given (it must not exist yet: the local run's <run>/work), else
    # <work_base>/<work_prefix><random>, work_base "" being ~/.cache/bringup/burnin.
    work_dir: str = ""
    work_base: str = ""
    work_prefix: str = "burnin-"
    resume: str | None = None  # a checkpoint directory (…/checkpoints/step<N>) to continue
    gather_adapters: bool = True  # False reproduces the ZeRO-3 empty-adapter trap (tests)
    telemetry_interval_s: float = 1.0
    python: str = ""  # interpreter with torch & co.; "" = the one running this probe
    keep_checkpoints: bool = True  # False: delete them once measured (disk space)


# Throughput is rounded once, here, to the figure everyone shows: stdout, baseline.json, the
# report and the exporter then print the same number to the last digit (docs/json.md).
TOKENS_PER_S_DIGITS = 2


def measured(times: list[float], warmup: int) -> list[float]:
    """Step times after the warm-up; all of them when the run was shorter than the warm-up."""
    return times[warmup:] or times


def tokens_per_s_per_gpu(
    step_times: list[float], warmup: int, tokens_per_step_per_gpu: int | None
) -> float | None:
    """The burn-in's tokens/s per GPU: tokens per step over the median step after the
    warm-up. The one computation of the figure `burnin.tokens_per_s`."""
    times = measured(step_times, warmup)
    if not tokens_per_step_per_gpu or not times:
        return None
    median = statistics.median(times)
    return round(tokens_per_step_per_gpu / median, TOKENS_PER_S_DIGITS) if median > 0 else None


@dataclass
class StepRecord:
    """One optimizer step: the loss over every rank, and rank 0's time split."""

    step: int
    loss: float | None
    time_s: float
    forward_s: float | None = None
    backward_s: float | None = None
    optimizer_s: float | None = None


@dataclass
class RankRecord:
    rank: int
    host: str | None = None
    local_rank: int | None = None
    device: str | None = None
    device_name: str | None = None
    step_times_s: list[float] = field(default_factory=list)
    peak_memory_bytes: int | None = None
    memory_kind: str | None = None  # cuda_max_allocated, cpu_max_rss
    error: str | None = None


@dataclass
class CheckpointRecord:
    step: int
    save_s: float
    adapter_tensors: int | None = None
    adapter_empty_tensors: int | None = None  # > 0: saved without gathering (ZeRO-3 trap)
    adapter_bytes: int | None = None


@dataclass
class RestoreRecord:
    step: int  # the checkpoint loaded back
    restore_s: float
    compared_tensors: int | None = None
    bit_identical: bool | None = None
    max_abs_diff: float | None = None
    loss_recorded: float | None = None  # the loss of step+1 when training went through it
    loss_replayed: float | None = None  # the same step recomputed after the restore
    loss_continues: bool | None = None


@dataclass
class BurninFacts:
    recipe: str
    world_size: int
    nnodes: int
    device_kind: str  # cuda or cpu
    device_name: str | None
    dtype: str
    zero_stage: int
    seq_len: int
    micro_batch: int
    grad_accum: int
    gradient_checkpointing: bool
    warmup_steps: int  # steps left out of the timing statistics
    tokens_per_step_per_gpu: int | None = None
    model_flops_per_token: int | None = None
    hardware_flops_per_token: int | None = None
    params_base: int | None = None
    params_adapter: int | None = None
    params_expected_base: int | None = None
    params_expected_adapter: int | None = None
    steps: list[StepRecord] = field(default_factory=list)
    ranks: list[RankRecord] = field(default_factory=list)
    checkpoints: list[CheckpointRecord] = field(default_factory=list)
    restore: RestoreRecord | None = None
    nan_step: int | None = None
    resumed_from_step: int | None = None  # the checkpoint this run continued from
    stopped_by: str | None = None  # steps, minutes, nan; None when the trainer did not finish
    error: str | None = None  # why the trainer did not finish; what it measured is kept
    duration_s: float = 0.0
    versions: dict[str, str] = field(default_factory=dict)
    telemetry: Timeline | None = None
    # The heartbeat: seconds after the launch when the last step ended, and how long the
    # trainer then ran without another (a hung step: up to the deadline).
    last_step_s: float | None = None
    quiet_s: float | None = None


FACTS = BurninFacts


def collect(params: Params) -> ProbeOutput:
    if not params.recipe:
        raise ProbeError("burnin: no recipe given")
    if not params.deepspeed_config:
        raise ProbeError("burnin: no deepspeed_config given (the controller resolves the recipe's)")
    python = params.python or sys.executable
    # The checkpoints written here are loaded back with pickle (DeepSpeed): the directory
    # is a new one, this user's alone, in a base nobody else can change (workdir.py).
    if params.work_dir:
        work = new_dir(Path(params.work_dir))
    else:
        work = work_dir("burnin", params.work_base, params.work_prefix)
    plan = {
        "recipe": params.recipe,
        "work_dir": str(work),
        "resume": params.resume,
        "gather_adapters": params.gather_adapters,
        "deepspeed_config": params.deepspeed_config,
    }
    (work / "plan.json").write_text(json.dumps(plan, indent=2))
    nproc = params.nproc or _gpu_count() or 1
    argv = [python, "-m", "torch.distributed.run", *_launch_args(params, nproc, work)]
    argv += ["-m", "bringup.node.burnin.trainer", "--plan", str(work / "plan.json")]
    started = time.monotonic()
    first_rank = params.node_rank * nproc  # this node's first rank: it times every step
    watch = StepWatch(work, params.recipe, nproc * params.nnodes, started, first_rank)
    with Sampler(interval_s=params.telemetry_interval_s) as sampler:
        error = _launch(argv, work, params.deadline_s, trainer_environment(params, work), watch)
        timeline = sampler.stop()
    ended = time.monotonic()
    facts = read_outputs(work, params.recipe, nproc, params.nnodes)
    facts.duration_s = round(ended - started, 3)
    facts.telemetry = timeline
    facts.last_step_s, facts.quiet_s = watch.heartbeat(ended)
    if error is not None and error.startswith("trainer stopped at the deadline"):
        error += watch.stall(ended)
    facts.error = facts.error or error
    raw = {"trainer.log": _tail(work / "trainer.log"), "plan.json": json.dumps(plan, indent=2)}
    for name in ("result.json", "steps.jsonl"):
        if (work / name).exists():
            raw[name] = (work / name).read_text()
    if not params.keep_checkpoints:
        shutil.rmtree(work / "checkpoints", ignore_errors=True)
    # Its telemetry (throttling, power) read the simulated NVML: said so, never live.
    return ProbeOutput(facts=facts, raw=raw, simulated=sampled_gpus())


def _launch_args(params: Params, nproc: int, work: Path) -> list[str]:
    if params.nnodes > 1 and not params.master_port:
        raise ProbeError("burnin: across nodes the rendezvous needs a master_port")
    port = params.master_port or free_port("127.0.0.1")
    return [
        f"--nproc-per-node={nproc}",
        f"--nnodes={params.nnodes}",
        f"--node-rank={params.node_rank}",
        f"--master-addr={params.master_addr}",
        f"--master-port={port}",
        # The static rendezvous waits this long for the other nodes, then fails naming
        # the address it could not reach (torch's default is 600 s).
        f"--rdzv-conf=timeout={max(1, round(params.rendezvous_timeout_s))}",
        # Its log folder in the run's own: left to itself torchrun makes one in $TMPDIR
        # each launch and never removes it.
        f"--log-dir={work / 'torchelastic'}",
    ]


def trainer_environment(params: Params, work: Path) -> dict[str, str]:
    """The ranks' environment: this one, the params' NCCL/GLOO settings, gloo's interface,
    torch inductor's cache in the run's work folder."""
    env = {**os.environ, **params.env}
    # Importing torch's inductor (DeepSpeed does) makes its cache folder, /tmp/torchinductor_
    # <user> by default: a folder in the shared /tmp whose name anyone can take first.
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(work / "torchinductor"))
    if params.nnodes > 1 and "GLOO_SOCKET_IFNAME" not in env:
        interface = interface_towards(params.master_addr)
        if interface:
            env["GLOO_SOCKET_IFNAME"] = interface
    return env


class StepWatch:
    """The steps this node's first rank has timed so far (rank<R>.jsonl), with their loss
    where this node holds rank 0 (steps.jsonl), each reported once as it appears, and a
    heartbeat while none does."""

    def __init__(
        self,
        work: Path,
        recipe: dict[str, Any],
        world: int,
        started: float,
        first_rank: int = 0,
    ) -> None:
        train = recipe.get("train", {})
        self.losses, self.times = work / "steps.jsonl", work / f"rank{first_rank}.jsonl"
        self.steps: int | None = train.get("steps")
        self.minutes: float | None = train.get("minutes")
        per_gpu = int(train.get("seq_len", 0)) * int(train.get("micro_batch", 0))
        self.tokens_per_step = per_gpu * int(train.get("grad_accum", 1)) * world
        self.started = started
        self.with_loss = first_rank == 0  # rank 0 writes each step's loss after its time
        self.seen: dict[int, dict[str, Any]] = {}  # step -> its timing line
        self.first: int | None = None  # the first step of this run (after a resume: N+1)
        self.last_at: float | None = None  # when the last new step was seen
        self.beat_at = started

    def poll(self, now: float) -> None:
        """Report each step recorded since the last poll; a heartbeat when none was."""
        times = {int(r["step"]): r for r in _jsonl(self.times) if "step" in r}
        new = sorted(step for step in times if step not in self.seen)
        losses = {int(r["step"]): r.get("loss") for r in _jsonl(self.losses) if "step" in r}
        if self.with_loss:  # a step is whole once its loss is written too
            new = [step for step in new if step in losses]
        for step in new:
            self.seen[step] = times[step]
            self.first = step if self.first is None else min(self.first, step)
            self.last_at = self.beat_at = now
            progress.report(**self._step_fields(step, losses.get(step), now))
        if now - self.beat_at >= HEARTBEAT_S:
            self.beat_at = now
            if self.last_at is None:
                progress.report(phase=f"starting the trainer ({now - self.started:.0f} s)")
            else:
                last = max(self.seen)
                progress.report(step=last, of=self._of(), since_step_s=round(now - self.last_at))

    def _of(self) -> int | None:
        return self.first - 1 + self.steps if self.steps and self.first else None

    def _step_fields(self, step: int, loss: object, now: float) -> dict[str, Any]:
        fields: dict[str, Any] = {"step": step, "of": self._of()}
        if loss is not None:  # rank 0's node only: it averages the loss over every rank
            fields["loss"] = loss
        step_s = self.seen[step].get("time_s")
        if isinstance(step_s, int | float) and step_s > 0:
            fields["step_s"] = round(step_s, 4)
            fields["tokens_per_s"] = round(self.tokens_per_step / step_s, 1)
        timed = [t for r in self.seen.values() if isinstance(t := r.get("time_s"), int | float)]
        of = self._of()
        if of is not None and timed:
            fields["eta_s"] = round((of - step) * sum(timed) / len(timed))
        elif self.minutes is not None and timed:
            # The trainer's clock starts before its first step: near enough, the first
            # step's start as this watch saw it.
            fields["eta_s"] = round(max(0.0, self.minutes * 60 - sum(timed)))
        return fields

    def heartbeat(self, ended: float) -> tuple[float | None, float | None]:
        """(seconds after the launch of the last step seen, seconds without one after it)."""
        if self.last_at is None:
            return None, None
        return round(self.last_at - self.started, 3), round(ended - self.last_at, 3)

    def stall(self, ended: float) -> str:
        """What the deadline cut: '; no step for 1800 s after step 12' (or before step 1)."""
        if self.last_at is None:
            return f"; no step ended in {ended - self.started:.0f} s"
        return f"; no step for {ended - self.last_at:.0f} s after step {max(self.seen)}"


def _launch(
    argv: list[str],
    work: Path,
    deadline_s: float,
    env: dict[str, str],
    watch: StepWatch | None = None,
) -> str | None:
    """Run the trainer to its end or the deadline, reporting its steps as they end; None,
    or why it did not finish."""
    env = dict(env)
    # The trainer imports bringup from wherever this probe was loaded (a checkout, a wheel,
    # or the zip the controller shipped).
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root(), env.get("PYTHONPATH")]))
    with (work / "trainer.log").open("wb") as log:
        try:
            proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        except OSError as exc:
            raise ProbeError(f"burnin: cannot start {argv[0]}: {exc.strerror}") from None
        progress.report(phase="starting the trainer")
        end = time.monotonic() + deadline_s
        try:
            while True:
                try:
                    code = proc.wait(timeout=max(0.0, min(POLL_S, end - time.monotonic())))
                    break
                except subprocess.TimeoutExpired:
                    if time.monotonic() >= end:
                        raise
                    if watch is not None:
                        watch.poll(time.monotonic())
            if watch is not None:
                watch.poll(time.monotonic())  # the last steps, written just before the end
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            return f"trainer stopped at the deadline of {deadline_s:g} s"
    if code != 0:
        return f"trainer exited {code}: {_last_line(work / 'trainer.log')}"
    return None


def read_outputs(work: Path, recipe: dict[str, Any], nproc: int, nnodes: int) -> BurninFacts:
    """Facts from what the ranks wrote into `work` (however far they got)."""
    train = recipe.get("train", {})
    result = _json(work / "result.json") or {}
    facts = BurninFacts(
        recipe=str(recipe.get("name", "?")),
        world_size=int(result.get("world_size") or nproc * nnodes),
        nnodes=nnodes,
        device_kind="cpu",
        device_name=None,
        dtype=str(train.get("dtype", "bf16")),
        zero_stage=int(recipe.get("deepspeed", {}).get("zero_stage", 3)),
        seq_len=int(train.get("seq_len", 0)),
        micro_batch=int(train.get("micro_batch", 0)),
        grad_accum=int(train.get("grad_accum", 1)),
        gradient_checkpointing=bool(train.get("gradient_checkpointing", False)),
        warmup_steps=int(train.get("warmup_steps", 0)),
    )
    for key in (
        "tokens_per_step_per_gpu",
        "model_flops_per_token",
        "hardware_flops_per_token",
        "params_base",
        "params_adapter",
        "params_expected_base",
        "params_expected_adapter",
        "nan_step",
        "stopped_by",
    ):
        setattr(facts, key, result.get(key))
    facts.resumed_from_step = (result.get("resumed_from") or {}).get("step")
    facts.versions = {str(k): str(v) for k, v in (result.get("versions") or {}).items()}
    losses = {int(r["step"]): r.get("loss") for r in _jsonl(work / "steps.jsonl")}
    facts.ranks = _ranks(work)
    rank0 = {int(r["step"]): r for r in _jsonl(work / "rank0.jsonl")}
    facts.steps = [
        StepRecord(
            step=step,
            loss=losses.get(step),
            time_s=float(r["time_s"]),
            forward_s=r.get("forward_s"),
            backward_s=r.get("backward_s"),
            optimizer_s=r.get("optimizer_s"),
        )
        for step, r in sorted(rank0.items())
    ]
    facts.checkpoints = [
        CheckpointRecord(
            step=int(c["step"]),
            save_s=float(c["save_s"]),
            adapter_tensors=c.get("adapter_tensors"),
            adapter_empty_tensors=c.get("adapter_empty_tensors"),
            adapter_bytes=c.get("adapter_bytes"),
        )
        for c in result.get("checkpoints") or []
    ]
    restore = result.get("restore")
    if restore:
        facts.restore = RestoreRecord(**{k: restore.get(k) for k in RestoreRecord.__annotations__})
    names = {r.device_name for r in facts.ranks if r.device_name}
    facts.device_name = ", ".join(sorted(names)) or None
    if any((r.device or "").startswith("cuda") for r in facts.ranks):
        facts.device_kind = "cuda"
    errors = [f"rank {r.rank}: {r.error}" for r in facts.ranks if r.error]
    if errors:
        facts.error = errors[0] + (f" (and {len(errors) - 1} more ranks)" if errors[1:] else "")
    return facts


def _ranks(work: Path) -> list[RankRecord]:
    found: dict[int, RankRecord] = {}
    for path in work.glob("rank*.jsonl"):
        rank = int(path.stem.removeprefix("rank"))
        times = [float(r["time_s"]) for r in _jsonl(path)]
        found[rank] = RankRecord(rank=rank, step_times_s=times)
    for path in work.glob("rank*.json"):
        stem = path.name.split(".")[0]
        rank = int(stem.removeprefix("rank"))
        record = found.setdefault(rank, RankRecord(rank=rank))
        data = _json(path) or {}
        if path.name.endswith(".error.json"):
            record.error = str(data.get("error"))
            continue
        for key in ("host", "local_rank", "device", "device_name", "peak_memory_bytes"):
            setattr(record, key, data.get(key))
        record.memory_kind = data.get("memory_kind")
    return [found[r] for r in sorted(found)]


def _gpu_count() -> int:
    """GPUs this node shows (`nvidia-smi -L`), honouring CUDA_VISIBLE_DEVICES; 0 without."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip()])
    if which("nvidia-smi") is None:
        return 0
    result = run(["nvidia-smi", "-L"], timeout_s=30)
    if result.returncode != 0:
        return 0
    return sum(1 for line in result.stdout.splitlines() if line.startswith("GPU "))


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _jsonl(path: Path) -> list[dict[str, Any]]:
    """Whole lines only: a rank killed mid-write leaves a partial last line, skipped."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - LOG_TAIL_BYTES))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _last_line(path: Path) -> str:
    """The telling line of a failed launch: the last error, else torchrun's root cause."""
    lines = [line.strip() for line in _tail(path).splitlines() if line.strip()]
    for line in reversed(lines):
        if ("Error:" in line or "error:" in line) and not line.endswith("ChildFailedError:"):
            return line[:300]
    root = next((i for i, line in enumerate(lines) if line.startswith("Root Cause")), None)
    if root is not None:
        causes = [line for line in lines[root:] if line.startswith(("exitcode", "rank"))]
        return " ".join(" ".join(c.split()) for c in causes[:2])[:300]
    return lines[-1][:300] if lines else "no output"
