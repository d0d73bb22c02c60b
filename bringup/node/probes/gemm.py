"""The `gemm` probe: per-GPU matmul throughput (BF16, FP8 where the GPU has it) and HBM copy.

Method of the "maximum achievable matmul FLOPS" finder (stas00/ml-engineering,
compute/accelerator): sweep M at fixed N = K, warm up, time many iterations, keep the best
shape. Every GPU runs at once (one thread per GPU: the matmuls release the GIL), so the
node is loaded as a training job loads it: power and heat of all GPUs together. With
`sustain_s` the best BF16 shape then runs that long while the telemetry sampler watches
(the `diagnose` command), and the sustained TFLOP/s is recorded beside the best burst.

On a GPU: CUDA events time the kernels. Without one: small shapes on the CPU, timed by
the wall clock, so the same code path runs (and is tested) on any machine.
torch is imported lazily: a node without it gets a clear ProbeError.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from bringup.node import progress
from bringup.node.probes.telemetry import Sampler, Timeline
from bringup.node.result import ProbeError, ProbeOutput

# The sweep of ml-engineering's mamf-finder, reduced to the shapes that matter on
# H100/H200/B200: M from 2048 to 16384 at N = K = 8192
# (docs/reference.md#achievable-matmul-ceilings).
GPU_M_SIZES = [2048, 4096, 8192, 12288, 16384]
GPU_NK = 8192
CPU_M_SIZES = [64, 128, 256]
CPU_NK = 256
HBM_COPY_BYTES_GPU = 2**30  # 1 GiB: far above any L2 cache
HBM_COPY_BYTES_CPU = 16 * 2**20
# Busy seconds of back-to-back matmuls before the sweep. From idle the GPU's clocks take a
# while to rise (an H200 idles at 345 MHz SM clock and runs at 1980 under load), and five
# warm-up products of the first, smallest shape last about 2 ms: it would be timed at idle
# clocks. A CPU has no such ramp worth waiting for.
GPU_WARMUP_S = 2.0
CPU_WARMUP_S = 0.1
# FP8 tensor cores: Ada and Hopper (sm_89, sm_90) on (docs/reference.md#gpu-peaks).
FP8_CAPABILITY = (8, 9)


@dataclass
class Params:
    m_sizes: list[int] = field(default_factory=list)  # [] = the default sweep for the device
    nk: int = 0  # N = K; 0 = default for the device
    warmup: int = 5
    warmup_s: float | None = None  # busy seconds before the sweep; None = for the device
    iterations: int = 20
    fp8: bool = True  # also measure FP8 where the GPU has it (sm_89 and newer)
    sustain_s: float = 0.0  # then run the best BF16 shape this long (diagnose)
    sample_interval_s: float = 0.0  # > 0: sample telemetry meanwhile (5-10 Hz: 0.1-0.2)
    device: str = "auto"  # "auto", "cuda" or "cpu"


@dataclass
class GemmResult:
    """One timed shape."""

    dtype: str  # "bf16" or "fp8"
    m: int
    n: int
    k: int
    seconds: float  # per matmul, mean of the timed iterations
    flops_per_s: float


@dataclass
class GemmGpu:
    """What one GPU (or the CPU) delivered."""

    index: int
    name: str
    capability: str | None = None  # CUDA compute capability, "9.0"; None on the CPU
    bf16_flops_per_s: float | None = None  # best shape of the sweep
    bf16_best: str | None = None  # "MxNxK"
    fp8_flops_per_s: float | None = None
    fp8_best: str | None = None
    # FP8 accumulation as timed: "fast" (use_fast_accum=True, how datasheet-style FP8 figures
    # are reached) or "full" (a torch whose _scaled_mm has no such switch). None: not timed.
    fp8_accumulation: str | None = None
    fp8_error: str | None = None  # the FP8 path failed here; the BF16 figures still stand
    sustained_bf16_flops_per_s: float | None = None  # over sustain_s, under telemetry
    sustained_s: float | None = None
    warmup_s: float | None = None  # busy seconds of matmuls before the sweep (clocks up)
    hbm_bytes_per_s: float | None = None  # device-to-device copy, bytes read + written
    sweep: list[GemmResult] = field(default_factory=list)
    error: str | None = None  # this GPU failed (the others still count)


@dataclass
class GemmFacts:
    device: str  # "cuda" or "cpu"
    timing: str  # "cuda-events" or "wall-clock"
    torch_version: str
    gpus: list[GemmGpu] = field(default_factory=list)
    timeline: Timeline | None = None  # telemetry while sustaining, when asked for
    fp8: bool = True  # FP8 was asked for (Params.fp8): a GPU that has it must show it


FACTS = GemmFacts


def collect(params: Params) -> ProbeOutput:
    """Measure every GPU at once; on a machine without CUDA, the CPU with small shapes."""
    try:
        import torch
    except ImportError:
        raise ProbeError("torch not installed: the gemm probe needs PyTorch on the node") from None
    device = _device(torch, params.device)
    targets = list(range(torch.cuda.device_count())) if device == "cuda" else [0]
    results: list[GemmGpu | None] = [None] * len(targets)
    sampler = Sampler(params.sample_interval_s) if params.sample_interval_s > 0 else None
    # All GPUs start the sustained phase together; the last to arrive starts the sampler,
    # so the timeline covers the sustained load (or, without one, the whole probe).
    start_sampler = sampler.start if sampler is not None and params.sustain_s > 0 else None

    def sustained() -> None:
        progress.report(phase=f"sustained load, {params.sustain_s:g} s")
        if start_sampler is not None:
            start_sampler()

    barrier = threading.Barrier(len(targets), action=sustained)
    if sampler is not None and start_sampler is None:
        sampler.start()

    def worker(slot: int, index: int) -> None:
        try:
            results[slot] = measure(torch, device, index, params, barrier)
        except Exception as exc:  # one GPU failing must not lose the others' figures
            barrier.abort()
            results[slot] = GemmGpu(index, _name(torch, device, index), error=_one_line(exc))

    progress.report(phase=f"shape sweep on {len(targets)} {device} device(s)")
    threads = [
        threading.Thread(target=worker, args=(slot, index), name=f"gemm-{index}")
        for slot, index in enumerate(targets)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    timeline = sampler.stop() if sampler is not None else None
    facts = GemmFacts(
        device=device,
        timing="cuda-events" if device == "cuda" else "wall-clock",
        torch_version=str(torch.__version__),
        gpus=[r for r in results if r is not None],
        timeline=timeline,
        fp8=params.fp8,
    )
    if all(g.error for g in facts.gpus):
        raise ProbeError(f"gemm failed on every {device} device: {facts.gpus[0].error}")
    return ProbeOutput(facts)


def _device(torch: Any, wanted: str) -> str:
    if wanted not in ("auto", "cuda", "cpu"):
        raise ProbeError(f"device must be auto, cuda or cpu, not {wanted!r}")
    has_cuda = bool(torch.cuda.is_available())
    if wanted == "cuda" and not has_cuda:
        raise ProbeError("device cuda asked for, but torch sees no CUDA GPU")
    return "cuda" if wanted == "cuda" or (wanted == "auto" and has_cuda) else "cpu"


def _name(torch: Any, device: str, index: int) -> str:
    if device == "cuda":
        return str(torch.cuda.get_device_name(index))
    return "cpu"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


# --- one GPU -----------------------------------------------------------------------------


def measure(
    torch: Any,
    device: str,
    index: int,
    params: Params,
    barrier: threading.Barrier,
) -> GemmGpu:
    """The sweep, FP8 where supported, HBM copy, then the sustained phase, on one device."""
    dev = torch.device(f"cuda:{index}") if device == "cuda" else torch.device("cpu")
    if device == "cuda":
        torch.cuda.set_device(dev)
    timer = _Timer(torch, dev)
    nk = params.nk or (GPU_NK if device == "cuda" else CPU_NK)
    m_sizes = params.m_sizes or (GPU_M_SIZES if device == "cuda" else CPU_M_SIZES)
    gpu = GemmGpu(index=index, name=_name(torch, device, index))
    if device == "cuda":
        major, minor = torch.cuda.get_device_capability(index)
        gpu.capability = f"{major}.{minor}"
    warmup_s = params.warmup_s
    if warmup_s is None:
        warmup_s = GPU_WARMUP_S if device == "cuda" else CPU_WARMUP_S
    if warmup_s > 0:
        _, gpu.warmup_s = _sustain(torch, dev, timer, max(m_sizes), nk, warmup_s)
    for m in m_sizes:
        gpu.sweep.append(_matmul(torch, dev, timer, "bf16", m, nk, nk, params))
    best = max(gpu.sweep, key=lambda r: r.flops_per_s)
    gpu.bf16_flops_per_s, gpu.bf16_best = best.flops_per_s, f"{best.m}x{best.n}x{best.k}"
    if params.fp8 and _has_fp8(torch, device, index):
        # A torch build without the FP8 kernels fails here: that is FP8's own finding, and
        # must not take the BF16 figures or the other GPUs' sustained phase with it.
        try:
            fp8 = [_matmul(torch, dev, timer, "fp8", m, nk, nk, params) for m in m_sizes]
        except Exception as exc:
            gpu.fp8_error = _one_line(exc)
        else:
            gpu.sweep.extend(fp8)
            top = max(fp8, key=lambda r: r.flops_per_s)
            gpu.fp8_flops_per_s, gpu.fp8_best = top.flops_per_s, f"{top.m}x{top.n}x{top.k}"
            gpu.fp8_accumulation = _fp8_accumulation(torch)
    copy_bytes = HBM_COPY_BYTES_GPU if device == "cuda" else HBM_COPY_BYTES_CPU
    gpu.hbm_bytes_per_s = _copy_bandwidth(torch, dev, timer, copy_bytes, params)
    if params.sustain_s > 0:
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            gpu.error = "sustained phase skipped: another GPU failed"
            return gpu
        flops, seconds = _sustain(torch, dev, timer, best.m, nk, params.sustain_s)
        gpu.sustained_bf16_flops_per_s, gpu.sustained_s = flops, seconds
    return gpu


def _has_fp8(torch: Any, device: str, index: int) -> bool:
    """FP8 matmuls (torch._scaled_mm) need sm_89 or newer. A torch without _scaled_mm on
    such a GPU is tried all the same: its failure is the GPU's fp8_error, not a silence."""
    if device != "cuda":
        return False
    return tuple(torch.cuda.get_device_capability(index)) >= FP8_CAPABILITY


def _fp8_accumulation(torch: Any) -> str:
    """ "fast" where torch._scaled_mm takes use_fast_accum (torch 2.1 on), else "full"."""
    import inspect

    try:
        parameters = inspect.signature(torch._scaled_mm).parameters
    except (TypeError, ValueError):  # a builtin without a signature: the documented one
        return "fast"
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    return "fast" if "use_fast_accum" in parameters or takes_any else "full"


class _Timer:
    """Seconds taken by `fn` repeated n times: CUDA events on a GPU, wall clock on the CPU."""

    def __init__(self, torch: Any, dev: Any) -> None:
        self.torch, self.dev = torch, dev
        self.cuda = dev.type == "cuda"

    def time(self, fn: Any, n: int) -> float:
        if not self.cuda:
            start = time.perf_counter()
            for _ in range(n):
                fn()
            return time.perf_counter() - start
        begin = self.torch.cuda.Event(enable_timing=True)
        end = self.torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(n):
            fn()
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) / 1000.0  # ms -> s


def _matmul(
    torch: Any, dev: Any, timer: _Timer, dtype: str, m: int, n: int, k: int, params: Params
) -> GemmResult:
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    if dtype == "fp8":
        fp8 = torch.float8_e4m3fn
        a8, b8 = a.to(fp8), b.to(fp8)
        one = torch.tensor(1.0, device=dev)

        fast = {"use_fast_accum": True} if _fp8_accumulation(torch) == "fast" else {}

        # _scaled_mm wants the second operand column-major: b8.t() of a row-major (n, k).
        def fn() -> Any:
            return torch._scaled_mm(
                a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, **fast
            )

    else:
        bt = b.t()

        def fn() -> Any:
            return torch.mm(a, bt)

    for _ in range(params.warmup):
        fn()
    seconds = timer.time(fn, params.iterations) / params.iterations
    return GemmResult(dtype, m, n, k, seconds, 2.0 * m * n * k / seconds)


def _copy_bandwidth(torch: Any, dev: Any, timer: _Timer, size: int, params: Params) -> float:
    """Bytes read + written per second by a device-to-device copy of `size` bytes."""
    src = torch.empty(size, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    for _ in range(params.warmup):
        dst.copy_(src)
    seconds = timer.time(lambda: dst.copy_(src), params.iterations)
    return 2.0 * size * params.iterations / seconds


def _sustain(
    torch: Any, dev: Any, timer: _Timer, m: int, nk: int, seconds: float
) -> tuple[float, float]:
    """Run the best shape back to back for `seconds`; mean FLOP/s over all of it."""
    a = torch.randn(m, nk, device=dev, dtype=torch.bfloat16)
    bt = torch.randn(nk, nk, device=dev, dtype=torch.bfloat16).t()
    flop = 2.0 * m * nk * nk
    done, busy = 0, 0.0
    # Until the device has been busy `seconds` (the wall clock runs a little longer, by the
    # gaps between batches), so sustained_s is never short of what was asked.
    # Batches of a few matmuls: the check between batches must not starve the GPU.
    batch = 1
    while busy < seconds:
        busy += timer.time(lambda: torch.mm(a, bt), batch)
        done += batch
        batch = min(batch * 2, 64)
    return flop * done / busy, busy
