"""`bringup sim nvml`: build the simulated NVML library and write its states.

    bringup sim nvml build --out /tmp/nvmlsim                 # DIR/libnvidia-ml.so.1
    bringup sim nvml state --from nvidia-smi-q.txt > h200.json
    bringup sim nvml state --from b300 --driver 575.57.08 --fault hw-thermal:5=3 > b300.json
    BRINGUP_NVMLSIM_STATE=b300.json LD_LIBRARY_PATH=/tmp/nvmlsim bringup check --local

The library is NVIDIA's API compiled against NVIDIA's own nvml.h (the nvidia-nvml-dev
wheels) and answers from the JSON state, so the real pynvml, and every bringup probe
that reads NVML, runs on a machine without a GPU. See docs/nvmlsim.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bringup.commands.common import JsonOpt, QuietOpt, fail, print_envelope, print_json

sim_app = typer.Typer(help="Simulations for testing bringup itself.", no_args_is_help=True)
nvml_app = typer.Typer(
    help="The simulated NVML: a libnvidia-ml.so.1 driven by a JSON state.", no_args_is_help=True
)
sim_app.add_typer(nvml_app, name="nvml")


@nvml_app.command("build")
def build(
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Directory for the library.")],
    header: Annotated[
        Path | None,
        typer.Option("--header", help="nvml.h to build against (default: the installed wheel)."),
    ] = None,
    cc: Annotated[str, typer.Option("--cc", help="The C compiler.")] = "cc",
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,  # the path built is all it prints
) -> None:
    """Compile DIR/libnvidia-ml.so.1 against NVIDIA's nvml.h."""
    from bringup.sim.nvml import NvmlSimError, build_library

    try:
        library = build_library(out_dir, header, cc)
    except NvmlSimError as exc:
        fail(str(exc))
    if as_json:
        print_envelope([], judged=False, data={"library": str(library)})
    else:
        print(library)


@nvml_app.command("state")
def state(
    # A path, as --from is in every command; a path that is no file may name a profile.
    source: Annotated[
        Path,
        typer.Option(
            "--from", help="A recorded `nvidia-smi -q` / `-q -x` file, or a profile (b300)."
        ),
    ],
    driver: Annotated[
        str | None,
        typer.Option("--driver", help="Driver version: chooses the branch's NVML field ids."),
    ] = None,
    faults: Annotated[
        list[str] | None,
        typer.Option("--fault", help="KIND[:GPU][=VALUE], repeatable (docs/nvmlsim.md)."),
    ] = None,
    out_file: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the state here, not to stdout.")
    ] = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,  # the state, or the path written, is all it prints
) -> None:
    """Print (or write) a simulated NVML state as JSON."""
    from bringup.files import InputError, read_text
    from bringup.sim.nvml import (
        PROFILES,
        NvmlSimError,
        apply_fault,
        check_state,
        state_from_capture,
        state_from_profile,
        write_state,
    )

    try:
        if str(source) in PROFILES:
            built = state_from_profile(str(source), driver)
        elif source.is_file():
            read_text(source, "capture", lenient=True)  # a FIFO, a device, 64 MiB+: refused
            built = state_from_capture(source, driver)
        else:
            known = ", ".join(PROFILES)
            fail(f"--from {source}: not a file, and not a profile the simulator knows ({known})")
        for spec in faults or []:
            built = apply_fault(built, spec)
        check_state(built)
        if out_file is not None:
            write_state(built, out_file)
    except (NvmlSimError, InputError) as exc:
        fail(str(exc))
    if as_json:  # the state inside the envelope, as every command's --json
        data = {"state": dict(built), "written": str(out_file) if out_file else None}
        print_envelope([], judged=False, data=data)
    elif out_file is not None:
        print(out_file)
    else:
        print_json(dict(built))  # the state itself: BRINGUP_NVMLSIM_STATE reads this
