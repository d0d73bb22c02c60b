"""What reading a probe's facts costs: msgspec (bringup.facts.validate_facts) against
pydantic's TypeAdapter, the validator it replaced (issue 31).

    .venv/bin/python benchmarks/facts_validation.py [--repeat 7] [--instructions]

Real records: the demo fleet's healthy node (its gpu record is the simulated B300's: eight
GPUs with their NVLinks, ECC and identity), every probe it recorded. Each figure is the
median of `--repeat` fresh interpreters (CPU: user + system of the child), so a first call
pays what a health check pays at every job start:

- import: `import msgspec` against `from pydantic import TypeAdapter`, less `python -c pass`;
- first record: the validator made for the probe's type and the record read once, both
  libraries imported and warmed on a small type of their own (what a health check pays
  for each probe it judges);
- each next record: the same record read again, microseconds, timed in one process.

With `--instructions` (valgrind installed) the import and first-record figures are also
counted in instructions (cachegrind, the hash seed fixed): a figure the machine's load does
not move. Asserts nothing; prints ratios (pydantic / msgspec).
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# What both libraries import and the health check loads anyway (its own modules need them):
# an import measured on top of it is what the library adds there.
SHARED = "import typing, inspect, dataclasses, datetime, decimal, uuid, enum, typing_extensions"
IMPORTS = {
    "nothing": "pass",
    "msgspec": "import msgspec",
    "pydantic": "from pydantic import TypeAdapter",
    "shared": SHARED,
    "shared, msgspec": f"{SHARED}; import msgspec",
    "shared, pydantic": f"{SHARED}; from pydantic import TypeAdapter",
}

# One child: the probe's record (argv[2], argv[3]: its JSON) read once by the validator
# named in argv[1]; "base": nothing read. Both libraries are imported and have read one
# small dataclass of their own first (pydantic loads most of its machinery at its first
# TypeAdapter, which a health check pays for its other models anyway): what is left is
# what a probe's own type costs, as each probe judged in a health check pays it.
FIRST = """\
import dataclasses, json, sys
import msgspec
from pydantic import TypeAdapter
from bringup.node.catalog import PROBES
@dataclasses.dataclass
class Warm:
    n: int
    x: list[float] | None = None
msgspec.convert({"n": 1}, Warm, strict=True)
TypeAdapter(Warm).validate_python({"n": 1})
probe, data = sys.argv[2], json.loads(sys.argv[3])
facts_type = PROBES[probe].FACTS
if sys.argv[1] == "msgspec":
    msgspec.convert(data, facts_type, strict=True)
elif sys.argv[1] == "pydantic":
    TypeAdapter(facts_type).validate_python(data)
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    # as the `bringup` command runs pydantic: no plugin search (bringup/cli.py)
    env.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    return {**env, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": "0"}


def _cpu(argv: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, env=_env(), cwd=REPO, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _instructions(argv: list[str]) -> int | None:
    if shutil.which("valgrind") is None:
        return None
    with tempfile.TemporaryDirectory(prefix="facts-valgrind-") as logs:
        log = Path(logs) / "log"
        cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
        subprocess.run(
            [*cmd, f"--log-file={log}", *argv],
            check=True,
            env=_env(),
            cwd=REPO,
            capture_output=True,
        )
        found = re.search(r"I\s+refs:\s+([\d,]+)", log.read_text())
    return int(found.group(1).replace(",", "")) if found else None


def _median(argv: list[str], repeat: int) -> float:
    _cpu(argv)  # bytecode written, caches warm: what an installed controller runs
    return statistics.median(_cpu(argv) for _ in range(repeat))


def _records() -> dict[str, object]:
    from bringup.sim.demo import demo_nodes

    healthy = demo_nodes()[0]
    return {name: json.loads(json.dumps(r.facts)) for name, r in healthy.probes.items()}


def _each_next(probe: str, data: object, rounds: int) -> tuple[float, float]:
    """Seconds per read of an already-made validator: (msgspec, pydantic)."""
    import msgspec
    from pydantic import TypeAdapter

    from bringup.node.catalog import PROBES

    facts_type = PROBES[probe].FACTS
    adapter = TypeAdapter(facts_type)
    msgspec.convert(data, facts_type, strict=True)
    figures = []
    for read in (
        lambda: msgspec.convert(data, facts_type, strict=True),
        lambda: adapter.validate_python(data),
    ):
        start = time.process_time()
        for _ in range(rounds):
            read()
        figures.append((time.process_time() - start) / rounds)
    return figures[0], figures[1]


def _ratio(old: float, new: float) -> str:
    """old / new, or "-" where new is under the resolution of the kernel's CPU accounting."""
    return f"{old / new:5.0f}x" if new > 0.5e-3 else "    -"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="fresh interpreters per figure")
    parser.add_argument("--instructions", action="store_true", help="also count instructions")
    args = parser.parse_args()
    python = sys.executable
    print(f"load at start: {os.getloadavg()[0]:.1f}")

    cpu = {name: _median([python, "-c", code], args.repeat) for name, code in IMPORTS.items()}
    count = {
        name: _instructions([python, "-c", code]) if args.instructions else None
        for name, code in IMPORTS.items()
    }
    print("\nimport: CPU ms, and M instructions where counted, less the base")
    for base in ("nothing", "shared"):
        print(f"  over {'python -c pass' if base == 'nothing' else SHARED}")
        added = {}
        for lib in ("msgspec", "pydantic"):
            name = lib if base == "nothing" else f"{base}, {lib}"
            added[lib] = cpu[name] - cpu[base]
            line = f"    {lib:9} {1000 * added[lib]:7.1f} ms"
            if args.instructions and count[name] and count[base]:
                line += f" {(count[name] - count[base]) / 1e6:8.1f} M"  # type: ignore[operator]
            print(line)
        print(f"    ratio     {added['pydantic'] / max(added['msgspec'], 1e-6):7.1f}x (CPU)")

    records = _records()
    print("\nfirst record of a probe, both libraries imported (CPU ms); each next (us)")
    columns = f"{'msgspec':>8} {'pydantic':>9} {'ratio':>6}"
    print(f"  {'probe':10} {columns}   {columns}")
    for probe, data in records.items():
        doc = json.dumps(data)
        base = _median([python, "-c", FIRST, "base", probe, doc], args.repeat)
        first = {
            name: _median([python, "-c", FIRST, name, probe, doc], args.repeat) - base
            for name in ("msgspec", "pydantic")
        }
        new, old = _each_next(probe, data, 2000)
        print(
            f"  {probe:10} {1000 * first['msgspec']:8.2f} {1000 * first['pydantic']:9.2f}"
            f" {_ratio(first['pydantic'], first['msgspec'])}"
            f"   {1e6 * new:8.1f} {1e6 * old:9.1f} {old / new:5.1f}x"
        )
        if args.instructions:
            counted = {
                name: _instructions([python, "-c", FIRST, name, probe, doc])
                for name in ("base", "msgspec", "pydantic")
            }
            if all(counted.values()):
                m = (counted["msgspec"] - counted["base"]) / 1e6  # type: ignore[operator]
                p = (counted["pydantic"] - counted["base"]) / 1e6  # type: ignore[operator]
                print(f"  {'':10} {m:7.2f}M {p:8.2f}M {p / max(m, 1e-6):5.0f}x  (instructions)")
    print(f"\nload at end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
