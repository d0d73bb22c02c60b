"""The `dcgm` probe: NVIDIA's own active diagnostic, `dcgmi diag -r N`, read test by test.

`dcgmi diag` asks the DCGM host engine (nv-hostengine) to run its diagnostic at a level:
1 is deployment checks (seconds), 2 adds short hardware tests (about two minutes), 3 adds
the stress and targeted power tests (about 15 minutes), 4 is extended
(docs/reference.md#dcgm-diagnostics). The probe asks for JSON (`-j`) where this dcgmi
offers it, which is read without the table's 45-character cuts, and for the table
otherwise; both are parsed by bringup/node/parsers/dcgm_diag.py. It never judges: what a
failed test means and what to do is `bringup.checks.dcgm`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from bringup.node import progress
from bringup.node.parsers.dcgm_diag import DiagReport, parse_diag
from bringup.node.result import ParseError, ProbeError, ProbeOutput
from bringup.node.simulated import tool_is_simulated
from bringup.node.tool import CommandResult, run, which

NOT_INSTALLED = "dcgmi not found (install DCGM: `bringup provision --tags dcgm`)"


@dataclass
class Params:
    level: int = 1  # dcgmi diag -r: 1 quick, 2 medium, 3 long, 4 extended
    gpus: str = ""  # dcgmi diag -i, "0,1": only these GPUs; "" = every GPU
    parameters: list[str] = field(default_factory=list)  # -p test.parameter=value, each
    timeout_s: float = 1500  # for dcgmi itself; the suite's step deadline is the hard one


@dataclass
class DcgmFacts:
    level: int  # 0: not known (an output someone sent, without its command line)
    command: str  # as run, for the report
    exit_code: int  # dcgmi's: non-zero when a test failed, so it is kept, not judged
    report: DiagReport


FACTS = DcgmFacts


def diag_argv(dcgmi: str, params: Params, json_output: bool) -> list[str]:
    if params.level not in (1, 2, 3, 4):
        raise ProbeError(f"level must be 1, 2, 3 or 4, not {params.level!r}")
    argv = [dcgmi, "diag", "-r", str(params.level)]
    if params.gpus:
        argv += ["-i", params.gpus]
    for parameter in params.parameters:
        argv += ["-p", parameter]
    return argv + (["-j"] if json_output else [])


def collect(params: Params) -> ProbeOutput:
    """Run the diagnostic at the level asked for and parse its verdicts."""
    dcgmi = which("dcgmi")
    if dcgmi is None:
        raise ProbeError(NOT_INSTALLED)
    json_output = offers_json(dcgmi)
    argv = diag_argv(dcgmi, params, json_output)
    progress.report(phase=f"dcgmi diag -r {params.level}")
    result = run(argv, params.timeout_s)
    command = shlex.join(["dcgmi", *argv[1:]])
    name = "dcgmi-diag.json" if json_output else "dcgmi-diag.txt"
    raw = {name: f"# command: {command}\n{result.stdout}", "dcgmi-diag.stderr": result.stderr}
    if result.timed_out:
        raise ProbeError(f"{command} timed out after {params.timeout_s:g} s", raw)
    try:
        report = parse_diag(result.stdout)
    except ParseError as exc:
        raise ProbeError(f"{command}: {why_no_verdict(result, exc)}", raw) from None
    facts = DcgmFacts(params.level, command, result.returncode, report)
    return ProbeOutput(facts, raw, simulated=["dcgmi"] if tool_is_simulated(dcgmi) else [])


def facts_from_output(text: str) -> DcgmFacts:
    """Facts of an output someone sent (`bringup inspect`); the level from its command line
    when the paste kept it ("dcgmi diag -r 2 ...")."""
    report = parse_diag(text)
    said = re.search(r"dcgmi diag\b[^\n]*?(?:-r|--run)[ =]?([1-4])\b", text)
    level = int(said.group(1)) if said else 0
    command = f"dcgmi diag -r {level}" if level else "dcgmi diag"
    return DcgmFacts(level, command, 0, report)


def offers_json(dcgmi: str) -> bool:
    """True when this dcgmi's `diag` takes -j/--json (every DCGM since 1.x does; a wrapper
    or a trimmed build may not, and the table is read instead)."""
    helped = run([dcgmi, "diag", "--help"], 30)
    return "--json" in helped.stdout + helped.stderr


def why_no_verdict(result: CommandResult, exc: ParseError) -> str:
    """What dcgmi said instead of verdicts: its own error line, with what to do."""
    said = [
        line.strip()
        for line in (result.stdout + "\n" + result.stderr).splitlines()
        if line.strip() and not line.lstrip().startswith(("{", "}", '"'))
    ]
    first = next((line for line in said if "rror" in line), said[0] if said else "")
    if "connection" in first.lower() or "host engine" in first.lower():
        return f"{first} (is the DCGM host engine running? `systemctl start nvidia-dcgm`)"
    if first:
        return first
    return f"no verdict in its output ({exc}; exit status {result.returncode})"
