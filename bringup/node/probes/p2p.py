"""The `p2p` probe: peer-to-peer copy bandwidth between every pair of GPUs, both ways.

For each pair (a, b): a -> b alone, b -> a alone, then both at once (bidirectional, the
sum), as CUDA's p2pBandwidthLatencyTest measures them (docs/reference.md#nvlink). With
torch: `dst.copy_(src)` between two GPUs is a peer copy over NVLink where the pair has
it (over PCIe otherwise). torch makes a cross-device copy wait on the current streams of
both devices, and current streams are per thread, so each direction runs in a thread of
its own with streams of its own: the two directions overlap as they would in a job.

Timing is the wall clock from a common start (a barrier) to the end of the last copy,
after warm-up copies. Without CUDA (`device: cpu`, tests only) two host buffers stand in
for each "GPU", so the same code runs on any machine. torch is imported lazily.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from bringup.node.result import ProbeError, ProbeOutput


@dataclass
class Params:
    size_bytes: int = 256 * 2**20  # per copy: far above any cache, well under HBM size
    warmup: int = 3
    iterations: int = 20
    device: str = "cuda"  # "cpu": host buffers stand in for GPUs (tests)
    cpu_devices: int = 2  # with device "cpu": how many stand-ins


@dataclass
class PairBandwidth:
    a: int
    b: int
    peer_access: bool  # torch.cuda.can_device_access_peer(a, b): a direct path exists
    a_to_b_bytes_per_s: float | None = None
    b_to_a_bytes_per_s: float | None = None
    bidirectional_bytes_per_s: float | None = None  # both at once, the two directions summed
    error: str | None = None


@dataclass
class P2pFacts:
    device: str  # "cuda" or "cpu"
    torch_version: str
    gpus: list[str] = field(default_factory=list)  # name per index
    size_bytes: int = 0
    pairs: list[PairBandwidth] = field(default_factory=list)


FACTS = P2pFacts


def collect(params: Params) -> ProbeOutput:
    """Every pair of GPUs, one pair at a time (pairs must not share the links measured)."""
    try:
        import torch
    except ImportError:
        raise ProbeError("torch not installed: the p2p probe needs PyTorch on the node") from None
    if params.device not in ("cuda", "cpu"):
        raise ProbeError(f"device must be cuda or cpu, not {params.device!r}")
    if params.device == "cuda":
        if not torch.cuda.is_available():
            raise ProbeError("torch sees no CUDA GPU: peer-to-peer copies need GPUs")
        count = torch.cuda.device_count()
        names = [str(torch.cuda.get_device_name(i)) for i in range(count)]
    else:
        count = params.cpu_devices
        names = ["cpu"] * count
    facts = P2pFacts(params.device, str(torch.__version__), names, params.size_bytes)
    for a, b in itertools.combinations(range(count), 2):
        try:
            facts.pairs.append(measure_pair(torch, params, a, b))
        except Exception as exc:  # one pair failing must not lose the others
            facts.pairs.append(PairBandwidth(a, b, False, error=_one_line(exc)))
        finally:
            if params.device == "cuda":
                torch.cuda.empty_cache()
    if facts.pairs and all(p.error for p in facts.pairs):
        raise ProbeError(f"every peer copy failed: {facts.pairs[0].error}")
    return ProbeOutput(facts)


def measure_pair(torch: Any, params: Params, a: int, b: int) -> PairBandwidth:
    cuda = params.device == "cuda"
    dev_a = torch.device(f"cuda:{a}" if cuda else "cpu")
    dev_b = torch.device(f"cuda:{b}" if cuda else "cpu")
    peer = bool(torch.cuda.can_device_access_peer(a, b)) if cuda else False
    n = params.size_bytes
    on_a = torch.empty(n, dtype=torch.uint8, device=dev_a)
    on_b = torch.empty(n, dtype=torch.uint8, device=dev_b)
    to_a = torch.empty(n, dtype=torch.uint8, device=dev_a)
    to_b = torch.empty(n, dtype=torch.uint8, device=dev_b)
    result = PairBandwidth(a, b, peer)
    result.a_to_b_bytes_per_s = _timed(torch, [(on_a, to_b)], params)
    result.b_to_a_bytes_per_s = _timed(torch, [(on_b, to_a)], params)
    result.bidirectional_bytes_per_s = _timed(torch, [(on_a, to_b), (on_b, to_a)], params)
    return result


def _timed(torch: Any, copies: list[tuple[Any, Any]], params: Params) -> float:
    """Bytes per second of the copies run together, each direction in its own thread: from
    the first start after the common barrier to the last copy done."""
    barrier = threading.Barrier(len(copies))
    spans: list[tuple[float, float]] = []
    errors: list[BaseException] = []

    def direction(src: Any, dst: Any) -> None:
        try:
            with _own_streams(torch, src, dst) as done:
                for _ in range(params.warmup):
                    dst.copy_(src, non_blocking=True)
                done()
                barrier.wait()
                start = time.perf_counter()
                for _ in range(params.iterations):
                    dst.copy_(src, non_blocking=True)
                done()
                spans.append((start, time.perf_counter()))
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=direction, args=pair) for pair in copies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    seconds = max(end for _, end in spans) - min(start for start, _ in spans)
    return len(copies) * params.iterations * params.size_bytes / seconds


@contextlib.contextmanager
def _own_streams(torch: Any, src: Any, dst: Any) -> Any:
    """This thread's own stream on the source and destination GPUs; yields a `sync()`."""
    if src.device.type != "cuda":
        yield lambda: None
        return
    streams = [torch.cuda.Stream(device=src.device), torch.cuda.Stream(device=dst.device)]
    with torch.cuda.stream(streams[0]), torch.cuda.stream(streams[1]):
        yield lambda: [s.synchronize() for s in streams]


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]
