"""A simulated `dcgmi` for simulated nodes: `dcgmi diag -r N` prints the table DCGM 4.x
prints for the node's GPUs, every test passed.

The layout is DCGM's own (`dcgmi/Diag.cpp` of NVIDIA/DCGM, as the real DCGM 4.4.2 output
in tests/fixtures/dcgm shows it): the metadata rows, then per level the tests of that
level, each with one row per GPU. The simulation models which GPUs the node has, not
DCGM's tests: a fault planted in a node's NVML (a pending row remap, a slowdown) is the
gpu checks' to find, and the simulated DCGM passes every test.
"""

from __future__ import annotations

import shlex
from pathlib import Path

# DCGM 4.x test names by level: level 1 runs the deployment tests ("software"), level 2
# adds memory and pcie, level 3 the stress tests, level 4 the extended ones.
LEVELS: dict[int, list[tuple[str, str]]] = {
    1: [("Deployment", "software")],
    2: [("Hardware", "memory"), ("Integration", "pcie")],
    3: [
        ("Stress", "memory_bandwidth"),
        ("Hardware", "diagnostic"),
        ("Stress", "targeted_stress"),
        ("Stress", "targeted_power"),
    ],
    4: [("Hardware", "memtest"), ("Hardware", "pulse_test")],
}
_BORDER = "+---------------------------+------------------------------------------------+"
_SECTIONS = {
    "Metadata": "|-----  Metadata  ----------+------------------------------------------------|",
    "Deployment": "|-----  Deployment  --------+------------------------------------------------|",
    "Hardware": "+-----  Hardware  ----------+------------------------------------------------+",
    "Integration": "+-----  Integration  -------+------------------------------------------------+",
    "Stress": "+-----  Stress  ------------+------------------------------------------------+",
}


def _row(name: str, info: str) -> str:
    return f"| {name:<25} | {info:<46} |"


def diag_table(gpus: int, level: int, driver: str, device_id: str = "3182") -> str:
    """The output of `dcgmi diag -r level` on a node with `gpus` GPUs, all tests passed."""
    lines = [
        "Successfully ran diagnostic for group.",
        _BORDER,
        _row("Diagnostic", "Result"),
        _BORDER.replace("-", "="),
        _SECTIONS["Metadata"],
        _row("DCGM Version", "4.4.2"),
        _row("Driver Version Detected", driver),
        _row("GPU Device IDs Detected", ",".join([device_id] * gpus)),
    ]
    tests = [test for n in range(1, level + 1) for test in LEVELS[n]]
    for section in ("Deployment", "Hardware", "Integration", "Stress"):
        mine = [name for where, name in tests if where == section]
        if not mine:
            continue
        lines.append(_SECTIONS[section])
        for name in mine:
            lines.append(_row(name, "Pass"))
            lines += [_row("", f"GPU{i}: Pass") for i in range(gpus)]
    lines.append(_BORDER)
    return "\n".join(lines) + "\n"


def install(bin_dir: Path, gpus: int, driver: str) -> Path:
    """Write `dcgmi` (and its tables) into a node's bin folder: `diag -r N` prints table N."""
    for level in LEVELS:
        (bin_dir / f"dcgmi-r{level}.txt").write_text(diag_table(gpus, level, driver))
    script = bin_dir / "dcgmi"
    tables = shlex.quote(str(bin_dir))
    script.write_text(
        "#!/bin/sh\n"
        "# Simulated dcgmi (bringup.sim.dcgm): the table of `dcgmi diag -r N`.\n"
        'if [ "$2" = "--help" ]; then echo "  -r, --run  Run a diagnostic."; exit 0; fi\n'
        'level=1; prev=""\n'
        'for arg in "$@"; do [ "$prev" = "-r" ] && level="$arg"; prev="$arg"; done\n'
        f'exec cat {tables}/dcgmi-r"$level".txt\n'
    )
    script.chmod(0o755)
    return script
