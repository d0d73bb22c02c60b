"""Facts as the controller holds them: one record per probe per node, as JSON on disk.

The probe dataclasses (bringup/node/probes/*) are the schema; here one validator,
`validate_facts`, turns the JSON a node sent (or a file someone recorded) back into those
dataclasses: msgspec's `convert` in strict mode, which builds the stdlib dataclasses
themselves and refuses what does not fit (docs/json.md, "How a probe's facts are read").

The records around them (`ProbeRecord`, `NodeFacts`) are plain dataclasses too: built by
the tool's own code as they are, read from what a node sent or a file holds by
`read_record` and `read_node_facts` (bringup/jsondata.py: msgspec, strict), and written
by `record_text` and `node_facts_text` byte for byte as the pydantic models wrote them.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import msgspec

from bringup import jsondata
from bringup.node.catalog import PROBES
from bringup.provenance import Origin, Provenance, Source, origin_of


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeRecord:
    """What one probe returned on one node (raw outputs live apart, in raw/<node>/<probe>/).

    Frozen: a node's record is replaced by a newer one, never changed (RunDir.add_record),
    so copies of a node's map of records share them."""

    probe: str
    ok: bool
    error: str | None = None
    facts: dict[str, Any] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    started_at: str | None = None
    duration_s: float = 0.0
    # Where the facts came from, oldest step first (bringup/provenance.py); empty: measured
    # live by the run that recorded it.
    provenance: list[Source] = field(default_factory=list)

    def __post_init__(self) -> None:
        # A float however it was given (duration_s=0): 0.0 in the JSON, as the model wrote it.
        if type(self.duration_s) is int:
            object.__setattr__(self, "duration_s", float(self.duration_s))

    def with_source(self, source: Source) -> ProbeRecord:
        """This record one step further from its measurement (a replay, a file)."""
        return replace(self, provenance=[*self.provenance, source])


@dataclass(slots=True, kw_only=True)
class NodeFacts:
    """facts/<node>.json: every probe record of one node."""

    node: str
    bringup_version: str
    collected_at: str
    probes: dict[str, ProbeRecord] = field(default_factory=dict)

    def headers(self) -> NodeFacts:
        """The node with each record's facts cut to their top-level scalars (a burn-in's
        device_kind, a probe's tool version): what it ran, when, how it ended and where
        it came from, without the bulk (per-GPU lists, samples, curves). What a reader of
        a whole fleet keeps once it has taken the rest from the node (commands/report.py)."""
        probes = {
            name: replace(record, facts=_scalars(record.facts))
            for name, record in self.probes.items()
        }
        return replace(self, probes=probes)


# --- records as JSON: facts/<node>.json, the journal's lines, a node's answer ---------------


def record_text(record: ProbeRecord) -> str:
    """The record as one line of JSON (no newline): a journal line's `record`, written as
    the pydantic model wrote it (`model_dump_json()`)."""
    return jsondata.dumps(record)


Journaled = tuple[ProbeRecord, str]  # a record and its record_text, as the journal took it
_NO_PROBES = '"probes":{}}'


def node_facts_text(facts: NodeFacts, texts: Mapping[str, Journaled] | None = None) -> str:
    """facts/<node>.json's text: `model_dump_json(indent=2)` of the model, and a newline.

    `texts`: probe -> (the record, its record_text) as the run journaled them. Where they
    are every record the node holds, the file is laid out from those texts rather than
    each record encoded (and searched for exponents) again: the same bytes, since msgspec's
    `format` keeps each value's text as it is and a record's text is the same alone or in
    its node's (tests/unit/test_facts_text.py)."""
    laid_out = _from_journaled(facts, texts) if texts else None
    return laid_out if laid_out is not None else jsondata.dumps(facts, indent=True) + "\n"


def _from_journaled(facts: NodeFacts, texts: Mapping[str, Journaled]) -> str | None:
    """The facts file's text from its records' journaled texts; None unless they are every
    record the node holds, each text that of the very record held."""
    if len(texts) != len(facts.probes):
        return None
    members = []
    for name, record in facts.probes.items():
        journaled = texts.get(name)
        if journaled is None or journaled[0] is not record:
            return None
        members.append(f"{jsondata.dumps(name)}:{journaled[1]}")
    head = jsondata.dumps(replace(facts, probes={}))  # {"node":...,"probes":{}}
    if not head.endswith(_NO_PROBES):
        return None
    compact = f'{head[: -len(_NO_PROBES)]}"probes":{{{",".join(members)}}}}}'
    return msgspec.json.format(compact.encode("utf-8"), indent=2).decode() + "\n"


def record_json(record: ProbeRecord) -> dict[str, Any]:
    """The record as JSON data (what a node sends for it, and `--json` shows): a number
    that is not finite is None, as pydantic's `model_dump(mode="json")` gave it, so no
    document made from it holds a NaN or an Infinity that JSON has no form for."""
    data: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(record))
    return data


def read_record(data: object) -> ProbeRecord:
    """A record from JSON data (a node's answer as the transport parsed it, or a journal
    line's `record`): strict, jsondata.Invalid naming where it does not fit. Keys the
    record does not name are passed over (a newer node's record still reads)."""
    return jsondata.convert(data, ProbeRecord)


def read_node_facts(text: bytes | str) -> NodeFacts:
    """facts/<node>.json (or a recorded one someone gives), strict: jsondata.Invalid
    naming where it does not fit."""
    return jsondata.load(text, NodeFacts)


def _scalars(facts: dict[str, Any] | None) -> dict[str, Any] | None:
    if facts is None:
        return None
    return {k: v for k, v in facts.items() if v is None or isinstance(v, str | int | float | bool)}


def origin(nodes: list[NodeFacts], made: Provenance | None = None) -> Origin:
    """Where the facts of these nodes came from: live only if every record is."""
    chains = ((n.node, r.provenance) for n in nodes for r in n.probes.values())
    return origin_of(chains, made)


class FactsError(ValueError):
    """Recorded facts do not match the probe's schema (an edited or foreign file)."""


T = TypeVar("T")

_READY: set[type] = set()  # the facts types msgspec has read once: its schema of each made
_FIRST_READ = threading.Lock()


def validate_facts(probe: str, facts_type: type[T], data: object) -> T:
    """`data` (JSON as read: dicts, lists, str, int, float, bool, None) as the probe's facts
    dataclass, or FactsError naming where it does not fit, in one line.

    Strict: a value is taken only in the form the node's probes write it (their dataclass
    through `dataclasses.asdict` and json), never coerced from another ("3" for an int, 1
    for a bool); an int is taken for a float, as json writes a float field that holds
    one. Keys the type does not name are passed over (a newer node's facts still read).
    msgspec keeps what it learns of each type on the type, so the first record of a probe
    pays for its schema and the next ones do not."""
    try:
        if facts_type in _READY:
            return msgspec.convert(data, facts_type, strict=True)
        # The first read of a type builds msgspec's schema of it. Under a lock: a fleet
        # run's threads judge their first nodes together, and each would build its own.
        with _FIRST_READ:
            try:
                return msgspec.convert(data, facts_type, strict=True)
            finally:
                _READY.add(facts_type)
    except msgspec.ValidationError as exc:
        raise FactsError(f"facts of probe {probe!r} invalid {jsondata.reason(exc)}") from None


# A node's records decoded while `decoded_once()` holds: the report reads each node's
# gpu record three times (its figures, its identity marks, its GPU's profile), and the
# record's validation was the largest part of reading a node (docs/scale.md).
_DECODED: ContextVar[dict[int, tuple[ProbeRecord, Any, FactsError | None]] | None] = ContextVar(
    "_DECODED", default=None
)


@contextmanager
def decoded_once() -> Iterator[None]:
    """Within it, each record is validated once: decode() gives the same answer (its
    facts, or its FactsError) to every reader of the same record object."""
    token = _DECODED.set({})
    try:
        yield
    finally:
        _DECODED.reset(token)


def decode(record: ProbeRecord) -> Any:
    """The probe's facts dataclass from a record that is ok; FactsError when it does not fit."""
    memo = _DECODED.get()
    if memo is None:
        return _decode(record)
    held = memo.get(id(record))
    if held is None or held[0] is not record:  # an id is reused only once its object is gone
        try:
            held = (record, _decode(record), None)
        except FactsError as exc:
            held = (record, None, exc)
        memo[id(record)] = held
    if held[2] is not None:
        raise held[2]
    return held[1]


def _decode(record: ProbeRecord) -> Any:
    if record.probe not in PROBES:
        raise FactsError(f"unknown probe {record.probe!r}")
    return validate_facts(record.probe, PROBES[record.probe].FACTS, record.facts)


# Probes whose facts class exists but that a catalog may not list yet; decoded directly.
_EXTRA_FACTS: dict[str, str] = {"nccl": "bringup.node.probes.nccl"}


def decode_record(record: ProbeRecord) -> tuple[Any | None, str | None]:
    """(facts dataclass, None), or (None, why not): failed probe, unknown or invalid schema.

    Never raises: a report shows every record it can. An unknown probe (one added after
    this version was written) is not an error: its facts are shown as recorded, and the
    reason says so.
    """
    if not record.ok:
        return None, record.error or "probe failed without a reason"
    if record.probe in PROBES:
        try:
            return decode(record), None
        except FactsError as exc:
            return None, str(exc)
    module = _EXTRA_FACTS.get(record.probe)
    if module is None:
        return None, f"probe {record.probe!r} not known to this report: shown as recorded"
    facts_type = importlib.import_module(module).FACTS
    try:
        return validate_facts(record.probe, facts_type, record.facts), None
    except FactsError as exc:
        return None, str(exc)
