"""What the GPUs are and how they are set up: count, model and memory, driver, persistence.

Every judge is pure: `GpuFacts + Profile -> list[Finding]` (gpu.count also reads the
topology matrix, when the node has one, as evidence).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from bringup.checks import finding
from bringup.checks.gpu.per_gpu import gpu_label, gpu_list, judge_each_gpu, no_gpus
from bringup.findings import Finding, Status, equal
from bringup.node import gpu_ids
from bringup.node.gpu_facts import Gpu, GpuFacts
from bringup.profile import Profile

if TYPE_CHECKING:  # the topology probe loads only for a node that ran it
    from bringup.node.probes.topology import TopologyFacts

MIB = 2**20


def parse_version(text: str) -> tuple[int, ...] | None:
    """'580.65.06' -> (580, 65, 6); None when a part is not a number."""
    parts = text.strip().split(".")
    # ASCII digits only: str.isdigit() also accepts '²', which int() refuses.
    if not all(part.isascii() and part.isdigit() for part in parts):
        return None
    return tuple(int(part) for part in parts)


def version_at_least(have: str, need: str) -> bool | None:
    """Compare dotted versions numerically ('590.48.01' >= '580.65.06'); None if unparsable."""
    have_v, need_v = parse_version(have), parse_version(need)
    if have_v is None or need_v is None:
        return None
    width = max(len(have_v), len(need_v))
    # Pad with zeros so that "13" compares equal to "13.0".
    return have_v + (0,) * (width - len(have_v)) >= need_v + (0,) * (width - len(need_v))


# ---------------------------------------------------------------------------------------
# gpu.count


def judge_count(
    facts: GpuFacts, profile: Profile, topology: TopologyFacts | None = None
) -> list[Finding]:
    """As many GPUs as the profile says; a trimmed log (attached > listed) is called out.

    The count is this check's finding alone: when the topology matrix shows the same wrong
    count, the message says so (topology.gpu_count then defers to it). A GPU that is
    listed but cannot be read (NVML: GPU is lost) is named here, and only here: the other
    gpu checks judge the GPUs that could be read.
    """
    check, expected = "gpu.count", profile.gpu.count
    if not facts.gpus:
        return [no_gpus(check)]
    lost = [gpu for gpu in facts.gpus if gpu.error is not None]
    if lost:
        return [_lost(lost, facts, expected)]
    listed = len(facts.gpus)
    attached = facts.attached_gpus if facts.attached_gpus is not None else listed
    # A log can be trimmed (telegraf's A100 sample says 4 attached, lists 1): the tool's
    # own count is the better number of GPUs present, but only the listed ones are judged.
    seen = max(listed, attached)
    note = ""
    if attached > listed:
        note = f" ({attached} attached, only {listed} listed: the others were not judged)"
    if topology is not None and topology.gpu_count == seen != expected:
        note += f" (the topology matrix shows {seen} too)"
    if seen < expected:
        status, message = Status.FAIL, f"{seen} GPUs, expected {expected}{note}"
        action = "a GPU is missing: check `nvidia-smi -L`, XID 79 in the kernel log, reseat / RMA"
    elif seen > expected:
        status, message = Status.WARN, f"{seen} GPUs, expected {expected}{note}"
        action = "more GPUs than the profile says: is this the right profile?"
    elif note:
        status, message = Status.WARN, f"{seen} GPUs as expected{note}"
        action = "judge a complete log (`nvidia-smi -q` untrimmed) or the live node"
    else:
        status, message, action = Status.PASS, f"{seen} GPUs, as expected", None
    return [
        finding(
            check,
            status,
            message,
            value=seen,
            expected=str(expected),
            unit="GPUs",
            action=action,
        )
    ]


def _lost(lost: list[Gpu], facts: GpuFacts, expected: int) -> Finding:
    """The GPUs that are there but cannot be read: FAIL, each named with NVML's words."""
    readable = len(facts.gpus) - len(lost)
    reasons = "; ".join(f"{gpu_label(gpu)}: {gpu.error}" for gpu in lost)
    indices = ", ".join(str(gpu.index) for gpu in lost)
    return finding(
        "gpu.count",
        Status.FAIL,
        f"{reasons} ({readable} of {len(facts.gpus)} GPUs readable, expected {expected})",
        value=readable,
        expected=str(expected),
        unit="GPUs",
        action=f"GPU {indices} fell off the bus: look for XID 79 in the kernel log, reset it "
        f"(`nvidia-smi -r -i {lost[0].index}`) or power-cycle the node; reseat / RMA if it repeats",
    )


def readable(facts: GpuFacts) -> GpuFacts:
    """The facts without the GPUs that could not be read (gpu.count names those)."""
    if all(gpu.error is None for gpu in facts.gpus):
        return facts
    return dataclasses.replace(facts, gpus=[gpu for gpu in facts.gpus if gpu.error is None])


# ---------------------------------------------------------------------------------------
# gpu.model


def _named_by_id(gpu: Gpu, profile: Profile) -> bool:
    """A driver older than the GPU prints "NVIDIA Graphics Device": the GPU is the
    profile's model when its PCI device id is (pci.ids, bringup/node/gpu_ids.py)."""
    return gpu_ids.is_generic(gpu.name) and (
        gpu_ids.profile_name(gpu.pci_device_id) == profile.name
        or gpu_ids.normal(gpu.pci_device_id) == gpu_ids.normal(profile.gpu.pci_device_id)
    )


def _model_one(gpu: Gpu, profile: Profile) -> list[Finding] | None:
    """The GPU is the model the profile names, with at least the memory it promises."""
    check, spec = "gpu.model", profile.gpu
    memory = gpu.memory_total_bytes
    # An excerpt of a log may lack the name (the parsers give "") and the memory size.
    if not gpu.name and memory is None:
        return None
    found = []
    if gpu.name and gpu.name != spec.model and not _named_by_id(gpu, profile):
        found.append(
            finding(
                check,
                Status.FAIL,
                f"{gpu_label(gpu)}: {gpu.name!r}, expected {spec.model!r}",
                value=gpu.name,
                expected=equal(spec.model),
                # Named, not "wrong model": --profile auto picks the family (a100), and a
                # 40 GB card of it is a real difference from the 80 GB the profile describes.
                action=f"the {profile.name} profile describes {spec.model!r}, this is "
                f"{gpu.name!r}: if that is what was ordered, judge it with a profile for its "
                "model (`--profile FILE`, docs/profiles.md); else claim the ordered model",
            )
        )
    if memory is not None and memory < spec.memory_min_bytes:
        found.append(
            finding(
                check,
                Status.FAIL,
                f"{gpu_label(gpu)}: {memory // MIB} MiB memory, "
                f"expected >= {spec.memory_min_bytes // MIB} MiB",
                value=memory,
                expected=f">= {spec.memory_min_bytes}",
                unit="B",
                action=f"{gpu_label(gpu)} shows less memory than its model has: "
                "check for a wrong SKU or a MIG/vGPU slice, else RMA",
            )
        )
    return found


def judge_model(facts: GpuFacts, profile: Profile) -> list[Finding]:
    spec = profile.gpu
    unsized = [gpu for gpu in facts.gpus if gpu.memory_total_bytes is None]
    memory = f">= {spec.memory_min_bytes // MIB} MiB"
    if unsized:
        memory = f"memory size not reported on {gpu_list(unsized)}"
    return judge_each_gpu(
        "gpu.model",
        facts,
        lambda gpu: _model_one(gpu, profile),
        ok=f"{spec.model}, {memory}",
        unreported="model and memory size not reported",
    )


# ---------------------------------------------------------------------------------------
# gpu.driver


def _version_finding(
    check: str, what: str, have: str | None, need: str, action: str
) -> Finding | None:
    """A finding when `have` is missing, unparsable or older than `need`; None when fine."""
    if have is None:
        return finding(check, Status.ERROR, f"{what} version not reported", expected=f">= {need}")
    at_least = version_at_least(have, need)
    if at_least is None:
        return finding(
            check,
            Status.ERROR,
            f"cannot compare {what} version {have!r} with {need!r}",
            value=have,
            expected=f">= {need}",
        )
    if not at_least:
        return finding(
            check,
            Status.FAIL,
            f"{what} {have}, expected >= {need}",
            value=have,
            expected=f">= {need}",
            action=action,
        )
    return None


def judge_driver(facts: GpuFacts, profile: Profile) -> list[Finding]:
    """The driver and the CUDA version it supports are at least the profile's minimum."""
    check, sw = "gpu.driver", profile.software
    if not facts.gpus:
        return [no_gpus(check)]
    branch = f" ({sw.driver_branch} branch)" if sw.driver_branch else ""
    action = f"install driver >= {sw.min_driver}{branch}"
    if facts.cuda_driver_version is None and facts.driver_version is not None:
        return [_driver_alone(check, facts.driver_version, sw.min_driver, sw.min_cuda, action)]
    found = [
        f
        for f in (
            _version_finding(check, "driver", facts.driver_version, sw.min_driver, action),
            _version_finding(check, "CUDA", facts.cuda_driver_version, sw.min_cuda, action),
        )
        if f is not None
    ]
    if found:
        return found
    return [
        finding(
            check,
            Status.PASS,
            f"driver {facts.driver_version} (CUDA {facts.cuda_driver_version}): "
            f">= {sw.min_driver} (CUDA {sw.min_cuda})",
            value=facts.driver_version,
            expected=f">= {sw.min_driver}",
        )
    ]


def _driver_alone(check: str, have: str, need: str, cuda: str, action: str) -> Finding:
    """The floor judged by the driver version when the output names no CUDA version (a
    `--query-gpu=driver_version,...` CSV): every profile's minimum driver supports at least
    its minimum CUDA (docs/reference.md#driver-cuda-and-provisioning), so the driver alone
    decides."""
    found = _version_finding(check, "driver", have, need, action)
    if found is not None:
        return found
    return finding(
        check,
        Status.PASS,
        f"driver {have}: >= {need} (the output names no CUDA version; a driver >= {need} "
        f"supports CUDA >= {cuda})",
        value=have,
        expected=f">= {need}",
    )


# ---------------------------------------------------------------------------------------
# gpu.persistence


def _persistence_one(gpu: Gpu) -> list[Finding] | None:
    if gpu.persistence_mode is None:
        return None
    if gpu.persistence_mode:
        return []
    return [
        finding(
            "gpu.persistence",
            Status.WARN,
            f"{gpu_label(gpu)}: persistence mode off",
            value="off",
            expected="on",
            action="enable persistence: `nvidia-smi -pm 1` or nvidia-persistenced",
        )
    ]


def judge_persistence(facts: GpuFacts, profile: Profile) -> list[Finding]:
    """Persistence mode keeps the driver loaded (no re-initialisation at each job start)."""
    return judge_each_gpu(
        "gpu.persistence",
        facts,
        _persistence_one,
        ok="persistence mode on",
        unreported="persistence mode not reported",
    )
