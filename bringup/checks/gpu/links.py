"""The GPUs' links: PCIe width and generation, NVLink state per GPU, NVLink fabric registration.

Every judge is pure: `GpuFacts + Profile -> list[Finding]` (gpu.nvlink also reads the
topology matrix, when the node has one: a GPU cut off from NVLink is the topology's finding).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bringup.checks import finding, has_profile
from bringup.checks.gpu.per_gpu import gpu_label, gpu_list, judge_each_gpu, no_gpus
from bringup.findings import Finding, Status
from bringup.node.gpu_facts import Gpu, GpuFacts
from bringup.profile import Profile

if TYPE_CHECKING:  # the topology probe loads only for a node that ran it
    from bringup.node.probes.topology import TopologyFacts

# `nvidia-smi nvlink -s` prints link speeds with three decimals ("26.562 GB/s") or none
# ("25 GB/s"): a hundredth of a GB/s absorbs that rounding.
NVLINK_SPEED_TOLERANCE_GB_S = 0.01


# ---------------------------------------------------------------------------------------
# gpu.pcie


def _is_idle(gpu: Gpu) -> bool | None:
    """Whether the GPU said it is idle; None when the clocks event reasons are unknown."""
    if gpu.clock_event_reasons is None:
        return None
    return "gpu_idle" in gpu.clock_event_reasons


def _pcie_width(gpu: Gpu, profile: Profile) -> Finding | None:
    """The link trained at its full width: the GPU's own max and the profile's."""
    current = gpu.pcie_width_current
    if current is None:
        return None
    expected = max(profile.gpu.pcie_width, gpu.pcie_width_max or 0)
    if current >= expected:
        return None
    return finding(
        "gpu.pcie",
        Status.FAIL,
        f"{gpu_label(gpu)}: PCIe x{current}, expected x{expected}",
        value=current,
        expected=f">= {expected}",
        unit="lanes",
        action=f"reseat {gpu_label(gpu)} / check the riser",
    )


def _pcie_gen_max(gpu: Gpu, profile: Profile) -> Finding | None:
    """The GPU's own maximum generation is what the profile expects (a Gen4 part?)."""
    gen_max = gpu.pcie_gen_max
    if gen_max is None or gen_max >= profile.gpu.pcie_gen:
        return None
    return finding(
        "gpu.pcie",
        Status.WARN,
        f"{gpu_label(gpu)}: PCIe Gen{gen_max} max, expected Gen{profile.gpu.pcie_gen}",
        value=gen_max,
        expected=f">= {profile.gpu.pcie_gen}",
        unit="PCIe gen",
        action="the GPU reports a lower PCIe generation than its model should: "
        "check the VBIOS and the platform's PCIe settings",
    )


def _pcie_link_max(gpu: Gpu, profile: Profile) -> Finding | None:
    """The host side lets the link reach what the platform should give (a Gen4 slot under
    a Gen5 GPU): the profile's host generation (a Grace host's Gen5), else the GPU's."""
    link_max = gpu.pcie_link_gen_max
    own = gpu.pcie_gen_max if gpu.pcie_gen_max is not None else profile.gpu.pcie_gen
    should = min(own, profile.gpu.pcie_host_gen or profile.gpu.pcie_gen)
    if link_max is None or link_max >= should:
        return None
    return finding(
        "gpu.pcie",
        Status.WARN,
        f"{gpu_label(gpu)}: PCIe link max Gen{link_max} (the host side), expected Gen{should}",
        value=link_max,
        expected=f">= {should}",
        unit="PCIe gen",
        action="the slot or the host's root port caps the link below the platform's "
        "generation: check the BIOS PCIe speed setting and the riser",
    )


def _expected_gen(gpu: Gpu, profile: Profile) -> int:
    """The generation the link should run at under load: the GPU's own max (else the
    profile's), capped by the host side: the link's own max where the source reports it,
    else the profile's host generation (a Grace host's Gen5 under a Gen6 GPU is full speed)."""
    own = gpu.pcie_gen_max if gpu.pcie_gen_max is not None else profile.gpu.pcie_gen
    host = gpu.pcie_link_gen_max
    if host is None:
        host = profile.gpu.pcie_host_gen
    return min(own, host) if host is not None else own


def _gen_not_judged(gpu: Gpu, profile: Profile) -> bool:
    """True when the link runs below its generation but the GPU is (or may be) idle.

    GPUs drop the PCIe generation at idle to save power (Gen1 at idle is normal), so a
    low generation only means something while the GPU is working.
    """
    current = gpu.pcie_gen_current
    low = current is not None and current < _expected_gen(gpu, profile)
    return low and _is_idle(gpu) is not False


def _pcie_gen_current(gpu: Gpu, profile: Profile) -> Finding | None:
    """Under load, the link runs at the generation the GPU can do."""
    current, expected = gpu.pcie_gen_current, _expected_gen(gpu, profile)
    if current is None or current >= expected or _gen_not_judged(gpu, profile):
        return None
    return finding(
        "gpu.pcie",
        Status.FAIL,
        f"{gpu_label(gpu)}: PCIe Gen{current} while busy, expected Gen{expected}",
        value=current,
        expected=f">= {expected}",
        unit="PCIe gen",
        action=f"reseat {gpu_label(gpu)} / check the riser and the BIOS PCIe speed setting",
    )


def _pcie_one(gpu: Gpu, profile: Profile) -> list[Finding] | None:
    if gpu.pcie_width_current is None and gpu.pcie_gen_current is None:
        return None
    found = (
        _pcie_width(gpu, profile),
        _pcie_gen_max(gpu, profile),
        _pcie_link_max(gpu, profile),
        _pcie_gen_current(gpu, profile),
    )
    return [f for f in found if f is not None]


def _idle_gen_skip(gpus: list[Gpu], profile: Profile) -> list[Finding]:
    """One SKIP per (now, max) generation pair naming the GPUs not judged because idle."""
    groups: dict[tuple[int | None, int, bool], list[Gpu]] = {}
    for gpu in gpus:
        if _gen_not_judged(gpu, profile):
            key = (gpu.pcie_gen_current, _expected_gen(gpu, profile), _is_idle(gpu) is True)
            groups.setdefault(key, []).append(gpu)
    return [
        finding(
            "gpu.pcie",
            Status.SKIP,
            f"{gpu_list(idle)}: gen not judged {'at idle' if known else '(idle state unknown)'} "
            f"(Gen{now} now, max Gen{expected})",
            value=now,
            expected=f">= {expected}",
            unit="PCIe gen",
            action="judge the PCIe generation under load (e.g. during the burn-in)",
        )
        for (now, expected, known), idle in groups.items()
    ]


def judge_pcie(facts: GpuFacts, profile: Profile) -> list[Finding]:
    """Link width always; link generation only while the GPU is busy."""
    spec = profile.gpu
    findings = judge_each_gpu(
        "gpu.pcie",
        facts,
        lambda gpu: _pcie_one(gpu, profile),
        ok=f"PCIe x{spec.pcie_width}, Gen{spec.pcie_gen} capable"
        + (f" (Gen{spec.pcie_host_gen} host link)" if spec.pcie_host_gen else ""),
        unreported="PCIe link not reported",
    )
    return findings + _idle_gen_skip(facts.gpus, profile)


# ---------------------------------------------------------------------------------------
# gpu.nvlink


def _links(numbers: list[int]) -> str:
    return ("link " if len(numbers) == 1 else "links ") + ", ".join(map(str, numbers))


def _all_inactive(gpu: Gpu, links: int, cut_off: bool) -> Finding:
    """The driver lists no link because none is up: on a GPU that must have NVLink, a FAIL
    (or, where the topology matrix already shows it cut off, topology.nvlink's finding)."""
    message = f"{gpu_label(gpu)}: all NVLinks inactive (0/{links} active, nvidia-smi nvlink -s)"
    if cut_off:
        return finding(
            "gpu.nvlink",
            Status.SKIP,
            f"{message}: judged by topology.nvlink (no NVLink to any other GPU)",
            value=0,
            expected=str(links),
            unit="links",
        )
    return finding(
        "gpu.nvlink",
        Status.FAIL,
        message,
        value=0,
        expected=str(links),
        unit="links",
        action="check fabric manager / reseat the GPU baseboard, RMA if persistent",
    )


def _nvlink_states(facts: GpuFacts) -> list[Finding]:
    """Without a profile (a GPU none fits): the link states alone. A link down beside
    links up, or every link inactive, is a fault on any GPU; how many links and how fast
    are the profile's to say."""
    check = "gpu.nvlink"
    if not facts.gpus:
        return [no_gpus(check)]

    def one(gpu: Gpu) -> list[Finding] | None:
        if gpu.nvlinks_all_inactive and not gpu.nvlinks:
            what = "all NVLinks inactive"
        elif not gpu.nvlinks:
            return None
        elif down := [link.link for link in gpu.nvlinks if not link.active]:
            up = len(gpu.nvlinks) - len(down)
            what = f"{_links(down)} down ({up}/{len(gpu.nvlinks)} active)"
        else:
            return []
        return [
            finding(
                check,
                Status.FAIL,
                f"{gpu_label(gpu)}: {what}",
                action="check fabric manager / reseat the GPU baseboard, RMA if persistent",
            )
        ]

    return judge_each_gpu(
        check,
        facts,
        one,
        ok="every NVLink reported is active (no profile: link count and speed not judged)",
        unreported="NVLink state not reported",
    )


def _nvlink_one(gpu: Gpu, profile: Profile, cut_off: bool) -> list[Finding] | None:
    """All the profile's links up, at the profile's version and speed.

    `cut_off`: the topology matrix shows this GPU without NVLink to any other GPU; its
    links down are then topology.nvlink's finding, and here a SKIP that points to it.
    """
    spec = profile.nvlink
    if spec is not None and gpu.nvlinks_all_inactive and not gpu.nvlinks:
        return [_all_inactive(gpu, spec.links_per_gpu, cut_off)]
    if spec is None or not gpu.nvlinks:
        return None
    check, name = "gpu.nvlink", gpu_label(gpu)
    action = "check fabric manager / reseat the GPU baseboard, RMA if persistent"
    found = []
    active = [link for link in gpu.nvlinks if link.active]
    if len(active) < spec.links_per_gpu:
        down = [link.link for link in gpu.nvlinks if not link.active]
        if not active:
            what = f"all {len(down)} links down"
        elif down:
            what = f"{_links(down)} down"
        else:
            what = f"{len(gpu.nvlinks)} links reported"
        if cut_off:
            found.append(
                finding(
                    check,
                    Status.SKIP,
                    f"{name}: {what}: judged by topology.nvlink "
                    "(no NVLink to any other GPU in the topology matrix)",
                    value=len(active),
                    expected=str(spec.links_per_gpu),
                    unit="links",
                )
            )
        else:
            found.append(
                finding(
                    check,
                    Status.FAIL,
                    f"{name}: {what} ({len(active)}/{spec.links_per_gpu} active)",
                    value=len(active),
                    expected=str(spec.links_per_gpu),
                    unit="links",
                    action=action,
                )
            )
    if gpu.nvlink_version is not None and gpu.nvlink_version != spec.version:
        found.append(
            finding(
                check,
                Status.FAIL,
                f"{name}: NVLink {gpu.nvlink_version}, expected NVLink {spec.version}",
                value=gpu.nvlink_version,
                expected=str(spec.version),
                action=f"the {profile.name} profile describes NVLink {spec.version} GPUs: "
                "judge this node with the profile of its GPU (`--profile auto`, or a name from "
                "`bringup profiles list`)",
            )
        )
    slow = [
        link.link
        for link in active
        if link.speed_bytes_per_s is not None
        and link.speed_bytes_per_s / 1e9 < spec.link_speed_gb_s - NVLINK_SPEED_TOLERANCE_GB_S
    ]
    if slow:
        speed = min(link.speed_bytes_per_s or 0.0 for link in active) / 1e9
        found.append(
            finding(
                check,
                Status.WARN,
                f"{name}: {'all links' if len(slow) == len(active) else _links(slow)} "
                f"at {speed:.3f} GB/s, "
                f"expected {spec.link_speed_gb_s:.3f} GB/s",
                value=speed,
                expected=f">= {spec.link_speed_gb_s}",
                unit="GB/s",
                action=action,
            )
        )
    return found


def judge_nvlink(
    facts: GpuFacts, profile: Profile, topology: TopologyFacts | None = None
) -> list[Finding]:
    """Every GPU's links up at the profile's version and speed (NVML, or `nvlink -s`)."""
    if not has_profile(profile):
        return _nvlink_states(facts)
    check, spec = "gpu.nvlink", profile.nvlink
    if not facts.gpus:
        return [no_gpus(check)]
    if spec is None:
        return [finding(check, Status.SKIP, "the profile expects no NVLink (PCIe system)")]
    cut_off: set[int] = set()
    if topology is not None:  # the topology checks (and probe) load for a node that ran it
        from bringup.checks.topology import gpus_without_nvlink

        cut_off = set(gpus_without_nvlink(topology))
    return judge_each_gpu(
        check,
        facts,
        lambda gpu: _nvlink_one(gpu, profile, gpu.index in cut_off),
        ok=f"{spec.links_per_gpu}/{spec.links_per_gpu} NVLink {spec.version} links active",
        unreported="NVLink state not reported",
    )


# ---------------------------------------------------------------------------------------
# gpu.fabric


def _normal(text: str) -> str:
    """'In Progress' -> 'in_progress': NVML names and nvidia-smi words compare equal."""
    return "_".join(text.lower().split())


def _fabric_required(profile: Profile) -> bool:
    """The profile's GPUs reach each other only through the NVLink fabric (NVL72 trays).
    Without a profile (a GPU none fits) the fabric is judged by what it reports alone."""
    return (
        isinstance(profile, Profile)
        and profile.nvlink is not None
        and profile.nvlink.fabric_required
    )


def _fabric_one(gpu: Gpu, required: bool) -> list[Finding] | None:
    """NVSwitch systems: Fabric Manager registered the GPU in the NVLink fabric; on a
    tray of a multi-node NVLink domain, in a clique (0 is "none": the rack's other trays
    are out of reach over NVLink)."""
    if gpu.fabric_state is None or _normal(gpu.fabric_state) == "not_supported":
        if required and gpu.fabric_state is not None:
            return [_fabric_fail(gpu, "fabric not supported", "not_supported")]
        return None
    state, status = _normal(gpu.fabric_state), gpu.fabric_status
    if state == "completed" and (status is None or _normal(status) == "success"):
        if required and gpu.fabric_clique_id == 0:
            return [_fabric_fail(gpu, "fabric registration completed but clique 0", 0)]
        return []
    # The status is shown as reported: it is the error the operator will search for.
    detail = f"fabric state {state}" + (f", status {status}" if status else "")
    return [_fabric_fail(gpu, detail, state)]


def _fabric_fail(gpu: Gpu, detail: str, value: str | int) -> Finding:
    return finding(
        "gpu.fabric",
        Status.FAIL,
        f"{gpu_label(gpu)}: {detail}",
        value=value,
        expected="completed / success" + (", clique != 0" if value == 0 else ""),
        action="fabric manager has not finished: `systemctl status nvidia-fabricmanager` "
        "(its version must match the driver); on an NVL72 tray also the NVLink switch "
        "trays' fabric (`nvidia-smi -q | grep -A4 Fabric` shows the clique) and IMEX "
        "(`systemctl status nvidia-imex`)",
    )


def _cliques(facts: GpuFacts) -> str:
    """' (clique 2)' when the GPUs report one clique id other than 0, else ''."""
    ids = {g.fabric_clique_id for g in facts.gpus if g.fabric_clique_id is not None}
    return f" (clique {ids.pop()})" if len(ids) == 1 and 0 not in ids else ""


def judge_fabric(facts: GpuFacts, profile: Profile) -> list[Finding]:
    required = _fabric_required(profile)
    return judge_each_gpu(
        "gpu.fabric",
        facts,
        lambda gpu: _fabric_one(gpu, required),
        ok=f"fabric registration completed{_cliques(facts)}",
        unreported="fabric state not reported (pre-Hopper driver or not an NVSwitch system)",
    )
