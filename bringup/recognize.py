"""`bringup inspect`: recognise a tool output someone sent, parse it, judge it.

Each kind names its parser and the probe whose checks judge the parsed facts; the order
of KINDS is the order of detection (most specific markers first).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from bringup import jsondata
from bringup.checks.auto import (
    NO_PROFILE,
    WITHOUT_PROFILE,
    gpu_device_id,
    gpu_model,
    judge_gpu_model,
)
from bringup.checks.catalog import judge_probe
from bringup.checks.gpu.identity import judge_count
from bringup.files import InputError
from bringup.files import read_text as read_file
from bringup.findings import Finding, Status
from bringup.node import gpu_ids
from bringup.node.fabric_facts import FabricFacts
from bringup.node.gpu_facts import Gpu, GpuFacts
from bringup.node.imex_facts import ImexFacts
from bringup.node.nccl_facts import NcclFacts
from bringup.node.parsers import (
    dcgm_diag,
    dmon,
    fio,
    imex_ctl,
    nvlink_status,
    perftest,
    rdma,
    smi_csv,
    smi_text,
    smi_xml,
)
from bringup.node.probes import dcgm, nccl, topology, xid
from bringup.node.result import ParseError
from bringup.node.timeline import Timeline
from bringup.profile import Profile


@dataclass(frozen=True)
class Kind:
    name: str
    description: str
    detect: Callable[[str], bool]
    parse: Callable[[str], Any]
    probe: str  # whose checks judge the facts
    checks: tuple[str, ...] | None = None  # only these (the output shows only part of a probe)
    # A per-GPU listing judged by another probe's checks (a dmon series): the GPUs it shows,
    # so that gpu.count judges them as it judges every other kind.
    listed: Callable[[Any], GpuFacts] | None = None
    # The output names no GPU and its checks judge it without a profile (an IMEX domain
    # report): under --profile auto it is judged as it reads, with no profile.auto finding.
    without_profile: bool = False


def _looks_like_topo(text: str) -> bool:
    # A matrix row starts with GPU<n> followed by cells such as X, NV18, SYS, PIX.
    return bool(re.search(r"^\s*GPU\d+\s+(X|NV\d+|SYS|SOC|NODE|PHB|PXB|PIX)\b", text, re.M))


def listed_gpus(timeline: Timeline, source: str) -> GpuFacts:
    """The GPUs a sampled series shows (one per index), for gpu.count."""
    indices = sorted({sample.gpu for sample in timeline.samples})
    return GpuFacts(source=source, gpus=[Gpu(index=i, name="") for i in indices])


def imex_report(text: str) -> GpuFacts:
    """A pasted `nvidia-imex-ctl -N`: the IMEX domain alone, judged by gpu.imex."""
    domain = imex_ctl.parse_imex_domain(text)
    source = "nvidia-imex-ctl -N"
    return GpuFacts(source=source, imex=ImexFacts(domain=domain, source=source))


def _perftest_run(text: str) -> FabricFacts:
    """One ib_write_bw / ib_write_lat output as the fabric facts of its run."""
    run = perftest.parse(text)
    return FabricFacts(source=run.test, runs=[run])


def _looks_like_smi_q(text: str) -> bool:
    # nvlink -s markers win over -q's: such a text is read as nvlink -s (its kind below).
    return smi_text.detect(text) and not nvlink_status.detect(text)


KINDS: list[Kind] = [
    Kind("smi-xml", "nvidia-smi -q -x", smi_xml.detect, smi_xml.parse_q_xml, "gpu"),
    Kind("fio", "fio --output-format=json", fio.detect, fio.parse_fio_json, "fio"),
    Kind(
        "imex",
        "nvidia-imex-ctl -N",
        imex_ctl.detect,
        imex_report,
        "gpu",
        checks=("gpu.imex",),
        without_profile=True,
    ),
    Kind("dcgm", "dcgmi diag", dcgm_diag.detect, dcgm.facts_from_output, "dcgm"),
    # The RDMA fabric: each output shows one part of what the fabric probe reads.
    Kind("ibstat", "ibstat", rdma.detect_ibstat, rdma.parse_ibstat, "fabric", ("fabric.ports",)),
    Kind(
        "ibv-devinfo",
        "ibv_devinfo",
        rdma.detect_ibv_devinfo,
        rdma.parse_ibv_devinfo,
        "fabric",
        ("fabric.ports",),
    ),
    Kind(
        "perfquery",
        "perfquery",
        rdma.detect_perfquery,
        rdma.parse_perfquery,
        "fabric",
        ("fabric.counters",),
    ),
    Kind(
        "perftest",
        "ib_write_bw / ib_write_lat",
        perftest.detect,
        _perftest_run,
        "fabric",
        ("fabric.write_bw",),
    ),
    # Before smi-q: a series of -q captures also looks like one.
    Kind(
        "smi-q-series",
        "series of nvidia-smi -q",
        dmon.detect_q_series,
        dmon.parse_q_series,
        "telemetry",
        listed=lambda timeline: listed_gpus(timeline, "nvidia-smi -q series"),
    ),
    Kind("smi-q", "nvidia-smi -q", _looks_like_smi_q, smi_text.parse_q_text, "gpu"),
    Kind("nccl", "nccl-tests output", nccl.detect, nccl.parse_nccl_tests, "nccl"),
    Kind("topo", "nvidia-smi topo -m", _looks_like_topo, topology.parse_topo, "topology"),
    Kind(
        "nvlink",
        "nvidia-smi nvlink -s",
        nvlink_status.detect,
        lambda text: nvlink_status.gpu_facts_from_nvlink(nvlink_status.parse_nvlink_status(text)),
        "gpu",
        checks=("gpu.count", "gpu.nvlink"),
    ),
    # Before smi-csv: a timestamped --query-gpu series also looks like one capture.
    Kind(
        "smi-csv-series",
        "series of nvidia-smi --query-gpu",
        dmon.detect_csv_series,
        dmon.parse_csv_series,
        "telemetry",
        listed=lambda timeline: listed_gpus(timeline, "nvidia-smi --query-gpu series"),
    ),
    Kind("smi-csv", "nvidia-smi --query-gpu", smi_csv.detect, smi_csv.parse_query_csv, "gpu"),
    Kind(
        "dmon",
        "nvidia-smi dmon",
        dmon.detect,
        dmon.parse_dmon,
        "telemetry",
        listed=lambda timeline: listed_gpus(timeline, "nvidia-smi dmon"),
    ),
    Kind("kernel-log", "kernel log (Xid)", xid.detect, xid.parse_kernel_log, "xid"),
    # After the Xid kind: a log with both is read for its Xids (the GPU fault is the worse).
    Kind(
        "link-log",
        "kernel log (mlx5 link down/up)",
        rdma.detect_link_log,
        rdma.parse_link_log,
        "fabric",
        ("fabric.link_flaps",),
    ),
]
KIND_NAMES = [k.name for k in KINDS]


def described(kind_name: str) -> str:
    """What a kind of output is called where people read it: "nvidia-smi topo -m"."""
    return next((k.description for k in KINDS if k.name == kind_name), kind_name)


class InspectError(InputError):
    """The file could not be read or recognised; one line."""


@dataclass
class Inspection:
    kind: str
    facts: Any  # the parsed dataclass, or None when parsing failed
    findings: list[Finding]
    profile: str | None = None  # the name of the profile that judged it (None: none fit)

    def facts_json(self) -> Any:
        return dataclasses.asdict(self.facts) if self.facts is not None else None

    @property
    def read(self) -> str:
        """What was read, in words: "7 GPUs (NVIDIA B300 SXM6 AC)"; "" when nothing to say."""
        return what_was_read(self.facts)


def what_was_read(facts: Any) -> str:
    """The summary of parsed facts an operator checks first: the model, how many GPUs, the
    NICs, the DCGM tests. "" for facts that name none of these."""
    if isinstance(facts, GpuFacts) and not facts.gpus and facts.imex is not None:
        return _imex_read(facts.imex)
    if isinstance(facts, GpuFacts):
        return _gpus_read(facts)
    if isinstance(facts, topology.TopologyFacts):
        model = f" ({', '.join(facts.gpu_models)})" if facts.gpu_models else ""
        bonded = sum(nic.bonded for nic in facts.nic_details)
        nics = f", {_count(len(facts.nics), 'NIC')}" + (f" ({bonded} bonded)" if bonded else "")
        return f"{_count(facts.gpu_count, 'GPU')}{model}{nics}"
    if isinstance(facts, dcgm.DcgmFacts):
        report = facts.report
        version = f"DCGM {report.dcgm_version}, " if report.dcgm_version else ""
        ids = sorted(set(report.device_ids))
        gpus = f"{_count(len(report.device_ids), 'GPU')} ({', '.join(ids)}), " if ids else ""
        return f"{version}{gpus}tests: {', '.join(t.name for t in report.tests)}"
    if isinstance(facts, NcclFacts):
        return _ranks_read(facts)
    if isinstance(facts, FabricFacts):
        return _fabric_read(facts)
    if isinstance(facts, Timeline):
        gpus = len({sample.gpu for sample in facts.samples})
        return f"{_count(gpus, 'GPU')}, {_count(len(facts.samples), 'sample')}"
    return ""


def _fabric_read(facts: FabricFacts) -> str:
    """ "2 RDMA ports on mlx4_0 (1 ACTIVE), firmware 2.42.5000", a run, or the link events."""
    if facts.runs:
        run = facts.runs[0]
        sizes = len(run.bw) or len(run.lat)
        return (
            f"{run.test} on {run.device or 'a device not shown'}, {_count(sizes, 'message size')}"
        )
    if facts.source == "perfquery" and facts.ports:
        return f"counters of {facts.ports[0].name}"
    if facts.ports:
        devices = ", ".join(dict.fromkeys(p.device for p in facts.ports))
        active = sum(p.state == "ACTIVE" for p in facts.ports)
        firmware = sorted({d.fw_ver for d in facts.devices if d.fw_ver})
        text = f"{_count(len(facts.ports), 'RDMA port')} on {devices} ({active} ACTIVE)"
        return text + (f", firmware {', '.join(firmware)}" if firmware else "")
    downs = sum(e.state == "down" for e in facts.link_events)
    return f"{_count(len(facts.link_events), 'mlx5 link event')} ({downs} down)"


def _gpus_read(facts: GpuFacts) -> str:
    models = list(dict.fromkeys(g.name for g in facts.gpus if g.name))
    shown = len(facts.gpus)
    text = _count(shown, "GPU")
    if facts.attached_gpus is not None and facts.attached_gpus > shown:
        text = f"{shown} of {facts.attached_gpus} GPUs"
    if models:
        text += f" ({', '.join(models)})"
    # A driver older than the GPU names it "NVIDIA Graphics Device": its PCI id says which.
    generic = {g.pci_device_id for g in facts.gpus if gpu_ids.is_generic(g.name)}
    if generic - {None}:
        text += f", PCI device id {', '.join(sorted(i for i in generic if i))}"
    selected = [g.pci_bus_id for g in facts.gpus if g.by_bus_id and g.pci_bus_id]
    if selected:
        text += f" at {', '.join(selected)}"
    if facts.driver_version:
        text += f", driver {facts.driver_version}"
    return text


def _imex_read(imex: ImexFacts) -> str:
    """ "IMEX domain UP, 18 nodes (18 READY), IMEX 570.172"."""
    domain = imex.domain
    if domain is None:
        return ""
    ready = sum(node.status == "READY" for node in domain.nodes)
    text = f"IMEX domain {domain.state or 'state not printed'}, "
    text += f"{_count(len(domain.nodes), 'node')} ({ready} READY)"
    versions = sorted({node.version for node in domain.nodes if node.version})
    return text + (f", IMEX {', '.join(versions)}" if versions else "")


def _ranks_read(facts: NcclFacts) -> str:
    """ "all_reduce, 72 ranks on 18 nodes, device list trimmed (1 of 72 ranks shown),
    NVIDIA Graphics Device": the ranks from the highest rank number, not the lines shown."""
    ranks = facts.nranks or facts.launched_ranks
    parts = [facts.collective or "collective not named"]
    parts.append(_count(ranks, "rank") if ranks else "ranks not shown")
    if facts.nodes:
        parts[-1] += f" on {_count(facts.nodes, 'node')}"
    if facts.devices_trimmed:
        parts.append(f"device list trimmed ({len(facts.devices)} of {ranks} ranks shown)")
    models = dict.fromkeys(m for d in facts.devices if (m := _device_model(d)))
    if models:
        parts.append(", ".join(models))
    return ", ".join(parts)


def _device_model(device: str) -> str | None:
    """The GPU name of an nccl-tests device line as the facts keep it."""
    return gpu_model("nccl", NcclFacts(collective=None, nranks=None, devices=[device]))


def _count(number: int, word: str) -> str:
    return f"{number} {word}" if number == 1 else f"{number} {word}s"


def read_text(path: Path) -> str:
    """A tool output as text: a stray undecodable byte (a kernel log line) is replaced, not
    refused; what is not text at all is then no known kind."""
    try:
        return read_file(path, "tool output", lenient=True)
    except InputError as exc:
        raise InspectError(str(exc)) from None


def detect(text: str) -> Kind:
    for kind in KINDS:
        try:
            if kind.detect(text):
                return kind
        except Exception:  # a detector is a heuristic: a crash there means "not mine"
            continue
    raise InspectError(f"not a known tool output; known kinds: {', '.join(KIND_NAMES)} (--kind)")


def finite(facts: Any) -> Any:
    """The parsed facts as a record of them holds them: a figure the text gave as "inf" or
    "nan" (Python's float() reads both, and an `inf` bus bandwidth passed every floor) is
    null there, JSON's only form for it, as a live node's is (fleet/transport.py); a field
    that must hold a number then holds none: ParseError naming it."""
    if not any(_not_finite(value) for value in _numbers(msgspec.to_builtins(facts))):
        return facts
    as_json = msgspec.json.encode(facts)  # a number that is not finite written null
    try:
        return msgspec.json.decode(as_json, type=type(facts), strict=True)
    except msgspec.ValidationError as exc:
        raise ParseError(f"a figure that is not a finite number, {jsondata.reason(exc)}") from None


def _numbers(data: Any) -> Iterator[Any]:
    """Every leaf of JSON data."""
    if isinstance(data, dict):
        for value in data.values():
            yield from _numbers(value)
    elif isinstance(data, list):
        for value in data:
            yield from _numbers(value)
    else:
        yield data


def _not_finite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def inspect_text(text: str, profile: Profile | str, kind_name: str | None = None) -> Inspection:
    """Parse text as `kind_name` (or the detected kind) and judge it against the profile,
    or with profile.AUTO against the profile of the GPU model it names (checks/auto.py)."""
    kind = next((k for k in KINDS if k.name == kind_name), None) if kind_name else detect(text)
    if kind is None:
        raise InspectError(f"unknown kind {kind_name!r}; known: {', '.join(KIND_NAMES)}")
    try:
        facts, error = finite(kind.parse(text)), None
    except ParseError as exc:
        facts, error = None, f"could not parse as {kind.description}: {exc}"
    except (ValueError, LookupError, TypeError, AttributeError, RecursionError) as exc:
        # A parser meets text no tool wrote (a file someone sent): its crash is "cannot parse".
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())
        facts, error = None, f"could not parse as {kind.description}: {reason}"
    said: list[Finding] = []
    if not isinstance(profile, Profile):
        if kind.probe in WITHOUT_PROFILE or kind.without_profile:
            profile = NO_PROFILE  # its checks need none: nothing to choose, nothing to say
        else:
            model = gpu_model(kind.probe, facts) if facts is not None else None
            device_id = gpu_device_id(kind.probe, facts) if facts is not None else None
            chosen, finding = judge_gpu_model(
                model, error or f"{kind.description} names no GPU model", device_id=device_id
            )
            if chosen is None:
                # What needs no profile is still judged: ECC, row remaps, fabric, link
                # states, nccl-tests' #wrong (checks/auto.py).
                free = judge_probe(kind.probe, facts, error, NO_PROFILE, profile_free_only=True)
                if kind.checks is not None:
                    free = [f for f in free if f.check in kind.checks]
                return Inspection(kind.name, facts, [finding, *free])
            profile, said = chosen, [finding]
    findings = judge_probe(kind.probe, facts, error, profile)
    if kind.checks is not None:
        findings = [f for f in findings if f.check in kind.checks]
    if error is not None and not findings:
        # No check of this kind applies to the profile (an IMEX report under auto), yet
        # the text could not be read: that is said, never "nothing judged".
        check = kind.checks[0] if kind.checks else kind.probe
        action = f"give the whole output of `{kind.description}` as the tool printed it"
        findings = [Finding(check=check, status=Status.ERROR, message=error, action=action)]
    if kind.listed is not None and facts is not None and profile is not NO_PROFILE:
        findings = [*judge_count(kind.listed(facts), profile), *findings]
    name = profile.name if isinstance(profile, Profile) else None
    return Inspection(kind.name, facts, [*said, *findings], name)


def is_facts_json(text: str) -> bool:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and "bringup_version" in data and "probes" in data
