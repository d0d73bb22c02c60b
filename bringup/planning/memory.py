"""Memory per GPU of a fine-tune: weights, gradients, optimizer state, activations.

Model states (ZeRO paper, Rajbhandari et al. 2020, section 3.1 and figure 1; sources in
docs/reference.md#memory-and-time-model, every formula in docs/plan.md):

    full, mixed precision   16-bit weights 2 + 16-bit gradients 2 + fp32 master and Adam
                            moments 12 = 16 bytes per parameter
    LoRA                    the frozen base in 16 bits (2 B/param), the adapters in fp32
                            (peft keeps them so on a 16-bit base): 4 + 4 + Adam 8 = 16 B/param
    QLoRA                   the base's projections in 4-bit NF4 with double-quantized
                            constants, 4.127 bits per parameter (QLoRA paper); the rest and
                            the adapters as for LoRA

ZeRO stage 1 shards the optimizer state over the G GPUs, stage 2 the gradients too, stage 3
the weights too (frozen ones included: DeepSpeed's zero.Init partitions every parameter).

Activations are counted as Korthikanti et al. 2022 count them, tensor by tensor of what
autograd keeps for the backward, for the Llama/Qwen2 layer the trainer builds (PyTorch
SDPA: no attention matrix is kept). A layer's count was checked against the tensors
PyTorch really saves (tests/unit/test_planning_memory.py holds the figures).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal, get_args

from bringup.node.burnin import flops
from bringup.node.burnin.recipe import LoraSpec, ModelShape
from bringup.profile import Profile

Method = Literal["full", "lora", "qlora"]
METHODS: tuple[str, ...] = get_args(Method)
Precision = Literal["bf16", "fp32"]
# Where DeepSpeed keeps a state it offloads (ZeRO-Offload: the CPU's memory; ZeRO-Infinity:
# NVMe), or "gpu": not offloaded. docs/reference.md#offload.
Place = Literal["gpu", "cpu", "nvme"]
PLACES: tuple[str, ...] = get_args(Place)

GB = 10**9
GIB = 1024**3
ELEMENT_BYTES = {"bf16": 2, "fp32": 4}
ADAPTER_BYTES = 4  # peft's autocast_adapter_dtype (default on): adapters stay fp32
MASTER_AND_ADAM_BYTES = 12  # fp32 master copy + Adam m and v (ZeRO paper: K = 12)
ADAM_BYTES = 8  # Adam m and v of weights that are fp32 already (no master copy)
NF4_BITS = 4.127  # QLoRA: 4-bit NF4 + 0.127 bits of double-quantized block constants
# DeepSpeed's gradient reduction bucket, reduce_bucket_size in burnin/deepspeed/*.json.
REDUCE_BUCKET_ELEMENTS = 500_000_000
# What a GPU holds beyond the allocator's tensors: CUDA context, cuBLAS workspaces, NCCL
# buffers, and the caching allocator's fragmentation. bringup policy
# (docs/reference.md#plan-assumptions): the verdict keeps this much free.
RESERVE_FIXED_BYTES = 2 * GIB
RESERVE_FRAGMENTATION = 0.10  # of the allocated bytes
# On a CPU the burn-in's peak is the process's resident set: Python, torch, DeepSpeed,
# transformers and peft themselves. Measured: one rank of a negligible model (the `nano`
# run of tests/fixtures/plan/, torch 2.13.0+cpu, DeepSpeed 0.19.8), its peak max RSS.
CPU_RUNTIME_BYTES = 461_623_296


@dataclass(frozen=True)
class Device:
    """What the plan runs on: a profile's GPU, or a CPU (the tiny recipe's burn-in)."""

    name: str  # profile name, or "cpu"
    model: str  # the GPU's name as NVML gives it, or "cpu"
    kind: Literal["gpu", "cpu"]
    memory_bytes: int | None  # per GPU: the profile's floor; None on a CPU (not judged)
    peak_flops: float | None  # dense BF16 per GPU
    per_node: int  # GPUs of one node
    busbw_gb_s: float | None = None  # NCCL all-reduce floor inside a node
    multinode_busbw_gb_s: float | None = None  # the same across nodes
    pcie_gen: int | None = None  # each GPU's host link, as the profile states it
    pcie_width: int | None = None
    nvme_read_gb_s: float | None = None  # the profile's NVMe floors (a node meets them)
    nvme_write_gb_s: float | None = None


def device_of(profile: Profile) -> Device:
    return Device(
        name=profile.name,
        model=profile.gpu.model,
        kind="gpu",
        memory_bytes=profile.gpu.memory_min_bytes,
        peak_flops=profile.gpu.bf16_dense_tflops * 1e12,
        per_node=profile.gpu.count,
        busbw_gb_s=profile.nccl.allreduce_busbw_min_gb_s,
        multinode_busbw_gb_s=profile.nccl.allreduce_busbw_multinode_min_gb_s,
        pcie_gen=min(profile.gpu.pcie_gen, profile.gpu.pcie_host_gen or profile.gpu.pcie_gen),
        pcie_width=profile.gpu.pcie_width,
        nvme_read_gb_s=profile.nvme.seq_read_min_gb_s,
        nvme_write_gb_s=profile.nvme.seq_write_min_gb_s,
    )


def cpu_device(ranks: int) -> Device:
    return Device("cpu", "cpu", "cpu", memory_bytes=None, peak_flops=None, per_node=ranks)


@dataclass(frozen=True)
class Setup:
    """Everything the memory and the FLOPs of one training job depend on."""

    shape: ModelShape
    method: Method
    lora: LoraSpec
    seq_len: int
    micro_batch: int  # sequences per GPU per forward
    gradient_checkpointing: bool
    zero_stage: int  # 0 (plain data parallel) to 3
    gpus: int
    precision: Precision = "bf16"
    # DeepSpeed's offload_optimizer and offload_param devices (its config reference: the
    # optimizer offloads from ZeRO stage 1, to NVMe and the parameters only under stage 3).
    offload_optimizer: Place = "gpu"
    offload_params: Place = "gpu"

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}")
        if self.zero_stage not in (0, 1, 2, 3):
            raise ValueError("ZeRO stage must be 0, 1, 2 or 3")
        if self.offload_optimizer not in PLACES or self.offload_params not in PLACES:
            raise ValueError("offload to gpu (none), cpu or nvme")
        if self.offload_optimizer != "gpu" and self.zero_stage == 0:
            raise ValueError("offloading the optimizer needs ZeRO stage 1, 2 or 3")
        nvme = "nvme" in (self.offload_optimizer, self.offload_params)
        if (self.offload_params != "gpu" or nvme) and self.zero_stage != 3:
            raise ValueError("offloading parameters, or to NVMe, needs ZeRO stage 3")
        if self.precision not in ELEMENT_BYTES:
            raise ValueError("precision must be bf16 or fp32")
        for name in ("seq_len", "micro_batch", "gpus"):
            if getattr(self, name) < (2 if name == "seq_len" else 1):
                raise ValueError(f"{name} must be positive")

    def but(self, **changes: object) -> Setup:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    @property
    def element_bytes(self) -> int:
        return ELEMENT_BYTES[self.precision]

    @property
    def tokens_per_micro_batch(self) -> int:
        return self.seq_len * self.micro_batch

    @property
    def offloaded(self) -> bool:
        return self.offload_optimizer != "gpu" or self.offload_params != "gpu"


@dataclass(frozen=True)
class Part:
    what: str
    bytes: int


@dataclass(frozen=True)
class Consumer:
    name: str  # weights, gradients, optimizer state, activations
    parts: tuple[Part, ...]

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.parts)


@dataclass(frozen=True)
class Memory:
    """Bytes per GPU at the step's peak."""

    weights: Consumer
    gradients: Consumer
    optimizer: Consumer
    activations: Consumer
    runtime_bytes: int  # the process itself, counted in a CPU's resident set; 0 on a GPU
    adapter_input_copies: int  # of the activations: fp32 copies peft's adapters keep

    @property
    def consumers(self) -> tuple[Consumer, ...]:
        return (self.weights, self.gradients, self.optimizer, self.activations)

    @property
    def model_states(self) -> int:
        """Weights, gradients and optimizer state: what the job holds before any token."""
        return self.weights.bytes + self.gradients.bytes + self.optimizer.bytes

    @property
    def allocated(self) -> int:
        """The four consumers: what torch.cuda.max_memory_allocated shows at the peak."""
        return self.model_states + self.activations.bytes

    @property
    def peak(self) -> int:
        """What the burn-in records as its peak: allocated, plus the process on a CPU."""
        return self.allocated + self.runtime_bytes


@dataclass(frozen=True)
class Fit:
    capacity_bytes: int | None  # per GPU; None: not judged
    allocated_bytes: int
    reserve_bytes: int
    headroom_bytes: int | None  # capacity - allocated - reserve

    @property
    def fits(self) -> bool | None:
        return None if self.headroom_bytes is None else self.headroom_bytes >= 0


# --- parameters --------------------------------------------------------------------------


def trainable_parameters(setup: Setup) -> int:
    if setup.method == "full":
        return flops.parameter_counts(setup.shape).total
    return flops.adapter_parameters(setup.shape, setup.lora)


def quantized_parameters(shape: ModelShape) -> int:
    """The weights QLoRA stores in 4 bits: every projection of every layer (biases,
    norms, the embedding and the output projection stay 16-bit, as transformers does)."""
    return shape.num_layers * sum(i * o for i, o in flops.projection_shapes(shape).values())


def weight_bytes(setup: Setup) -> tuple[float, float]:
    """(frozen, trainable) weight bytes of the whole model, before any sharding."""
    total = flops.parameter_counts(setup.shape).total
    e = setup.element_bytes
    if setup.method == "full":
        return 0.0, float(total * e)
    adapters = flops.adapter_parameters(setup.shape, setup.lora) * ADAPTER_BYTES
    if setup.method == "lora":
        return float(total * e), float(adapters)
    quantized = quantized_parameters(setup.shape)
    return quantized * NF4_BITS / 8 + (total - quantized) * e, float(adapters)


def _layer_unit_bytes(setup: Setup) -> tuple[float, float]:
    """(one decoder layer, the largest other module) in bytes as ZeRO-3 gathers them."""
    shape, e = setup.shape, setup.element_bytes
    layer = flops.layer_parameters(shape)
    if setup.method == "full":
        layer_bytes = float(layer * e)
    else:
        projections = sum(i * o for i, o in flops.projection_shapes(shape).values())
        base = projections * (NF4_BITS / 8 if setup.method == "qlora" else e)
        adapters = flops.adapter_parameters(shape, setup.lora) // shape.num_layers
        layer_bytes = base + (layer - projections) * e + adapters * ADAPTER_BYTES
    return layer_bytes, float(shape.vocab_size * shape.hidden_size * e)


# --- the model states --------------------------------------------------------------------


def _share(setup: Setup, stage: int) -> tuple[int, str]:
    """The divisor and its label for a state that ZeRO shards from `stage` on."""
    if setup.zero_stage >= stage and setup.gpus > 1:
        return setup.gpus, f", 1/{setup.gpus} (ZeRO-{setup.zero_stage})"
    return 1, ""


def _away(place: Place) -> str:
    """The label of a state DeepSpeed keeps off the GPU."""
    return f", offloaded to {place.upper() if place == 'cpu' else 'NVMe'}: 0 on the GPU"


def _weights(setup: Setup) -> Consumer:
    frozen, trainable = weight_bytes(setup)
    n, shard = _share(setup, 3)
    e = setup.element_bytes
    # ZeRO-3 with offload_param keeps each GPU's partition of the weights on the CPU or
    # NVMe; only the gathered modules below are on the GPU (DeepSpeed's estimator:
    # largest layer only).
    kept = 0 if setup.offload_params != "gpu" else 1
    if kept == 0:
        shard += _away(setup.offload_params)
    parts = []
    if setup.method == "full":
        parts.append(Part(f"weights, {e * 8}-bit{shard}", kept * round(trainable / n)))
    else:
        base = "4-bit NF4 projections, 16-bit rest" if setup.method == "qlora" else f"{e * 8}-bit"
        parts.append(Part(f"frozen base, {base}{shard}", kept * round(frozen / n)))
        parts.append(Part(f"adapters, fp32{shard}", kept * round(trainable / n)))
    if setup.zero_stage == 3 and setup.gpus > 1:
        layer, largest = _layer_unit_bytes(setup)
        gathered = round(max(layer, largest) + layer)
        parts.append(Part("gathered for compute: largest module + next layer (ZeRO-3)", gathered))
    if setup.method == "qlora":
        biggest = max(i * o for i, o in flops.projection_shapes(setup.shape).values())
        parts.append(Part("one projection dequantized for its matmul", biggest * e))
    return Consumer("weights", tuple(parts))


def _gradients(setup: Setup, device: Device) -> Consumer:
    trainable = trainable_parameters(setup)
    grad_bytes = setup.element_bytes if setup.method == "full" else ADAPTER_BYTES
    n, shard = _share(setup, 2)
    what = "gradients" if setup.method == "full" else "adapter gradients"
    # With the optimizer offloaded, ZeRO-2 and -3 move each reduced gradient partition to
    # where the optimizer steps (DeepSpeed's estimators keep none on the GPU); stage 1 does
    # not partition gradients and keeps them.
    kept = 0 if setup.offload_optimizer != "gpu" and setup.zero_stage >= 2 else 1
    if kept == 0:
        shard += _away(setup.offload_optimizer)
    grads = kept * round(trainable * grad_bytes / n)
    parts = [Part(f"{what}, {grad_bytes * 8}-bit{shard}", grads)]
    if setup.zero_stage >= 1:
        # DeepSpeed allocates its reduction bucket whole on a GPU (stages 1-2 double it for
        # overlap_comm; stage 1 stages the fp32 accumulator); on a CPU only the pages a
        # gradient was copied into are resident.
        buffers = 1 if setup.zero_stage == 3 else 2
        staged = 4 if setup.zero_stage == 1 else grad_bytes
        elements = REDUCE_BUCKET_ELEMENTS
        if device.kind == "cpu":
            elements = min(REDUCE_BUCKET_ELEMENTS, trainable)
        bucket = Part(f"DeepSpeed reduction bucket ×{buffers}", elements * staged * buffers)
        parts.append(bucket)
    return Consumer("gradients", tuple(parts))


def _optimizer(setup: Setup) -> Consumer:
    trainable = trainable_parameters(setup)
    n, shard = _share(setup, 1)
    if setup.method == "full" and setup.precision == "bf16":
        what, per = "fp32 master weights + Adam moments, 12 B/param", MASTER_AND_ADAM_BYTES
    else:
        what, per = "Adam moments, 8 B/param (the weights are fp32 already)", ADAM_BYTES
    if setup.offload_optimizer != "gpu":
        return Consumer("optimizer state", (Part(what + _away(setup.offload_optimizer), 0),))
    return Consumer("optimizer state", (Part(f"{what}{shard}", round(trainable * per / n)),))


# --- activations -------------------------------------------------------------------------


def layer_activation_bytes(setup: Setup) -> tuple[int, int]:
    """(bytes per token one decoder layer keeps for its backward, of them fp32 input
    copies of the adapters). Counted tensor by tensor for transformers' Llama/Qwen2 layer:

    - each RMSNorm keeps its input in fp32 (it upcasts before normalising): 2 x 4h
    - SDPA keeps q (rotated), k, v and its output, which is also o_proj's input: e(2h + 2kv)
    - the gated MLP keeps the gate output, its SiLU and the up output: 3ei
    - trained weights need their inputs: full keeps the q/k/v input, the gate/up input and
      the down input, e(2h + i), and each norm's normalised input, 2eh. A frozen base
      keeps none (QLoRA's 4-bit matmul neither). LoRA adapters keep their input: in fp32
      on a 16-bit base, a copy per adapted projection (4 x in); at fp32 the base's own
      inputs, shared; and the r-wide output of A: 4r per adapter.
    """
    shape, e = setup.shape, setup.element_bytes
    h, i = shape.hidden_size, shape.intermediate_size
    kv = shape.num_kv_heads * shape.head_dim
    kept = 2 * 4 * h + e * (2 * h + 2 * kv) + 3 * e * i
    if setup.method == "full":
        return kept + e * (2 * h + i) + 2 * e * h, 0
    shapes = flops.projection_shapes(shape)
    targets = list(dict.fromkeys(setup.lora.targets))
    if e == ADAPTER_BYTES:
        # The base's inputs themselves: q/k/v share one, gate/up one, o's is SDPA's output.
        groups = {
            "q_proj": "qkv",
            "k_proj": "qkv",
            "v_proj": "qkv",
            "o_proj": "o",
            "gate_proj": "mlp",
            "up_proj": "mlp",
            "down_proj": "down",
        }
        width = {"qkv": h, "o": 0, "mlp": h, "down": i}
        copies = 0
        inputs = sum(4 * width[g] for g in {groups[t] for t in targets})
    else:
        copies = sum(4 * shapes[t][0] for t in targets)
        inputs = copies
    return kept + inputs + 4 * setup.lora.r * len(targets), copies


def head_activation_bytes(setup: Setup) -> tuple[int, int]:
    """(bytes per token at the loss's backward, of them the logits the step holds).

    The logits (e·V) stay referenced by the model's output through the backward; the loss
    upcasts them to fp32 and keeps the log-softmax output (4V); its backward then holds
    the gradient of that output and the gradient of the logits, fp32 both (8V). The final
    norm keeps its fp32 input (4h) and, full fine-tune, the output projection its input.
    """
    shape, e = setup.shape, setup.element_bytes
    v, h = shape.vocab_size, shape.hidden_size
    norm = 4 * h + (e * h if setup.method == "full" else 0)
    return e * v + 12 * v + norm, e * v


def _activations(setup: Setup) -> tuple[Consumer, int]:
    tokens = setup.tokens_per_micro_batch
    layers = setup.shape.num_layers
    layer, copies = layer_activation_bytes(setup)
    head, logits = head_activation_bytes(setup)
    if setup.gradient_checkpointing:
        # Only each layer's input is kept; the backward recomputes one layer at a time.
        inputs = tokens * layers * setup.element_bytes * setup.shape.hidden_size
        kept = Part(f"{layers} layer inputs (checkpointing)", inputs)
        peak = max(head, logits + layer)
        what = "loss backward" if head >= logits + layer else "one layer recomputed + logits"
        copies_at_peak = 0 if head >= logits + layer else copies
    else:
        kept = Part(f"{layers} layers kept for the backward", tokens * layers * layer)
        peak, what, copies_at_peak = head, "loss backward", layers * copies
    if what == "loss backward":
        what += ": logits, fp32 log-softmax and its gradients"
    extra = Part(what, tokens * peak)
    return Consumer("activations", (kept, extra)), tokens * copies_at_peak


def offloaded_bytes(setup: Setup, per_node: int) -> dict[str, int]:
    """Bytes one node keeps off its GPUs, by place ("cpu", "nvme"): what its GPUs' shares of
    the offloaded states add up to. DeepSpeed's ZeRO-3 estimator
    (`estimate_zero3_model_states_mem_needs`, zero_init) counts 16 bytes per parameter for
    the offloaded optimizer (fp32 master weights, Adam's two moments, fp32 gradients) and 2
    more for offloaded 16-bit weights; adapters that are fp32 already have no master copy."""
    trainable = trainable_parameters(setup)
    on_node = min(setup.gpus, per_node)
    found: dict[str, int] = {}
    if setup.offload_optimizer != "gpu":
        full = setup.method == "full" and setup.precision == "bf16"
        per = (MASTER_AND_ADAM_BYTES if full else ADAM_BYTES) + 4  # + the fp32 gradients
        share = round(trainable * per / setup.gpus) * on_node
        found[setup.offload_optimizer] = found.get(setup.offload_optimizer, 0) + share
    if setup.offload_params != "gpu":
        frozen, weights = weight_bytes(setup)
        share = round((frozen + weights) / setup.gpus) * on_node
        found[setup.offload_params] = found.get(setup.offload_params, 0) + share
    return found


def memory(setup: Setup, device: Device) -> Memory:
    activations, copies = _activations(setup)
    return Memory(
        weights=_weights(setup),
        gradients=_gradients(setup, device),
        optimizer=_optimizer(setup),
        activations=activations,
        runtime_bytes=CPU_RUNTIME_BYTES if device.kind == "cpu" else 0,
        adapter_input_copies=copies,
    )


def fit(mem: Memory, device: Device) -> Fit:
    """The verdict against the device's memory: the allocated bytes plus the reserve."""
    allocated = mem.allocated
    if device.memory_bytes is None:
        return Fit(None, allocated, 0, None)
    reserve = RESERVE_FIXED_BYTES + round(RESERVE_FRAGMENTATION * allocated)
    return Fit(device.memory_bytes, allocated, reserve, device.memory_bytes - allocated - reserve)


# --- the same job on other GPU counts ---------------------------------------------------


@dataclass(frozen=True)
class Option:
    change: str  # what to change, in words
    setup: Setup
    memory: Memory
    fit: Fit


def gpu_counts(per_node: int, up_to_nodes: int = 64) -> list[int]:
    """GPU counts a job takes: powers of two within a node, then whole nodes."""
    counts, g = [], 1
    while g < per_node:
        counts.append(g)
        g *= 2
    return counts + [per_node * n for n in range(1, up_to_nodes + 1)]


def option(setup: Setup, device: Device, change: str) -> Option:
    mem = memory(setup, device)
    return Option(change, setup, mem, fit(mem, device))


def by_gpu_count(setup: Setup, device: Device, counts: list[int]) -> list[Option]:
    """The same job on each GPU count (its ZeRO stage kept)."""
    return [option(setup.but(gpus=g), device, f"{g} GPUs") for g in counts]
