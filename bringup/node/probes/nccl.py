"""The `nccl` probe: collective bus bandwidth, measured the way nccl-tests measures it.

Two engines fill the same facts, chosen automatically (`engine="auto"`):
  - nccl-tests (`all_reduce_perf` and friends, on PATH or in `nccl_tests_dir`), run with
    `-b 8M -e 8G -f 2 -g <gpus> -c 1` and parsed here;
  - our own torch.distributed benchmark (`collective/`) when nccl-tests is absent, or
    across nodes, or on CPU with gloo.

The parser copes with every real nccl-tests format seen (tests/fixtures/nccl). Units follow
nccl-tests (PERFORMANCE.md): time in microseconds, algbw and busbw in GB/s with GB = 1e9
bytes. Facts are in SI: seconds and bytes per second. Standard library only: runs on nodes.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import sys
from decimal import Decimal, DecimalException
from pathlib import Path

from bringup.node import progress
from bringup.node.collective import launcher
from bringup.node.nccl_facts import (
    GB,
    US,
    NcclFacts,
    NcclRow,
    Params,
    run_environment,
    summarise,
)
from bringup.node.result import ParseError, ProbeError, ProbeOutput
from bringup.node.tool import CommandResult, run, which

COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "alltoall",
    "broadcast",
    "reduce_scatter",
    "reduce",
    "sendrecv",
    "scatter",
    "gather",
    "hypercube",
)


FACTS = NcclFacts

# Launcher prefixes: `srun -l` (" 0: ") and Open MPI --tag-output ("[1,0]<stdout>:").
_PREFIX = re.compile(r"^(?:\s*[0-9]+:(?=\s|$)|\[[0-9]+,[0-9]+\]<std(?:out|err)>:)\s?", re.ASCII)
_NUMBER = r"[0-9]+(?:\.[0-9]*)?"
# size count type [redop] [root] then 2 x (time algbw busbw wrong|error).
_ROW = re.compile(
    rf"^(?P<size>[0-9]+)\s+(?P<count>[0-9]+)\s+(?P<dtype>[A-Za-z][A-Za-z0-9_]*)"
    rf"(?P<middle>(?:\s+\S+){{0,2}}?)"
    rf"\s+(?P<ot>{_NUMBER})\s+(?P<oa>{_NUMBER})\s+(?P<ob>{_NUMBER})\s+(?P<ow>\S+)"
    rf"\s+(?P<it>{_NUMBER})\s+(?P<ia>{_NUMBER})\s+(?P<ib>{_NUMBER})\s+(?P<iw>\S+)$",
    re.ASCII,
)
_WRONG_COUNT = re.compile(r"^[0-9]+$", re.ASCII)
_MAX_ERROR = re.compile(r"^[0-9]+(?:\.[0-9]*)?[eE][+-]?[0-9]+\*?$", re.ASCII)
_RANK = re.compile(
    r"^#\s*Rank\s+(?P<rank>[0-9]+)\s+(?:Group\s+[0-9]+\s+)?Pid\s+[0-9]+\s+on\s+(?P<host>\S+)\s+"
    r"device\s+(?P<device>[0-9]+)\s+\[(?P<bus>[^\]]*)\]\s+(?P<name>.+)$",
    re.ASCII,
)
_AVG = re.compile(
    rf"^#\s*Avg bus bandwidth\s*:\s*(?P<value>{_NUMBER}(?:[eE][+-]?[0-9]+)?)", re.ASCII
)
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(?P<count>[0-9]+)", re.ASCII)
_ERROR = re.compile(r"NCCL WARN|Test (?:NCCL|CUDA) failure")
_BINARY = re.compile(r"\b(?P<name>[a-z_]+)_perf(?:_mpi)?\b", re.ASCII)
_NCCL_VERSION = re.compile(r"NCCL version (?P<version>\S+)")
_LIBRARY_CODE = re.compile(r"nccl-library=(?P<code>[0-9]+)", re.ASCII)
_NRANKS = re.compile(r"\bnranks (?P<n>[0-9]+)", re.ASCII)
_HEADER = re.compile(r"^#\s*(?:nThread|Using devices|Collective test starting|nccl-tests version)")


def detect(text: str) -> bool:
    """True when the text looks like nccl-tests output."""
    return any(
        _HEADER.match(line) or _AVG.match(line) or _ROW.match(line)
        for line in (_strip_prefix(raw).strip() for raw in text.splitlines())
    )


def parse_nccl_tests(text: str) -> NcclFacts:
    """The facts of one nccl-tests run, from its stdout (and stderr, if it was merged)."""
    facts = NcclFacts(collective=None, nranks=None)
    seen_header = False
    ranks_reported: list[int] = []
    shown: dict[int, tuple[str, int]] = {}  # rank number -> (host, device) of its line
    for raw in text.splitlines():
        line = _strip_prefix(raw).strip()
        if not line:
            continue
        if _ERROR.search(line):
            facts.errors.append(line)
            continue
        if row := _parse_row(line):
            facts.rows.append(row)
            continue
        seen_header = seen_header or bool(_HEADER.match(line))
        _read_other_line(line, facts, ranks_reported, shown)
    if not facts.rows and not facts.errors and not seen_header:
        raise ParseError("no nccl-tests result rows or errors found")
    _count_ranks(facts, shown, ranks_reported)
    if facts.collective is None:
        facts.collective = infer_collective(facts.rows, facts.nranks)
    summarise(facts)
    return facts


def _strip_prefix(line: str) -> str:
    """The line without a launcher's rank prefix."""
    return _PREFIX.sub("", line, count=1)


def _count_ranks(
    facts: NcclFacts, shown: dict[int, tuple[str, int]], ranks_reported: list[int]
) -> None:
    """Ranks and hosts from the device lines: the highest rank number (or NCCL's own
    `nranks`) counts the ranks, not the lines shown, since vendors trim the list. A trimmed
    list leaves the hosts unknown; they are estimated as the ranks over the GPUs per host
    its device numbers show (rank 71 on device 3: at least 4 GPUs a host)."""
    counted = max(shown) + 1 if shown else None
    nranks = max([n for n in (counted, *ranks_reported) if n is not None], default=None)
    facts.nranks = nranks
    if not shown or nranks is None:
        return
    hosts = len({host for host, _ in shown.values()})
    facts.devices_trimmed = len(shown) < nranks
    if not facts.devices_trimmed:
        facts.nodes = hosts
        return
    per_host = max(device for _, device in shown.values()) + 1
    facts.nodes = max(hosts, -(-nranks // per_host))


def _read_other_line(
    line: str,
    facts: NcclFacts,
    ranks_reported: list[int],
    shown: dict[int, tuple[str, int]],
) -> None:
    """Take what a non-row line says: devices, summary, version, collective name."""
    if match := _RANK.match(line):
        facts.devices.append(
            f"{match['host']} device {match['device']} [{match['bus']}] {match['name'].strip()}"
        )
        shown[int(match["rank"])] = (match["host"], int(match["device"]))
    elif match := _AVG.match(line):
        facts.avg_busbw_bytes_per_s = _scaled(match["value"], GB)
        facts.complete = True
    elif match := _OUT_OF_BOUNDS.match(line):
        facts.out_of_bounds = int(match["count"])
    elif match := _NCCL_VERSION.search(line):
        facts.version = match["version"]
    elif (match := _LIBRARY_CODE.search(line)) and facts.version is None:
        facts.version = _version_from_code(int(match["code"]))
    if match := _NRANKS.search(line):
        ranks_reported.append(int(match["n"]))
    match = _BINARY.search(line)
    if facts.collective is None and match and match["name"] in COLLECTIVES:
        facts.collective = match["name"]


def _parse_row(line: str) -> NcclRow | None:
    """One result row, or None when the line is not one."""
    match = _ROW.match(line)
    if match is None:
        return None
    redop, root = _redop_root(match["middle"].split())
    oop_wrong, oop_error = _wrong(match["ow"])
    ip_wrong, ip_error = _wrong(match["iw"])
    return NcclRow(
        size_bytes=int(match["size"]),
        count=int(match["count"]),
        dtype=match["dtype"],
        redop=redop,
        root=root,
        oop_time_s=_scaled(match["ot"], US),
        oop_algbw_bytes_per_s=_scaled(match["oa"], GB),
        oop_busbw_bytes_per_s=_scaled(match["ob"], GB),
        oop_wrong=oop_wrong,
        ip_time_s=_scaled(match["it"], US),
        ip_algbw_bytes_per_s=_scaled(match["ia"], GB),
        ip_busbw_bytes_per_s=_scaled(match["ib"], GB),
        ip_wrong=ip_wrong,
        oop_max_error=oop_error,
        ip_max_error=ip_error,
    )


def _redop_root(middle: list[str]) -> tuple[str | None, int | None]:
    """The optional redop and root columns (absent in old output, redop blank for alltoall)."""
    redop: str | None = None
    root: int | None = None
    for token in middle:
        if re.fullmatch(r"-?[0-9]+", token, re.ASCII):
            root = int(token)
        else:
            redop = token
    return redop, root


def _wrong(token: str) -> tuple[int | None, float | None]:
    """(wrong-element count, old-format max error) from the #wrong/error cell."""
    if _WRONG_COUNT.match(token):
        return int(token), None
    if _MAX_ERROR.match(token):
        # A trailing "*" is how some old versions flagged an out-of-bounds row.
        return (1 if token.endswith("*") else None), _scaled(token.rstrip("*"), "1")
    return None, None  # "N/A": validation was off (-c 0)


def _scaled(text: str, unit: str) -> float:
    """A printed number times its unit, computed in decimal so 68.4048 GB/s is 68404800000.0."""
    try:
        return float(Decimal(text) * Decimal(unit))
    except DecimalException:
        raise ParseError(f"not a number: {text!r}") from None


def _version_from_code(code: int) -> str:
    """NCCL_VERSION_CODE (major*10000 + minor*100 + patch since 2.9) as "2.26.6"."""
    return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"


def infer_collective(rows: list[NcclRow], nranks: int | None) -> str | None:
    """ "all_reduce" when busbw/algbw equals all-reduce's 2(n-1)/n, else None.

    Old output does not name the test. Only all-reduce has that bus factor; all-gather,
    reduce-scatter and alltoall share (n-1)/n and cannot be told apart (PERFORMANCE.md).
    With 2 ranks 2(n-1)/n = 1 is also broadcast's factor, so it takes n > 2.
    """
    if nranks is None or nranks <= 2:
        return None
    big = [r for r in rows if r.oop_algbw_bytes_per_s >= 1e9]
    if not big:
        return None
    row = max(big, key=lambda r: r.size_bytes)
    factor = row.oop_busbw_bytes_per_s / row.oop_algbw_bytes_per_s
    expected = 2 * (nranks - 1) / nranks
    # 2% covers the 2-decimal rounding of the printed GB/s values.
    return "all_reduce" if abs(factor - expected) <= 0.02 * expected else None


# --- the probe ---------------------------------------------------------------------------

ENGINES = ("auto", "nccl-tests", "torch")
BACKENDS = ("auto", "nccl", "gloo")


def collect(params: Params) -> ProbeOutput:
    """Measure each requested collective with the engine that fits this node."""
    validate(params)
    gpus = count_gpus()
    engine = choose_engine(params, gpus)
    if engine == "nccl-tests":
        return _collect_nccl_tests(params, gpus)
    return launcher.collect(params, gpus)


def validate(params: Params) -> None:
    """A ProbeError naming the first parameter that cannot work."""
    problems = [
        (params.engine not in ENGINES, f"engine {params.engine!r} is not one of {ENGINES}"),
        (params.backend not in BACKENDS, f"backend {params.backend!r} is not one of {BACKENDS}"),
        (not params.collectives, "collectives is empty"),
        (params.min_bytes < 0 or params.max_bytes < params.min_bytes, "need 0 <= min <= max"),
        (params.step_factor < 2, "step_factor must be >= 2"),
        (params.iters < 1 or params.warmup_iters < 0, "need iters >= 1, warmup_iters >= 0"),
        (params.ranks is not None and params.ranks < 1, "ranks must be >= 1"),
        (params.nnodes < 1 or not 0 <= params.node_rank < params.nnodes, "bad node_rank"),
    ]
    unknown = [c for c in params.collectives if c not in COLLECTIVES]
    problems.append((bool(unknown), f"unknown collective {unknown[:1]}; known: {COLLECTIVES}"))
    for bad, message in problems:
        if bad:
            raise ProbeError(f"nccl probe: {message}")


def count_gpus() -> int:
    """NVIDIA GPUs this process may use: `nvidia-smi -L`, else the device nodes."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    if which("nvidia-smi"):
        listed = run(["nvidia-smi", "-L"], timeout_s=30)
        if listed.returncode == 0:
            return sum(1 for line in listed.stdout.splitlines() if line.startswith("GPU "))
    return len(glob.glob("/dev/nvidia[0-9]*"))


def nccl_tests_binary(collective: str, directory: str | None) -> str | None:
    """Path of `<collective>_perf`, in `directory` or on PATH."""
    name = f"{collective}_perf"
    if directory:
        path = Path(directory) / name
        return str(path) if os.access(path, os.X_OK) else None
    return which(name)


def torch_installed() -> bool:
    """True when `import torch` would work here (without paying for the import)."""
    return importlib.util.find_spec("torch") is not None


def choose_engine(params: Params, gpus: int) -> str:
    """nccl-tests on a GPU node that has it (one node); otherwise our torch benchmark."""
    have_binaries = all(nccl_tests_binary(c, params.nccl_tests_dir) for c in params.collectives)
    if params.engine == "nccl-tests":
        if params.nnodes > 1:
            raise ProbeError("engine nccl-tests runs on one node; across nodes use engine torch")
        if not have_binaries:
            missing = next(
                f"{c}_perf"
                for c in params.collectives
                if not nccl_tests_binary(c, params.nccl_tests_dir)
            )
            raise ProbeError(f"nccl-tests binary {missing} not found (PATH or nccl_tests_dir)")
        return "nccl-tests"
    if params.engine == "auto" and params.nnodes == 1 and gpus > 0 and have_binaries:
        return "nccl-tests"
    if not torch_installed():
        raise ProbeError(
            "neither nccl-tests (all_reduce_perf on PATH or nccl_tests_dir) nor torch "
            f"(`{os.path.basename(sys.executable)} -c 'import torch'`) is available on this node"
        )
    return "torch"


def nccl_tests_argv(binary: str, params: Params, gpus: int) -> list[str]:
    """The nccl-tests command line: the size sweep, one process driving every GPU."""
    return [
        binary,
        *("-b", str(params.min_bytes), "-e", str(params.max_bytes), "-f", str(params.step_factor)),
        *("-g", str(gpus), "-c", "1" if params.check else "0"),
        *("-n", str(params.iters), "-w", str(params.warmup_iters)),
    ]


def _collect_nccl_tests(params: Params, gpus: int) -> ProbeOutput:
    """Run each collective's `_perf` binary in turn; keep partial rows of a run that died."""
    ranks = params.ranks or gpus
    raw: dict[str, str] = {}
    runs: list[NcclFacts] = []
    for index, collective in enumerate(params.collectives, start=1):
        phase = f"{collective}_perf on {ranks} GPUs"
        progress.report(phase=phase, index=index, of=len(params.collectives))
        binary = nccl_tests_binary(collective, params.nccl_tests_dir)
        assert binary is not None  # choose_engine made sure
        result = run(
            nccl_tests_argv(binary, params, ranks), params.timeout_s, run_environment(params)
        )
        raw[f"{collective}_perf.txt"] = _transcript(result)
        runs.append(facts_from_run(result, collective, params.timeout_s, raw))
    main, *others = runs
    main.others = others
    return ProbeOutput(facts=main, raw=raw)


def _transcript(result: CommandResult) -> str:
    """What the binary printed, with its command line, as the raw output to keep."""
    head = "# command: " + " ".join(result.argv)
    return f"{head}\n{result.stdout}\n# stderr:\n{result.stderr}"


def facts_from_run(
    result: CommandResult, collective: str, timeout_s: float, raw: dict[str, str]
) -> NcclFacts:
    """Facts of one nccl-tests run, marked with how it ended (timeout, exit code)."""
    try:
        facts = parse_nccl_tests(result.stdout + "\n" + result.stderr)
    except ParseError:
        if result.returncode == 0:
            raise ProbeError(
                f"{collective}_perf printed no result table (see raw output)", raw
            ) from None
        facts = NcclFacts(collective=None, nranks=None)
    facts.collective = facts.collective or collective
    facts.engine = "nccl-tests"
    facts.launched_ranks = int(result.argv[result.argv.index("-g") + 1])
    if result.timed_out:
        facts.complete = False
        facts.errors.append(f"{collective}_perf timed out after {timeout_s:g} s")
    elif result.returncode != 0:
        last = (result.stderr.strip().splitlines() or [""])[-1]
        facts.errors.append(f"{collective}_perf exited {result.returncode}: {last}".rstrip(": "))
    return facts
