"""sbatch scripts for sites that submit the jobs themselves (`bringup slurm render`).

The script runs the same `bringup` command a person would (`check`, `nccl`, `burnin`
with `--slurm`, inside the allocation sbatch gives it); its #SBATCH lines and its comment
come from the plan that command makes (fleet.plan): the probes each node runs and their
timeouts, from which the default time limit is computed. Every value is shell-quoted
(shlex.quote; sbatch reads #SBATCH lines with the same quoting); one that no quoting
makes safe on one line (a newline, a backslash) is refused.

    script = render(JobScript(title=..., command="check", argv=[...], steps=plan_steps,
                              nodes=4, partition="gpu", ...))
"""

from __future__ import annotations

import functools
import math
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from bringup import __version__

TEMPLATES = Path(__file__).resolve().parent.parent / "templates" / "slurm"
# Seconds a job needs beyond its nodes' deadlines: the allocation, srun starting the node
# side on every node, judging and writing the report.
JOB_SLACK_S = 300.0


class SbatchError(Exception):
    """A value cannot be written into the script safely; one line."""


@dataclass
class JobScript:
    """Everything the template needs, each value as the user gave it (quoted there)."""

    title: str
    command: str  # check, nccl or burnin
    name: str  # the suite's name: part of the run directory's name
    argv: list[str]  # the bringup command line the job runs, before --out
    steps: list[dict[str, Any]]  # the plan's probes: {"name", "timeout_s"}
    source: str  # where the plan came from, for the comment
    nodes: int
    time: str
    time_note: str
    runs: str = "runs"
    job_name: str = "bringup"
    partition: str | None = None
    account: str | None = None
    nodelist: str | None = None


def time_limit(seconds: float) -> str:
    """Slurm's time format, whole minutes rounded up: 0:42:00, 1-02:00:00."""
    minutes = max(1, math.ceil(seconds / 60))
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    clock = f"{hours:d}:{minutes:02d}:00"
    return f"{days}-{hours:02d}:{minutes:02d}:00" if days else clock


def job_seconds(node_deadline_s: float) -> float:
    """The job's time: the nodes run at once, each within its plan's deadline."""
    return node_deadline_s + JOB_SLACK_S


def safe(value: str, what: str) -> str:
    """The value, or SbatchError when quoting cannot keep it on its one line: a control
    character ends the #SBATCH line (and starts a shell line), and sbatch reads a
    backslash as an escape even inside quotes."""
    for char in value:
        if not char.isprintable() or char == "\\":
            raise SbatchError(f"{what} {value!r}: no control characters or backslashes")
    return value


def _comment(value: object) -> str:
    """Text for a comment line: printable, one line."""
    return "".join(c if c.isprintable() else " " for c in str(value))


@functools.cache
def environment() -> jinja2.Environment:
    """One environment per process: Jinja2 keeps the template it compiled."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,  # a typo in a template is an error, not a blank
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # a shell script, not HTML: quoting is the `q` filter's
    )
    env.filters["q"] = shlex.quote
    return env


def render(job: JobScript) -> str:
    """The sbatch script; SbatchError when a value cannot be written safely."""
    for what, value in (
        ("--job-name", job.job_name),
        ("--partition", job.partition),
        ("--account", job.account),
        ("--nodelist", job.nodelist),
        ("--time", job.time),
        ("--runs", job.runs),
        *(("argument", a) for a in job.argv),
    ):
        if value is not None:
            safe(value, what)
    return (
        environment()
        .get_template("job.sbatch.j2")
        .render(
            version=__version__,
            title=_comment(job.title),
            command=job.command,
            source=_comment(job.source),
            steps=[{"name": _comment(s["name"]), "timeout_s": s["timeout_s"]} for s in job.steps],
            time_note=_comment(job.time_note),
            job_name=job.job_name,
            nodes=job.nodes,
            nodelist=job.nodelist,
            partition=job.partition,
            account=job.account,
            time=job.time,
            runs=job.runs,
            name=job.name,
            argv=job.argv,
        )
    )
