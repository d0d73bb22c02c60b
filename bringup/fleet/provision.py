"""Provisioning: run playbooks/site.yml on the nodes through ansible-runner.

The playbooks do the work (drivers, CUDA, containers, DCGM, tools: see docs/provisioning.md);
this module drives them and keeps the record:

    inventory (shared with `bringup check --nodes`) ──► ansible-runner ──► events
        events ──► live per-node progress on stderr (task, ok / changed / failed)
               ──► per-node results: facts/<node>.json (probe record "provision"),
                   raw/<node>/provision/tasks.jsonl, findings.jsonl ("provision.site")
    ansible-runner's own artifacts (job events, stdout) stay in <run>/ansible/.

A failure on one node does not stop the others (Ansible drops the failed host from the
play and goes on); the summary says which node failed at which task, and why.

Secrets: the NGC API key reaches Ansible only through the environment (NGC_API_KEY) or
Vault, and every task touching it has `no_log: true`. ansible-runner writes the whole
environment into artifacts/<ident>/command; `_EnvScrubber` takes that file as it is
written (through a FIFO) and stores it without the environment, so no key touches disk.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import stat
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from bringup.data import data_dir
from bringup.files import write_atomic
from bringup.findings import Finding, Status
from bringup.rundir import RunDir, now

# The roles of site.yml, which are also its tags (`--tags nvidia_driver,cuda`).
ROLES = ("node_tools", "nvidia_driver", "fabric_manager", "cuda", "dcgm", "containers")
IDENT = "provision"  # ansible-runner's name for the job: artifacts/provision/
CHECK = "provision.site"  # the finding per node
# Extra variables that look like secrets: refused on the command line, where they would
# be recorded (ansible-runner's command file, shell history): use the environment or Vault.
SECRET_NAME = re.compile(r"(api_?key|password|passwd|secret|token)", re.IGNORECASE)
MESSAGE_CHARS = 300
# What OpenSSH adds to a module's stderr (the script module's), not the module's words.
SSH_NOISE = re.compile(r"^Shared connection to \S+ closed\.$")
# ansible-playbook's own error, as ansible-core 2.19 on prints it ("[ERROR]: message" then
# "Origin: file:line:column") and as it did before ("ERROR! message", then "The error
# appears to be in 'file': line N, column M, but may be elsewhere ...").
ANSIBLE_ERROR = re.compile(r"^(?:\[ERROR\]:|ERROR!)\s*(?P<message>.*)$")
ORIGIN = re.compile(r"^Origin:\s*(?P<where>\S.*)$")
APPEARS = re.compile(
    r"The error appears to be in '(?P<file>.+)': line (?P<line>\d+), column (?P<col>\d+)"
)
OWN_OUTPUT_LINES = 200  # of ansible-playbook's own error output kept: its message and where
# ansible-playbook's exit codes for input it refuses (ansible.errors.ExitCode): 4 a playbook
# or role file it cannot parse, 5 bad options. 4 also means "unreachable hosts", but that
# one comes after the play's recap; a parse error stops the play before it.
REFUSED_RC = (4, 5)


class ProvisionError(Exception):
    """Bad input for a provisioning run; the message is one line."""


# --- results (pure) -------------------------------------------------------------------


@dataclass
class TaskResult:
    """One task's outcome on one node, as tasks.jsonl keeps it."""

    task: str
    role: str | None
    status: str  # ok, changed, failed, ignored, skipped, unreachable
    message: str = ""


@dataclass
class NodeResult:
    """What the play did on one node."""

    node: str
    ok: int = 0
    changed: int = 0
    failed: int = 0
    skipped: int = 0
    ignored: int = 0
    unreachable: bool = False
    current_task: str = ""
    failed_task: str | None = None
    message: str | None = None
    finished: bool = False  # the play's final stats included this node
    # Set when the play is over without a recap for this node: "error" (ansible-playbook
    # stopped: a file it cannot parse, a crash) or "interrupted" (Ctrl-C).
    cut_short: str | None = None
    changed_tasks: list[str] = field(default_factory=list)
    tasks: list[TaskResult] = field(default_factory=list)

    def ignored_tasks(self) -> list[TaskResult]:
        """The failures the play was told to ignore (ignore_errors), in order."""
        return [t for t in self.tasks if t.status == "ignored"]

    @property
    def status(self) -> str:
        if self.unreachable:
            return "unreachable"
        if self.failed_task is not None:
            return "failed"
        if not self.finished:
            return self.cut_short or "running"
        return "changed" if self.changed else "ok"


def task_label(event_data: dict[str, Any]) -> str:
    """'role : task' as Ansible prints it."""
    task = str(event_data.get("task") or "?").strip()
    role = event_data.get("role")
    return f"{role} : {task}" if role else task


def result_message(res: dict[str, Any] | None) -> str:
    """One line saying why a task failed: the module's message, and apt's "E: ..." lines
    or else the last line of its stderr, when that says more."""
    if not res:
        return ""
    if "censored" in res:
        return "output hidden (no_log: true)"
    parts = []
    for key in ("msg", "reason", "module_stderr"):
        if res.get(key):
            parts.append(_one_line(res[key]))
            break
    stderr = [
        line
        for line in str(res.get("stderr") or "").splitlines()
        if line.strip() and not SSH_NOISE.match(line.strip())
    ]
    # apt's own verdicts ("E: Unable to locate package X") when there are some, else the
    # last line (the script module runs on a terminal: its stderr arrives in its stdout).
    stdout = str(res.get("stdout") or "").splitlines() if res.get("rc") not in (None, 0) else []
    errors = [line.strip() for line in stderr + stdout if line.startswith("E: ")]
    said = "; ".join(dict.fromkeys(errors)) if errors else stderr[-1] if stderr else ""
    if said and _one_line(said) not in " ".join(parts):
        parts.append(_one_line(said))
    if not parts and res.get("rc") not in (None, 0):
        parts.append(f"exit status {res['rc']}")
    text = " — ".join(parts)
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"


def _ignored_finding(node: NodeResult, check_mode: bool) -> Finding:
    """A play that finished past failures it was told to ignore (`ignore_errors`).

    In check mode that is a FAIL: the check is there to say whether the real run would
    work, and an ignored error (a package that does not resolve) says it would not. In a
    real run the play went on by design: WARN, naming what was ignored.
    """
    ignored = node.ignored_tasks()
    first = ignored[0]
    more = f" (and {len(ignored) - 1} more)" if len(ignored) > 1 else ""
    mode = "check mode: " if check_mode else ""
    return Finding(
        node=node.node,
        check=CHECK,
        status=Status.FAIL if check_mode else Status.WARN,
        value=len(ignored),
        unit="ignored",
        message=(
            f"{mode}{len(ignored)} failure(s) ignored: [{first.task}] "
            f"{first.message or 'no reason given'}{more}"
        ),
        action=f"see raw/{node.node}/provision/tasks.jsonl: an ignored error is still an error",
    )


def _one_line(value: object) -> str:
    return " ".join((value if isinstance(value, str) else json.dumps(value)).split())


def ansible_error(lines: list[str]) -> str | None:
    """ansible-playbook's own error (its output lines) as one line: where, as Ansible names
    it (file:line:column), then what it said; None when it reported no error.

    What it said is the paragraph just before the line that says where (before 2.19 a
    parse error starts with a paragraph on JSON, then the YAML one), or the first
    paragraph when no line says where; the source excerpt after it is left out.
    """
    starts = [i for i, line in enumerate(lines) if ANSIBLE_ERROR.match(line.strip())]
    if not starts:
        return None
    block = [line.strip() for line in lines[starts[0] :]]
    block[0] = ANSIBLE_ERROR.sub(r"\g<message>", block[0])
    where = None
    for i, text in enumerate(block):
        if origin := ORIGIN.match(text):
            where = origin["where"].strip()
        elif appears := APPEARS.search(text):
            where = f"{appears['file']}:{appears['line']}:{appears['col']}"
        if where is not None:
            block = block[:i]
            break
    paragraphs = [p for p in "\n".join(block).split("\n\n") if p.strip()]
    said = _one_line(paragraphs[-1] if where else paragraphs[0]) if paragraphs else ""
    text = f"{where}: {said or 'no message'}" if where else said or "no message"
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"


class Progress:
    """Per-node state built from ansible-runner events (no I/O: the display reads it)."""

    def __init__(self, nodes: list[str]) -> None:
        self.nodes: dict[str, NodeResult] = {n: NodeResult(n) for n in nodes}
        self.task = ""
        self.stats_seen = False
        # ansible-playbook's own error output (a file it cannot parse, a bad option), from
        # its first error line on: it arrives as text, one event or one line at a time.
        self.own_output: list[str] = []
        # Set when the play is over: why ansible-playbook refused the input (a playbook or
        # role file it cannot parse, bad options), one line; None when it did not.
        self.refused: str | None = None

    def node(self, name: str) -> NodeResult:
        if name not in self.nodes:
            self.nodes[name] = NodeResult(name)
        return self.nodes[name]

    def feed(self, event: dict[str, Any]) -> NodeResult | None:
        """Take one event; returns the node whose task just failed (to announce it)."""
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        if kind == "playbook_on_task_start":
            self.task = task_label(data)
            return None
        if kind == "playbook_on_stats":
            self._stats(data)
            return None
        if kind in ("error", "verbose"):
            self._own_output(str(event.get("stdout") or ""))
            return None
        host = data.get("host")
        if not host or not kind.startswith("runner_on_"):
            return None
        node = self.node(str(host))
        label = task_label(data)
        res = data.get("res") or {}
        if kind == "runner_on_start":
            node.current_task = label
        elif kind == "runner_on_ok":
            changed = bool(res.get("changed"))
            node.tasks.append(TaskResult(label, data.get("role"), "changed" if changed else "ok"))
            if changed:
                node.changed_tasks.append(label)
        elif kind == "runner_on_skipped":
            node.tasks.append(TaskResult(label, data.get("role"), "skipped"))
        elif kind == "runner_on_failed":
            message = result_message(res)
            if data.get("ignore_errors"):
                node.tasks.append(TaskResult(label, data.get("role"), "ignored", message))
            else:
                node.tasks.append(TaskResult(label, data.get("role"), "failed", message))
                node.failed_task, node.message = label, message
                return node
        elif kind == "runner_on_unreachable":
            message = result_message(res)
            node.tasks.append(TaskResult(label, data.get("role"), "unreachable", message))
            node.unreachable, node.failed_task, node.message = True, label, message
            return node
        return None

    def _own_output(self, text: str) -> None:
        """Keep ansible-playbook's own output from its first error line on (bounded)."""
        lines = text.splitlines() or [""]  # an empty event is a blank line of the output
        if not self.own_output:
            starts = [i for i, line in enumerate(lines) if ANSIBLE_ERROR.match(line.strip())]
            if not starts:
                return
            lines = lines[starts[0] :]
        self.own_output += lines[: OWN_OUTPUT_LINES - len(self.own_output)]

    @property
    def error(self) -> str | None:
        """ansible-playbook's own error, one line naming the file and line it names."""
        return ansible_error(self.own_output)

    def end(self, rc: int | None, interrupted: bool, why: str | None = None) -> None:
        """The play is over: a node it never finished is no longer "running", and a
        playbook Ansible refused (REFUSED_RC before any recap) says why. `why`: what
        stopped it, where bringup knows better than the exit status."""
        reason = why or self.error or f"ansible-playbook exited {rc} before its recap"
        for node in self.nodes.values():
            if not node.finished and node.failed_task is None:
                node.cut_short = "interrupted" if interrupted else "error"
                node.message = node.message or reason
        if not interrupted and not self.stats_seen and rc in REFUSED_RC:
            self.refused = reason

    def _stats(self, data: dict[str, Any]) -> None:
        """The play's recap: the authoritative counts per node."""
        self.stats_seen = True
        names = set()
        for key in ("ok", "changed", "failures", "dark", "skipped", "ignored", "processed"):
            names.update((data.get(key) or {}).keys())
        for name in names:
            node = self.node(str(name))
            node.ok = int((data.get("ok") or {}).get(name, 0))
            node.changed = int((data.get("changed") or {}).get(name, 0))
            node.failed = int((data.get("failures") or {}).get(name, 0))
            node.skipped = int((data.get("skipped") or {}).get(name, 0))
            node.ignored = int((data.get("ignored") or {}).get(name, 0))
            node.unreachable = node.unreachable or bool((data.get("dark") or {}).get(name))
            node.finished = True


def findings(progress: Progress, check_mode: bool, rc: int | None) -> list[Finding]:
    """One finding per node: PASS provisioned, FAIL failed at a task, UNREACHABLE; a play
    that went on past ignored failures is WARN (FAIL in check mode)."""
    result = []
    for node in progress.nodes.values():
        counts = f"{node.ok} ok, {node.changed} changed, {node.skipped} skipped"
        if node.unreachable:
            result.append(
                Finding(
                    node=node.node,
                    check=CHECK,
                    status=Status.UNREACHABLE,
                    message=f"unreachable at [{node.failed_task}]: {node.message}",
                    action="check SSH access to the node (address, key, known_hosts)",
                )
            )
        elif node.failed_task is not None:
            result.append(
                Finding(
                    node=node.node,
                    check=CHECK,
                    status=Status.FAIL,
                    value=node.failed_task,
                    message=f"failed at [{node.failed_task}]: {node.message or 'no reason given'}",
                    action=f"see raw/{node.node}/provision/tasks.jsonl, fix, rerun provision",
                )
            )
        elif not node.finished:
            reason = (
                node.message or progress.error or f"ansible-playbook exited {rc} before its recap"
            )
            result.append(
                Finding(
                    node=node.node,
                    check=CHECK,
                    status=Status.ERROR,
                    message=f"provisioning did not finish: {reason}",
                )
            )
        elif node.ignored_tasks():
            result.append(_ignored_finding(node, check_mode))
        else:
            what = "would change" if check_mode else "changed"
            message = f"{'check mode: ' if check_mode else ''}{counts}"
            if node.changed:
                message += f" ({node.changed} task(s) {what})"
            result.append(
                Finding(
                    node=node.node,
                    check=CHECK,
                    status=Status.PASS,
                    value=node.changed,
                    unit="changed",
                    message=message,
                )
            )
    return result


# --- running --------------------------------------------------------------------------


@dataclass
class Request:
    """What to run, where: everything the command line said, checked."""

    inventory: Path
    nodes: list[str]
    playbook: Path
    limit: str | None = None
    tags: list[str] = field(default_factory=list)
    skip_tags: list[str] = field(default_factory=list)
    check_mode: bool = False
    forks: int = 16
    extra_vars: dict[str, Any] = field(default_factory=dict)
    connect_timeout_s: int = 30


def parse_tags(text: str | None, option: str) -> list[str]:
    """'cuda,dcgm' -> ['cuda', 'dcgm'], refusing names site.yml does not have."""
    if not text:
        return []
    tags = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in tags if t not in (*ROLES, "always")]
    if unknown:
        raise ProvisionError(
            f"{option} {','.join(unknown)}: unknown tag (known: {', '.join(ROLES)})"
        )
    return tags


def parse_extra_vars(items: list[str]) -> dict[str, Any]:
    """NAME=VALUE pairs, each VALUE read as YAML; secret-looking names are refused (they
    would be recorded).

    ansible-playbook's own `-e NAME=VALUE` passes every value as a string, so `false`
    reaches a `when:` as the string "false" (true to ansible-core 2.18, an error to
    2.19). Here booleans, null, lists and mappings get their YAML type; numbers stay the
    text typed, because the roles' numbers are names (branch "580", CUDA "12.10", which
    YAML would read as 12.1).
    """
    result: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ProvisionError(f"-e {item!r}: expected NAME=VALUE")
        if SECRET_NAME.search(key):
            raise ProvisionError(
                f"-e {key}: secrets on the command line end up in logs; "
                "set NGC_API_KEY in the environment or put the variable in Ansible Vault"
            )
        result[key] = _typed(item, text)
    return result


def _typed(item: str, text: str) -> Any:
    """The YAML value of one -e VALUE (numbers kept as typed)."""
    try:
        value = yaml.safe_load(text) if text.strip() else text
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem", None) or "not valid YAML"
        raise ProvisionError(f"-e {item!r}: {mark} (quote the value to pass it as text)") from None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return text
    if isinstance(value, (datetime.date, datetime.datetime)):
        return text  # YAML reads 2026-01-02 as a date: a tag or a name here
    return value


def _search_path() -> str:
    """PATH with this Python's bin folder first: its ansible-playbook, even from a venv
    that is not activated."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


SCRUBBER = "bringup-env-scrubber"  # its thread's name


class _EnvScrubber:
    """Keeps ansible-runner from storing the environment (and so any key in it) on disk.

    ansible-runner writes artifacts/<ident>/command as JSON with the command, its working
    directory and the *whole environment*. A FIFO stands where that file will be: a thread
    reads what ansible-runner writes into it and stores the command without the
    environment as a regular file. ansible-runner has no option to skip that file
    (suppress_env_files covers only env/), hence this.
    """

    def __init__(self, artifact_dir: Path) -> None:
        self.path = artifact_dir / "command"
        artifact_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.mkfifo(self.path, 0o600)
        self._thread = threading.Thread(target=self._take, name=SCRUBBER, daemon=True)
        self._thread.start()

    def _take(self) -> None:
        try:
            with open(self.path) as fifo:  # blocks until ansible-runner opens it to write
                text = fifo.read()
        except FileNotFoundError:  # close() gave up waiting for this thread and tidied
            return
        try:
            doc = json.loads(text)
        except ValueError:
            doc = {}
        kept = {k: v for k, v in doc.items() if k != "env"}
        write_atomic(self.path, json.dumps(kept) + "\n")

    def close(self) -> None:
        """Unblock the reader if ansible-runner never wrote (it failed before), then tidy.

        The reader may not have opened the FIFO yet (a thread just started): opening it to
        write fails until it has (ENXIO), so this tries again until the reader is done."""
        deadline = time.monotonic() + 5
        while self._thread.is_alive() and time.monotonic() < deadline:
            with contextlib.suppress(OSError):  # ENXIO: no reader yet
                os.close(os.open(self.path, os.O_WRONLY | os.O_NONBLOCK))
            self._thread.join(timeout=0.05)
        if self.path.exists() and stat.S_ISFIFO(self.path.stat().st_mode):
            self.path.unlink()


def run_playbook(
    request: Request,
    private_dir: Path,
    on_event: Callable[[dict[str, Any]], None],
) -> tuple[str, int | None]:
    """Run the playbook with ansible-runner; events go to on_event. Returns (status, rc)."""
    import ansible_runner  # imported here: a second to import, only provisioning needs it
    import pexpect

    cmdline = ["--check"] if request.check_mode else []
    # The shipped settings and roles, also for a playbook of the user's (--playbook).
    shipped = data_dir("playbooks")
    envvars = {
        "ANSIBLE_CONFIG": str(shipped / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(shipped / "roles"),
        "ANSIBLE_TIMEOUT": str(request.connect_timeout_s),
        "ANSIBLE_NOCOLOR": "1",
        "PATH": _search_path(),
    }
    scrubber = _EnvScrubber(private_dir / "artifacts" / IDENT)
    try:
        runner = ansible_runner.run(
            private_data_dir=str(private_dir),
            playbook=str(request.playbook),
            inventory=str(request.inventory.resolve()),
            limit=request.limit,
            tags=",".join(request.tags) or None,
            skip_tags=",".join(request.skip_tags) or None,
            extravars=request.extra_vars or None,
            cmdline=" ".join(cmdline) or None,
            forks=request.forks,
            envvars=envvars,
            ident=IDENT,
            quiet=True,
            suppress_env_files=True,
            event_handler=lambda event: on_event(event) or True,
        )
    except pexpect.TIMEOUT:
        # Once ansible-playbook has exited, ansible-runner waits a hard-coded 5 s for the
        # rest of its output and raises past that (ansible/ansible-runner#1343, seen on a
        # loaded machine), the play's exit status unread.
        return OUTPUT_LOST, None
    finally:
        scrubber.close()
    return str(runner.status), runner.rc


# run_playbook's status when ansible-runner lost the end of the play's output, and why
OUTPUT_LOST = "output lost"
LOST_WHY = (
    "ansible-runner lost the end of ansible-playbook's output (it waits 5 s for it after "
    "the play ends: ansible/ansible-runner#1343); the play's result is unknown, run again"
)


# --- display --------------------------------------------------------------------------

_STYLE = {"ok": "green", "changed": "yellow", "failed": "bold red", "unreachable": "magenta"}


def progress_table(progress: Progress, check_mode: bool) -> Table:
    """The live view: one row per node with its counts and the task it is on."""
    mode = " (check mode)" if check_mode else ""
    table = Table(title=f"provision{mode}: {progress.task}", title_justify="left")
    for column in ("node", "state", "ok", "changed", "failed", "task"):
        table.add_column(column, no_wrap=column != "task")
    for node in progress.nodes.values():
        counts = {"ok": 0, "changed": 0, "failed": 0}
        for task in node.tasks:
            if task.status in counts:
                counts[task.status] += 1
        counts["ok"] += counts["changed"]  # Ansible counts a changed task as ok too
        state = node.status
        table.add_row(
            node.node,
            Text(state, style=_STYLE.get(state, "cyan")),
            str(counts["ok"]),
            str(counts["changed"]),
            str(counts["failed"]),
            node.failed_task or node.current_task,
        )
    return table


def summary_table(progress: Progress, check_mode: bool) -> Table:
    """The final recap: per node counts, and the failed task with its reason."""
    changed = "would change" if check_mode else "changed"
    table = Table(title="provision summary", title_justify="left", expand=True)
    for column in ("node", "result", "ok", changed, "skipped", "ignored", "failed at / why"):
        table.add_column(column, no_wrap=column not in ("failed at / why",))
    for node in progress.nodes.values():
        why = f"[{node.failed_task}] {node.message or ''}" if node.failed_task else ""
        if not node.finished and not node.failed_task:
            why = node.message or ""
        ignored = node.ignored_tasks()
        if not why and ignored:
            why = f"ignored: [{ignored[0].task}] {ignored[0].message}"
        state = node.status if node.finished or node.failed_task else "did not finish"
        table.add_row(
            node.node,
            Text(state, style=_STYLE.get(state, "magenta")),
            str(node.ok),
            str(node.changed),
            str(node.skipped),
            str(len(ignored)),
            why,
        )
    return table


# --- the record -----------------------------------------------------------------------


def record_node(
    run: RunDir, node: NodeResult, request: Request, started: str, took_s: float
) -> None:
    """facts/<node>.json gets a "provision" record; raw/ every task's outcome."""
    facts = {
        "status": node.status,
        "check_mode": request.check_mode,
        "playbook": request.playbook.name,
        "tags": request.tags,
        "skip_tags": request.skip_tags,
        "ok": node.ok,
        "changed": node.changed,
        "failed": node.failed,
        "skipped": node.skipped,
        "ignored": node.ignored,
        "unreachable": node.unreachable,
        "failed_task": node.failed_task,
        "changed_tasks": node.changed_tasks,
    }
    tasks = "".join(json.dumps(asdict(t)) + "\n" for t in node.tasks)
    ok = node.finished and node.failed_task is None
    error = None if ok else (node.message or "provisioning did not finish")
    run.add_record(
        node.node,
        {
            "probe": "provision",
            "ok": ok,
            "error": error,
            "facts": facts,
            "params": {"tags": request.tags, "check_mode": request.check_mode},
            "started_at": started,
            "duration_s": round(took_s, 1),
            "raw": {"tasks.jsonl": tasks},
        },
    )


def provision(request: Request, run: RunDir, err: Console) -> tuple[Progress, list[Finding]]:
    """Run the playbook on the request's nodes, showing progress, recording the results."""
    progress = Progress(request.nodes)
    run.add_nodes(list(request.nodes))
    started, t0 = now(), time.monotonic()
    rc: int | None = None
    status = "failed"
    interrupted = False
    with Live(progress_table(progress, request.check_mode), console=err, transient=True) as live:

        def on_event(event: dict[str, Any]) -> None:
            failed = progress.feed(event)
            if failed is not None:
                kind = "UNREACHABLE" if failed.unreachable else "FAILED"
                line = Text(f"{failed.node} {kind}", style="bold red")
                line.append(f" at [{failed.failed_task}]: {failed.message}")
                live.console.print(line, soft_wrap=True)
            live.update(progress_table(progress, request.check_mode))

        try:
            status, rc = run_playbook(request, run.path / "ansible", on_event)
        except KeyboardInterrupt:
            run.manifest.status = "interrupted"
            interrupted = True
            err.print("[yellow]interrupted: keeping what was recorded[/]")
    took = time.monotonic() - t0
    lost = LOST_WHY if status == OUTPUT_LOST else None
    progress.end(rc, interrupted or status in ("canceled", "timeout"), lost)
    for node in progress.nodes.values():
        record_node(run, node, request, started, took)
    result = findings(progress, request.check_mode, rc)
    if status in ("canceled", "timeout"):
        run.manifest.status = "interrupted"
    run.add_findings(result)
    return progress, result


# --- command line ---------------------------------------------------------------------


def make_request(
    nodes: Path,
    limit: str | None,
    tags: str | None,
    skip_tags: str | None,
    check_mode: bool,
    forks: int,
    extra_vars: list[str],
    playbook: Path | None,
    connect_timeout_s: int,
) -> Request:
    """Check the command line and the inventory before anything runs."""
    from bringup.fleet.inventory import InventoryError, load

    if forks < 1:
        raise ProvisionError(f"--forks {forks}: must be at least 1")
    book = playbook or data_dir("playbooks") / "site.yml"
    if not book.is_file():
        raise ProvisionError(f"{book}: no such playbook")
    try:
        hosts = load(nodes, limit)
    except InventoryError as exc:
        raise ProvisionError(str(exc)) from None
    return Request(
        inventory=nodes,
        nodes=[h.name for h in hosts],
        playbook=book.resolve(),
        limit=limit,
        tags=parse_tags(tags, "--tags"),
        skip_tags=parse_tags(skip_tags, "--skip-tags"),
        check_mode=check_mode,
        forks=forks,
        extra_vars=parse_extra_vars(extra_vars),
        connect_timeout_s=connect_timeout_s,
    )
