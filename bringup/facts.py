"""Facts as the controller holds them: one record per probe per node, as JSON on disk.

The probe dataclasses (bringup/node/probes/*) are the schema; here pydantic validates the
JSON a node sent (or a file someone recorded) back into those dataclasses.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from bringup.node.catalog import PROBES


class ProbeRecord(BaseModel):
    """What one probe returned on one node (raw outputs live apart, in raw/<node>/<probe>/)."""

    probe: str
    ok: bool
    error: str | None = None
    facts: dict[str, Any] | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    started_at: str | None = None
    duration_s: float = 0.0


class NodeFacts(BaseModel):
    """facts/<node>.json: every probe record of one node."""

    node: str
    bringup_version: str
    collected_at: str
    probes: dict[str, ProbeRecord] = Field(default_factory=dict)


class FactsError(ValueError):
    """Recorded facts do not match the probe's schema (an edited or foreign file)."""


@cache
def _adapter(probe: str) -> TypeAdapter[Any]:
    return TypeAdapter(PROBES[probe].FACTS)


def decode(record: ProbeRecord) -> Any:
    """The probe's facts dataclass from a record that is ok; FactsError when it does not fit."""
    if record.probe not in PROBES:
        raise FactsError(f"unknown probe {record.probe!r}")
    try:
        return _adapter(record.probe).validate_python(record.facts)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise FactsError(
            f"facts of probe {record.probe!r} invalid at {where}: {err['msg']}"
        ) from None
