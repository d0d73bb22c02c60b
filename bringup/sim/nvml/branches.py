"""NVML field ids by driver branch: which ids a driver defines, and where the moving ones are.

NVIDIA renumbered some field ids between driver branches: the clocks event reason
(throttle-time) counters appeared in r575 at 251-253 and moved to 269-271 in r580, where
power smoothing's "active preset profile" went back from 269 to 264. A simulated driver must
answer the ids of ITS branch, so a state records its branch's ids (`field_ids`) and the
builders place counters by this table.

Every number below was read from NVIDIA's nvml.h in the PyPI wheel named in its comment
(grep the `#define NVML_FI_...` lines); `field_ids` are the ranges 1..NVML_FI_MAX-1 minus the
ids that header leaves undefined.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Field ids that are the same on every branch here (checked in all three headers).
MEMORY_TEMP = 82  # NVML_FI_DEV_MEMORY_TEMP, degrees C
NVLINK_GET_SPEED = 164  # NVML_FI_DEV_NVLINK_GET_SPEED, MBps; scope = the link
TEMPERATURE_SLOWDOWN_TLIMIT = 194  # NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT, C relative to T.Limit
TEMPERATURE_MEM_MAX_TLIMIT = 195  # NVML_FI_DEV_TEMPERATURE_MEM_MAX_TLIMIT, the HBM's, same scale
PERF_POLICY_POWER = 74  # NVML_FI_DEV_PERF_POLICY_POWER = ..._CLOCKS_EVENT_REASON_SW_POWER_CAP, ns
PERF_POLICY_SYNC_BOOST = 76  # NVML_FI_DEV_PERF_POLICY_SYNC_BOOST = ..._REASON_SYNC_BOOST, ns


@dataclass(frozen=True)
class Branch:
    """What one driver branch's nvml.h defines."""

    name: str  # "r580"
    cuda: str  # the CUDA version of that header, which a driver of the branch reports
    header: str  # the wheel the numbers were read from
    field_ids: tuple[tuple[int, int], ...]  # inclusive ranges of the ids the branch defines
    # Cumulative throttle-time counters (ns) by clocks event reason name, as
    # bringup.node.probes.gpu.CLOCK_EVENT_REASONS names them.
    throttle_counters: dict[str, int] = field(default_factory=dict)
    power_smoothing_active_preset_profile: int | None = None

    def has_field(self, field_id: int) -> bool:
        return any(lo <= field_id <= hi for lo, hi in self.field_ids)


BRANCHES: dict[str, Branch] = {
    # nvidia-nvml-dev-cu12 12.8.90 (CUDA 12.8): NVML_FI_MAX 269, ids 231-234 undefined, no
    # clocks event reason counters beyond the two perf policy ones; power smoothing's active
    # preset profile is 264.
    "r570": Branch(
        name="r570",
        cuda="12.8",
        header="nvidia-nvml-dev-cu12==12.8.90",
        field_ids=((1, 230), (235, 268)),
        throttle_counters={"sw_power_cap": PERF_POLICY_POWER, "sync_boost": PERF_POLICY_SYNC_BOOST},
        power_smoothing_active_preset_profile=264,
    ),
    # nvidia-nvml-dev-cu12 12.9.79 (CUDA 12.9): NVML_FI_MAX 274; SW_THERM_SLOWDOWN 251,
    # HW_THERM_SLOWDOWN 252, HW_POWER_BRAKE_SLOWDOWN 253; ACTIVE_PRESET_PROFILE 269.
    "r575": Branch(
        name="r575",
        cuda="12.9",
        header="nvidia-nvml-dev-cu12==12.9.79",
        field_ids=((1, 273),),
        throttle_counters={
            "sw_power_cap": PERF_POLICY_POWER,
            "sync_boost": PERF_POLICY_SYNC_BOOST,
            "sw_thermal_slowdown": 251,
            "hw_thermal_slowdown": 252,
            "hw_power_brake_slowdown": 253,
        },
        power_smoothing_active_preset_profile=269,
    ),
    # nvidia-nvml-dev 13.0.87 (CUDA 13.0): NVML_FI_MAX 274; SW_THERM_SLOWDOWN 269,
    # HW_THERM_SLOWDOWN 270, HW_POWER_BRAKE_SLOWDOWN 271; ACTIVE_PRESET_PROFILE 264.
    # nvidia-nvml-dev 13.5.37 keeps all of these ids (its NVML_FI_MAX is 310), so later
    # branches use this table.
    "r580": Branch(
        name="r580",
        cuda="13.0",
        header="nvidia-nvml-dev==13.0.87",
        field_ids=((1, 273),),
        throttle_counters={
            "sw_power_cap": PERF_POLICY_POWER,
            "sync_boost": PERF_POLICY_SYNC_BOOST,
            "sw_thermal_slowdown": 269,
            "hw_thermal_slowdown": 270,
            "hw_power_brake_slowdown": 271,
        },
        power_smoothing_active_preset_profile=264,
    ),
}


def branch_for_major(major: int) -> Branch:
    """The table for a driver's major version (580 for 580.95.05).

    The newest table not newer than the driver: a driver of a later branch keeps r580's ids
    (checked against the 13.5 header). A driver older than r570 gets r570's table, the
    oldest header at hand: its throttle counters (only the two perf policy ones) and the
    fixed ids above hold there too, but it may list ids an older driver lacks.
    """
    known = sorted(BRANCHES.values(), key=lambda b: int(b.name[1:]))
    chosen = known[0]
    for branch in known:
        if int(branch.name[1:]) <= major:
            chosen = branch
    return chosen
