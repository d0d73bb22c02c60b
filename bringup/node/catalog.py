"""The one list of probes: name -> module. Each module has `Params`, a facts class and `collect`.

A probe module defines:
  - `Params`: a dataclass of its parameters with defaults (suites set them by name);
  - `FACTS`: the dataclass its `collect` returns as `ProbeOutput.facts`;
  - `collect(params: Params) -> ProbeOutput`, raising `ProbeError` when it cannot measure.

A probe's module is imported when it is first looked up, not when the catalog is: the node
side starts at every run (every job start under Slurm), and importing every probe
and their parsers cost it more CPU than the gpu and xid probes of a health check take to
run (benchmarks/node_side.py measures it).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from types import ModuleType

# name -> module under bringup.node.probes, in the order suites and help list them
PROBE_NAMES = (
    "gpu",
    "topology",
    "host",
    "fabric",
    "nvme",
    "storage",
    "uplink",
    "xid",
    "dcgm",
    "nccl",
    "ibperf",
    "gemm",
    "p2p",
    "telemetry",
    "burnin",
)


class _Catalog(MutableMapping[str, ModuleType]):
    """A dict of name -> probe module whose modules load on first use. Setting an entry
    replaces the module (tests plant a probe of their own); the names stay those above."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self._names = names
        self._modules: dict[str, ModuleType] = {}

    def __getitem__(self, name: str) -> ModuleType:
        module = self._modules.get(name)
        if module is None:
            if name not in self._names:
                raise KeyError(name)
            module = importlib.import_module(f"bringup.node.probes.{name}")
            self._modules[name] = module
        return module

    def __setitem__(self, name: str, module: ModuleType) -> None:
        if name not in self._names:
            raise KeyError(f"{name!r} is not a probe of the catalog")
        self._modules[name] = module

    def __delitem__(self, name: str) -> None:
        raise TypeError("the catalog's probes cannot be removed")

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


PROBES: MutableMapping[str, ModuleType] = _Catalog(PROBE_NAMES)
