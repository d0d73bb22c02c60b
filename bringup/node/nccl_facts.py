"""What the nccl probe is asked (`Params`) and what it measured (`NcclFacts`).

Both engines fill the same facts: nccl-tests, whose output the probe parses
(probes/nccl.py), and our torch.distributed benchmark (collective/). Units follow
nccl-tests (PERFORMANCE.md): it prints time in microseconds and algbw and busbw in GB/s
with GB = 1e9 bytes; the facts are in SI, seconds and bytes per second.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

GB = "1e9"  # nccl-tests prints GB/s with GB = 1e9 bytes (PERFORMANCE.md)
US = "1e-6"  # and times in microseconds


# --- what the probe is asked ---------------------------------------------------------------

MIB = 1 << 20
GIB = 1 << 30
# What `-c 1` validation and -n/-w mean are nccl-tests' own defaults (README.md of nccl-tests).
DEFAULT_ITERS = 20
DEFAULT_WARMUP_ITERS = 5


@dataclass
class Params:
    """How to measure; suites and `bringup nccl` set these by name."""

    engine: str = "auto"  # auto: nccl-tests when found with GPUs on one node, else torch
    collectives: list[str] = field(default_factory=lambda: ["all_reduce"])
    min_bytes: int = 8 * MIB  # nccl-tests -b
    max_bytes: int = 8 * GIB  # nccl-tests -e: large enough to reach the bus plateau
    step_factor: int = 2  # nccl-tests -f
    iters: int = DEFAULT_ITERS  # timed iterations per size (nccl-tests -n)
    warmup_iters: int = DEFAULT_WARMUP_ITERS  # nccl-tests -w
    check: bool = True  # count wrong values (nccl-tests -c 1)
    ranks: int | None = None  # ranks on this node: None = one per GPU (nccl-tests -g)
    backend: str = "auto"  # torch engine: nccl with GPUs; gloo (CPU) needs `ranks`
    nccl_tests_dir: str | None = None  # where all_reduce_perf & co are; else PATH
    timeout_s: float = 1500.0  # the benchmark's own deadline: keep it under the step's
    rendezvous_timeout_s: float = 120.0  # torch: how long ranks wait for each other
    env: dict[str, str] = field(default_factory=dict)  # NCCL_*/GLOO_* for the run
    # Across nodes (set by `bringup nccl --nodes`): this node's place in the job.
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"  # where rank 0 listens for the rendezvous
    master_port: int = 0  # 0: a free port (one node only)


def run_environment(params: Params) -> dict[str, str]:
    """This process's environment plus the run's NCCL_*/GLOO_* settings."""
    env = dict(os.environ)
    env.setdefault("NCCL_DEBUG", "WARN")  # so a failure says why, in lines the parser keeps
    env.update({str(k): str(v) for k, v in params.env.items()})
    return env


# --- what was measured ------------------------------------------------------------------


@dataclass
class NcclRow:
    """One row of the result table: one message size, out-of-place then in-place."""

    size_bytes: int
    count: int
    dtype: str
    redop: str | None  # None when the column is absent or blank (alltoall)
    root: int | None  # -1 for collectives without a root; None when the column is absent
    oop_time_s: float
    oop_algbw_bytes_per_s: float
    oop_busbw_bytes_per_s: float
    oop_wrong: int | None  # wrong elements; None when not validated (N/A) or the old format
    ip_time_s: float
    ip_algbw_bytes_per_s: float
    ip_busbw_bytes_per_s: float
    ip_wrong: int | None
    # The old `error` column is the largest difference seen (a float), not a count; whether
    # it is out of bounds is in the "Out of bounds values" summary, so it is kept apart.
    oop_max_error: float | None = None
    ip_max_error: float | None = None


@dataclass
class NcclFacts:
    """What one nccl-tests run printed."""

    collective: str | None  # "all_reduce", ... None when the output does not say
    nranks: int | None
    devices: list[str] = field(default_factory=list)  # "node005 device 0 [0x18] NVIDIA H100 ..."
    version: str | None = None  # NCCL library version, "2.18.3+cuda12.2"
    rows: list[NcclRow] = field(default_factory=list)
    avg_busbw_bytes_per_s: float | None = None  # "# Avg bus bandwidth": every size, small too
    out_of_bounds: int | None = None  # "# Out of bounds values : N OK|FAILED"
    peak_busbw_bytes_per_s: float | None = None  # best row, max of in-place and out-of-place
    largest_size_busbw_bytes_per_s: float | None = None  # at the largest size measured
    errors: list[str] = field(default_factory=list)  # NCCL WARN and "Test ... failure" lines
    complete: bool = False  # the summary lines were reached
    all_zero_busbw: bool = False  # busbw 0 everywhere although data moved: 1-rank runs
    # Set by the probe; None when the facts come from a log someone sent.
    engine: str | None = None  # "nccl-tests" or "torch"
    backend: str | None = None  # the torch engine's: "nccl" on GPUs, "gloo" on CPU
    launched_ranks: int | None = None  # ranks the probe started, every node together
    nodes: int | None = None  # hosts the ranks ran on; None when the output does not say
    # The device list is trimmed (vendors print `# Rank 71 ...` alone, or ranks 0, 1, 126,
    # 127): nranks then comes from the highest rank number, and `nodes` is an estimate
    # (the ranks over the GPUs per host the device numbers show), never the hosts shown.
    devices_trimmed: bool = False
    others: list[NcclFacts] = field(default_factory=list)  # more collectives of the same run
    # False where in-place does not exist (torch's alltoall): its columns are then 0, not data.
    in_place_measured: bool = True


def summarise(facts: NcclFacts) -> None:
    """Peak, largest-size and all-zero busbw from the rows."""
    if not facts.rows:
        return
    best = [max(r.oop_busbw_bytes_per_s, r.ip_busbw_bytes_per_s) for r in facts.rows]
    facts.peak_busbw_bytes_per_s = max(best)
    largest = max(r.size_bytes for r in facts.rows)
    facts.largest_size_busbw_bytes_per_s = max(
        b for r, b in zip(facts.rows, best, strict=True) if r.size_bytes == largest
    )
    moved = any(max(r.oop_algbw_bytes_per_s, r.ip_algbw_bytes_per_s) > 0 for r in facts.rows)
    facts.all_zero_busbw = moved and max(best) == 0
