"""The node side's cost per run, phase by phase, as a node pays it (issue 31).

    .venv/bin/python benchmarks/node_side.py [--baseline REV [REV ...]] [--repeat 5]

Each phase is run as its own process, the way the SSH transport starts the node side on a
node: the probe code zip stored in a private cache (the tree's own upload command, once),
then the tree's own remote command (`sh -c`, the cached zip run by python3) with a JSON
request on stdin. CPU is user + system of the process and its children (the kernel's
accounting, getrusage), the median of `--repeat` runs; wall is beside it but moves with
whatever else this machine runs. The phases:

- interpreter start: `python3 -c pass`, the floor of any run;
- upload: storing the zip once (the size and sha256 check on the node included; where the
  tree stores it in the run that finds it missing, that run with no probe);
- start, no probe: the remote command with an empty request (shell, cache look-up, unpack
  check, the node side's own imports): what every run pays before its first probe;
- each probe: a run with that probe alone, less the empty run (its imports and its work);
- the probes together: one run with every probe, as `check --nodes` sends them;
- `slurm healthcheck`: the whole command (controller and node side) against the simulated
  NVML, where the tree has it: as a prolog runs it (`--profile auto`, the default) and
  with the profile named (`--profile b300`). With `--baseline`, the trees' runs take
  turns (this checkout, the baseline, this checkout, ...), so that a load that comes and
  goes weighs on each alike; the load averages at the start and the end are printed. With
  `--instructions` (valgrind installed), the instructions the health check's own process
  executes (`--profile auto`, one run under cachegrind, the hash seed fixed): a figure the
  load of the machine does not move, where CPU seconds move by ±0.03 s on a loaded one.

Bytecode is written and used, as on an installed controller and in a node's cache:
PYTHONDONTWRITEBYTECODE is dropped from the environment (set, every run would compile the
modules it imports, and that, not bringup, is what would be measured).

The gpu probe reads a simulated NVML (docs/nvmlsim.md: `bringup sim nvml`, built here with
a C compiler and cJSON; without them the gpu probe fails fast and says so). The other
probes read this machine. `--baseline REV` measures that commit side by side, from a
`git worktree` in a private temporary directory (5d22cad: before the one-house redesign;
main: before this branch); several commits, several columns. With `--ssh` (root: a
simulated node, bringup.sim.cluster), each tree's own SSH transport runs on one node with
no probe (code not cached, then cached) and with the xid probe, and the node's CPU (its
sshd and all below it: the login shell, the node side) and the SSH sessions each run
opened are printed. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# fanout.py's suite (topology) and the Slurm health check's (gpu, xid); host and nvme too
# with --probes (at 5d22cad the host probe ran fio for 20 s: not the same probe)
PROBES = ("gpu", "topology", "xid")
PRINT_CODE = """\
import json, sys
try:
    from bringup.fleet import node_code as m
except ImportError:  # before the one-house redesign (5d22cad): bringup/ssh.py
    from bringup import ssh as m
code = m.build_node_code()
open(sys.argv[1], "wb").write(code.data)
if hasattr(m, "request_frame"):  # one session: the zip follows the framed request
    print(json.dumps({"run": m.remote_command(code, sys.argv[2]), "framed": True}))
    sys.exit(0)
try:
    upload = m.upload_command(code, sys.argv[2])
except TypeError:
    upload = m.upload_command(code)
print(json.dumps({"run": m.remote_command(code, sys.argv[2]), "upload": upload}))
"""


def request_bytes(probes: tuple[str, ...], framed: bool) -> bytes:
    """The request as the tree's start command reads it (framed: its length on a line)."""
    body = json.dumps({"probes": [{"name": p, "timeout_s": 60} for p in probes]}).encode()
    return b"%d\n" % len(body) + body if framed else body


@dataclass
class Cost:
    cpu_s: float
    wall_s: float

    def __sub__(self, other: Cost) -> Cost:
        return Cost(self.cpu_s - other.cpu_s, self.wall_s - other.wall_s)


def timed(argv: list[str], env: dict[str, str], stdin: bytes = b"", cwd: Path = REPO) -> Cost:
    """CPU (user + system, the command and its children) and wall seconds of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, env=env, cwd=cwd, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-2:]
        print(f"  ! {argv[:3]} exited {done.returncode}: {tail}", file=sys.stderr)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Cost(cpu, wall)


def median(runs: list[Cost]) -> Cost:
    return Cost(statistics.median(r.cpu_s for r in runs), statistics.median(r.wall_s for r in runs))


@contextmanager
def tree_of(rev: str | None, base: Path) -> Iterator[Path]:
    """This checkout, or REV checked out in a private worktree (removed afterwards)."""
    if rev is None:
        yield REPO
        return
    path = base / f"tree-{rev.replace('/', '_')}"
    subprocess.run(
        ["git", "worktree", "add", "-q", "--detach", str(path), rev], cwd=REPO, check=True
    )
    try:
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=REPO, check=False)


def simulated_nvml(base: Path) -> dict[str, str]:
    """The environment that points pynvml at a simulated B300 NVML (empty when it cannot
    be built here: the gpu probe then fails fast, and says why)."""
    out = base / "nvml"
    build = [sys.executable, "-m", "bringup.cli", "sim", "nvml", "build", "--out", str(out)]
    state = [sys.executable, "-m", "bringup.cli", "sim", "nvml", "state", "--from", "b300"]
    state += ["--out", str(base / "b300.json")]
    for argv in (build, state):
        if subprocess.run(argv, capture_output=True, cwd=REPO, check=False).returncode != 0:
            print("simulated NVML not built here: the gpu probe fails fast", file=sys.stderr)
            return {}
    return {"LD_LIBRARY_PATH": str(out), "BRINGUP_NVMLSIM_STATE": str(base / "b300.json")}


def measure_tree(
    tree: Path, base: Path, nvml: dict[str, str], repeat: int, probes: tuple[str, ...]
) -> dict[str, Cost]:
    """Each phase's median cost for the node side of `tree`."""
    home = base / f"home-{tree.name}"
    home.mkdir()
    env = {**base_env(), **nvml, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}
    env["PYTHONPATH"] = str(tree)  # the tree's own bringup, not this venv's
    python = sys.executable  # the venv's: the baseline's gpu probe finds pynvml in it too
    zip_file = base / f"{tree.name}.zip"
    shown = subprocess.run(
        [python, "-c", PRINT_CODE, str(zip_file), python],
        capture_output=True,
        env=env,
        cwd=tree,
        check=True,
    )
    commands = json.loads(shown.stdout)
    node_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}  # a node has neither
    costs: dict[str, Cost] = {}
    costs["interpreter start"] = median(
        [timed([python, "-c", "pass"], node_env) for _ in range(repeat)]
    )
    framed = bool(commands.get("framed"))
    if framed:  # stored by the run that finds it missing: an empty request, then the zip
        stdin = request_bytes((), framed) + zip_file.read_bytes()
        costs["upload (once)"] = timed(["sh", "-c", commands["run"]], node_env, stdin)
    else:
        upload = ["sh", "-c", commands["upload"]]
        costs["upload (once)"] = timed(upload, node_env, zip_file.read_bytes())

    def run(probes: tuple[str, ...]) -> Cost:
        request = request_bytes(probes, framed)
        timed(["sh", "-c", commands["run"]], node_env, request)  # warm: bytecode, unpack
        return median(
            [timed(["sh", "-c", commands["run"]], node_env, request) for _ in range(repeat)]
        )

    costs["start, no probe"] = run(())
    for probe in probes:
        costs[f"probe {probe}"] = run((probe,)) - costs["start, no probe"]
    costs[f"{'+'.join(probes)} (one run)"] = run(probes)
    return costs


def base_env() -> dict[str, str]:
    """This environment, less PYTHONDONTWRITEBYTECODE (see the module's docstring)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def healthchecks(
    trees: list[Path], base: Path, nvml: dict[str, str], repeat: int, profile: str
) -> list[Cost | None]:
    """`bringup slurm healthcheck` (prolog suite) of each tree (None where it has none),
    the trees' runs alternated: whatever else loads this machine weighs on each alike."""
    commands: dict[Path, tuple[list[str], dict[str, str]]] = {}
    for tree in trees:
        if not (tree / "bringup" / "fleet" / "healthcheck.py").is_file() or not nvml:
            continue
        env = {**base_env(), **nvml, "PYTHONPATH": str(tree)}
        argv = [sys.executable, "-m", "bringup.cli", "slurm", "healthcheck", "--node", "n1"]
        argv += ["--profile", profile, "--out", str(base / f"hc-{tree.name}")]
        warm = subprocess.run(argv, capture_output=True, env=env, cwd=tree, check=False)
        if warm.returncode in (0, 1):  # else this tree's health check has no such option
            commands[tree] = (argv, env)
    runs: dict[Path, list[Cost]] = {tree: [] for tree in commands}
    for _ in range(repeat):
        for tree, (argv, env) in commands.items():
            runs[tree].append(timed(argv, env, cwd=tree))
    return [median(runs[tree]) if tree in runs else None for tree in trees]


def instructions(tree: Path, base: Path, nvml: dict[str, str], profile: str) -> int | None:
    """Instructions the health check's own process of `tree` executes (valgrind's
    cachegrind), or None where it cannot be counted. Unlike its CPU seconds the figure does
    not move with the load of the machine; its forks (the node side, the probes) are left
    out, each counting on from its parent's figure at the fork."""
    if shutil.which("valgrind") is None or not nvml:
        return None
    logs = Path(tempfile.mkdtemp(prefix="valgrind-", dir=base))
    # a generous budget: under valgrind the command runs some fifty times slower
    argv = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    argv += [f"--log-file={logs}/%p", sys.executable, "-m", "bringup.cli", "slurm", "healthcheck"]
    argv += ["--node", "n1", "--profile", profile, "--budget-s", "600"]
    argv += ["--out", str(base / f"hc-{tree.name}")]
    # the same hash seed each run: set and dict orders, and so the work, do not vary
    env = {**base_env(), **nvml, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    done = subprocess.run(argv, capture_output=True, env=env, cwd=tree, check=False)
    logged = sorted(logs.iterdir(), key=lambda f: int(f.name))  # the first pid: the command
    found = re.search(r"I\s+refs:\s+([\d,]+)", logged[0].read_text()) if logged else None
    if done.returncode not in (0, 1) or found is None:
        return None
    return int(found.group(1).replace(",", ""))


# One run of the tree's own SSH transport against a simulated node (as root, --ssh).
RUN_SSH = """\
import json, sys
from pathlib import Path
from bringup.fleet import ssh
from bringup.fleet.inventory import load
from bringup.fleet.node_code import build_node_code
host = load(Path(sys.argv[1]))[0]
settings = ssh.SshSettings(known_hosts=Path(sys.argv[2]), ssh_config=None)
records = list(ssh.run_ssh(host, json.loads(sys.argv[3]), 120, connector=ssh.Connector(settings),
                           code=build_node_code()))
assert records or not json.loads(sys.argv[3])["probes"], records
"""


@dataclass
class NodeCost:
    """What one run over SSH cost the node: its CPU (sshd and everything below it, the
    login shell included), and the SSH sessions it opened (sshd's log)."""

    cpu_s: float
    sessions: int


def over_ssh(trees: list[Path], repeat: int, probe: str) -> list[dict[str, NodeCost]]:
    """Each tree's runs over SSH on one simulated node (bringup.sim.cluster: a real sshd
    in a network namespace, root's login shell), code not cached and cached."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from fanout import tree_cpu_s  # the nodes' own accounting, as fanout.py reads it

    from bringup.sim.cluster import SimCluster

    results: list[dict[str, NodeCost]] = []
    with (
        tempfile.TemporaryDirectory(prefix="bringup-nodeside-ssh-") as tmp,
        SimCluster(1, Path(tmp) / "cluster", nvml=False) as cluster,
    ):
        node = cluster.nodes[cluster.names[0]]
        assert node.sshd is not None
        log = node.dir / "sshd.log"

        def cost(tree: Path, request: dict[str, Any], cold: bool) -> NodeCost:
            if cold:
                shutil.rmtree(node.cache_dir / "bringup", ignore_errors=True)
            sessions = log.read_text(errors="replace").count("Starting session:")
            before = tree_cpu_s(node.sshd.pid)  # type: ignore[union-attr]
            argv = [sys.executable, "-c", RUN_SSH, str(cluster.inventory)]
            argv += [str(cluster.known_hosts), json.dumps(request)]
            env = {**base_env(), "PYTHONPATH": str(tree)}
            done = subprocess.run(argv, capture_output=True, env=env, cwd=tree, check=False)
            if done.returncode != 0:
                tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:]
                print(f"  ! ssh run of {tree.name} failed: {tail}", file=sys.stderr)
            time.sleep(0.5)  # the node's session ends just after the client's
            opened = log.read_text(errors="replace").count("Starting session:") - sessions
            return NodeCost(tree_cpu_s(node.sshd.pid) - before, opened)  # type: ignore[union-attr]

        empty: dict[str, Any] = {"probes": []}
        one = {"probes": [{"name": probe, "timeout_s": 60}]}
        for tree in trees:
            phases: dict[str, NodeCost] = {}
            for label, request, cold in [
                ("no probe, code not cached", empty, True),
                ("no probe, code cached", empty, False),
                (f"{probe}, code cached", one, False),
            ]:
                runs = [cost(tree, request, cold) for _ in range(repeat)]
                phases[f"ssh: {label}"] = NodeCost(
                    statistics.median(r.cpu_s for r in runs),
                    max(r.sessions for r in runs),
                )
            results.append(phases)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--baseline", nargs="+", default=[], help="commits to measure beside this checkout"
    )
    parser.add_argument("--repeat", type=int, default=5, help="runs per phase (median)")
    parser.add_argument("--probes", nargs="+", default=list(PROBES), help="probes to measure")
    parser.add_argument(
        "--ssh", action="store_true", help="also runs over SSH on a simulated node (root)"
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also counts the health check's instructions (valgrind): steady under load",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bringup-nodeside-") as tmp:
        base = Path(tmp)
        nvml = simulated_nvml(base)
        names = ["this checkout", *args.baseline]
        results: list[dict[str, Cost]] = []
        with ExitStack() as stack:
            trees = [stack.enter_context(tree_of(rev, base)) for rev in [None, *args.baseline]]
            loads = [os.getloadavg()]
            for tree in trees:
                results.append(measure_tree(tree, base, nvml, args.repeat, tuple(args.probes)))
            for profile in ("auto", "b300"):
                checks = healthchecks(trees, base, nvml, args.repeat, profile)
                for costs, check in zip(results, checks, strict=True):
                    if check is not None:
                        costs[f"slurm healthcheck -p {profile}"] = check
            counted: list[int | None] = []
            if args.instructions:
                counted = [instructions(tree, base, nvml, "auto") for tree in trees]
            loads.append(os.getloadavg())
            by_ssh = over_ssh(trees, args.repeat, "xid") if args.ssh else []
        print(f"node side per run, CPU s (wall s); median of {args.repeat}; {os.cpu_count()} CPUs")
        shown = " -> ".join(" ".join(f"{x:.2f}" for x in load) for load in loads)
        print(f"load average (1, 5, 15 min) at the start and the end: {shown}")
        print(f"{'phase':<36}" + "".join(f"{n[:22]:>24}" for n in names))
        phases = list(dict.fromkeys(p for r in results for p in r))
        for phase in phases:
            cells = [r.get(phase) for r in results]
            text = "".join(
                f"{c.cpu_s:>11.3f} ({c.wall_s:>6.3f} s)" if c else f"{'-':>24}" for c in cells
            )
            print(f"{phase:<36}{text}")
        if counted:
            label = "slurm healthcheck -p auto, instr."
            text = "".join(f"{f'{n / 1e6:,.0f} M' if n else '-':>24}" for n in counted)
            print(f"{label:<36}{text}  (its own process, valgrind; not its forks)")
        if by_ssh:
            print("over SSH, the node's CPU s (sshd, login shell, node side) and SSH sessions")
            for phase in by_ssh[0]:
                cells = [r[phase] for r in by_ssh]
                text = "".join(f"{c.cpu_s:>11.3f} ({c.sessions} sess.)  " for c in cells)
                print(f"{phase:<36}{text}")


if __name__ == "__main__":
    main()
