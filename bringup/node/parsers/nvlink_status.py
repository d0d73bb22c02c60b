"""`nvidia-smi nvlink -s` into an `NvlinkStatus`: every GPU's links and their speed.

`gpu_facts_from_nvlink` turns it into the gpu probe's facts, so the gpu.nvlink check
judges a capture someone sent. A pure function of the text: on output it cannot read it
raises `ParseError` with one line naming what was wrong, and never any other exception.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bringup.node.gpu_facts import Gpu, GpuFacts, NvLink
from bringup.node.parsers.smi_values import reported, short
from bringup.node.result import ParseError

# Per-link speed per direction, GB/s, as `nvidia-smi nvlink -s` prints it, by NVLink version
# (A100 12 links x 25 GB/s; H100/H200 NVLink 4 18 x 26.562 GB/s;
# B200/B300 NVLink 5 18 x 53.125 GB/s).
NVLINK_SPEED_GB_S: dict[int, float] = {3: 25.0, 4: 26.562, 5: 53.125}

_NVLINK_GPU = re.compile(r"GPU ([0-9]{1,9}): (.*?) \(UUID: ([^)]*)\)")
_NVLINK_LINK = re.compile(r"Link ([0-9]{1,9}): (.*)")
_GB_S = re.compile(r"([0-9]+(?:\.[0-9]+)?) GB/s")

# A "GPU N: name (UUID: ...)" line followed by a link or by a message about NVLink.
_NVLINK_MARKERS = re.compile(
    r"^GPU [0-9]+: .* \(UUID: [^)]*\)[ \t]*\n[ \t]*(?:Link [0-9]+: |.*nvlink)",
    re.IGNORECASE | re.MULTILINE,
)


@dataclass
class NvlinkGpu:
    """One GPU of `nvidia-smi nvlink -s` and the links it listed."""

    index: int
    name: str
    uuid: str | None
    links: list[NvLink] = field(default_factory=list)
    # "NVML: Unable to retrieve NVLink information as all links are inactive": the GPU has
    # NVLink and none of it is up, which is a fault, not a GPU without NVLink.
    all_inactive: bool = False


@dataclass
class NvlinkStatus:
    """`nvidia-smi nvlink -s`: per-GPU links, or why the node cannot report them."""

    supported: bool
    reason: str | None = None  # "Nvlink queries are not supported for Devices in MIG mode"
    gpus: list[NvlinkGpu] = field(default_factory=list)


def nvlink_version_from_speed(gb_s: float) -> int | None:
    """The NVLink version whose per-link speed this is (within 1%), else None."""
    for version, nominal in NVLINK_SPEED_GB_S.items():
        if abs(gb_s - nominal) <= 0.01 * nominal:
            return version
    return None


def detect(text: str) -> bool:
    """True when a "GPU N: name (UUID: ...)" line is followed by a link or an NVLink message."""
    return _NVLINK_MARKERS.search(text) is not None


def parse_nvlink_status(text: str) -> NvlinkStatus:
    """Links of every GPU; a GPU that prints a message instead of links makes it unsupported."""
    gpus: list[NvlinkGpu] = []
    reason: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if gpu_match := _NVLINK_GPU.fullmatch(line):
            index, name, uuid = gpu_match.groups()
            gpus.append(NvlinkGpu(int(index), name, reported(uuid)))
        elif not line or not gpus:
            continue  # blank lines, and the prompt pasted above the first GPU
        elif link_match := _NVLINK_LINK.fullmatch(line):
            gpus[-1].links.append(_nvlink(int(link_match.group(1)), link_match.group(2)))
        elif "all links are inactive" in line.lower():
            gpus[-1].all_inactive = True
        elif "nvlink" in line.lower():
            # "Device does not have or support Nvlink", "... not supported ... in MIG mode"
            reason = reason or line
        else:
            raise ParseError(f"nvidia-smi nvlink -s: unexpected line {short(line)}")
    if not gpus:
        raise ParseError("nvidia-smi nvlink -s: no 'GPU N: ... (UUID: ...)' line")
    return NvlinkStatus(supported=reason is None, reason=reason, gpus=gpus)


def gpu_facts_from_nvlink(status: NvlinkStatus) -> GpuFacts:
    """The links of `nvlink -s` as GpuFacts, so the gpu.nvlink check can judge them."""
    gpus = []
    for listed in status.gpus:
        speeds = [link.speed_bytes_per_s for link in listed.links if link.speed_bytes_per_s]
        version = nvlink_version_from_speed(speeds[0] / 1e9) if speeds else None
        gpus.append(
            Gpu(
                index=listed.index,
                name=listed.name,
                uuid=listed.uuid,
                nvlink_version=version,
                nvlinks=listed.links,
                nvlinks_all_inactive=listed.all_inactive or None,
            )
        )
    return GpuFacts(source="nvidia-smi nvlink -s", attached_gpus=len(gpus), gpus=gpus)


def _nvlink(link: int, status: str) -> NvLink:
    """One link: 53.125 GB/s -> active at 53.125e9 B/s; <inactive> -> not active."""
    if status.strip().lower() == "<inactive>":
        return NvLink(link=link, active=False)
    match = _GB_S.fullmatch(status.strip())
    if match is None:
        raise ParseError(f"nvidia-smi nvlink -s: link {link}: unexpected {short(status)}")
    return NvLink(link=link, active=True, speed_bytes_per_s=float(match.group(1)) * 1e9)
