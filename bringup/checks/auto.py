"""--profile auto: each node is judged by the shipped profile of its own GPU model.

The model comes from the node's facts: the gpu probe's names, else the GPU the gemm,
burn-in or nccl probe ran on, else the names the telemetry probe read (diagnose --watch);
the PCI device id from the gpu probe, else from DCGM's device-id list. profile.for_gpu
maps them to a profile (the model exactly, else by family, else by device id: a driver
older than the GPU names it "NVIDIA Graphics Device"). A node with no GPU, or one no
profile knows, gets one ERROR finding naming the model, its device id and the profiles
there are: it is never judged by a profile chosen for it silently (a B300 profile on an
H100 fails every figure, for the wrong reason).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from bringup.checks import Check
from bringup.checks.catalog import checks_of_probes, judge_node
from bringup.facts import FactsError, NodeFacts, decode
from bringup.findings import Finding, Status
from bringup.node import gpu_ids
from bringup.profile import Profile, available, for_gpu

CHECK = "profile.auto"

# Probes whose facts name the GPU, the most direct first.
_MODEL_PROBES = ("gpu", "gemm", "burnin", "nccl", "telemetry")
# nccl-tests' device line, as the nccl facts keep it: "node005 device 0 [0x18] NVIDIA H100".
_NCCL_DEVICE = re.compile(r"\[[^\]]*\]\s*(?P<name>.+)$")


def gpu_model(probe: str, facts: Any) -> str | None:
    """The GPU model a probe's (decoded) facts name, if any: the first GPU that names one."""
    names: list[str] = []
    if probe == "gpu":
        names = [g.name for g in getattr(facts, "gpus", []) if g.error is None]
    elif probe == "gemm" and getattr(facts, "device", None) == "cuda":
        names = [g.name for g in facts.gpus]
    elif probe == "burnin":
        names = [getattr(facts, "device_name", None) or ""]
    elif probe == "nccl":
        names = [m["name"] for d in facts.devices if (m := _NCCL_DEVICE.search(d))]
    elif probe == "telemetry":
        names = [facts.gpu_names[k] for k in sorted(facts.gpu_names, key=_index)]
    elif probe == "topology":  # an environment dump names the GPUs above the matrix
        names = list(getattr(facts, "gpu_models", []))
    return next((n.strip() for n in names if n and n.strip() and n.strip() != "cpu"), None)


def _index(key: str) -> int:
    return int(key) if key.isdigit() else 1 << 30


def gpu_device_id(probe: str, facts: Any) -> str | None:
    """The PCI device id a probe's (decoded) facts give ("0x2941"), if any: the gpu probe's
    per GPU, DCGM's device-id list (its header prints them without "0x")."""
    ids: list[str | None] = []
    if probe == "gpu":
        ids = [g.pci_device_id for g in getattr(facts, "gpus", []) if g.error is None]
    elif probe == "dcgm":
        ids = list(getattr(getattr(facts, "report", None), "device_ids", []) or [])
    return next((n for i in ids if (n := gpu_ids.normal(i))), None)


def node_model(node: NodeFacts) -> tuple[str | None, str | None, str | None]:
    """The node's GPU model and PCI device id, or None with why none is known: the error of
    a probe that names GPUs, else of any probe (a node whose only probe could not run)."""
    why, model, device_id = None, None, None
    for probe in (*_MODEL_PROBES, *[p for p in node.probes if p not in _MODEL_PROBES]):
        record = node.probes.get(probe)
        if record is None:
            continue
        if not record.ok:
            why = why or f"{probe} probe: {record.error or 'failed'}"
            continue
        if probe not in (*_MODEL_PROBES, "dcgm"):
            continue
        try:
            facts = decode(record)
        except FactsError as exc:
            why = why or str(exc)
            continue
        model = model or (gpu_model(probe, facts) if probe in _MODEL_PROBES else None)
        device_id = device_id or gpu_device_id(probe, facts)
    if model or device_id:
        return model, None, device_id
    return None, why, None


def _named(model: str | None, device_id: str | None) -> str:
    """ "'NVIDIA Graphics Device', PCI device id 0x2941 (pci.ids: GB100 [HGX GB200])"."""
    parts = [repr(model)] if model else []
    if device_id:
        device_id = gpu_ids.normal(device_id) or device_id
        known = gpu_ids.pci_name(device_id)
        listed = f"pci.ids: {known}" if known else "not in bringup's table of data-center GPUs"
        parts.append(f"PCI device id {device_id} ({listed})")
    return ", ".join(parts)


def judge_gpu_model(
    model: str | None, why: str | None = None, node: str = "", device_id: str | None = None
) -> tuple[Profile | None, Finding]:
    """The profile of `model` (or, where its name fits none, of its PCI device id) and a
    PASS naming it, or None and the ERROR that says why no profile can be chosen."""
    chosen = for_gpu(model, device_id)
    if chosen is not None:
        # Named by its model as always; by its device id too where that is what fitted.
        shown = repr(model) if for_gpu(model) is not None else _named(model, device_id)
        said = f"judged by profile {chosen.name}: the GPU is {shown}"
        return chosen, Finding(
            node=node, check=CHECK, status=Status.PASS, message=said, value=chosen.name
        )
    names = ", ".join(available())
    if model or device_id:
        subject = (
            f"GPU model {_named(model, device_id)}"
            if model
            else f"GPU with {_named(None, device_id)}"
        )
        message = f"{subject} matches no profile (available: {names})"
        if gpu_ids.is_generic(model) and not device_id:
            message = (
                f"GPU model {model!r} is how a driver older than the GPU names it, and the "
                f"output carries no PCI device id to tell which GPU it is: no profile to "
                f"judge by (available: {names})"
            )
    else:
        seen = f" ({why})" if why else ""
        message = f"no GPU model in the facts{seen}: no profile to judge by (available: {names})"
    return None, Finding(
        node=node,
        check=CHECK,
        status=Status.ERROR,
        message=message,
        value=model or device_id,
        action="give --profile NAME, or a profile YAML of your own for this GPU (docs/profiles.md)",
    )


# Probes whose checks read nothing of a profile (a test holds them to it): judged with
# nothing chosen and nothing said, even on a node or capture whose GPU no profile fits.
WITHOUT_PROFILE = frozenset({"xid", "dcgm", "fabric"})
# The other probes' checks marked Check.profile_free (ECC, row remaps, fabric, NVLink link
# states, nccl-tests' #wrong) are judged on a GPU no profile fits too, beside the one
# profile.auto ERROR that stands for everything that needs a profile.


class NoProfile:
    """What the checks of WITHOUT_PROFILE are given: any use of it is a bug, said loudly."""

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"no profile fits this GPU: profile.{name} is not known")


NO_PROFILE: Any = NoProfile()


def judge_node_model(node: NodeFacts) -> tuple[Profile | None, Finding]:
    """The profile of the node's own GPU (and the PASS naming it), or None and the ERROR
    naming why there is none."""
    model, why, device_id = node_model(node)
    return judge_gpu_model(model, why, node.node, device_id)


def judge_node_by(node: NodeFacts, profile: Profile | str) -> list[Finding]:
    """The node's findings by the profile given, or with AUTO by its own GPU's.

    With AUTO and no profile that fits, every check still has its finding, as the report
    counts them: the checks that need no profile are judged, those of a probe that could not
    run are ERRORs with its reason (they read nothing of a profile), and those of a probe
    that measured are ERRORs "measured, not judged" that keep its figures (the NVMe
    figures of a GPU-less node are shown, never passed).
    """
    if isinstance(profile, Profile):
        return judge_node(node, profile)
    chosen, said = judge_node_model(node)
    if chosen is not None:
        return [said, *judge_node(node, chosen)]
    judged = judge_node(node, NO_PROFILE, profile_free_only=True)
    done = {f.check for f in judged}
    failed = {k: r for k, r in node.probes.items() if not r.ok}
    measured = {k: r for k, r in node.probes.items() if r.ok}
    # The checks of the node's probes: every finding below is one of theirs.
    checks = checks_of_probes(node.probes)
    unrun = judge_node(replace(node, probes=failed), NO_PROFILE)
    unjudged = judge_node(replace(node, probes=measured), _stand_in())
    found = [
        *judged,
        *[f for f in unrun if f.check not in done],
        *_not_judged([f for f in unjudged if f.check not in done], said, checks),
    ]
    # In the catalog's order, as a node judged by a profile: a probe's first check first.
    order = {c.name: i for i, c in enumerate(checks)}
    return [said, *sorted(found, key=lambda f: order.get(f.check, len(order)))]


def _stand_in() -> Profile:
    """A profile to read figures with when none fits: its thresholds never reach a verdict."""
    from bringup.profile import load

    return load(available()[0])


def _not_judged(findings: list[Finding], said: Finding, checks: list[Check]) -> list[Finding]:
    """Each finding of a measured probe as an ERROR: its figure kept, no threshold, no pass.

    The message names the check (so that a console does not fold them into one line as it
    does the checks of a probe that could not run) and why nothing judged it.
    """
    described = {c.name: c.description for c in checks}
    out = []
    for f in findings:
        what = described.get(f.check, f.check)
        crashed = f.message.startswith("check crashed")
        out.append(
            replace(
                f,
                status=Status.ERROR,
                message=f"{what}: measured, not judged: no profile fits this node's GPU",
                value=None if crashed else f.value,
                unit=None if crashed else f.unit,
                expected=None,
                action=said.action,
            )
        )
    return out
