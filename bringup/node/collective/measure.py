"""What the torch engine measures, as nccl-tests measures it (PERFORMANCE.md). Pure.

Size = the larger of a rank's send and receive buffers, time = the mean over ranks of the
time per iteration, algbw = size / time, busbw = algbw x the collective's bus factor,
GB = 1e9. The launcher and every worker read the same `Plan`.
"""

from __future__ import annotations

from dataclasses import dataclass

from bringup.node.nccl_facts import GB, US, NcclFacts, NcclRow

ELEMENT_BYTES = 4  # float32, nccl-tests' default type ("float")
SUPPORTED = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast")


@dataclass
class Plan:
    """What every worker runs: passed to it as JSON on its command line."""

    collectives: list[str]
    sizes: list[int]
    iters: int
    warmup_iters: int
    check: bool
    backend: str  # "nccl" or "gloo"
    rendezvous_timeout_s: float


def bus_factor(collective: str, nranks: int) -> float:
    """busbw / algbw of a collective on n ranks (nccl-tests PERFORMANCE.md)."""
    n = nranks
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    if collective == "broadcast":
        return 1.0
    raise ValueError(f"no bus factor for {collective!r}")


def in_place_exists(collective: str) -> bool:
    """torch defines no in-place all-to-all (gloo returns wrong values when asked for one)."""
    return collective != "alltoall"


def sweep(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """Message sizes as nccl-tests -b/-e/-f: min, min*f, ... up to max."""
    sizes = []
    size = max(min_bytes, ELEMENT_BYTES)
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    return sizes


@dataclass(frozen=True)
class Layout:
    """Buffers of one size: nccl-tests' "count" column and the bytes it reports."""

    count: int  # elements per rank in the column nccl-tests prints
    size_bytes: int  # the larger of send and receive buffer of one rank


def layout(collective: str, size_bytes: int, nranks: int) -> Layout:
    """The buffers nccl-tests would use for `size_bytes` (its *GetCollByteCount)."""
    elements = size_bytes // ELEMENT_BYTES
    if collective in ("all_reduce", "broadcast"):
        return Layout(elements, elements * ELEMENT_BYTES)
    per_rank = elements // nranks  # all_gather, reduce_scatter, alltoall: a chunk per rank
    return Layout(per_rank, per_rank * nranks * ELEMENT_BYTES)


def make_row(
    collective: str,
    size: Layout,
    nranks: int,
    times_s: tuple[float, float],
    wrong: tuple[int | None, int | None],
) -> NcclRow:
    """One result row from measured times (out-of-place, in-place): algbw, busbw."""
    factor = bus_factor(collective, nranks)

    def algbw(time_s: float) -> float:
        return size.size_bytes / time_s if time_s > 0 else 0.0

    oop, ip = times_s
    return NcclRow(
        size_bytes=size.size_bytes,
        count=size.count,
        dtype="float",
        redop="sum" if collective in ("all_reduce", "reduce_scatter") else "none",
        root=0 if collective == "broadcast" else -1,
        oop_time_s=oop,
        oop_algbw_bytes_per_s=algbw(oop),
        oop_busbw_bytes_per_s=algbw(oop) * factor,
        oop_wrong=wrong[0],
        ip_time_s=ip,
        ip_algbw_bytes_per_s=algbw(ip),
        ip_busbw_bytes_per_s=algbw(ip) * factor,
        ip_wrong=wrong[1],
    )


def render_table(facts: NcclFacts) -> str:
    """The rows as nccl-tests prints them, so people (and `bringup inspect`) can read them."""
    lines = [
        f"# torch.distributed engine of bringup, backend {facts.backend}, "
        f"{facts.collective}_perf equivalent, nranks {facts.nranks}",
        *(f"#  Rank {i} on {d}" for i, d in enumerate(facts.devices)),
        "#",
        "#                                                              out-of-place"
        "                       in-place",
        "#       size         count      type   redop    root     time   algbw   busbw"
        " #wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
        "            (us)  (GB/s)  (GB/s)",
    ]
    gb, us = float(GB), float(US)
    for r in facts.rows:
        cells = [f"{r.size_bytes:12d}", f"{r.count:12d}", f"{r.dtype:>8}", f"{r.redop:>7}"]
        cells.append(f"{r.root:7d}")
        cases = [(r.oop_time_s, r.oop_algbw_bytes_per_s, r.oop_busbw_bytes_per_s, r.oop_wrong)]
        if facts.in_place_measured:
            cases.append((r.ip_time_s, r.ip_algbw_bytes_per_s, r.ip_busbw_bytes_per_s, r.ip_wrong))
        for t, a, b, w in cases:
            cells += [f"{t / us:8.1f}", f"{a / gb:7.2f}", f"{b / gb:7.2f}"]
            cells.append(f"{'N/A' if w is None else w:>6}")
        if not facts.in_place_measured:
            cells.append("  (no in-place form)")
        lines.append(" ".join(cells))
    if facts.complete:
        lines.append(f"# Out of bounds values : {facts.out_of_bounds or 0} OK")
        lines.append(f"# Avg bus bandwidth    : {(facts.avg_busbw_bytes_per_s or 0) / gb:.4g}")
    lines.extend(f"# error: {e}" for e in facts.errors)
    return "\n".join(lines) + "\n"


# Passing device_id to init_process_group was reported to hang NCCL at random on torch 2.6
# (pytorch/pytorch#153960, reproduced on 2.6.0); DeepSpeed's comm/torch.py leaves it out
# for 2.6.0 < torch < 2.7.1. Here the whole range from 2.6.0 up to 2.7.1 is left out.
_DEVICE_ID_UNSAFE = ((2, 6, 0), (2, 7, 1))  # [from, to)


def device_id_safe(torch_version: str) -> bool:
    """Whether to pass device_id to init_process_group on this torch: it exists from 2.3 on,
    and is left out from 2.6.0 up to (not including) 2.7.1, where it hangs."""
    parts = []
    for piece in torch_version.split("+", 1)[0].split(".")[:3]:
        digits = ""
        for char in piece:
            if not (char.isascii() and char.isdigit()):
                break
            digits += char
        if not digits:
            break
        parts.append(int(digits))
    release = tuple(parts + [0] * (3 - len(parts)))
    if release < (2, 3, 0):
        return False
    low, high = _DEVICE_ID_UNSAFE
    return not low <= release < high
