"""The real `bringup` CLI, two ways.

run_cli: in a child process (`python -m bringup.cli ARGS`), as a user starts it: its own
interpreter, exit code, stdout and stderr apart. The integration tests use it.
invoke: in this process (Typer's CliRunner on the real `bringup.cli.app`): fast, for tests of
what a command says and exits with when nothing has to run for real.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from click.testing import Result
from typer.testing import CliRunner

from bringup.cli import app
from tests.support.timing import scaled


def run_cli(
    *args: str | Path,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """`bringup ARGS` in a child process; env None keeps this process's environment.
    `timeout` bounds a hang: it is scaled by BRINGUP_TEST_TIME_SCALE (tests/support/timing.py)."""
    return subprocess.run(
        [sys.executable, "-m", "bringup.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=scaled(timeout),
        check=False,
    )


def start_cli(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """`bringup ARGS` started in a child process, for a test that stops it with a signal
    (Ctrl-C: `send_signal(signal.SIGINT)`); stdout and stderr are pipes.

    SIGINT is reset to its default in the child: a shell starts a background job (`make test
    &`, nohup, a CI runner's script) with SIGINT ignored, every child inherits that, and
    Python then installs no KeyboardInterrupt handler, so the CLI would never see the test's
    Ctrl-C (the run went on to its own deadline and the test timed out)."""
    return subprocess.Popen(
        [sys.executable, "-m", "bringup.cli", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=env,
        preexec_fn=_default_sigint,
    )


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def valid_envelope(doc: dict[str, Any]) -> dict[str, Any]:
    """The document, after validating it against the published --json schema (docs/json.md)."""
    import jsonschema

    from tests.support import REPO

    schema = json.loads((REPO / "docs" / "schema" / "bringup-output.schema.json").read_text())
    jsonschema.validate(doc, schema)
    return doc


def nodes_of(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The envelope's `nodes` (a list, docs/json.md) by node name."""
    return {entry["node"]: entry for entry in doc.get("nodes") or []}


def invoke(*args: str | Path) -> Result:
    """`bringup ARGS` in this process; result.stdout and result.stderr are kept apart."""
    return CliRunner().invoke(app, [str(a) for a in args])
