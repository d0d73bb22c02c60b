"""Each node's figures (bringup/measurements.py) as the report reads them: held in memory
for a small run, or spooled to disk as each node is read, for a large one.

At a thousand nodes the measurements were a fifth of the report's memory (34 kB a node:
identity, curves, NVMe rows, Xid lines, probe summaries, timelines), and every one of them
was held until the last format was written. Spooled, what stays in memory per node is
what the whole-fleet parts of the report need: its metrics (the fleet statistics and the
stragglers) and its brief (the passing nodes' list); a node's full figures are read back
when its section is written, one node at a time (docs/scale.md, "The streamed report").

The spool is an anonymous temporary file (tempfile.TemporaryFile: no name in a shared
directory, gone when closed), written and read by this process alone: what is read back is
what was written, so pickle is safe here, and it gives the objects back exactly (the
timelines, which the JSON form leaves out, included).
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO

from bringup.measurements import NodeMeasurements


@dataclass(frozen=True)
class Brief:
    """What the list of passing nodes shows of a node: its GPUs and driver."""

    gpu_count: int | None = None
    gpu_models: list[str] = field(default_factory=list)
    driver: str | None = None

    @classmethod
    def of(cls, m: NodeMeasurements) -> Brief:
        identity = m.identity
        return cls(identity.gpu_count, list(identity.gpu_models), identity.driver)


class Spool:
    """Objects written once each under a name, read back by name (the last one written)."""

    def __init__(self) -> None:
        self._file: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (unlinked; closed when dropped)
        self._where: dict[str, tuple[int, int]] = {}
        self._end = 0

    def put(self, name: str, value: object) -> None:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        self._file.seek(self._end)
        self._file.write(data)
        self._where[name] = (self._end, len(data))
        self._end += len(data)

    def get(self, name: str) -> object | None:
        where = self._where.get(name)
        if where is None:
            return None
        self._file.seek(where[0])
        return pickle.loads(self._file.read(where[1]))  # this process's own file: see above

    def __contains__(self, name: object) -> bool:
        return name in self._where


class Figures:
    """The measured nodes' figures by name: every one held, or spooled (`spooled()`).

    Either way the report asks the same things of it: one node's full figures (`get`),
    every node's metrics (`metrics_only`), a node's brief, or every node's full figures
    in node-name order (`every`: a comparison with a baseline reads them all)."""

    def __init__(self, spool: Spool | None = None) -> None:
        self._spool = spool
        self._held: dict[str, NodeMeasurements] = {}
        self._metrics: dict[str, dict[str, float]] = {}
        self._briefs: dict[str, Brief] = {}
        self._burnin: set[str] = set()

    @classmethod
    def held(cls, measured: Iterable[NodeMeasurements]) -> Figures:
        figures = cls()
        for m in measured:
            figures.add(m)
        return figures

    @classmethod
    def spooled(cls) -> Figures:
        return cls(Spool())

    def add(self, m: NodeMeasurements) -> None:
        """Keep a node's figures (replacing any it had)."""
        if self._spool is None:
            self._held[m.node] = m
        else:
            self._spool.put(m.node, m)
        self._metrics[m.node] = dict(m.metrics)
        self._briefs[m.node] = Brief.of(m)
        if m.burnin:
            self._burnin.add(m.node)
        else:
            self._burnin.discard(m.node)

    @property
    def names(self) -> list[str]:
        """The nodes measured, by name."""
        return sorted(self._metrics)

    @property
    def trained(self) -> set[str]:
        """The nodes whose figures hold a burn-in."""
        return set(self._burnin)

    def get(self, node: str) -> NodeMeasurements:
        """A node's full figures; a node not measured has none (an empty set)."""
        if node not in self._metrics:
            return NodeMeasurements(node=node)
        if self._spool is None:
            return self._held[node]
        kept = self._spool.get(node)
        assert isinstance(kept, NodeMeasurements)  # written by add() alone
        return kept

    def brief(self, node: str) -> Brief:
        return self._briefs.get(node) or Brief()

    def metrics_only(self) -> list[NodeMeasurements]:
        """Each node's metrics alone, in node-name order: what the fleet statistics and the
        stragglers read (measurements.metric_values)."""
        # Validated, not model_construct: that inspects each default factory's signature
        # on every call (0.7 ms a node, against 6 us).
        return [NodeMeasurements(node=n, metrics=self._metrics[n]) for n in self.names]

    def every(self) -> list[NodeMeasurements]:
        """Every node's full figures, in node-name order (as measure_fleet gives them)."""
        return [self.get(n) for n in self.names]

    def only(self, nodes: Iterable[str]) -> Figures:
        """These nodes' figures alone (a view narrowed by --limit), on the same spool."""
        kept = Figures(self._spool)
        for n in nodes:
            if n not in self._metrics:
                continue
            if self._spool is None:
                kept._held[n] = self._held[n]
            kept._metrics[n] = self._metrics[n]
            kept._briefs[n] = self._briefs[n]
            if n in self._burnin:
                kept._burnin.add(n)
        return kept
