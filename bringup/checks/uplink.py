"""Check of the `uplink` probe: is the node's external bandwidth enough to bring a dataset?

`uplink.throughput` states the measured rate and how long the profile's dataset size
(`uplink.dataset_bytes`, 512 GB unless set) would take at it, and FAILs below the site's
figure (`uplink.min_mbit_s`, set per site with a profile or `bringup_profile_overrides`).
Without a figure the rate is reported, not judged (SKIP); without an endpoint, SKIP with how
to name one. docs/reference.md#uplink.
"""

from __future__ import annotations

from bringup.checks import Check, finding
from bringup.findings import Finding, Status
from bringup.node.probes.uplink import UplinkFacts
from bringup.profile import Profile


def transfer_time(size_bytes: float, bits_per_second: float) -> str:
    """ "1 h 52 min": how long size_bytes take at a rate, rounded to what a person plans by."""
    seconds = 8 * size_bytes / bits_per_second
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def size_text(size_bytes: float) -> str:
    """512 GB, 1.5 TB (decimal, as datasets and links are quoted)."""
    if size_bytes >= 1e12:
        return f"{size_bytes / 1e12:g} TB"
    return f"{size_bytes / 1e9:g} GB"


def rate_text(bits_per_second: float) -> str:
    if bits_per_second >= 10e9:
        return f"{bits_per_second / 1e9:.1f} Gbit/s"
    return f"{bits_per_second / 1e6:.0f} Mbit/s"


def judge_throughput(facts: UplinkFacts, profile: Profile) -> list[Finding]:
    check = "uplink.throughput"
    if not facts.endpoint:
        return [
            finding(
                check,
                Status.SKIP,
                "no uplink endpoint named (--uplink iperf3://HOST[:PORT] or --uplink URL, or "
                "the host variable bringup_uplink)",
            )
        ]
    rate = facts.bits_per_second or 0.0
    if rate <= 0:
        return [finding(check, Status.ERROR, f"nothing measured to {facts.endpoint}")]
    spec = profile.uplink
    how = f"{facts.method} {facts.direction}, {facts.seconds or 0:.0f} s"
    if facts.streams and facts.streams > 1:
        how += f", {facts.streams} streams"
    text = (
        f"{rate_text(rate)} from {facts.endpoint} ({how}): {size_text(spec.dataset_bytes)} "
        f"would take {transfer_time(spec.dataset_bytes, rate)} at {rate_text(rate)}"
    )
    value = round(rate / 1e6, 1)
    if spec.min_mbit_s is None:
        return [
            finding(
                check,
                Status.SKIP,
                f"{text}; not judged: no site figure (uplink.min_mbit_s)",
                value=value,
                unit="Mbit/s",
            )
        ]
    floor = spec.min_mbit_s * 1e6
    if rate < floor:
        return [
            finding(
                check,
                Status.FAIL,
                f"{text}; below the site's {rate_text(floor)}, at which it would take "
                f"{transfer_time(spec.dataset_bytes, floor)}",
                value=value,
                expected=f">= {spec.min_mbit_s:g}",
                unit="Mbit/s",
                action="check the node's route and NIC to the outside (ethtool speed, "
                "shaping), and measure from another node: a shared or misrouted uplink is the "
                "provider's to fix",
            )
        ]
    return [
        finding(
            check,
            Status.PASS,
            text,
            value=value,
            expected=f">= {spec.min_mbit_s:g}",
            unit="Mbit/s",
        )
    ]


CHECKS = [
    Check("uplink.throughput", "uplink", judge_throughput, "throughput to the named endpoint"),
]
