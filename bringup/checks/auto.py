"""--profile auto: each node is judged by the shipped profile of its own GPU model.

The model comes from the node's facts: the gpu probe's names, else the GPU the gemm,
burn-in or nccl probe ran on, else the names the telemetry probe read (diagnose --watch).
profile.for_gpu maps it to a profile (exactly, else by family).
A node with no GPU, or one whose model no profile knows, gets one ERROR finding
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


def node_model(node: NodeFacts) -> tuple[str | None, str | None]:
    """The node's GPU model, or None with why none is known: the error of a probe that
    names GPUs, else of any probe (a node whose only probe could not run)."""
    why = None
    for probe in (*_MODEL_PROBES, *[p for p in node.probes if p not in _MODEL_PROBES]):
        record = node.probes.get(probe)
        if record is None:
            continue
        if not record.ok:
            why = why or f"{probe} probe: {record.error or 'failed'}"
            continue
        if probe not in _MODEL_PROBES:
            continue
        try:
            model = gpu_model(probe, decode(record))
        except FactsError as exc:
            why = why or str(exc)
            continue
        if model:
            return model, None
    return None, why


def judge_gpu_model(
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


# Probes whose checks read nothing of a profile (a test holds them to it): judged even on a
# node, or in a capture, whose GPU no profile fits.
WITHOUT_PROFILE = frozenset({"xid", "dcgm"})


class NoProfile:
    """What the checks of WITHOUT_PROFILE are given: any use of it is a bug, said loudly."""

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"no profile fits this GPU: profile.{name} is not known")


NO_PROFILE: Any = NoProfile()


def judge_node_model(node: NodeFacts) -> tuple[Profile | None, Finding]:
    """The profile of the node's own GPU (and the PASS naming it), or None and the ERROR
    naming why there is none."""
    model, why = node_model(node)
    return judge_gpu_model(model, why, node.node)


def judge_node_by(node: NodeFacts, profile: Profile | str) -> list[Finding]:
    """The node's findings by the profile given, or with AUTO by its own GPU's.

    With AUTO and no profile that fits, every check still has its finding, as the report
    counts them: the checks of WITHOUT_PROFILE are judged, those of a probe that could not
    run are ERRORs with its reason (they read nothing of a profile), and those of a probe
    that measured are ERRORs "measured, not judged" that keep its figures (the NVMe
    figures of a GPU-less node are shown, never passed).
    """
    if isinstance(profile, Profile):
        return judge_node(node, profile)
    chosen, said = judge_node_model(node)
    if chosen is not None:
        return [said, *judge_node(node, chosen)]
    free = {k: r for k, r in node.probes.items() if k in WITHOUT_PROFILE or not r.ok}
    measured = {k: r for k, r in node.probes.items() if k not in free}
    judged = judge_node(node.model_copy(update={"probes": free}), NO_PROFILE)
    unjudged = judge_node(node.model_copy(update={"probes": measured}), _stand_in())
    return [said, *judged, *_not_judged(unjudged, said)]


def _stand_in() -> Profile:
    """A profile to read figures with when none fits: its thresholds never reach a verdict."""
    from bringup.profile import load

    return load(available()[0])


def _not_judged(findings: list[Finding], said: Finding) -> list[Finding]:
    """Each finding of a measured probe as an ERROR: its figure kept, no threshold, no pass.

    The message names the check (so that a console does not fold them into one line as it
    does the checks of a probe that could not run) and why nothing judged it.
    """
    from bringup.checks.catalog import CHECKS

    described = {c.name: c.description for c in CHECKS}
    out = []
    for f in findings:
        what = described.get(f.check, f.check)
        crashed = f.message.startswith("check crashed")
        out.append(
            f.model_copy(
                update={
                    "status": Status.ERROR,
                    "message": f"{what}: measured, not judged: no profile fits this node's GPU",
                    "value": None if crashed else f.value,
                    "unit": None if crashed else f.unit,
                    "expected": None,
                    "action": said.action,
                }
            )
        )
    return out
