"""`bringup learn`: a golden manifest of what every node of a fleet should show.

    bringup learn runs/2026-11-30-check/ --out golden.yaml     the fleet's majority
    bringup learn runs/2026-11-30-check/ --node node03         one node taken as the model
    bringup check --nodes hosts.ini --golden golden.yaml      every node judged against it

The manifest is YAML for a person to read and edit: per node the driver, CUDA, kernel,
kernel command line, firmware and NIC ports; per GPU its PCIe address, generation and
width, VBIOS, NVLink count and the state of each link, and its NIC's rate. A field deleted
from it is not checked. bringup/checks/consistency.py says what each field is.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from bringup.commands.common import JsonOpt, QuietOpt, fail, load_facts, out, print_envelope
from bringup.files import write_atomic


def learn(
    run_dir: Annotated[Path, typer.Argument(help="A run or snapshot directory (its facts/).")],
    node: Annotated[
        str | None, typer.Option("--node", help="Take this node as the model, not the majority.")
    ] = None,
    out_file: Annotated[
        Path, typer.Option("--out", "-o", help="Where to write the manifest.")
    ] = Path("golden.yaml"),
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Write a golden manifest from a run's facts: the fleet's majority, or one node."""
    from bringup.checks.consistency import FIELDS_HELP, fleet_fields, majority, to_manifest

    fleet = fleet_fields(load_facts(run_dir))
    if not any(fleet.values()):
        fail(f"{run_dir}: no gpu, host or topology facts to learn from")
    split: dict[str, list[str]] = {}
    if node is not None:
        if node not in fleet:
            fail(f"--node {node}: not in {run_dir} (nodes: {', '.join(sorted(fleet))})")
        fields = {k: v for group in fleet[node].values() for k, v in group.items()}
        origin = f"node {node} of {run_dir}"
    else:
        fields, split = majority(fleet)
        origin = f"the majority of {len(fleet)} node(s) of {run_dir}"
    header = [
        f"# Golden manifest: learned from {_comment(origin)}",
        f"# by `bringup learn` on {datetime.now().astimezone():%Y-%m-%d %H:%M %Z}.",
        "# `bringup check --golden THIS_FILE` FAILs every node and field that differs.",
        "# Edit freely: a field removed is not checked. Fields:",
        *(f"#   {line}" for line in FIELDS_HELP.splitlines()),
    ]
    if split:
        header.append("# Not learned, no majority among the nodes (value: the values seen):")
        header += [
            f"#   {_comment(key)}: {', '.join(map(_quoted, values))}"
            for key, values in sorted(split.items())
        ]
    try:
        write_atomic(out_file, "\n".join(header) + "\n" + _yaml(to_manifest(fields)))
    except OSError as exc:
        fail(f"cannot write {out_file}: {exc.strerror}")
    if as_json:
        data = {"golden": str(out_file), "fields": len(fields), "not_learned": split}
        print_envelope([], judged=False, data=data)
        return
    out.print(f"{out_file}: {len(fields)} fields from {origin}", highlight=False, soft_wrap=True)
    if split and not quiet:
        out.print(f"not learned (no majority): {', '.join(sorted(split))}", highlight=False)


# --- the YAML: every string a node sent is data, never syntax ------------------------------


class _Quoted(str):
    """A string value (a node's kernel, VBIOS, NIC name ...): written double-quoted, so a
    newline or a `key: value` in it stays inside the value (an escape, not a new line)."""


def _quote_strings(value: Any) -> Any:
    """The document with every string value a _Quoted (mapping keys stay as they are: the
    emitter quotes one that needs it)."""
    if isinstance(value, dict):
        return {key: _quote_strings(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_quote_strings(inner) for inner in value]
    return _Quoted(value) if isinstance(value, str) else value


def _yaml(doc: dict[str, Any]) -> str:
    """The manifest through PyYAML's emitter. Flow style for lists and mappings of plain
    values: a GPU's 18 link states on one line. No width: a long value is never folded."""
    import yaml  # here, not at start-up: `bringup --help` stays fast

    class Dumper(yaml.SafeDumper):
        pass

    def quoted(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
        return dumper.represent_scalar("tag:yaml.org,2002:str", text, style='"')

    Dumper.add_representer(_Quoted, quoted)
    return yaml.dump(
        _quote_strings(doc),
        Dumper=Dumper,
        sort_keys=False,
        width=float("inf"),
        default_flow_style=None,
        allow_unicode=False,
    )


def _quoted(text: str) -> str:
    """A value inside a comment line: a JSON string, which escapes every line break (also
    U+0085 and U+2028, which YAML counts as ones) and control character."""
    return json.dumps(text, ensure_ascii=True)


def _comment(text: str) -> str:
    """Text inside a comment line, on that one line (see _quoted), without its quotes."""
    return _quoted(text)[1:-1]
