"""`lspci -vvv` (pciutils): each PCI function's address, name and ACS control bits.

Only what the ACS check needs is read: the first line of each function ("0000:05:08.0 PCI
bridge: PLX Technology, Inc. PEX 8747 ..."; the domain is absent without -D), and the
`ACSCtl:` line of its Access Control Services capability:

    Capabilities: [2a0 v1] Access Control Services
        ACSCap: SrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans+
        ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-

Extended capabilities live past the first 64 bytes of config space, which only root may read:
without root lspci prints `Capabilities: <access denied>` instead, so "no ACSCtl line" means
"no ACS capability" only for a function whose capabilities were readable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bringup.node.result import ParseError

_FUNCTION = re.compile(
    r"^(?P<address>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(?P<name>\S.*)$"
)
_FLAG = re.compile(r"([A-Za-z][A-Za-z0-9_]*)([+-])")
ACCESS_DENIED = "<access denied>"


@dataclass
class LspciFunction:
    """One function of `lspci -vvv` as far as ACS goes."""

    address: str  # with the domain: "0000:05:08.0"
    name: str  # "PCI bridge: PLX Technology, Inc. PEX 8747 48-Lane, ..."
    acs_ctl: dict[str, bool] | None = None  # None: no ACSCtl line
    access_denied: bool = False  # "Capabilities: <access denied>": lspci ran without root


def normalize(address: str) -> str:
    """ "05:08.0" -> "0000:05:08.0" (lspci omits domain 0 without -D), lower case."""
    address = address.lower()
    return address if address.count(":") == 2 else "0000:" + address


def parse_flags(text: str) -> dict[str, bool]:
    """ "SrcValid+ TransBlk- ..." -> {"SrcValid": True, "TransBlk": False, ...}."""
    flags = {name: sign == "+" for name, sign in _FLAG.findall(text)}
    if not flags:
        raise ParseError(f"no ACS flags in {text.strip()[:60]!r}")
    return flags


def parse_lspci(text: str) -> list[LspciFunction]:
    """Every function of an `lspci -vvv` output, in order; ParseError when there is none."""
    functions: list[LspciFunction] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            match = _FUNCTION.match(line.rstrip())
            if match:
                functions.append(
                    LspciFunction(normalize(match.group("address")), match.group("name"))
                )
            continue  # a warning lspci printed ("lspci: Unable to load libkmod ...")
        if not functions:
            continue
        current = functions[-1]
        stripped = line.strip()
        if stripped.startswith("ACSCtl:"):
            current.acs_ctl = parse_flags(stripped.removeprefix("ACSCtl:"))
        elif stripped.startswith("Capabilities:") and ACCESS_DENIED in stripped:
            current.access_denied = True
    if not functions:
        raise ParseError("not `lspci -vvv` output: no PCI function line (bus:device.function)")
    return functions
