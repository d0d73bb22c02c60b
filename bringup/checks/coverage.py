"""What a handover bundle covers: each measurement a renter pays for, where the bundle
holds it ("measured (part, time)") or "not run" with the command that would add it.

    acceptance suite           a check part that ran every probe of the acceptance suite
    DCGM level                 the highest `dcgmi diag -r` level run
    per-GPU compute            gemm: every GPU under matmul load
    NVMe on a device           nvme on a block device (not tmpfs, overlay or memory)
    storage layout             storage: dataset and checkpoint directories
    uplink                     uplink throughput
    NCCL single-node           an all-reduce inside one node
    NCCL multi-node/pairwise   one job across nodes, or every pair (`nccl --pairwise`)
    burn-in MFU baseline       a burn-in that measured steps
    diagnose                   the throttling diagnosis under load

Three of them make the verdict: a bundle without the acceptance suite, without a burn-in,
or (with more than one node) without NCCL across nodes is never ACCEPTED: each missing one
is a `report.coverage` ERROR, and the verdict line names them ("NOT ACCEPTED (partial
handover: no burn-in)"). A quick suite is not the acceptance suite.

Pure: over the parts as bringup/report/rundata.py read them (checks/bundle.py's PartContents).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from bringup.baseline import CoverageRow
from bringup.checks import finding
from bringup.checks.bundle import PartContents
from bringup.facts import ProbeRecord
from bringup.findings import Finding, Status
from bringup.words import plural

CHECK = "report.coverage"
GATHER = "then gather it with the bundle's parts: `bringup handover --from RUN ...`"
ACCEPTANCE = "bringup check --nodes hosts.ini --suite acceptance"


@dataclass(frozen=True)
class Found:
    """A probe record of some part: where and when it was measured."""

    part: str
    node: str
    record: ProbeRecord

    @property
    def facts(self) -> dict[str, Any]:
        return self.record.facts or {}


def bundle_coverage(
    parts: Sequence[PartContents], nodes: Sequence[str], acceptance: Sequence[str]
) -> list[CoverageRow]:
    """The coverage table of a bundle, in the order a renter reads it. `acceptance`: the
    probes of the acceptance suite (a check part that planned all of them ran it)."""
    multi = len(nodes) > 1
    return [
        _acceptance(parts, acceptance),
        _row(
            "DCGM level",
            _records(parts, "dcgm"),
            lambda found: f"level {max(f.facts.get('level') or 0 for f in found) or '?'}",
            f"{ACCEPTANCE} (dcgmi diag -r 3)",
        ),
        _row(
            "per-GPU compute",
            _records(parts, "gemm"),
            lambda found: "matmul and HBM copy on every GPU",
            ACCEPTANCE,
        ),
        _nvme(parts),
        _row(
            "storage layout",
            _records(parts, "storage"),
            lambda found: "dataset and checkpoint directories",
            f"{ACCEPTANCE} --dataset-dir DIR --checkpoint-dir DIR",
        ),
        _row(
            "uplink",
            _records(parts, "uplink"),
            lambda found: "download throughput",
            f"{ACCEPTANCE} --uplink iperf3://HOST",
        ),
        _row(
            "NCCL single-node",
            [f for f in _records(parts, "nccl") if (f.facts.get("nodes") or 1) <= 1],
            lambda found: f"all-reduce inside {_count(found, 'node')}",
            "bringup nccl --local (on each node), or the acceptance suite",
        ),
        _across_nodes(parts, required=multi),
        _row(
            "burn-in MFU baseline",
            [f for f in _records(parts, "burnin") if _has_steps(f)],
            lambda found: _recipe(found),
            "bringup burnin --nodes hosts.ini --recipe llama-8b-lora",
            required=True,
        ),
        _row(
            "diagnose",
            [f for f in _records(parts, "telemetry") if _kind(parts, f.part) == "diagnose"],
            lambda found: f"telemetry under load on {_count(found, 'node')}",
            "bringup diagnose --nodes hosts.ini",
        ),
    ]


def judge_coverage(rows: Sequence[CoverageRow]) -> list[Finding]:
    """One ERROR per measurement the verdict needs and the bundle lacks."""
    return [
        finding(
            CHECK,
            Status.ERROR,
            f"the handover holds no {row.item}: {row.detail}",
            action=f"run `{row.command}`; {GATHER}",
        )
        for row in rows
        if row.required and not row.measured
    ]


# --- the rows -------------------------------------------------------------------------------


def _records(parts: Sequence[PartContents], probe: str) -> list[Found]:
    """Every record of `probe` that measured something, in every part."""
    return list(_each(parts, probe))


def _each(parts: Sequence[PartContents], probe: str) -> Iterator[Found]:
    for part in parts:
        if part.run is None:
            continue
        for node, facts in sorted(part.run.facts.items()):
            record = facts.probes.get(probe)
            if record is not None and record.ok and record.facts is not None:
                yield Found(part.path, node, record)


def _row(
    item: str,
    found: list[Found],
    detail: Callable[[list[Found]], str],
    command: str,
    required: bool = False,
) -> CoverageRow:
    if not found:
        return CoverageRow(
            item=item, measured=False, detail="not run", command=command, required=required
        )
    first = found[0].part
    at = min((f.record.started_at for f in found if f.record.started_at), default=None)
    return CoverageRow(
        item=item, measured=True, detail=detail(found), part=first, at=at, required=required
    )


def _acceptance(parts: Sequence[PartContents], acceptance: Sequence[str]) -> CoverageRow:
    """A check part that planned every probe of the acceptance suite; else what ran."""
    item = "acceptance suite"
    checks = [p for p in parts if p.kind == "check" and p.run is not None]
    for part in checks:
        assert part.run is not None
        planned = set(part.run.planned or [])
        if acceptance and planned >= set(acceptance):
            manifest = part.run.manifest
            suite = (manifest.suite if manifest else None) or "a suite of its probes"
            at = manifest.started_at if manifest else None
            return CoverageRow(
                item=item, measured=True, detail=suite, part=part.path, at=at, required=True
            )
    if checks:
        ran = []
        for part in checks:
            assert part.run is not None
            manifest = part.run.manifest
            suite = manifest.suite if manifest else None
            ran.append(
                f"the {suite} suite" if suite else f"probes {', '.join(part.run.planned or [])}"
            )
        detail = f"{' and '.join(ran)}, not the acceptance suite"
    else:
        detail = "no acceptance check in the bundle"
    return CoverageRow(item=item, measured=False, detail=detail, command=ACCEPTANCE, required=True)


def _nvme(parts: Sequence[PartContents]) -> CoverageRow:
    """fio on a block device: a figure of memory (tmpfs, overlay) is no NVMe measurement."""
    found = _records(parts, "nvme")
    on_device = [f for f in found if _on_device(f) is True]
    command = f"{ACCEPTANCE} --data-dir /path/on/nvme"
    if found and not on_device:
        memory = any(_on_device(f) is False for f in found)
        detail = (
            "fio measured memory or an overlay, not a block device"
            if memory
            else "fio figures whose device was not recorded"
        )
        return CoverageRow(item="NVMe on a device", measured=False, detail=detail, command=command)
    return _row("NVMe on a device", on_device, lambda f: "fio on a block device", command)


def _on_device(found: Found) -> bool | None:
    """True: every path on a block device; False: one is not; None: not recorded."""
    paths = [p for p in found.facts.get("paths") or [] if isinstance(p, dict)]
    marks = [p.get("on_block_device") for p in paths]
    if not marks or any(m is False for m in marks):
        return False if marks else None
    return True if all(m is True for m in marks) else None


def _across_nodes(parts: Sequence[PartContents], required: bool) -> CoverageRow:
    """One NCCL job across nodes, or a pairwise run (its pairs are measured in sub-runs)."""
    item = "NCCL multi-node/pairwise"
    command = "bringup nccl --nodes hosts.ini (one job), or with --pairwise"
    for part in parts:
        manifest = part.run.manifest if part.run is not None else None
        if manifest is not None and manifest.command == "nccl-pairwise":
            return CoverageRow(
                item=item,
                measured=True,
                detail="every pair of nodes",
                part=part.path,
                at=manifest.started_at,
                required=required,
            )
    found = [f for f in _records(parts, "nccl") if (f.facts.get("nodes") or 1) > 1]
    if not found and not required:
        return CoverageRow(item=item, measured=False, detail="one node: nothing to span")
    return _row(
        item,
        found,
        lambda f: f"one job over {max(x.facts.get('nodes') or 0 for x in f)} nodes",
        command,
        required=required,
    )


def _has_steps(found: Found) -> bool:
    """A burn-in that measured steps: one without (torch missing, died at once) is no
    baseline (docs/burnin.md)."""
    steps = found.facts.get("steps")
    return isinstance(steps, list) and bool(steps)


def _recipe(found: list[Found]) -> str:
    recipe = found[0].facts.get("recipe")
    name = recipe.get("name") if isinstance(recipe, dict) else recipe
    return f"recipe {name}" if isinstance(name, str) and name else "a burn-in"


def _kind(parts: Sequence[PartContents], path: str) -> str | None:
    return next((p.kind for p in parts if p.path == path), None)


def _count(found: list[Found], word: str) -> str:
    return plural(len({f.node for f in found}), word)
