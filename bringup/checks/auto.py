"""--profile auto: each node is judged by the shipped profile of its own GPU model.

The model comes from the node's facts: the gpu probe's names, else the GPU the gemm,
burn-in or nccl probe ran on. profile.for_gpu maps it to a profile (exactly, else by
family). A node with no GPU, or one whose model no profile knows, gets one ERROR finding
naming the model and the profiles there are: it is never judged by a profile chosen for
it silently (a B300 profile on an H100 fails every figure, for the wrong reason).
"""

from __future__ import annotations

import re
from typing import Any

from bringup.checks.catalog import judge_node
from bringup.facts import FactsError, NodeFacts, decode
from bringup.findings import Finding, Status
from bringup.profile import Profile, available, for_gpu

CHECK = "profile.auto"

# Probes whose facts name the GPU, the most direct first.
_MODEL_PROBES = ("gpu", "gemm", "burnin", "nccl")
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
    return next((n.strip() for n in names if n and n.strip() and n.strip() != "cpu"), None)


def node_model(node: NodeFacts) -> tuple[str | None, str | None]:
    """The node's GPU model, or None with why none is known (the gpu probe's error)."""
    why = None
    for probe in _MODEL_PROBES:
        record = node.probes.get(probe)
        if record is None:
            continue
        if not record.ok:
            why = why or f"{probe} probe: {record.error or 'failed'}"
            continue
        try:
            model = gpu_model(probe, decode(record))
        except FactsError as exc:
            why = why or str(exc)
            continue
        if model:
            return model, None
    return None, why


def choose(
    model: str | None, why: str | None = None, node: str = ""
) -> tuple[Profile | None, Finding]:
    """The profile of `model` and a PASS naming it, or None and the ERROR that says why
    no profile can be chosen."""
    chosen = for_gpu(model)
    if chosen is not None:
        said = f"judged by profile {chosen.name}: the GPU is {model!r}"
        return chosen, Finding(
            node=node, check=CHECK, status=Status.PASS, message=said, value=chosen.name
        )
    names = ", ".join(available())
    if model:
        message = f"GPU model {model!r} matches no profile (available: {names})"
    else:
        seen = f" ({why})" if why else ""
        message = f"no GPU model in the facts{seen}: no profile to judge by (available: {names})"
    return None, Finding(
        node=node,
        check=CHECK,
        status=Status.ERROR,
        message=message,
        value=model,
        action="give --profile NAME, or a profile YAML of your own for this GPU (docs/profiles.md)",
    )


def choose_for(node: NodeFacts) -> tuple[Profile | None, Finding]:
    """The profile of the node's own GPU (and the PASS naming it), or None and the ERROR
    naming why there is none."""
    model, why = node_model(node)
    return choose(model, why, node.node)


def judge(node: NodeFacts, profile: Profile | str) -> list[Finding]:
    """The node's findings by the profile given, or with AUTO by its own GPU's."""
    if isinstance(profile, Profile):
        return judge_node(node, profile)
    chosen, said = choose_for(node)
    return [said] if chosen is None else [said, *judge_node(node, chosen)]
