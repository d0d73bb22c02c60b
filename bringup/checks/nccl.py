"""Checks of collective results (nccl-tests or the torch engine): did the run work, were the
values right, is the bus fast.

Bus bandwidth is judged on large messages only (>= 1 GiB): small ones measure latency, and
nccl-tests' own "Avg bus bandwidth" averages every size, small ones included
(docs/reference.md#nccl-bus-bandwidth), so it is shown but never judged.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from bringup.checks import Check, finding, has_profile
from bringup.findings import Finding, Status
from bringup.node.nccl_facts import NcclFacts, NcclRow
from bringup.profile import Profile

CHECK = "nccl.allreduce_busbw"
GB = 1e9  # GB/s as nccl-tests prints it
LARGE_BYTES = 1 << 30  # "large messages": where busbw reaches its plateau


def judge_allreduce_busbw(facts: NcclFacts, profile: Profile) -> list[Finding]:
    """nccl.allreduce_busbw: the run worked, its values were right, its busbw meets the floor."""
    others = [f for other in facts.others for f in _other_collective(other)]
    if not facts.complete or not facts.rows:
        return [_died(facts), *others]
    if facts.all_zero_busbw:
        return [_single_rank(facts) if facts.launched_ranks == 1 else _all_zero(), *others]
    findings = _validation(facts)
    findings.extend(others)
    if not has_profile(profile):
        findings.append(_unjudged(facts))
    elif facts.backend == "gloo":
        findings.append(_not_nccl(facts, profile))
    else:
        findings.append(_bandwidth(facts, profile))
    return findings


def _not_nccl(facts: NcclFacts, profile: Profile) -> Finding:
    """ERROR: a gloo collective (the CPU and its sockets) under a GPU profile.

    It checks the machinery (ranks meet, values right), but it is no NCCL measurement:
    the bus bandwidth the profile requires of its GPUs was never measured, so the run must
    not be accepted, whatever floor the job's rank count has or lacks."""
    return finding(
        CHECK,
        Status.ERROR,
        f"ran on gloo/CPU, not NCCL: the torch engine's {facts.collective or 'collective'}"
        f"{_over(facts)} measured the CPU and its sockets (peak busbw "
        f"{_gb(facts.peak_busbw_bytes_per_s)} GB/s), not the GPUs' bus; the {profile.name} "
        "profile's NCCL bandwidth is not measured",
        action="run `bringup nccl` on the GPUs with NCCL (nccl-tests, or --backend nccl); "
        "gloo checks only that the ranks meet and compute right",
    )


def _unjudged(facts: NcclFacts) -> Finding:
    """SKIP: no profile fits the GPUs, so no floor; the run's correctness was judged."""
    return finding(
        CHECK,
        Status.SKIP,
        f"no profile fits these GPUs: busbw not judged (peak "
        f"{_gb(facts.peak_busbw_bytes_per_s)} GB/s{_over(facts)}); its values were checked",
    )


def _over(facts: NcclFacts) -> str:
    """ " over 8 ranks", or nothing where the output does not say."""
    ranks = facts.nranks or facts.launched_ranks
    return f" over {ranks} ranks" if ranks else ""


def _other_collective(facts: NcclFacts) -> list[Finding]:
    """A further collective of the same run (all_gather, ...): did it run, were values right."""
    if not facts.complete or not facts.rows:
        return [_died(facts)]
    return _validation(facts)


def _engine(facts: NcclFacts) -> str:
    """Who measured, in messages: nccl-tests, or our torch engine and its backend."""
    if facts.engine == "torch":
        return f"the torch engine ({facts.backend}, {facts.collective})"
    return "nccl-tests"


def _single_rank(facts: NcclFacts) -> Finding:
    """SKIP: one GPU has no bus to measure (all-reduce's bus factor 2(n-1)/n is 0)."""
    return finding(
        CHECK,
        Status.SKIP,
        f"one rank only: {facts.collective} moves no data between GPUs (bus factor 0), so there "
        f"is no bus bandwidth to judge; {len(facts.rows)} sizes ran without error",
    )


def _died(facts: NcclFacts) -> Finding:
    """ERROR: the run never reached its summary (or had no rows); say why in NCCL's words."""
    if facts.errors:
        reason = first_error(facts.errors)
        more = f" (and {len(facts.errors) - 1} more error lines)" if len(facts.errors) > 1 else ""
        message = f"{_engine(facts)} died after {len(facts.rows)} result rows: {reason}{more}"
        action = "fix the error above (rerun with NCCL_DEBUG=INFO for details), then rerun"
    elif facts.complete:
        message = f"{_engine(facts)} printed its summary but no result rows"
        action = "read the raw output: the size range or the launch was wrong; rerun"
    else:
        message = f"{_engine(facts)} output ends after {len(facts.rows)} rows, before its summary"
        action = "the run was killed or timed out: read its raw output, then rerun"
    return finding(CHECK, Status.ERROR, message, action=action)


def first_error(errors: list[str]) -> str:
    """The most telling error line: an NCCL WARN's text beats a "Test failure" line."""
    for line in errors:
        if "NCCL WARN" in line:
            return " ".join(line.split("NCCL WARN", 1)[1].split())
    return " ".join(errors[0].split())


def _all_zero() -> Finding:
    """ERROR: every rank ran alone (busbw factor 0), so the bus was never measured."""
    return finding(
        CHECK,
        Status.ERROR,
        "busbw is 0 at every size although data moved: each process ran as its own 1-rank "
        "job (nccl-tests built without MPI but launched under mpirun)",
        action="rebuild nccl-tests with `make MPI=1`, or launch one process with -g N",
    )


def _validation(facts: NcclFacts) -> list[Finding]:
    """FAIL when nccl-tests found wrong values; nothing when it found none or did not check."""
    wrong_rows = [r for r in facts.rows if (r.oop_wrong or 0) > 0 or (r.ip_wrong or 0) > 0]
    out_of_bounds = facts.out_of_bounds or 0
    if not wrong_rows and out_of_bounds == 0:
        return []
    # Old output has no count per row, only the largest error: name the rows where it is > 0.
    suspect = wrong_rows or [
        r for r in facts.rows if (r.oop_max_error or 0) > 0 or (r.ip_max_error or 0) > 0
    ]
    sizes = ", ".join(size_text(r.size_bytes) for r in suspect) or "not shown"
    return [
        finding(
            CHECK,
            Status.FAIL,
            f"{facts.collective or 'the collective'} returned wrong values: "
            f"{out_of_bounds} out of bounds, {len(wrong_rows)} rows with #wrong > 0 "
            f"(at sizes: {sizes})",
            value=max(out_of_bounds, len(wrong_rows)),
            expected="0",
            unit="wrong values",
            action="data corruption: run `dcgmi diag -r 3`, look for Xid/ECC/row-remap errors "
            "on every GPU of the run, and rerun before trusting these nodes",
        )
    ]


def _bandwidth(facts: NcclFacts, profile: Profile) -> Finding:
    """Judge all-reduce busbw on large messages against the profile's floor."""
    if facts.collective != "all_reduce":
        what = facts.collective or "a collective the output does not name"
        return finding(
            CHECK,
            Status.SKIP,
            f"no floor for {what} in the profile; peak busbw "
            f"{_gb(facts.peak_busbw_bytes_per_s)} GB/s",
        )
    floor = allreduce_floor(facts, profile)
    if floor.gb_s is None:
        return finding(
            CHECK,
            Status.SKIP,
            f"{_no_floor(facts, floor)}; peak busbw {_gb(facts.peak_busbw_bytes_per_s)} GB/s",
        )
    floor_gb_s = floor.gb_s
    expected = f">= {floor_gb_s:g} GB/s"
    largest = max(facts.rows, key=lambda r: r.size_bytes)
    large = [r for r in facts.rows if r.size_bytes >= LARGE_BYTES]
    who = "nccl-tests" if facts.engine in (None, "nccl-tests") else "torch engine"
    avg = f"{who} Avg bus bandwidth {_gb(facts.avg_busbw_bytes_per_s)} GB/s (all sizes)"
    if not large:
        best = max(facts.rows, key=_busbw)
        return finding(
            CHECK,
            Status.WARN,
            f"largest message {size_text(largest.size_bytes)} is too small to judge the bus "
            f"(needs >= 1 GiB); peak busbw {_gb(_busbw(best))} GB/s at "
            f"{size_text(best.size_bytes)}; {avg}",
            value=round(_busbw(best) / GB, 2),
            expected=expected,
            unit="GB/s",
            action="rerun up to 8 GiB (all_reduce_perf -e 8G, `bringup nccl -e 8G`) to reach "
            "the bandwidth plateau",
        )
    best = max(large, key=_busbw)
    busbw_gb_s = _busbw(best) / GB
    message = (
        f"all_reduce busbw {busbw_gb_s:.2f} GB/s at {size_text(best.size_bytes)} "
        f"(best of messages >= 1 GiB; {_gb(_busbw(largest))} GB/s at the largest, "
        f"{size_text(largest.size_bytes)}), "
        f"{floor.label} {floor_gb_s:g} GB/s{floor.job}; {avg}, not judged"
    )
    ok = busbw_gb_s >= floor_gb_s
    return finding(
        CHECK,
        Status.PASS if ok else Status.FAIL,
        message,
        value=round(busbw_gb_s, 2),
        expected=expected,
        unit="GB/s",
        action=None
        if ok
        else "check NVLink/NVSwitch (`nvidia-smi topo -m`, `nvidia-smi nvlink -s`) and, across "
        "nodes, the NICs (ib_write_bw per NIC, NCCL_ALGO=RING); compare with a one-node run",
    )


@dataclass(frozen=True)
class Floor:
    """The all-reduce floor a job is judged by, and how the message names it."""

    gb_s: float | None  # None: no published floor for this job
    label: str  # "floor", "2-node floor", "4-rank floor"
    job: str  # " over 72 ranks on 18 nodes, inside one NVLink domain of 72 GPUs (...)"
    across: bool  # the job crosses NVLink domains (the RDMA fabric bounds it)


def _domain(profile: Profile) -> int:
    """GPUs in one NVLink domain: the profile's, else the node's own (an HGX board)."""
    if profile.nvlink is not None and profile.nvlink.domain_gpus is not None:
        return profile.nvlink.domain_gpus
    return profile.gpu.count


def _job(facts: NcclFacts, profile: Profile, across: bool) -> str:
    """ " over 72 ranks on 18 nodes, inside one NVLink domain of 72 GPUs": what the job was.
    HGX jobs say only their ranks, as they always have; a domain wider than a node (NVL72)
    says its scope, and a trimmed device list says so."""
    ranks = facts.nranks or facts.launched_ranks
    text = f" over {ranks} ranks" if ranks else ""
    domain = _domain(profile)
    if domain > profile.gpu.count:
        if facts.nodes:
            text += f" on {facts.nodes} {'node' if facts.nodes == 1 else 'nodes'}"
        text += (
            ", across NVLink domains" if across else f", inside one NVLink domain of {domain} GPUs"
        )
    if facts.devices_trimmed:
        text += (
            f" (device list trimmed: {len(facts.devices)} of {ranks} ranks shown, "
            "nodes estimated from its device numbers)"
        )
    return text


def allreduce_floor(facts: NcclFacts, profile: Profile) -> Floor:
    """The all-reduce floor for this job's scope and rank count (docs/reference.md#nccl-floors).

    Inside one NVLink domain (at most its GPUs; on one node where the domain is the node,
    as on HGX): the whole-domain floor, or for a smaller job the floor of the largest rank
    count it reaches. Across domains: the RDMA fabric's (multi-node) floor.
    """
    spec, domain, ranks = profile.nccl, _domain(profile), facts.nranks or facts.launched_ranks
    across = ((facts.nodes or 1) > 1 and domain <= profile.gpu.count) or (
        ranks is not None and ranks > domain
    )
    job = _job(facts, profile, across)
    if across:
        label = f"{facts.nodes}-node floor" if facts.nodes else "across-domain floor"
        return Floor(spec.allreduce_busbw_multinode_min_gb_s, label, job, across=True)
    if ranks is None or ranks >= domain:
        return Floor(spec.allreduce_busbw_min_gb_s, "floor", job, across=False)
    reached = [n for n in spec.allreduce_busbw_min_gb_s_by_ranks if n <= ranks]
    if not reached:
        return Floor(None, "floor", job, across=False)
    most = max(reached)
    return Floor(spec.allreduce_busbw_min_gb_s_by_ranks[most], f"{most}-rank floor", job, False)


def _no_floor(facts: NcclFacts, floor: Floor) -> str:
    """Why a job has no floor, naming the profile's key to set."""
    if floor.across:
        who = f"{facts.nodes}-node job" if facts.nodes else "job across NVLink domains"
        return (
            f"{who}{floor.job}: the profile has no multi-node floor "
            "(nccl.allreduce_busbw_multinode_min_gb_s: across NVLink domains the RDMA fabric "
            "sets it), and the NVLink floor does not apply"
        )
    ranks = facts.nranks or facts.launched_ranks
    return (
        f"{ranks}-rank job{floor.job}: the profile has no floor for {ranks} ranks "
        "(nccl.allreduce_busbw_min_gb_s_by_ranks), and the whole-domain floor does not apply"
    )


def _busbw(row: NcclRow) -> float:
    """A row's bus bandwidth: the better of in-place and out-of-place."""
    return max(row.oop_busbw_bytes_per_s, row.ip_busbw_bytes_per_s)


def _gb(bytes_per_s: float | None) -> str:
    return "n/a" if bytes_per_s is None else f"{bytes_per_s / GB:.2f}"


def size_text(size_bytes: int) -> str:
    """A message size as nccl-tests users say it: "4 GiB", "256 MiB", or bytes."""
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if size_bytes >= 1 << shift and size_bytes % (1 << shift) == 0:
            return f"{size_bytes >> shift} {unit}"
    return f"{size_bytes} B"


# --- pairwise: which node of a slow pair is slow ---------------------------------------------

PAIRWISE = "nccl.pairwise"


@dataclass
class PairResult:
    """One 2-node job of `bringup nccl --pairwise`: busbw at its largest size, or why none."""

    nodes: tuple[str, str]
    busbw_bytes_per_s: float | None
    error: str | None = None
    where: str = ""  # the run directory (under the pairwise run) that holds its records

    def as_json(self) -> dict[str, object]:
        return {
            "nodes": list(self.nodes),
            "busbw_gb_s": None if self.busbw_bytes_per_s is None else self.busbw_bytes_per_s / GB,
            "error": self.error,
            "run_dir": self.where,
        }


def reference(results: list[PairResult]) -> float | None:
    """The best pair's busbw: what a healthy pair reaches on this fabric."""
    measured = [r.busbw_bytes_per_s for r in results if r.busbw_bytes_per_s is not None]
    return max(measured) if measured else None


def _fast(result: PairResult, best: float | None, slow_fraction: float) -> bool:
    busbw = result.busbw_bytes_per_s
    return busbw is not None and best is not None and busbw >= slow_fraction * best


def split_pairs(results: list[PairResult], slow_fraction: float) -> tuple[list[str], list[str]]:
    """(known-good nodes, suspects): nodes of a fast pair are good; the others are suspects.

    Judged against the best pair rather than the profile: two nodes over the network reach
    less than one node over NVLink, and the best pair shows what this fabric can do.
    """
    best = reference(results)
    good: list[str] = []
    for r in results:
        if _fast(r, best, slow_fraction):
            good += [n for n in r.nodes if n not in good]
    suspects: list[str] = []
    for r in results:
        suspects += [n for n in r.nodes if n not in good and n not in suspects]
    return good, suspects


def judge_pairwise(
    nodes: list[str], first: list[PairResult], retests: list[PairResult], slow_fraction: float
) -> list[Finding]:
    """nccl.pairwise, one finding per node: fine, slow with a known-good partner, or unknown."""
    best = reference(first)
    good, _ = split_pairs(first, slow_fraction)
    findings = []
    for node in nodes:
        own = [r for r in first if node in r.nodes]
        retest = next((r for r in retests if r.nodes[0] == node), None)
        findings.append(
            replace(_pair_verdict(node, own, retest, good, best, slow_fraction), node=node)
        )
    return findings


def _pair_verdict(
    node: str,
    own: list[PairResult],
    retest: PairResult | None,
    good: list[str],
    best: float | None,
    slow_fraction: float,
) -> Finding:
    """The verdict on one node from its first-round pairs and its retest."""
    floor = None if best is None else slow_fraction * best
    expected = (
        None if floor is None else f">= {floor / GB:.2f} GB/s ({slow_fraction:g} x best pair)"
    )

    def partner(r: PairResult) -> str:
        return r.nodes[1] if r.nodes[0] == node else r.nodes[0]

    def shown(r: PairResult) -> str:
        if r.busbw_bytes_per_s is None:
            return f"with {partner(r)}: failed ({r.error})"
        return f"with {partner(r)}: {r.busbw_bytes_per_s / GB:.2f} GB/s"

    first_round = "; ".join(shown(r) for r in own) or "not paired"
    if node in good:
        fast = next(r for r in own if _fast(r, best, slow_fraction))
        return finding(
            PAIRWISE,
            Status.PASS,
            f"all_reduce busbw {shown(fast)}",
            value=round((fast.busbw_bytes_per_s or 0) / GB, 3),
            expected=expected,
            unit="GB/s",
        )
    if best is None:
        return finding(
            PAIRWISE,
            Status.ERROR,
            f"no pair could be measured, so no node can be judged ({first_round})",
            action="fix the failure shown (rendezvous port, interface), then rerun",
        )
    if retest is None:
        return finding(
            PAIRWISE,
            Status.WARN,
            f"slow or failed in its first pair ({first_round}) and no known-good node was left "
            "to retest it with",
            expected=expected,
            action="rerun --pairwise with a node known to be healthy in the inventory",
        )
    if retest.busbw_bytes_per_s is None:
        return finding(
            PAIRWISE,
            Status.ERROR,
            f"first round {first_round}; with known-good {partner(retest)} the job failed: "
            f"{retest.error}",
            action="check this node's network interfaces and the rendezvous port, then rerun",
        )
    value = round(retest.busbw_bytes_per_s / GB, 3)
    if _fast(retest, best, slow_fraction):
        return finding(
            PAIRWISE,
            Status.PASS,
            f"slow in its first pair ({first_round}) but {shown(retest)} (known good): "
            "the slow one was its first partner",
            value=value,
            expected=expected,
            unit="GB/s",
        )
    return finding(
        PAIRWISE,
        Status.FAIL,
        f"{node} is slow: {shown(retest)} (known good), and first round {first_round}; "
        f"best pair {best / GB:.2f} GB/s",
        value=value,
        expected=expected,
        unit="GB/s",
        action=f"check {node}'s network: link speed and errors of each NIC (ibstat, "
        "ethtool -S, ib_write_bw per NIC), cables and switch ports; rerun --pairwise after",
    )


CHECKS: list[Check] = [
    Check(
        name=CHECK,
        probe="nccl",
        judge=judge_allreduce_busbw,
        description="all_reduce (nccl-tests or torch): ran, values correct, large-message "
        "busbw >= floor",
        profile_free=True,  # #wrong > 0 is a FAIL on any hardware; busbw needs the profile
    ),
]


# --- a job across nodes ---------------------------------------------------------------------

JOB = "nccl.job"


def job_error(nodes: list[str], results: dict[str, NcclFacts | str]) -> str | None:
    """Why the job failed, in the words of the rank that says most; None when it ran.

    `results` holds each node's facts, or why it has none. The first node hosts the
    rendezvous and can only say "timed out waiting for clients"; a node that could not
    reach it names the address and the error, so it speaks first.
    """
    for node in [*nodes[1:], *nodes[:1]]:
        result = results[node]
        if isinstance(result, str):
            return f"{node}: {result}"
        if not result.complete and result.errors:
            return f"{node}: {first_error(result.errors)}"
        if not result.complete or not result.rows:
            return f"{node}: the measurement did not finish"
    return None


def judge_job(nodes: list[str], results: dict[str, NcclFacts | str]) -> list[Finding]:
    """nccl.job: did every node's ranks meet and finish; the job's busbw at the largest size."""
    reason = job_error(nodes, results)
    if reason is not None:
        return [
            Finding(
                node=nodes[0],
                check=JOB,
                status=Status.ERROR,
                message=f"the {len(nodes)}-node job did not complete: {reason}",
                action="check that every node reaches the first node on the rendezvous port "
                "(firewall) and the interface (bringup_nccl_env: NCCL_SOCKET_IFNAME, "
                "GLOO_SOCKET_IFNAME), then rerun",
            )
        ]
    first = results[nodes[0]]
    assert isinstance(first, NcclFacts)
    busbw = first.largest_size_busbw_bytes_per_s or 0.0
    return [
        Finding(
            node=nodes[0],
            check=JOB,
            status=Status.PASS,
            message=f"{first.collective} over {len(nodes)} nodes, {first.nranks} ranks: "
            f"busbw {busbw / GB:.2f} GB/s at the largest size",
            value=round(busbw / GB, 3),
            unit="GB/s",
        )
    ]
