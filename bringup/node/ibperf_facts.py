"""The facts of one node's side of an `ibperf` pair: perftest runs over each rail.

A rail is one compute NIC port; rail i of one node meets rail i of its partner (NIC i to
NIC i). Each test is one `ib_write_bw` (one rail alone, or every rail at once) or one
`ib_write_lat` run; the client's output is the measurement, the server's says whether its
side took part. A test that could not run keeps why in `error` ("no answer from node02 on
port 18516 within 30 s"), never a missing row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bringup.node.fabric_facts import PerftestFacts


@dataclass
class Rail:
    """One compute rail of this node as the job chose it."""

    rail: int  # index: NIC i of this node meets NIC i of its partner
    device: str  # "mlx5_3"
    ib_port: int  # the device's port (1 on a single-port ConnectX)
    gpu: int | None = None  # the GPU at PIX/PXB of this NIC (nvidia-smi topo -m), if known
    rate_gbit_s: float | None = None  # the port's signalling rate as sysfs showed it


@dataclass
class RailTest:
    """One perftest run on one rail."""

    rail: int
    # "single" (this rail alone), "host" (alone, host memory, beside a GPU-memory "single"),
    # "all" (every rail at once), "lat" (ib_write_lat)
    mode: str
    device: str
    ib_port: int
    tcp_port: int  # the TCP port of perftest's connection exchange
    use_cuda: int | None  # the GPU whose memory the buffers were in (--use_cuda), or None
    argv: list[str] = field(default_factory=list)
    seconds: float | None = None
    result: PerftestFacts | None = None
    error: str | None = None  # why there is no result (timed out, peer did not answer, ...)

    @property
    def gbit_s(self) -> float | None:
        """The best average bandwidth, Gb/s (10^9 bits), of a bandwidth test."""
        if self.result is None or self.result.best_average_bytes_per_s is None:
            return None
        return self.result.best_average_bytes_per_s * 8 / 1e9


@dataclass
class RailCounters:
    """A rail's port error counters (ERROR_COUNTERS, sysfs) read before this side's first
    test and after its last: a count that grew did so under the rails' own traffic, which an
    idle link can hide (the fabric probe reads its counters over an idle window)."""

    rail: int
    device: str
    ib_port: int
    before: dict[str, int] = field(default_factory=dict)
    after: dict[str, int] | None = None  # None: the second reading failed (see `unread`)
    unread: str | None = None  # why a reading is missing or partial


@dataclass
class IbperfFacts:
    """What one node's side of a pair ran and measured."""

    role: str  # "server" (listens) or "client" (connects; its output is the measurement)
    peer: str  # the partner node's name
    peer_address: str | None  # the address the client connected to
    tool: str | None  # the ib_write_bw it ran
    cuda_in_help: bool | None  # `ib_write_bw --help` lists --use_cuda (a CUDA build)
    rails: list[Rail] = field(default_factory=list)
    tests: list[RailTest] = field(default_factory=list)
    counters: list[RailCounters] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
