"""One rank of the burn-in fine-tune. Launched by the `burnin` probe through torch.distributed.run:

    python -m torch.distributed.run --nproc-per-node N -m bringup.node.burnin.trainer --plan PLAN

PLAN is a JSON file: {"recipe": {...}, "deepspeed_config": {...}, "work_dir": "...",
"resume": null, "gather_adapters": true}. The model is built from the recipe's shape with
random weights under deepspeed.zero.Init (ZeRO-3) or plainly (ZeRO-2), peft adds LoRA,
and DeepSpeed trains it on the packed token stream of corpus.py. Every rank writes what it
measured into the work directory as it goes, so a crash keeps the steps already timed:

    rank<R>.jsonl    one line per optimizer step: time and its forward/backward/optimizer parts
    steps.jsonl      rank 0: one line per step with the loss averaged over every rank
    rank<R>.json     at the end: device, peak memory, base-weight fingerprint
    result.json      rank 0 at the end: parameter counts, FLOPs, checkpoints, restore check
    checkpoints/step<N>/   DeepSpeed checkpoint (adapter shards + optimizer state) and
                           adapter/ (the LoRA adapters gathered into full tensors, peft format)

The restore check: after training, the latest checkpoint that has a recorded step after it
is loaded back; its adapters (gathered) must equal the saved file bit for bit, and the
replayed loss of the next step must equal the loss recorded when training went through it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import socket
import sys
import time
import traceback
import warnings
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Decided before deepspeed is imported: without CUDA, DeepSpeed's CPU accelerator (gloo).
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("DS_ACCELERATOR", "cpu")

import deepspeed
import torch.distributed as dist
from deepspeed.accelerator import get_accelerator

from bringup.node.burnin import flops
from bringup.node.burnin.corpus import Batch, JsonlCorpus, SyntheticCorpus
from bringup.node.burnin.recipe import Recipe, from_json

RESTORE_LOSS_RTOL = 1e-3  # bf16 kernels may reorder sums; fp32 on CPU matches exactly


@dataclass
class Rank:
    rank: int
    local_rank: int
    world: int
    device: torch.device


# --- setup -------------------------------------------------------------------------------


def init_rank() -> Rank:
    deepspeed.init_distributed(dist_backend=get_accelerator().communication_backend_name())
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_world))
        device = torch.device("cpu")
    return Rank(rank, local_rank, world, device)


def build_model(recipe: Recipe, ds_config: dict[str, Any], device: torch.device) -> torch.nn.Module:
    """The decoder of the recipe's shape with random weights (seeded), then LoRA on it."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    shape, dtype = recipe.model, _dtype(recipe)
    common = dict(
        vocab_size=shape.vocab_size,
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_layers,
        num_attention_heads=shape.num_heads,
        num_key_value_heads=shape.num_kv_heads,
        max_position_embeddings=shape.max_position_embeddings,
        rms_norm_eps=shape.rms_norm_eps,
        rope_theta=shape.rope_theta,
        tie_word_embeddings=shape.tie_word_embeddings,
        use_cache=False,
        attn_implementation="sdpa",  # PyTorch SDPA: flash/memory-efficient kernels on GPU
    )
    if shape.family == "qwen2":
        config, model_type = Qwen2Config(**common), Qwen2ForCausalLM  # q/k/v bias built in
    else:
        config = LlamaConfig(**common, attention_bias=shape.attention_bias)
        model_type = LlamaForCausalLM
    torch.manual_seed(recipe.train.seed)  # the same base weights on every rank and resume
    # ZeRO-3: each module is partitioned across the ranks as soon as it is built, so a 70B
    # model never exists whole on one GPU.
    # ZeRO-2: built straight on the GPU in its dtype, never as fp32 in host memory.
    zero3 = recipe.deepspeed.zero_stage == 3
    if zero3:
        init: Any = deepspeed.zero.Init(config_dict_or_path=ds_config, dtype=dtype)
    else:
        init = device
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with init:
            model = model_type(config)
    finally:
        torch.set_default_dtype(default_dtype)
    if not zero3:
        # transformers re-initialises whole tensors (normal, std 0.02); under ZeRO-3 it sees
        # only empty partitions and PyTorch's per-module initialisation stays. Use the latter
        # for both stages, so that their loss curves are alike.
        torch.manual_seed(recipe.train.seed)
        for module in model.modules():
            if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
                module.reset_parameters()
    if recipe.train.gradient_checkpointing:
        # Reentrant: non-reentrant checkpointing fails under ZeRO-3
        # (huggingface/trl#2514; docs/reference.md#burn-in-recipes).
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
        model.enable_input_require_grads()
    lora = recipe.lora
    adapters = LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=list(lora.targets),
        bias="none",
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, adapters)


def _dtype(recipe: Recipe) -> torch.dtype:
    return torch.bfloat16 if recipe.train.dtype == "bf16" else torch.float32


def build_corpus(recipe: Recipe) -> SyntheticCorpus | JsonlCorpus:
    t, shape = recipe.train, recipe.model
    if recipe.data.kind == "jsonl":
        path = Path(recipe.data.path or "")
        return JsonlCorpus(path, shape.vocab_size, t.seq_len, t.micro_batch, t.seed)
    return SyntheticCorpus(shape.vocab_size, t.seq_len, t.micro_batch, t.seed)


def parameter_counts(model: torch.nn.Module) -> tuple[int, int]:
    """(total, trainable) parameters; ZeRO-3 partitions report their full size in ds_numel."""
    total = trainable = 0
    for p in model.parameters():
        n = int(getattr(p, "ds_numel", p.numel()))
        total += n
        trainable += n if p.requires_grad else 0
    return total, trainable


def base_fingerprint(model: torch.nn.Module) -> float:
    """Sum of |w| over this rank's part of the frozen weights: equal iff rebuilt the same."""
    total = 0.0
    for p in model.parameters():
        if not p.requires_grad:
            local = getattr(p, "ds_tensor", p)
            total += float(local.detach().double().abs().sum())
    return total


# --- timing ------------------------------------------------------------------------------


class StepClock:
    """Marks inside one step; CUDA events on a GPU (no sync per mark), wall clock on a CPU."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.marks: list[tuple[str, Any]] = []

    def mark(self, name: str) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append((name, event))
        else:
            self.marks.append((name, time.perf_counter()))

    def phases(self) -> dict[str, float]:
        """Seconds per phase name (summed over micro-batches) and the whole step ("time_s")."""
        if self.cuda:
            self.marks[-1][1].synchronize()

        def gap(a: Any, b: Any) -> float:
            return a.elapsed_time(b) / 1000.0 if self.cuda else b - a

        spent: dict[str, float] = {}
        for (_, before), (name, after) in zip(self.marks, self.marks[1:], strict=False):
            spent[name] = spent.get(name, 0.0) + gap(before, after)
        spent["time_s"] = gap(self.marks[0][1], self.marks[-1][1])
        return spent


# --- checkpoints -------------------------------------------------------------------------


def gathered_adapters(engine: Any, gather: bool) -> dict[str, torch.Tensor]:
    """The LoRA weights as full CPU tensors, in peft's saved naming.

    Under ZeRO-3 each rank holds a shard and the parameter itself is an empty tensor: without
    GatheredParameters, the adapters would be saved empty (DeepSpeed #4295, peft #1710).
    `gather=False` reproduces that trap on purpose (tests).
    """
    from peft import get_peft_model_state_dict

    named = [(n, p) for n, p in engine.module.named_parameters() if p.requires_grad]
    zero3 = any(hasattr(p, "ds_id") for _, p in named)
    context = (
        deepspeed.zero.GatheredParameters([p for _, p in named], modifier_rank=None)
        if zero3 and gather
        else nullcontext()
    )
    with context:
        state = {n: p.detach().to("cpu", copy=True).contiguous() for n, p in named}
    return get_peft_model_state_dict(engine.module, state_dict=state)


def save_checkpoint(engine: Any, root: Path, step: int, gather: bool, rank: Rank) -> dict:
    """DeepSpeed checkpoint plus the gathered adapters; what was written and how long it took."""
    from safetensors.torch import load_file, save_file

    dist.barrier()
    started = time.perf_counter()
    tag = f"step{step}"
    engine.save_checkpoint(str(root), tag=tag, client_state={"step": step})
    adapters = gathered_adapters(engine, gather)  # collective: every rank takes part
    adapter_file = root / tag / "adapter" / "adapter_model.safetensors"
    if rank.rank == 0:
        adapter_file.parent.mkdir(parents=True, exist_ok=True)
        save_file(adapters, str(adapter_file))
        engine.module.peft_config["default"].save_pretrained(str(adapter_file.parent))
    dist.barrier()
    save_s = time.perf_counter() - started
    record = {"step": step, "tag": tag, "save_s": round(save_s, 6)}
    if rank.rank == 0:
        written = load_file(str(adapter_file))  # judge what is on disk, not what we meant
        record.update(
            adapter_tensors=len(written),
            adapter_empty_tensors=sum(1 for t in written.values() if t.numel() == 0),
            adapter_bytes=adapter_file.stat().st_size,
        )
    return record


def verify_restore(
    engine: Any,
    root: Path,
    checkpoint: dict,
    recorded_loss: float,
    corpus: SyntheticCorpus | JsonlCorpus,
    recipe: Recipe,
    rank: Rank,
) -> dict:
    """Load a checkpoint back: adapters bit-identical to the saved file, the loss continues."""
    from safetensors.torch import load_file

    dist.barrier()
    started = time.perf_counter()
    engine.load_checkpoint(str(root), tag=checkpoint["tag"], load_lr_scheduler_states=False)
    dist.barrier()
    restore_s = time.perf_counter() - started
    restored = gathered_adapters(engine, gather=True)
    step = checkpoint["step"]
    replayed = step_loss(engine, corpus, recipe, rank, step + 1)  # forward only, no update
    record: dict[str, Any] = {
        "step": step,
        "restore_s": round(restore_s, 6),
        "loss_recorded": recorded_loss,
        "loss_replayed": replayed,
    }
    if rank.rank == 0:
        saved = load_file(str(root / checkpoint["tag"] / "adapter" / "adapter_model.safetensors"))
        same_keys = sorted(saved) == sorted(restored)
        diffs = [
            float((saved[k].double() - restored[k].double()).abs().max()) if saved[k].numel() else 0
            for k in saved
            if k in restored and saved[k].shape == restored[k].shape
        ]
        identical = same_keys and all(
            saved[k].shape == restored[k].shape and torch.equal(saved[k], restored[k])
            for k in saved
        )
        record.update(
            compared_tensors=len(saved),
            bit_identical=bool(identical and all(t.numel() for t in saved.values())),
            max_abs_diff=max(diffs, default=None),
            loss_continues=math.isclose(replayed, recorded_loss, rel_tol=RESTORE_LOSS_RTOL),
        )
    return record


# --- training ----------------------------------------------------------------------------


def batches_for(corpus: Any, recipe: Recipe, rank: Rank, step: int) -> list[Batch]:
    """The micro-batches of optimizer step `step` (1-based) on this rank."""
    accum = recipe.train.grad_accum
    return [corpus.batch(rank.rank, (step - 1) * accum + m) for m in range(accum)]


def global_mean(value: float, rank: Rank, flag: float = 0.0) -> tuple[float, float]:
    """(mean of value over ranks, sum of flag over ranks) in one all-reduce."""
    t = torch.tensor([value, flag], dtype=torch.float64, device=rank.device)
    dist.all_reduce(t)
    return float(t[0]) / rank.world, float(t[1])


def step_loss(engine: Any, corpus: Any, recipe: Recipe, rank: Rank, step: int) -> float:
    """The loss of step `step` recomputed without training (the restore check)."""
    losses = []
    with torch.no_grad():
        for b in batches_for(corpus, recipe, rank, step):
            out = engine(input_ids=b.input_ids.to(rank.device), labels=b.labels.to(rank.device))
            losses.append(float(out.loss))
    return global_mean(sum(losses) / len(losses), rank)[0]


def train(plan: dict[str, Any], rank: Rank, work: Path) -> None:
    recipe = from_json(plan["recipe"])  # validated by the controller (bringup/recipe.py)
    t = recipe.train
    gather = bool(plan.get("gather_adapters", True))
    ds_config = plan.get("deepspeed_config")
    if not ds_config:  # the recipe's DeepSpeed file lives with the controller, not here
        raise ValueError("the plan has no deepspeed_config (the controller resolves it)")
    corpus = build_corpus(recipe)
    model = build_model(recipe, ds_config, rank.device)
    fingerprint = base_fingerprint(model)
    trainable = [p for p in model.parameters() if p.requires_grad]
    fused = {"fused": True} if rank.device.type == "cuda" else {}
    optimizer = torch.optim.AdamW(trainable, lr=t.lr, weight_decay=0.0, **fused)
    engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    total, trainable_count = parameter_counts(engine.module)
    per_token = flops.per_token(recipe.model, t.seq_len, recipe.lora, t.gradient_checkpointing)
    counts = flops.parameter_counts(recipe.model)
    result: dict[str, Any] = {
        "recipe": recipe.name,
        "world_size": rank.world,
        "params_base": total - trainable_count,  # the frozen model, as built
        "params_adapter": trainable_count,
        "params_expected_base": counts.total,  # flops.py from the shape: must be equal
        "params_expected_adapter": flops.adapter_parameters(recipe.model, recipe.lora),
        "model_flops_per_token": per_token.model,
        "hardware_flops_per_token": per_token.hardware,
        "tokens_per_step_per_gpu": t.seq_len * t.micro_batch * t.grad_accum,
        "versions": _versions(),
        "checkpoints": [],
        "restore": None,
        "nan_step": None,
        "stopped_by": "steps",
    }
    root = work / "checkpoints"
    start_step = 0
    if plan.get("resume"):
        start_step = _resume(engine, Path(plan["resume"]), result)
    losses: dict[int, float] = {}
    step_log = (work / f"rank{rank.rank}.jsonl").open("a")
    loss_log = (work / "steps.jsonl").open("a") if rank.rank == 0 else None
    began = time.monotonic()
    step = start_step
    engine.train()
    while True:
        step += 1
        batches = batches_for(corpus, recipe, rank, step)
        clock = StepClock(rank.device)
        clock.mark("start")
        loss_sum = torch.zeros((), device=rank.device)
        for b in batches:
            out = engine(input_ids=b.input_ids.to(rank.device), labels=b.labels.to(rank.device))
            clock.mark("forward_s")
            engine.backward(out.loss)
            clock.mark("backward_s")
            engine.step()
            clock.mark("optimizer_s")
            loss_sum += out.loss.detach().float()  # stays on the GPU: no sync per micro-batch
        phases = clock.phases()
        out_of_time = t.minutes is not None and time.monotonic() - began >= t.minutes * 60
        loss, stop_votes = global_mean(float(loss_sum) / len(batches), rank, float(out_of_time))
        phases = {k: round(v, 6) for k, v in phases.items()}
        step_log.write(json.dumps({"step": step, **phases}) + "\n")
        step_log.flush()
        if loss_log is not None:
            loss_log.write(json.dumps({"step": step, "loss": loss}) + "\n")
            loss_log.flush()
        losses[step] = loss
        if not math.isfinite(loss):
            result.update(nan_step=step, stopped_by="nan")
            break
        if step % t.checkpoint_interval == 0:
            result["checkpoints"].append(save_checkpoint(engine, root, step, gather, rank))
        if t.steps is not None and step >= start_step + t.steps:
            break
        if stop_votes > 0:
            result["stopped_by"] = "minutes"
            break
    step_log.close()
    if loss_log is not None:
        loss_log.close()
    verifiable = [c for c in result["checkpoints"] if c["step"] + 1 in losses]
    if verifiable and result["nan_step"] is None:
        chosen = verifiable[-1]
        result["restore"] = verify_restore(
            engine, root, chosen, losses[chosen["step"] + 1], corpus, recipe, rank
        )
    _write_rank_summary(work, rank, fingerprint)
    if rank.rank == 0:
        _write_json(work / "result.json", result)


def _resume(engine: Any, checkpoint: Path, result: dict[str, Any]) -> int:
    """Continue from a checkpoint directory (…/checkpoints/step<N>); the step it holds."""
    _, client = engine.load_checkpoint(str(checkpoint.parent), tag=checkpoint.name)
    if client is None:
        raise RuntimeError(f"cannot load checkpoint {checkpoint}")
    result["resumed_from"] = {"path": str(checkpoint), "step": int(client["step"])}
    # The frozen base is not in a ZeRO-3 checkpoint (only trainable parameters are): it is
    # rebuilt from the recipe's seed, and rank<R>.json's base_fingerprint shows it matches.
    return int(client["step"])


def _write_rank_summary(work: Path, rank: Rank, fingerprint: float) -> None:
    if rank.device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(rank.device)
        kind, name = "cuda_max_allocated", torch.cuda.get_device_name(rank.device)
    else:
        # ru_maxrss is KiB on Linux: the whole process, weights and activations alike.
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        kind, name = "cpu_max_rss", "cpu"
    summary = {
        "rank": rank.rank,
        "local_rank": rank.local_rank,
        "host": socket.gethostname(),
        "device": str(rank.device),
        "device_name": name,
        "peak_memory_bytes": int(peak),
        "memory_kind": kind,
        "base_fingerprint": fingerprint,
    }
    _write_json(work / f"rank{rank.rank}.json", summary)


def _versions() -> dict[str, str]:
    import peft
    import transformers

    found = {
        "torch": torch.__version__,
        "deepspeed": deepspeed.__version__,
        "transformers": transformers.__version__,
        "peft": peft.__version__,
        "python": sys.version.split()[0],
    }
    if torch.version.cuda:
        found["cuda"] = torch.version.cuda
    return found


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", type=Path, required=True)
    args = parser.parse_args(argv)
    # DeepSpeed calls torch.distributed APIs that torch deprecates, once per collective.
    warnings.filterwarnings("ignore", category=FutureWarning)
    plan = json.loads(args.plan.read_text())
    work = Path(plan["work_dir"])
    rank = init_rank()
    try:
        train(plan, rank, work)
        if rank.device.type == "cpu":
            _leave_cpu_run()
    except Exception as exc:
        # The probe reports this line; the traceback goes to the trainer log in raw/.
        _write_json(
            work / f"rank{rank.rank}.error.json",
            {"rank": rank.rank, "error": f"{type(exc).__name__}: {exc}".splitlines()[0]},
        )
        traceback.print_exc()
        return 1
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


def _leave_cpu_run() -> None:
    """End a finished CPU rank without running native teardown.

    DeepSpeed's CPU shared-memory collectives (the deepspeed_shm_comm op, used when it
    compiles) now and then abort in their teardown ("terminate called without an active
    exception") after every output was written: about 1 run in 5 here. Once all ranks are
    past a last barrier nothing is left to do, so the rank exits without destructors.
    """
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
