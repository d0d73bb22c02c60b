"""Profiles: what a node of one kind must show. Data in checks/profiles/*.yaml.

The schema forbids unknown keys so that a typo in a user's copy ("pcie_gn") is an error
naming the key, not a threshold silently ignored. A profile is a tree of frozen msgspec
Structs (`schema.Schema`: docs/contributing.md, "validation", says why not stdlib
dataclasses): read from YAML by bringup/schema.py's one validator (the bounds are
msgspec's `Meta` in the types), built plainly by the tool's own code, never changed once
made (a node's overrides make a new one, fleet.plan.node_profile; a copy with a change is
`msgspec.structs.replace`). Keyword-only, so that a field with a default may come before
one without, in the order the files write them.
"""

# No `from __future__ import annotations`: the schema's types are made once, as the
# classes are, where as text each would be compiled at the first read, twice (msgspec's
# and schema.unknown_key's look-up of the types): 114 compiles, about 20 ms of a health
# check (docs/scale.md).
import re
from pathlib import Path
from typing import Annotated, Literal

from msgspec import Meta, field, structs

from bringup.data import data_dir
from bringup.node import gpu_ids
from bringup.schema import Schema, locate, read_yaml, shipped, unknown_key, validate

Reported = Literal["ecc", "remapped_rows", "power_limit"]


class GpuSpec(Schema, kw_only=True):
    model: str  # the name nvidia-smi/NVML prints, e.g. "NVIDIA B300 SXM6 AC"
    count: Annotated[int, Meta(ge=1)]
    memory_min_bytes: int  # smallest total memory per GPU that is acceptable
    compute_capability: str
    pci_device_id: str | None = None
    power_limit_w: float  # default board power limit
    bf16_dense_tflops: float
    fp8_dense_tflops: float | None = None
    bf16_achievable_tflops: float | None = None  # measured matmul ceiling, not datasheet
    pcie_gen: int  # the GPU's own (device) maximum generation
    pcie_width: int
    # The host side's maximum where it is below the GPU's (a Grace CPU's Gen5 ports on a
    # Gen6 Blackwell): the link can train no higher, so that is full speed. None: the host
    # is no limit (or the facts report the link's own maximum, which then decides).
    pcie_host_gen: int | None = None
    # What this GPU must report (every datacenter HBM GPU has ECC, row remapping and a
    # power limit): "N/A" there is a GPU or driver that could not say, flagged by the check
    # that reads it. A profile of a GPU without one of these leaves it out: N/A stays SKIP.
    reports: list[Reported] = field(default_factory=lambda: ["ecc", "remapped_rows", "power_limit"])


class NvlinkSpec(Schema, kw_only=True):
    version: int  # 4 = Hopper, 5 = Blackwell
    links_per_gpu: int
    per_pair: int  # the NV# expected between every GPU pair in `nvidia-smi topo -m`
    link_speed_gb_s: float  # per link, per direction, GB/s as `nvidia-smi nvlink -s` prints
    # GPUs in one NVLink domain: 8 on an HGX board, 72 across the trays of an NVL72 rack.
    # None: the node's own GPUs (gpu.count). A job of more ranks crosses domains (RDMA).
    domain_gpus: Annotated[int, Meta(ge=1)] | None = None
    # The tray's GPUs reach each other only through the NVLink fabric (NVL72): fabric
    # registration (Fabric Manager / NVLink subnet manager, the IMEX domain) must complete.
    fabric_required: bool = False
    # The tray shares GPU memory with the other trays of its domain through NVIDIA's IMEX
    # service (GB200/GB300 NVL72): `nvidia-imex` must run and its domain be UP with this
    # node READY in it (docs/reference.md#imex).
    imex_required: bool = False


class ThermalSpec(Schema, kw_only=True):
    slowdown_margin_warn_c: float = 10.0  # WARN when the GPU is this close to slowdown
    memory_max_c: float | None = None  # HBM limit when the driver does not report one


class SoftwareSpec(Schema, kw_only=True):
    min_driver: str  # e.g. "580.65.06"
    min_cuda: str  # CUDA version the driver must support, e.g. "12.9"
    driver_branch: str | None = None  # informational, e.g. "R580"


class NcclSpec(Schema, kw_only=True):
    """All-reduce floors by scope (inside one NVLink domain, or across domains over RDMA)
    and rank count; GB/s = 1e9 B/s, large messages (docs/reference.md#nccl-floors)."""

    # Inside one NVLink domain, a job over all of it (8 ranks on HGX, 72 on NVL72).
    allreduce_busbw_min_gb_s: float
    # Inside the domain, smaller jobs: rank count -> floor; a job is judged by the entry of
    # the largest rank count it reaches. A job smaller than every entry (and than the
    # domain) has no published floor: reported, not judged.
    allreduce_busbw_min_gb_s_by_ranks: dict[int, float] = field(default_factory=dict)
    # Across NVLink domains (the RDMA fabric bounds it; 2 nodes of HGX, 2 racks of NVL72).
    # None: no published figure for this system; such runs are reported, not judged.
    allreduce_busbw_multinode_min_gb_s: float | None = None


class NetworkSpec(Schema, kw_only=True):
    """The compute (east-west) NICs of the node's reference design."""

    # Every compute rail port's rate, Gb/s as ibstat prints it (a rail trained lower FAILs).
    # None: no expectation; the ports are judged only for being up at one rate.
    compute_rate_gbit_s: float | None = None
    compute_ports: Annotated[int, Meta(ge=1)] | None = None  # rails per node, informational
    # Lanes every compute rail trains at ("4X"); a rail at fewer lost lanes (a cable or
    # transceiver fault). None: not judged (docs/reference.md#fabric).
    compute_width: Annotated[int, Meta(ge=1)] | None = None
    # ib_write_bw's average on a rail: at least this share of the rail's rate
    # (docs/reference.md#fabric: Azure's node health checks ask 375 of 400 Gb/s).
    write_bw_min_fraction: Annotated[float, Meta(gt=0, le=1)] = 0.9375
    # The per-rail job: a rail more than this share under the median of its node's rails or
    # of the fleet's FAILs (docs/reference.md#fabric: SuperBench's default variance rule).
    rail_median_tolerance: Annotated[float, Meta(gt=0, lt=1)] = 0.05
    # mlx5 link-down events of one port in the kernel log window: one or more WARN, more
    # than this FAIL (docs/reference.md#fabric).
    link_flaps_fail_count: Annotated[int, Meta(ge=1)] = 3


class NvmeSpec(Schema, kw_only=True):
    seq_read_min_gb_s: float = 3.0
    seq_write_min_gb_s: float = 3.0
    checkpoint_write_min_gb_s: float | None = None


class HostSpec(Schema, kw_only=True):
    cpu_governor: str = "performance"
    min_memlock_bytes: int | None = None  # None = unlimited required
    min_free_bytes: int = 100 * 10**9  # on the data and checkpoint paths


class UplinkSpec(Schema, kw_only=True):
    """The node's external bandwidth (the uplink probe): a site figure, not a GPU's."""

    min_mbit_s: float | None = None  # None: measured and reported, not judged
    dataset_bytes: Annotated[int, Meta(gt=0)] = 512 * 10**9  # whose transfer time is stated


class MetricTolerance(Schema, kw_only=True):
    """How far a measured metric may move before a report flags it (docs/reports.md)."""

    better: Literal["higher", "lower"]  # which way is an improvement
    baseline_pct: Annotated[float, Meta(ge=0)]  # worse than the baseline run by more: flagged
    fleet_pct: Annotated[float, Meta(ge=0)]  # worse than the fleet median by more: straggler


# Defaults; a profile's `tolerances:` section overrides them field by field. All are bringup
# policy: docs/reference.md#report-tolerances gives the reason for each.
DEFAULT_TOLERANCES: dict[str, MetricTolerance] = {
    "nccl.busbw": MetricTolerance(better="higher", baseline_pct=5.0, fleet_pct=5.0),
    "burnin.mfu": MetricTolerance(better="higher", baseline_pct=3.0, fleet_pct=3.0),
    "burnin.tokens_per_s": MetricTolerance(better="higher", baseline_pct=3.0, fleet_pct=3.0),
    "gemm.tflops": MetricTolerance(better="higher", baseline_pct=5.0, fleet_pct=5.0),
    "nvme.seq_read": MetricTolerance(better="higher", baseline_pct=10.0, fleet_pct=10.0),
    "nvme.seq_write": MetricTolerance(better="higher", baseline_pct=10.0, fleet_pct=10.0),
}


def default_tolerances() -> dict[str, MetricTolerance]:
    return dict(DEFAULT_TOLERANCES)  # the tolerances are frozen: shared, the dict is not


class Profile(Schema, kw_only=True):
    name: str
    description: str
    gpu: GpuSpec
    nvlink: NvlinkSpec | None = None  # None: PCIe-only systems
    thermal: ThermalSpec = ThermalSpec()
    software: SoftwareSpec
    nccl: NcclSpec
    nvme: NvmeSpec = NvmeSpec()
    host: HostSpec = HostSpec()
    network: NetworkSpec = NetworkSpec()
    uplink: UplinkSpec = UplinkSpec()
    # Metric name ("nccl.busbw", ...) -> tolerance; every known metric is present.
    tolerances: dict[str, MetricTolerance] = field(default_factory=default_tolerances)


class ProfileError(Exception):
    """A profile could not be found or is invalid; the message is one line."""


def profiles_dir() -> Path:
    return data_dir("checks") / "profiles"


def available() -> list[str]:
    """Names of the profiles shipped with bringup."""
    return shipped(profiles_dir())


def load(name_or_path: str) -> Profile:
    """A shipped profile by name (`b300`) or a user's profile file by path."""
    path = locate(name_or_path, profiles_dir(), "profile", ProfileError)
    return parse(read_yaml(path, ProfileError), str(path))


def parse(data: object, origin: str) -> Profile:
    """The profile from parsed YAML, or ProfileError with one line naming the offending key.

    Its `tolerances:` are laid over the defaults, each entry field by field (a profile
    names what it changes); a metric not among the defaults is refused.
    """
    if isinstance(data, dict) and "tolerances" in data and unknown_key(Profile, data) is None:
        data = {**data, "tolerances": _over_defaults(data["tolerances"], origin)}
    return validate(Profile, data, origin, ProfileError)


def _over_defaults(value: object, origin: str) -> object:
    if value is None:
        return default_tolerances()
    if not isinstance(value, dict):
        return value  # the validator names the type error
    merged: dict[object, object] = {
        name: structs.asdict(t) for name, t in DEFAULT_TOLERANCES.items()
    }
    for name, entry in value.items():
        if name not in DEFAULT_TOLERANCES:
            known = ", ".join(DEFAULT_TOLERANCES)
            raise ProfileError(f"{origin}: tolerances: unknown metric {name!r} (known: {known})")
        if isinstance(entry, dict):
            entry = {**merged[name], **entry}  # type: ignore[dict-item]
        merged[name] = entry
    return merged


# --profile auto: each node is judged by the profile of its own GPU (checks/auto.py).
AUTO = "auto"


def for_gpu(model: str | None, device_id: str | None = None) -> Profile | None:
    """The shipped profile of a GPU model as NVML or nvidia-smi names it: the one naming
    exactly that model, else the one of its family ("NVIDIA H100 PCIe" -> h100), a family
    being the profile's name as a word of the model; a GPU the driver could not name (its
    "NVIDIA Graphics Device", or no name) is identified by its PCI device id
    (bringup/node/gpu_ids.py, from pci.ids). This is the one detector: every command's
    --profile auto goes through it."""
    if not model and not device_id:
        return None
    loaded = shipped_profiles()
    if model:
        exact = [p for p in loaded if p.gpu.model == model]
        if exact:
            return exact[0]
        words = set(re.split(r"[^a-z0-9]+", model.lower()))
        family = [p for p in loaded if p.name.lower() in words]
        if len(family) == 1:
            return family[0]
    if model and not gpu_ids.is_generic(model):
        return None  # the driver named a GPU of its own: not one of ours, whatever its id
    by_id = gpu_ids.profile_name(device_id)
    return next((p for p in loaded if p.name == by_id), None)


# Shipped profiles as loaded, by file and the file's size and change time: `--profile auto`
# looks a node's GPU up among all of them, once per node judged (a thousand in one check,
# one at every job start under Slurm), and a profile is never changed once loaded (a node's
# overrides make a new one, fleet.plan.node_profile). An edited file is read again.
_SHIPPED: dict[str, tuple[tuple[int, int], Profile]] = {}


def shipped_profiles() -> list[Profile]:
    """Every shipped profile that loads, in name order (one that does not is left out: its
    own `--profile NAME` says why)."""
    loaded = []
    for name in available():
        path = profiles_dir() / f"{name}.yaml"
        try:
            info = path.stat()
            stamp = (info.st_mtime_ns, info.st_size)
            cached = _SHIPPED.get(name)
            if cached is None or cached[0] != stamp:
                cached = (stamp, load(name))
                _SHIPPED[name] = cached
        except (OSError, ProfileError):
            continue
        loaded.append(cached[1])
    return loaded
