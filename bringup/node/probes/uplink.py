"""The `uplink` probe: the node's throughput to an endpoint the user names.

Before renting time is spent, the dataset has to reach the node: this measures how fast.
The endpoint is either an iperf3 server (`iperf3://host[:port]`), measured with the real
`iperf3` client (`-J`, JSON; `-R` so that the server sends: a download, as a dataset's),
or a URL (`http://...`, `https://...`) fetched with a plain GET for up to `duration_s`.
Without an endpoint the probe records that none was named; the check says how to name one.
The figures are decimal: bits per second of payload received.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from bringup.node.result import ProbeError, ProbeOutput
from bringup.node.tool import run, which

IPERF3_PORT = 5201  # iperf3's default port (iperf3(1))
CHUNK = 1 << 20


@dataclass
class Params:
    endpoint: str = ""  # "iperf3://host[:port]" or "http(s)://..."; "" = none named
    duration_s: float = 10.0  # iperf3 -t; the longest an HTTP GET is read
    streams: int = 4  # iperf3 -P: parallel TCP streams, as a multi-stream downloader opens
    direction: str = "download"  # iperf3 only: "download" (-R) or "upload"
    timeout_s: float = 60.0  # connecting and the whole measurement


@dataclass
class UplinkFacts:
    endpoint: str  # "" when none was named
    method: str | None = None  # "iperf3" or "http"
    direction: str | None = None  # "download" or "upload"
    bits_per_second: float | None = None
    seconds: float | None = None  # over which it was measured
    bytes: int | None = None
    streams: int | None = None
    retransmits: int | None = None  # iperf3's TCP retransmissions (sender side)
    tool_version: str | None = None  # "iperf 3.12"


FACTS = UplinkFacts


def collect(params: Params) -> ProbeOutput:
    endpoint = params.endpoint.strip()
    if not endpoint:
        return ProbeOutput(UplinkFacts(endpoint=""))
    scheme = urllib.parse.urlsplit(endpoint).scheme
    if scheme == "iperf3":
        return measure_iperf3(endpoint, params)
    if scheme in ("http", "https"):
        return measure_http(endpoint, params)
    raise ProbeError(f"endpoint {endpoint!r}: give iperf3://host[:port] or an http(s):// URL")


# --- iperf3 -------------------------------------------------------------------------------


def iperf3_argv(iperf3: str, endpoint: str, params: Params) -> list[str]:
    parts = urllib.parse.urlsplit(endpoint)
    if not parts.hostname:
        raise ProbeError(f"endpoint {endpoint!r}: no host (iperf3://host[:port])")
    if params.direction not in ("download", "upload"):
        raise ProbeError(f"direction must be download or upload, not {params.direction!r}")
    argv = [iperf3, "-c", parts.hostname, "-p", str(parts.port or IPERF3_PORT)]
    argv += ["-t", f"{params.duration_s:g}", "-P", str(params.streams), "-J"]
    return argv + (["-R"] if params.direction == "download" else [])


def measure_iperf3(endpoint: str, params: Params) -> ProbeOutput:
    iperf3 = which("iperf3")
    if iperf3 is None:
        raise ProbeError("iperf3 not found (apt-get install iperf3, or give an http(s):// URL)")
    argv = iperf3_argv(iperf3, endpoint, params)
    result = run(argv, params.timeout_s + params.duration_s)
    raw = {"iperf3.json": result.stdout, "iperf3.stderr": result.stderr}
    if result.timed_out:
        raise ProbeError(f"iperf3 to {endpoint} did not finish within the timeout", raw)
    facts = parse_iperf3(result.stdout, endpoint, params.direction)
    return ProbeOutput(facts, raw)


def parse_iperf3(text: str, endpoint: str, direction: str) -> UplinkFacts:
    """`iperf3 -J` of the client: the receiver's sum is the payload that arrived."""
    try:
        doc = json.loads(text)
    except ValueError:
        line = next((x for x in text.splitlines() if x.strip()), "no output")
        raise ProbeError(f"iperf3 to {endpoint}: {line.strip()}") from None
    if doc.get("error"):
        raise ProbeError(f"iperf3 to {endpoint}: {doc['error']}")
    end = doc.get("end", {})
    received = end.get("sum_received") or {}
    if not received.get("bits_per_second"):
        raise ProbeError(f"iperf3 to {endpoint}: no received sum in its report")
    sent = end.get("sum_sent") or {}
    start = doc.get("start", {})
    return UplinkFacts(
        endpoint=endpoint,
        method="iperf3",
        direction=direction,
        bits_per_second=float(received["bits_per_second"]),
        seconds=float(received.get("seconds", 0.0)),
        bytes=int(received.get("bytes", 0)),
        streams=int(start.get("test_start", {}).get("num_streams", 0)) or None,
        retransmits=sent.get("retransmits"),
        tool_version=start.get("version"),
    )


# --- HTTP(S) ------------------------------------------------------------------------------


def measure_http(url: str, params: Params) -> ProbeOutput:
    """GET the URL and read it for up to duration_s; timed from the first byte received."""
    request = urllib.request.Request(url, headers={"User-Agent": "bringup-uplink"})
    try:
        response = urllib.request.urlopen(request, timeout=params.timeout_s)
    except urllib.error.HTTPError as exc:
        raise ProbeError(f"GET {url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ProbeError(f"GET {url}: {reason}") from None
    received = 0
    with response:
        first = response.read(CHUNK)
        started = time.monotonic()
        deadline = started + params.duration_s
        while time.monotonic() < deadline:
            chunk = response.read(CHUNK)
            if not chunk:
                break
            received += len(chunk)
        seconds = time.monotonic() - started
    if received == 0 or seconds <= 0:
        size = len(first)
        raise ProbeError(f"GET {url}: only {size} bytes: too small to time (use a larger file)")
    facts = UplinkFacts(
        endpoint=url,
        method="http",
        direction="download",
        bits_per_second=8 * received / seconds,
        seconds=round(seconds, 3),
        bytes=received,
        streams=1,
    )
    return ProbeOutput(facts)
