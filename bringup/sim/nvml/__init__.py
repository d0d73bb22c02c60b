"""A simulated NVML: NVIDIA's libnvidia-ml.so.1 replaced by a library driven by a JSON state.

The real pynvml loads it (LD_LIBRARY_PATH), so the project's GPU code runs against NVML on
a machine without a GPU, on values taken from a recorded nvidia-smi capture or a shipped
profile, with faults on top and values that change with time:

    from bringup.sim import nvml as nvmlsim

    library = nvmlsim.build_library(out_dir)                      # needs cc and nvml.h
    state = nvmlsim.state_from_capture("nvidia-smi-q.txt")        # or state_from_profile("b300")
    state = nvmlsim.apply_fault(state, "hw-thermal:3=0.5")        # KIND[:GPU][=VALUE]
    nvmlsim.write_state(state, state_path)
    env = nvmlsim.library_env(library, state_path)               # for a child process

nvml_sim.c is the library (what it implements, how time works, how to add an entry point);
state.py the schema; captures.py states from captures and profiles; faults.py the faults;
branches.py the field ids of each driver branch; build.py the compile.
"""

from bringup.sim.nvml.build import build_library, find_header, installed_headers, library_env
from bringup.sim.nvml.captures import (
    PROFILES,
    state_from_capture,
    state_from_facts,
    state_from_profile,
)
from bringup.sim.nvml.faults import apply_fault, parse_fault
from bringup.sim.nvml.state import (
    ENTRY_POINTS,
    ENV_STATE,
    NvmlSimError,
    check_state,
    write_state,
)

__all__ = [
    "ENTRY_POINTS",
    "ENV_STATE",
    "PROFILES",
    "NvmlSimError",
    "apply_fault",
    "build_library",
    "check_state",
    "find_header",
    "installed_headers",
    "library_env",
    "parse_fault",
    "state_from_capture",
    "state_from_facts",
    "state_from_profile",
    "write_state",
]
