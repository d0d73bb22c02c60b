"""The `ibperf` probe: one node's side of a pair measuring every rail with perftest.

Both nodes of a pair run this probe at once (the job is bringup/commands/ibperf_job.py,
on the pairing of `nccl --pairwise`): the server starts `ib_write_bw` listening, the client
connects to it, NIC i to NIC i. They walk the same list of tests in the same order, each
test on a TCP port of its own (`base_port` + its index), so a late or failed test can never
meet the next one:

  1. each rail alone:   ib_write_bw --ib-dev mlx5_i --ib-port P --port base+i ...
  2. with GPU memory in use, each rail alone again from host memory ("host"): a slow GPU
     path (GPUDirect, the PCIe switch) is then told from a slow wire
  3. every rail at once (one ib_write_bw per rail, concurrently): what a job sees
  4. each rail's latency: ib_write_lat

With GPUDirect RDMA ready on the node (the job reads the fabric probe's facts), the
buffers are in the memory of the GPU at PIX/PXB of that NIC (`--use_cuda=<gpu>`), when
this perftest was built with CUDA (its `--help` lists --use_cuda; Debian's is not), else
in host memory and a note says so.

Each rail's port error counters (sysfs, ERROR_COUNTERS) are read before the first test and
after the last: a link that counts errors only under load shows here, where the fabric
probe's idle window cannot see it (the job judges them: fabric.rail_counters).

Every test has a deadline on both sides. perftest's client gives up at once when nobody
listens yet, so the client tries again until `connect_timeout_s`; a peer that never
answers (down, firewalled, hung) is an error of that test naming the peer, and the tests
after it are not tried (each would wait as long). perftest's server listens on every
address of its node for the connection exchange (perftest 4.5 has no option to bind it;
`--source_ip` only chooses the client's source address).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bringup.node.fabric_facts import ERROR_COUNTERS
from bringup.node.ibperf_facts import IbperfFacts, Rail, RailCounters, RailTest
from bringup.node.parsers import perftest
from bringup.node.probes.fabric import read_counters
from bringup.node.result import ParseError, ProbeError, ProbeOutput
from bringup.node.simulated import tool_is_simulated
from bringup.node.tool import CommandResult, run, which

# The provisioning tag whose role installs perftest (bringup/fleet/provision.py ROLES).
PERFTEST_TAG = "node_tools"
DEFAULT_PORT = 18515  # perftest's own default port (`ib_write_bw --help`: -p)
# How long the client waits before asking again when the server is not listening yet.
RETRY_S = 0.5


@dataclass
class Params:
    """Parameters of the ibperf probe: the job sets them for each node of a pair."""

    role: str = ""  # "server" or "client"
    peer: str = ""  # the partner node's name (named in every error)
    peer_address: str = ""  # client: the server node's address
    rails: list[dict[str, Any]] = field(default_factory=list)  # Rail fields, in rail order
    use_cuda: bool = False  # GPUDirect RDMA ready here: buffers in the rail's GPU memory
    # Every rail again from host memory (the job sets it for both sides when either uses GPU
    # memory): the two sides' lists of tests, and so their ports, never differ.
    host_pass: bool = False
    base_port: int = DEFAULT_PORT
    size_bytes: int = 8388608  # 8 MiB messages: the wire's plateau, not the message rate
    duration_s: int = 5  # seconds each bandwidth test runs (perftest -D)
    lat_iters: int = 1000  # ib_write_lat exchanges per rail
    connect_timeout_s: float = 30.0  # the client asks again until this; the server waits it
    all_at_once: bool = True
    latency: bool = True
    timeout_s: float = 900.0  # the whole probe (its step's deadline is above it)
    sys_root: str = "/sys"  # where the rails' port counters are read (tests: a tree)


FACTS = IbperfFacts


def validate(params: Params) -> list[Rail]:
    """The rails of the parameters; ProbeError naming what is wrong."""
    if params.role not in ("server", "client"):
        raise ProbeError(f"ibperf: role must be server or client, not {params.role!r}")
    if params.role == "client" and not params.peer_address:
        raise ProbeError("ibperf: the client needs the server's address (peer_address)")
    if not 1 <= params.base_port <= 65535 - 4 * max(1, len(params.rails)):
        raise ProbeError(f"ibperf: base_port {params.base_port} leaves no room for the tests")
    if params.duration_s < 1 or params.size_bytes < 1 or params.connect_timeout_s <= 0:
        raise ProbeError("ibperf: duration_s, size_bytes and connect_timeout_s must be positive")
    try:
        rails = [Rail(**rail) for rail in params.rails]
    except TypeError as exc:
        raise ProbeError(f"ibperf: bad rail: {exc}") from None
    if not rails:
        raise ProbeError("ibperf: no rails to measure")
    return rails


def plan_tests(params: Params, rails: list[Rail], cuda: bool) -> list[list[RailTest]]:
    """The tests in order, grouped: the tests of a group run at once. Both sides of the
    pair build the same list from the parameters they share (rails, host_pass), so test k
    uses port base + k on both; `cuda` (this side's GPU memory) changes no test's place."""
    groups: list[list[RailTest]] = []
    port = params.base_port

    def test(rail: Rail, mode: str) -> RailTest:
        nonlocal port
        gpu = rail.gpu if cuda and mode in ("single", "all") else None
        made = RailTest(rail.rail, mode, rail.device, rail.ib_port, port, gpu)
        port += 1
        return made

    groups += [[test(rail, "single")] for rail in rails]
    if params.host_pass:  # the same rails from host memory: tells the GPU path from the wire
        groups += [[test(rail, "host")] for rail in rails]
    if params.all_at_once and len(rails) > 1:
        groups.append([test(rail, "all") for rail in rails])
    if params.latency:
        groups += [[test(rail, "lat")] for rail in rails]
    return groups


def argv_of(tool: str, test: RailTest, params: Params) -> list[str]:
    """The perftest command of one test; the server's has no address. Every flag is in
    `ib_write_bw --help` / `ib_write_lat --help` of perftest 4.5 (Debian), --use_cuda in a
    CUDA build's (tests/unit/test_ibperf.py checks them against the installed binary)."""
    argv = [tool, f"--ib-dev={test.device}", f"--ib-port={test.ib_port}"]
    argv += [f"--port={test.tcp_port}", "--CPU-freq"]
    if test.mode == "lat":
        argv += [f"--iters={params.lat_iters}"]
    else:
        argv += [f"--size={params.size_bytes}", f"--duration={params.duration_s}"]
        argv += ["--report_gbits"]
    if test.use_cuda is not None:
        argv += [f"--use_cuda={test.use_cuda}"]
    if params.role == "client":
        argv.append(params.peer_address)
    return argv


def _test_deadline(test: RailTest, params: Params) -> float:
    """Seconds one test may take on either side: the wait for the partner, the run, slack
    for setting up queue pairs and GPU memory."""
    run_s = 60.0 if test.mode == "lat" else params.duration_s + 30.0
    return params.connect_timeout_s + run_s


def run_test(tool: str, test: RailTest, params: Params) -> CommandResult:
    """One perftest run with its deadline; the client asks again while nobody listens."""
    test.argv = argv_of(tool, test, params)
    deadline = time.monotonic() + _test_deadline(test, params)
    started = time.monotonic()
    while True:
        left = deadline - time.monotonic()
        result = run(test.argv, max(1.0, left))
        refused = params.role == "client" and _refused(result)
        if not refused or time.monotonic() + RETRY_S >= started + params.connect_timeout_s:
            break
        time.sleep(RETRY_S)
    test.seconds = round(time.monotonic() - started, 3)
    test.error = _error(result, test, params, refused)
    if test.error is None:
        try:
            test.result = perftest.parse(result.stdout)
        except ParseError as exc:
            test.error = f"{test.device}: {exc}"
    return result


def _refused(result: CommandResult) -> bool:
    """perftest's client found nobody listening (yet): "Couldn't connect to HOST:PORT"."""
    text = result.stdout + result.stderr
    return not result.timed_out and result.returncode != 0 and "Couldn't connect" in text


def _error(result: CommandResult, test: RailTest, params: Params, refused: bool) -> str | None:
    where = f"{test.device} port {test.ib_port} (rail {test.rail}, TCP {test.tcp_port})"
    if result.timed_out:
        waited = f"{_test_deadline(test, params):g} s"
        if params.role == "client":
            return f"{where}: no answer from {params.peer} ({params.peer_address}) in {waited}"
        return f"{where}: {params.peer} did not connect or finish in {waited}"
    if refused:
        return (
            f"{where}: {params.peer} ({params.peer_address}) did not listen within "
            f"{params.connect_timeout_s:g} s"
        )
    if result.returncode != 0:
        last = (result.stderr.strip() or result.stdout.strip() or "no output").splitlines()[-1]
        return f"{where}: exited {result.returncode}: {last[:200]}"
    return None


def cuda_in_help(tool: str) -> bool | None:
    """Whether this perftest was built with CUDA: its --help lists --use_cuda."""
    result = run([tool, "--help"], 10.0)
    if result.timed_out:
        return None
    return "--use_cuda" in result.stdout + result.stderr


def collect(params: Params) -> ProbeOutput:
    """Run every test of this node's side of the pair; a test that failed says why."""
    rails = validate(params)
    bw, lat = which("ib_write_bw"), which("ib_write_lat")
    if bw is None or (params.latency and lat is None):
        missing = "ib_write_bw" if bw is None else "ib_write_lat"
        raise ProbeError(
            f"perftest is not installed: {missing} not on PATH; install it with "
            f"`bringup provision --nodes hosts.ini --tags {PERFTEST_TAG}` "
            "(or `apt-get install perftest`)"
        )
    facts = IbperfFacts(
        role=params.role,
        peer=params.peer,
        peer_address=params.peer_address or None,
        tool=bw,
        cuda_in_help=cuda_in_help(bw) if params.use_cuda else None,
        rails=rails,
    )
    cuda = params.use_cuda and bool(facts.cuda_in_help)
    if params.use_cuda and not cuda:
        facts.notes.append(
            f"{bw} was built without CUDA (--use_cuda not in its --help): buffers in host "
            "memory, the GPUDirect path not measured"
        )
    raw: dict[str, str] = {}
    facts.counters = [_first_reading(Path(params.sys_root), rail) for rail in rails]
    stopped: str | None = None
    for group in plan_tests(params, rails, cuda):
        if stopped is not None:
            for test in group:
                test.error = f"not run: {stopped}"
            facts.tests += group
            continue
        tool = lat if group[0].mode == "lat" else bw
        assert tool is not None
        results = _run_group(tool, group, params)
        facts.tests += group
        for test, result in zip(group, results, strict=True):
            raw[f"{test.mode}-{test.device}-{test.ib_port}.txt"] = result.stdout + result.stderr
        if all(_unanswered(t) for t in group):
            stopped = f"{params.peer} did not answer the earlier test ({group[0].error})"
    for counters in facts.counters:
        _second_reading(Path(params.sys_root), counters)
    raw["counters.txt"] = "".join(
        f"{c.device} port {c.ib_port} {name} {value} -> {(c.after or {}).get(name)}\n"
        for c in facts.counters
        for name, value in c.before.items()
    )
    simulated = [name for name in ("ib_write_bw",) if tool_is_simulated(bw)]
    return ProbeOutput(facts=facts, raw=raw, simulated=simulated)


def _port_dir(sys_root: Path, device: str, ib_port: int) -> Path:
    return sys_root / "class" / "infiniband" / device / "ports" / str(ib_port)


def _error_counters(sys_root: Path, device: str, ib_port: int) -> tuple[dict[str, int], str | None]:
    values, why = read_counters(_port_dir(sys_root, device, ib_port), "counters")
    return {k: v for k, v in values.items() if k in ERROR_COUNTERS}, why


def _first_reading(sys_root: Path, rail: Rail) -> RailCounters:
    before, why = _error_counters(sys_root, rail.device, rail.ib_port)
    return RailCounters(rail.rail, rail.device, rail.ib_port, before, None, why)


def _second_reading(sys_root: Path, counters: RailCounters) -> None:
    if not counters.before:
        return  # nothing to compare with: `unread` says why
    after, why = _error_counters(sys_root, counters.device, counters.ib_port)
    counters.after = after or None
    if why:
        counters.unread = why if counters.unread is None else f"{counters.unread}; {why}"


def _unanswered(test: RailTest) -> bool:
    error = test.error or ""
    return "no answer from" in error or "did not listen" in error or "did not connect" in error


def _run_group(tool: str, group: list[RailTest], params: Params) -> list[CommandResult]:
    """The tests of one group at once (one thread each: every one is a process)."""
    if len(group) == 1:
        return [run_test(tool, group[0], params)]
    results: list[CommandResult | None] = [None] * len(group)

    def one(index: int) -> None:
        results[index] = run_test(tool, group[index], params)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(group))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [r if r is not None else CommandResult([], -1, "", "no result") for r in results]
