"""Judging the per-rail ib_write_bw job (`ibperf`): every rail at its share of line rate
and level with the other rails, the slow one named by node, NIC, port and the GPU behind it.

A pair's measurement belongs to both its nodes: rail 3 of node01 and rail 3 of node02 read
the same figure. As `nccl --pairwise` does, a node whose rail was bad in the first round
is measured again with a partner whose rails were all good; the retest decides it. Only a
node that could not be retested keeps the first round's figure, and its finding says that
the fault may be either node's.

A rail is bad when its ib_write_bw average (alone, or with every rail at once) is:
  - below `network.write_bw_min_fraction` of the rail's rate (fabric.write_bw's rule), or
  - more than `network.rail_median_tolerance` under the median of the node's rails, or
    under the median of every rail in the fleet (docs/reference.md#fabric),
or when its test could not run (the peer did not answer, perftest missing): an ERROR.
ib_write_lat is reported, not judged (no published per-rail latency floor).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field, replace

from bringup.checks import Check, finding, has_profile
from bringup.checks.fabric import bad_link_action
from bringup.findings import Finding, Status, equal
from bringup.node.fabric_facts import ERROR_COUNTERS
from bringup.node.ibperf_facts import IbperfFacts
from bringup.profile import Profile

CHECK = "fabric.rail_bw"
# SuperBench's default variance rule for bandwidth: at most 5% under the criterion
# (docs/reference.md#fabric); here the criterion is the node's and the fleet's median.
DEFAULT_TOLERANCE = 0.05
MODES = {"single": "alone", "host": "alone from host memory", "all": "with every rail at once"}


@dataclass
class RailResult:
    """One rail of one node in one pair: what the pair measured on it, or why not."""

    node: str
    partner: str
    rail: int
    device: str
    ib_port: int
    gpu: int | None
    rate_gbit_s: float | None  # the port's signalling rate (sysfs)
    mode: str  # "single", "all" or "lat"
    gbit_s: float | None  # ib_write_bw best average, Gb/s
    lat_us: float | None  # ib_write_lat average at its smallest message, microseconds
    use_cuda: bool
    error: str | None
    stage: str  # "pairs" or "retest"
    where: str  # the sub-run directory holding both nodes' records

    def as_json(self) -> dict[str, object]:
        return asdict(self)

    @property
    def nic(self) -> str:
        gpu = f", GPU {self.gpu}" if self.gpu is not None else ""
        return f"rail {self.rail}: {self.device} port {self.ib_port}{gpu}"


def side_results(node: str, facts: IbperfFacts | str, stage: str, where: str) -> list[RailResult]:
    """One node's rail results from its record (a text: why the node's side did not run)."""
    if isinstance(facts, str):
        return []
    rails = {r.rail: r for r in facts.rails}
    found = []
    for test in facts.tests:
        rail = rails.get(test.rail)
        lat = None
        if test.result is not None and test.result.lat:
            lat = min(test.result.lat, key=lambda r: r.size_bytes).t_avg_us
        found.append(
            RailResult(
                node=node,
                partner=facts.peer,
                rail=test.rail,
                device=test.device,
                ib_port=test.ib_port,
                gpu=rail.gpu if rail else None,
                rate_gbit_s=rail.rate_gbit_s if rail else None,
                mode=test.mode,
                gbit_s=test.gbit_s,
                lat_us=lat,
                use_cuda=test.use_cuda is not None,
                error=test.error,
                stage=stage,
                where=where,
            )
        )
    return found


def pair_results(
    server: tuple[str, IbperfFacts | str],
    client: tuple[str, IbperfFacts | str],
    stage: str,
    where: str,
) -> list[RailResult]:
    """Both nodes' results of one pair: the client's figures (its output is the
    measurement) on both nodes' rails, the first error of either side."""
    (a, a_facts), (b, b_facts) = server, client
    mine = side_results(b, b_facts, stage, where)
    theirs = side_results(a, a_facts, stage, where)
    results: list[RailResult] = []
    if not mine:  # the client's side did not run: the server's own errors stand
        results += theirs
    by_test = {(r.mode, r.rail): r for r in theirs}
    for r in mine:
        other = by_test.get((r.mode, r.rail))
        error = r.error or (other.error if other else None)
        results.append(_copy(r, error=error))
        if other is not None:
            # The server's own error first: it names the client it waited for.
            own_error = other.error or error
            results.append(_copy(other, gbit_s=r.gbit_s, lat_us=r.lat_us, error=own_error))
    for node, facts in ((a, a_facts), (b, b_facts)):
        if isinstance(facts, str):
            results.append(_whole_side(node, b if node == a else a, facts, stage, where))
    return results


def _copy(result: RailResult, **changes: object) -> RailResult:
    return RailResult(**{**asdict(result), **changes})


def _whole_side(node: str, partner: str, why: str, stage: str, where: str) -> RailResult:
    """A node whose side of the pair did not run at all (perftest missing, unreachable)."""
    return RailResult(
        node, partner, -1, "", 0, None, None, "single", None, None, False, why, stage, where
    )


def bad_nodes(results: list[RailResult], profiles: dict[str, Profile | None]) -> set[str]:
    """Nodes with a bad or failed rail in these results."""
    return {r.node for r in results if _bad(r, results, profiles.get(r.node)) is not None}


def judge_rails(
    nodes: list[str],
    first: list[RailResult],
    retests: list[RailResult],
    profiles: dict[str, Profile | None],
) -> list[Finding]:
    """fabric.rail_bw for every node: its bad rails, each named, or one PASS."""
    # The suspects were retested (each as the first node of its retest pair); their
    # known-good partners keep the first round's verdict.
    retested = {r.node for r in retests} & bad_nodes(first, profiles)
    findings: list[Finding] = []
    for node in nodes:
        again = node in retested
        own = [r for r in (retests if again else first) if r.node == node]
        judged_in = first + retests  # the medians: every rail measured
        profile = profiles.get(node)
        problems = []
        slow: dict[int, list[tuple[RailResult, str]]] = {}
        for r in own:
            why = _bad(r, judged_in, profile)
            if why is None:
                continue
            if r.error:
                problems.append(_error(r))
            else:
                slow.setdefault(r.rail, []).append((r, why))
        problems += [_slow(bad, again, first, node) for bad in slow.values()]
        problems = _fold_not_run(problems)
        if not own:
            findings.append(
                replace(finding(CHECK, Status.SKIP, "no rail measured on this node"), node=node)
            )
            continue
        chosen = problems or [_pass(own, profile)]
        findings += [replace(f, node=node) for f in chosen]
    return findings


def _fold_not_run(problems: list[Finding]) -> list[Finding]:
    """The tests a dead peer stopped ("not run: ...") said once, on the error that
    stopped them, not one finding each."""
    kept = [f for f in problems if ": not measured: not run: " not in f.message]
    skipped = len(problems) - len(kept)
    if not skipped or not kept:
        return problems
    first = kept[0]
    more = f"; {skipped} later test(s) not run"
    return [replace(first, message=first.message + more), *kept[1:]]


def _floor(r: RailResult, profile: Profile | None) -> float | None:
    """fabric.write_bw's floor for this rail: the profile's share of the rail's rate."""
    if profile is None or not has_profile(profile):
        return None
    rate = profile.network.compute_rate_gbit_s or r.rate_gbit_s
    return None if rate is None else rate * profile.network.write_bw_min_fraction


def _tolerance(profile: Profile | None) -> float:
    if profile is None or not has_profile(profile):
        return DEFAULT_TOLERANCE
    return profile.network.rail_median_tolerance


def medians(r: RailResult, results: list[RailResult]) -> tuple[float | None, float | None]:
    """(the node's rail median, the fleet's rail median) of r's mode in these results."""
    same = [x for x in results if x.mode == r.mode and x.gbit_s is not None and x.rail >= 0]
    node = [x.gbit_s for x in same if x.node == r.node and x.gbit_s is not None]
    fleet = [x.gbit_s for x in same if x.gbit_s is not None]
    return (
        statistics.median(node) if node else None,
        statistics.median(fleet) if fleet else None,
    )


def _bad(r: RailResult, results: list[RailResult], profile: Profile | None) -> str | None:
    """Why this rail result is bad, or None."""
    if r.error:
        return r.error
    if r.mode == "lat" or r.gbit_s is None:
        return None
    reasons = []
    floor = _floor(r, profile)
    if floor is not None and r.gbit_s < floor:
        rate = floor / profile.network.write_bw_min_fraction  # type: ignore[union-attr]
        share = profile.network.write_bw_min_fraction  # type: ignore[union-attr]
        reasons.append(f"below {floor:g} Gb/s ({share:g} of the {rate:g} Gb/s rail)")
    tolerance = _tolerance(profile)
    node_median, fleet_median = medians(r, results)
    for label, median in (("the node's", node_median), ("the fleet's", fleet_median)):
        if median and r.gbit_s < (1 - tolerance) * median:
            under = 1 - r.gbit_s / median
            reasons.append(
                f"{under:.0%} under {label} rail median {median:.1f} Gb/s "
                f"(tolerance {tolerance:.0%})"
            )
    return "; ".join(reasons) or None


def _slow(
    bad: list[tuple[RailResult, str]], retested: bool, first: list[RailResult], node: str
) -> Finding:
    """One rail's FAIL: its figures alone and with every rail at once, why, with whom."""
    r, why = bad[0]
    partners = [x.partner for x in first if x.node == node and x.rail == r.rail]
    seen = (
        f"with {partners[0]}, again with {r.partner}"
        if retested and partners
        else (f"with {r.partner}")
    )
    cuda = " from GPU memory (--use_cuda)" if r.use_cuda else ""
    figures = ", ".join(f"{x.gbit_s or 0:.1f} Gb/s {MODES.get(x.mode, x.mode)}" for x, _ in bad)
    message = f"{r.nic}: ib_write_bw {figures}{cuda} (measured {seen}): {why}"
    if not retested:
        message += f"; not retested against a known-good node: the fault may be {r.partner}'s"
    return finding(
        CHECK,
        Status.FAIL,
        message,
        value=round(r.gbit_s or 0.0, 1),
        unit="Gb/s",
        action=f"a slow rail: check {r.device} port {r.ib_port}'s cable, transceiver and switch "
        f"port (`mlxlink -d {r.device} -p {r.ib_port}`, `ibstat {r.device}`), its PCIe link "
        f"(`lspci -vv -s` of the NIC: width and speed), then `bringup check --suite fabric` again",
    )


def _error(r: RailResult) -> Finding:
    where = r.nic if r.rail >= 0 else f"ibperf with {r.partner}"
    return finding(
        CHECK,
        Status.ERROR,
        f"{where}: not measured: {r.error}",
        action=f"check that {r.partner} is up and reachable from this node on TCP ports "
        "18515 and up (perftest's connection exchange; a firewall drops it), that perftest is "
        "installed on both (`bringup provision --tags node_tools`), then run again",
    )


def _pass(own: list[RailResult], profile: Profile | None) -> Finding:
    parts = []
    for mode, label in MODES.items():
        values = [r.gbit_s for r in own if r.mode == mode and r.gbit_s is not None]
        if values:
            parts.append(f"{min(values):.1f}-{max(values):.1f} Gb/s {label}")
    lats = [r.lat_us for r in own if r.mode == "lat" and r.lat_us is not None]
    if lats:
        parts.append(f"ib_write_lat {min(lats):g}-{max(lats):g} us")
    rails = len({r.rail for r in own if r.rail >= 0})
    partner = sorted({r.partner for r in own})
    floor = _floor(own[0], profile)
    judged = f"; each >= {floor:g} Gb/s" if floor is not None else " (no profile: no floor)"
    message = f"{rails} rails with {', '.join(partner)}: {'; '.join(parts)}{judged}"
    cuda = any(r.use_cuda for r in own)
    message += ", from GPU memory" if cuda else ", from host memory"
    values = [r.gbit_s for r in own if r.mode == "single" and r.gbit_s is not None]
    return finding(
        CHECK, Status.PASS, message, value=round(min(values), 1) if values else None, unit="Gb/s"
    )


# --- error counters under the rails' traffic -----------------------------------------------

COUNTERS_CHECK = "fabric.rail_counters"


@dataclass
class CountersSeen:
    """One node's side of one pair: its rails' counter readings around its tests."""

    node: str
    partner: str
    facts: IbperfFacts


def judge_rail_counters(nodes: list[str], seen: list[CountersSeen]) -> list[Finding]:
    """fabric.rail_counters for every node that ran the job: each port error counter that
    grew between the readings before its first test and after its last (its own traffic,
    in every pair it was in) FAILs once, naming NIC, port, counter, the growth summed over
    its pairs and the partners; else one PASS, or a SKIP when no counter could be read
    (fabric.counters then says why)."""
    findings: list[Finding] = []
    for node in nodes:
        own = [s for s in seen if s.node == node]
        if not own:
            continue
        grew: dict[tuple[int, str, int, str], Growth] = {}
        read = 0
        unread: set[str] = set()
        for side in own:
            for c in side.facts.counters:
                if c.after is None:
                    unread.add(f"{c.device} port {c.ib_port}: {c.unread or 'not read'}")
                    continue
                read += 1
                for counter in ERROR_COUNTERS:
                    start, end = c.before.get(counter), c.after.get(counter)
                    if start is not None and end is not None and end > start:
                        key = (c.rail, c.device, c.ib_port, counter)
                        grew.setdefault(key, Growth()).add(start, end, side.partner)
        if grew:
            chosen = [_grew_under_load(*key, growth) for key, growth in grew.items()]
        elif read:
            message = (
                f"{read} rail reading(s): no error counter grew during the rail tests "
                f"({', '.join(ERROR_COUNTERS[:3])}, ...)"
            )
            if unread:
                message += f"; not read: {'; '.join(sorted(unread))}"
            chosen = [finding(COUNTERS_CHECK, Status.PASS, message)]
        else:
            why = "; ".join(sorted(unread)) or "no rail"
            chosen = [finding(COUNTERS_CHECK, Status.SKIP, f"counters not read: {why}")]
        findings += [replace(f, node=node) for f in chosen]
    return findings


@dataclass
class Growth:
    """One port counter's growth over the pairs a node was in (counted only while tested)."""

    total: int = 0
    first: int | None = None
    last: int | None = None
    partners: list[str] = field(default_factory=list)

    def add(self, start: int, end: int, partner: str) -> None:
        self.total += end - start
        self.first = start if self.first is None else self.first
        self.last = end
        if partner not in self.partners:
            self.partners.append(partner)


def _grew_under_load(rail: int, device: str, ib_port: int, counter: str, growth: Growth) -> Finding:
    return finding(
        COUNTERS_CHECK,
        Status.FAIL,
        f"rail {rail}: {device} port {ib_port}: {counter} grew by {growth.total} during the "
        f"rail tests with {', '.join(growth.partners)} ({growth.first} -> {growth.last})",
        value=growth.total,
        expected=equal(0),
        unit="errors",
        action=bad_link_action(counter, "under traffic", f"{device} port {ib_port}", device),
    )


# --- one node's side of a pair, as a sub-run records it ----------------------------------------


def judge_side(facts: IbperfFacts, profile: Profile) -> list[Finding]:
    """ibperf.runs: each test of this node's side ran (the job judges the figures)."""
    failed = [t for t in facts.tests if t.error]
    if failed:
        return [
            finding("ibperf.runs", Status.ERROR, f"{t.device} port {t.ib_port}: {t.error}")
            for t in failed
        ]
    return [
        finding(
            "ibperf.runs",
            Status.PASS,
            f"{len(facts.tests)} perftest runs with {facts.peer} as {facts.role}",
        )
    ]


CHECKS = [
    Check(
        "ibperf.runs",
        "ibperf",
        judge_side,
        "one node's side of a pair's ib_write_bw/ib_write_lat runs ran (judged by the job)",
        profile_free=True,
    ),
]
