"""The one JSON document every command prints with --json: the envelope.

    {"bringup": "0.1.0", "command": "check", "exit_code": 1, "verdict": "NOT ACCEPTED",
     "run_dir": "runs/...", "nodes": [...], "findings": [...], "data": {...}}

Every command, every outcome (a refusal too: exit 2 with "error") prints this shape, so a
script reads `exit_code`, `verdict` and `findings` the same way whatever it ran; what is
the command's own (inspect's facts, a plan, the metrics the exporter would serve) is under
`data`. The models here are the contract: docs/schema/bringup-output.schema.json is
generated from them (`python -m bringup.commands.envelope > FILE`; a test keeps the two
equal) and docs/json.md explains each field.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bringup import __version__
from bringup.findings import Finding

SCHEMA_FILE = "docs/schema/bringup-output.schema.json"
# Keys left out of the document when they have nothing to say.
OPTIONAL = ("run_dir", "nodes", "data", "error", "provenance")


class ProbeState(BaseModel):
    """One probe on one node: whether it recorded facts, else why not."""

    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)

    ok: bool
    error: str | None = None


class NodeEntry(BaseModel):
    """One node of the run and what became of it."""

    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)

    node: str
    state: str = Field(
        description="complete, unreachable, error, interrupted (a run); recorded (facts "
        "judged again by check --replay / --demo); a provisioning host's ansible status"
    )
    reason: str | None = Field(default=None, description="Why the node is not complete")
    seconds: float | None = Field(default=None, description="Wall time spent on the node")
    probes: dict[str, ProbeState] | None = Field(
        default=None, description="Each probe recorded on the node (snapshot, replay, demo)"
    )


class Origin(BaseModel):
    """Where the judged facts came from, derived from every record (bringup/provenance.py)."""

    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)

    mode: str = Field(
        description="live (every record measured live by this run), else the kinds of "
        "record met joined by '+': demo, replayed, file, simulated ('demo+replayed')"
    )
    live: bool = Field(description="Every record measured live: only then can it be ACCEPTED")
    reasons: list[str] = Field(
        description="Why not live, as the verdict line says: 'demo data', 'replayed from "
        "d', 'simulated GPUs', 'facts from files on node03'"
    )


class Envelope(BaseModel):
    """What `bringup COMMAND --json` prints on stdout: one document, nothing else."""

    model_config = ConfigDict(extra="forbid", title="bringup --json output")

    bringup: str = Field(description="The bringup version that wrote the document")
    command: str = Field(description="The command, subcommands joined by spaces: 'profiles list'")
    exit_code: int = Field(
        ge=0,
        description="The process's exit code: a command that judges 0 only for ACCEPTED, "
        "1 NOT ACCEPTED (of any cause); other commands 0 success, 1 failed; 2 refused",
    )
    verdict: Literal["ACCEPTED", "NOT ACCEPTED"] | None = Field(
        description="The acceptance verdict of a command that judges; null when it judges "
        "nothing (profiles, plan, sim, snapshot, ...) or refused the input"
    )
    run_dir: str | None = Field(default=None, description="The run directory written")
    nodes: list[NodeEntry] | None = Field(default=None, description="The nodes of the run")
    findings: list[Finding] = Field(description="Every finding, as in findings.jsonl")
    data: dict[str, Any] | None = Field(
        default=None, description="The command's own payload (docs/json.md lists each)"
    )
    error: str | None = Field(default=None, description="Why the input was refused (exit 2)")
    provenance: Origin | None = Field(
        default=None, description="A command that judges: where the judged facts came from"
    )


def document(
    command: str,
    exit_code: int,
    findings: list[Finding],
    verdict: Literal["ACCEPTED", "NOT ACCEPTED"] | None,
    **optional: Any,
) -> dict[str, Any]:
    """The envelope as JSON data, without the optional keys that hold nothing."""
    envelope = Envelope(
        bringup=__version__,
        command=command,
        exit_code=exit_code,
        verdict=verdict,
        findings=findings,
        **optional,
    )
    doc = envelope.model_dump(mode="json")
    for key in OPTIONAL:
        if doc[key] is None:
            del doc[key]
    return doc


def schema() -> dict[str, Any]:
    """The published JSON Schema (draft 2020-12) of the envelope."""
    generated = Envelope.model_json_schema(mode="serialization")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **generated,
    }


def schema_text() -> str:
    """The schema as the committed file holds it."""
    return json.dumps(schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    print(schema_text(), end="")
