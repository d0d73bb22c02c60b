"""Command-line options that several commands share, so each means the same everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

ProfileOpt = Annotated[
    str, typer.Option("--profile", "-p", help="Profile name (b300, h100, ...) or YAML path.")
]
SuiteOpt = Annotated[str, typer.Option("--suite", "-s", help="Suite name or YAML path.")]
DataDirOpt = Annotated[
    list[Path] | None,
    typer.Option("--data-dir", help="Directory for the NVMe and free-space checks (repeatable)."),
]
OutOpt = Annotated[
    Path | None, typer.Option("--out", "-o", help="Run directory (default runs/<time>-<cmd>).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document, nothing else.")]
NodesOpt = Annotated[
    Path | None,
    typer.Option("--nodes", "-n", help="Ansible inventory (hosts.ini, YAML): run over SSH."),
]
LimitOpt = Annotated[
    str | None, typer.Option("--limit", "-l", help="Select hosts as ansible --limit does.")
]
ForksOpt = Annotated[int, typer.Option("--forks", "-f", min=1, help="Nodes run at once.")]
AcceptOpt = Annotated[
    bool,
    typer.Option("--accept-new-hostkeys", help="Trust (and record) host keys seen the first time."),
]
ConnectTimeoutOpt = Annotated[
    float, typer.Option("--connect-timeout", min=0.1, help="Seconds for TCP, banner and auth.")
]
